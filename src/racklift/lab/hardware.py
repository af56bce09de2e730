"""Emulated hardware of the lab hosts (lab only): each host's profile is kept on the controller
and pushed to the host by the `lab_hardware` role; faults are injected into the profile (or,
for a swapped MAC, into the container's NIC, and for the in-band cable, at its leaf switch)
and healed by regenerating it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from racklift import podman
from racklift.ansible import run_playbook
from racklift.errors import LabError
from racklift.lab import hwemu, leaf, seed
from racklift.lab.hosts import LAB, LabNet, observed_identity, profiles_dir
from racklift.lab.sources import lab_inventory
from racklift.netbox.client import NetBoxSettings


def profile_path(name: str, net: LabNet = LAB) -> Path:
    return profiles_dir(net) / f"{name}.json"


def load(name: str, net: LabNet = LAB) -> hwemu.Profile:
    path = profile_path(name, net)
    if not path.exists():
        raise LabError(f"{name} is not a lab host (no profile at {path}): lab.up creates them")
    return hwemu.Profile.from_dict(json.loads(path.read_text()))


def save(profile: hwemu.Profile, net: LabNet = LAB) -> None:
    path = profile_path(profile.hostname, net)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile.to_dict(), indent=2) + "\n")


def ib_cables(links: Mapping[str, tuple[str, str]]) -> dict[str, list]:
    """A host's planned HCA cables (its plan's links) as the emulated fabric takes them:
    CA → [leaf, port number] (a leaf port's number is its name's, p1 to p64)."""
    return {ca: [switch, int(port.removeprefix("p"))] for ca, (switch, port) in links.items()
            if ca in seed.IB_PORTS}


def ensure_profiles(hosts: Iterable[seed.HostPlan], net: LabNet = LAB) -> list[str]:
    """A healthy profile, cabled as planned, for each host that has none yet; returns the
    hosts given one."""
    new = []
    for number, host in enumerate(hosts, start=1):
        if not profile_path(host.name, net).exists():
            save(hwemu.cabled(hwemu.generate_profile(host.name, host.serial, seed=number),
                              ib_cables(host.links)), net)
            new.append(host.name)
    return new


def push(names: Iterable[str], settings: NetBoxSettings, net: LabNet = LAB) -> None:
    """Apply the lab_hardware role with each host's stored profile."""
    result = run_playbook("lab_hardware.yml", names, settings,
                          {**lab_inventory(), "RACKLIFT_LAB_PROFILES": str(profiles_dir(net))})
    if result.rc != 0 or result.failed:
        details = "; ".join(f"{h}: {why}" for h, why in sorted(result.failed.items()))
        raise LabError(f"applying lab_hardware failed (exit {result.rc}): {details}")


def _set_mac(name: str, mac: str, net: LabNet) -> None:
    podman.podman("exec", name, "ip", "link", "set", "dev", seed.PROVISIONING, "address",
                  mac.lower())
    # The controller is the lab's bridge host: drop its ARP entry for the old MAC now rather
    # than wait ~30 s for it to go stale.
    address = observed_identity(name, net)[1].split("/")[0]
    subprocess.run(["ip", "neigh", "flush", "to", address], check=False, capture_output=True)


def _recable(name: str, mac: str, faults: Iterable[str],
             net: LabNet) -> tuple[str, str, str | None, str | None]:
    """The host's in-band cable as its faults leave it (none: as planned); returns what its
    lldpd should then hear on it (host, NIC, switch, port; switch None: nothing)."""
    switch, planned = leaf.planned(name)
    port = hwemu.inband_port(planned, faults)
    if port is None:
        leaf.plug(name, seed.INBAND, mac, net.name, switch, planned, link=False)
        return name, seed.INBAND, None, None
    leaf.plug(name, seed.INBAND, mac, net.name, switch, port)
    return name, seed.INBAND, switch, port


def inject(faults: Mapping[str, Iterable[str]], macs: Mapping[str, Mapping[str, str]],
           settings: NetBoxSettings, net: LabNet = LAB) -> dict[str, hwemu.Profile]:
    """Inject faults into lab hosts ({host: kinds}), in one Ansible run. `macs` are each
    host's MACs by interface, as NetBox has them."""
    profiles, recabled = {}, []
    for name, kinds in faults.items():
        profile = load(name, net)
        for kind in kinds:
            profile = hwemu.inject(profile, kind)
            if kind == "mac-swapped":
                # As if the provisioning and in-band cables were swapped.
                _set_mac(name, macs[name][seed.INBAND], net)
        if set(kinds) & set(hwemu.ETHERNET_FAULTS):
            recabled.append(_recable(name, macs[name][seed.INBAND], profile.faults, net))
        save(profile, net)
        profiles[name] = profile
    push(profiles, settings, net)
    leaf.wait_heard(recabled)
    return profiles


def heal(names: Iterable[str], macs: Mapping[str, Mapping[str, str]],
         settings: NetBoxSettings, net: LabNet = LAB) -> None:
    """Remove every injected fault from these lab hosts, in one Ansible run."""
    names, recabled = list(names), []
    for name in names:
        profile = load(name, net)
        if profile.mac_swapped:
            _set_mac(name, macs[name][seed.PROVISIONING], net)
        if set(profile.faults) & set(hwemu.ETHERNET_FAULTS):
            recabled.append(_recable(name, macs[name][seed.INBAND], (), net))
        save(hwemu.heal(profile), net)
    push(names, settings, net)
    leaf.wait_heard(recabled)
