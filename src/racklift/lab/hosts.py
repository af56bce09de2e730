"""The lab rack: podman containers running systemd and sshd, reached over SSH as real servers
are, each registered in the lab NetBox with the MAC and IP it really has.

Lab only. Every container carries the label `racklift.lab`; `down()` removes exactly those
(the hosts and their leaf switches, racklift.lab.leaf), the lab network, and the NetBox devices
of those hosts and switches.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from racklift import podman
from racklift.errors import LabError
from racklift.lab import images, leaf, seed, standin_repo, tags
from racklift.netbox.client import NetBox
from racklift.paths import cache_lock, state_dir

# What lab hosts run: the stand-in driver; no OFED version, container toolkit or registry
# mirror, since containers run no container engine (None: not managed). Whole,
# not a partial override, so it holds whether or not the GPU servers' context exists. Their
# acceptance is an 8x H100 HGX node's.
LAB_SOFTWARE = {
    **seed.DESIRED_SOFTWARE,
    "ofed": {"source": "inbox", "version": None},
    "container_toolkit": {"version": None},
    "registry_mirror": {"url": None},
    "acceptance": seed.HGX_ACCEPTANCE,
}
FIRST_HOST = 11  # .11 is the first lab host; .1 is the controller (the bridge's gateway)
LABEL = "racklift.lab"
MAC_BASE = 0x4000  # lab MACs from racklift's prefix, clear of the seed generator's
STANDIN_PACKAGES = Path(__file__).with_name("standin-packages.yml")
STANDIN_LABEL = "racklift.standin"


@dataclass(frozen=True)
class LabNet:
    """One lab: its podman network and address ranges. The tests run their own, so they never
    touch the developer's lab."""

    name: str
    subnet: ipaddress.IPv4Network
    oob: ipaddress.IPv4Network  # container hosts have no BMC: placeholder OOB addresses
    mac_base: int = MAC_BASE

    @property
    def capacity(self) -> int:
        return self.subnet.num_addresses - FIRST_HOST - 1


LAB = LabNet("racklift-lab", ipaddress.ip_network("10.89.0.0/24"),
             ipaddress.ip_network("10.33.0.0/24"))


def lab_dir() -> Path:
    return state_dir() / "lab"


def profiles_dir(net: LabNet) -> Path:
    return lab_dir() / net.name / "hosts"


def ssh_key() -> Path:
    """The controller's lab SSH key (made once)."""
    key = lab_dir() / "ssh" / "id_ed25519"
    public = key.parent / f"{key.name}.pub"  # written last: the key is whole once it exists
    if public.exists():
        return key
    with cache_lock("lab-ssh-key"):  # two test lanes start at once
        if not public.exists():
            key.parent.mkdir(parents=True, exist_ok=True)
            key.unlink(missing_ok=True)  # a half-made pair: ssh-keygen would ask to overwrite
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "racklift-lab",
                            "-f", str(key)], check=True)
    return key


def host_name(rack: str, slot: int) -> str:
    return f"lab-{rack.lower()}-{slot:02d}"


def plan(count: int, rack: str = "L01", site: str = "lab1", net: LabNet = LAB) -> seed.SeedPlan:
    """`count` lab hosts in `rack`: fixed names, MACs and IPs, so re-running converges."""
    if not 0 < count <= net.capacity:
        raise LabError(f"the lab network {net.subnet} holds 1 to {net.capacity} hosts, "
                       f"not {count}")
    hosts = []
    for slot in range(count):
        index = net.mac_base + slot
        hosts.append(seed.HostPlan(
            name=host_name(rack, slot + 1), rack=rack,
            # A rack holds 8 servers; further lab hosts are in the rack without a position.
            position=1 + slot * seed.SERVER_U if slot < seed.HOSTS_PER_RACK else None,
            serial=f"LAB{rack}{slot + 1:04d}", asset_tag=f"{site}-{rack}-{slot + 1:02d}",
            macs={seed.BMC: seed.mac_for(index, 0), seed.PROVISIONING: seed.mac_for(index, 1),
                  seed.INBAND: seed.mac_for(index, 2)},
            primary_ip=f"{net.subnet.network_address + FIRST_HOST + slot}/{net.subnet.prefixlen}",
            oob_ip=f"{net.oob.network_address + FIRST_HOST + slot}/{net.oob.prefixlen}",
            # The in-band port to the rack's Ethernet leaf (a container speaking LLDP,
            # racklift.lab.leaf); InfiniBand cables to the rack's own rail leaves (the fabric
            # is emulated from them). The provisioning port is podman's, on no leaf.
            links={**inband_link(rack, slot),
                   **seed.ib_links(f"{rack.lower()}-{slot // seed.RAIL_GROUP + 1}",
                                   slot % seed.RAIL_GROUP)},
        ))
    return seed.SeedPlan(site=site, racks=(rack,), hosts=tuple(hosts), status="staged",
                         tags=(tags.LAB, tags.LAB_HOST), context_name="racklift-lab-hosts",
                         software=LAB_SOFTWARE, context_tags=(tags.LAB_HOST,),
                         context_weight=2000)


def inband_link(rack: str, slot: int) -> dict[str, tuple[str, str]]:
    """The in-band port of the host in `slot` (0-based) to its port on the rack's Ethernet
    leaf, as the seed plans it; a leaf takes 32 hosts, the next 32 go to `leaf-l01-2`."""
    group, member = divmod(slot, seed.RAIL_GROUP)
    switch, port = seed.ethernet_links(rack, member)[seed.INBAND]
    return {seed.INBAND: (switch if group == 0 else f"{switch}-{group + 1}", port)}


# ---------------------------------------------------------------------------------------------
# podman side


INOTIFY = Path("/proc/sys/fs/inotify/max_user_instances")
INOTIFY_PER_HOST = 16  # systemd in a container opens several inotify instances


def _ensure_inotify(count: int) -> None:
    """systemd in many containers runs out of inotify instances (default 128: ~20 hosts), and
    then its units hang at boot. Raise the kernel's limit at run time (nothing in /etc)."""
    want = 128 + INOTIFY_PER_HOST * count
    have = int(INOTIFY.read_text())
    if have >= want:
        return
    try:
        INOTIFY.write_text(str(want))
    except OSError as exc:
        raise LabError(f"{count} lab hosts need fs.inotify.max_user_instances >= {want} "
                       f"(now {have}): run `sysctl -w fs.inotify.max_user_instances={want}` "
                       f"as root ({exc})") from None


def _network_exists(net: LabNet) -> bool:
    return podman.succeeds("network", "exists", net.name)


def _ensure_network(net: LabNet) -> None:
    if not _network_exists(net):
        podman.podman("network", "create", "--subnet", str(net.subnet),
                      "--gateway", str(net.subnet.network_address + 1),
                      "--label", f"{LABEL}={net.name}", net.name)


def containers(net: LabNet = LAB) -> dict[str, dict]:
    """The lab's containers by name, with their state and rack."""
    out = podman.podman("ps", "-a", "--filter", f"label={LABEL}={net.name}", "--format", "json")
    return {c["Names"][0]: c for c in json.loads(out or "[]")}


def _run_container(image: str, host: seed.HostPlan, key: Path, net: LabNet,
                   standin: Path) -> None:
    ip = host.primary_ip.split("/")[0]
    mac = host.macs[seed.PROVISIONING].lower()
    podman.podman(
        "run", "-d", "--name", host.name, "--hostname", host.name,
        "--systemd=always", "--label", f"{LABEL}={net.name}",
        "--label", f"racklift.rack={host.rack}",
        "--label", f"{leaf.PLAN_LABEL}={leaf.plan_label(*host.links[seed.INBAND])}",
        "--network", f"{net.name}:ip={ip},mac={mac},interface_name={seed.PROVISIONING}",
        # NET_ADMIN: fault injection changes the NIC's MAC, as a swapped cable would.
        "--cap-add", "NET_ADMIN",
        "--mount", f"type=bind,src={key}.pub,dst=/root/.ssh/authorized_keys,ro=true",
        # The vendor repositories' stand-in (NVIDIA's cannot be reached from here).
        "--label", f"{STANDIN_LABEL}={standin.name}",
        "--mount", f"type=bind,src={standin},dst=/srv/racklift-standin,ro=true",
        # Room for the acceptance tests' emulated tools: eight ib_write_bw servers at once
        # are eight Python processes here (the real one is a small C program).
        "--memory", "512m", image)


def observed_identity(name: str, net: LabNet = LAB) -> tuple[str, str]:
    """(MAC, IP/prefix) of the container's provisioning NIC, as podman reports them."""
    info = json.loads(podman.podman("inspect", name, "--format", "json"))[0]
    nic = info["NetworkSettings"]["Networks"][net.name]
    return nic["MacAddress"].upper(), f"{nic['IPAddress']}/{nic['IPPrefixLen']}"


def wait_for_ssh(address: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, 22), timeout=1) as sock:
                if sock.recv(16).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise LabError(f"lab host at {address} did not answer on SSH in time: see "
                   "`podman logs` for its container")


def _cable_inband(hosts: Iterable[seed.HostPlan], image: str, net: LabNet) -> None:
    """Each host's in-band port (eno2) with its NetBox MAC, cabled to its leaf's planned port:
    a container has one real NIC, a GPU server has both. Hosts already cabled are left as
    they are; then every host's lldpd (where it runs) has heard its leaf."""
    hosts = list(hosts)
    leaf.ensure(sorted({h.links[seed.INBAND][0] for h in hosts}), image, net.name, LABEL)
    for host in hosts:
        switch, port = host.links[seed.INBAND]
        if not leaf.is_plugged(host.name, seed.INBAND, net.name, switch, port):
            leaf.plug(host.name, seed.INBAND, host.macs[seed.INBAND], net.name, switch, port)
    leaf.wait_heard((h.name, seed.INBAND, *h.links[seed.INBAND]) for h in hosts)


@dataclass(frozen=True)
class UpResult:
    hosts: tuple[seed.HostPlan, ...]
    created: int
    seconds: float


def up(netbox: NetBox, count: int, rack: str = "L01", site: str = "lab1",
       net: LabNet = LAB) -> UpResult:
    started = time.monotonic()
    wanted = plan(count, rack, site, net)
    image = images.node_image()
    key = ssh_key()
    standin = standin_repo.build(STANDIN_PACKAGES)
    _ensure_network(net)
    existing = containers(net)
    _ensure_inotify(len(podman.podman("ps", "-aq").split()) + count)
    created = 0
    for host in wanted.hosts:
        state = existing.get(host.name)
        if state is not None and (state.get("Labels", {}).get(STANDIN_LABEL) != standin.name
                                  or state.get("Image") != image):
            podman.podman("rm", "-f", host.name)  # made from an older recipe: make it again
            state = None
        if state is None:
            _run_container(image, host, key, net, standin)
            created += 1
        elif state["State"] != "running":
            podman.podman("start", host.name)
    deadline = time.monotonic() + 120 + 5 * count
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda h: wait_for_ssh(h.primary_ip.split("/")[0], deadline),
                      wanted.hosts))
    _cable_inband(wanted.hosts, image, net)
    # Register what the containers really have; it equals the plan unless podman disagreed.
    hosts = []
    for host in wanted.hosts:
        mac, ip = observed_identity(host.name, net)
        hosts.append(replace(host, primary_ip=ip, macs={**host.macs, seed.PROVISIONING: mac}))
    registered = replace(wanted, hosts=tuple(hosts))
    seed.apply(netbox, registered)
    return UpResult(registered.hosts, created, time.monotonic() - started)


@dataclass(frozen=True)
class DownResult:
    containers: int
    devices: int


def down(netbox: NetBox | None, net: LabNet = LAB) -> DownResult:
    ethernet_leaves = leaf.leaves(net.name, LABEL)
    names = sorted(containers(net))
    for name in names:
        podman.podman("rm", "-f", "-t", "2", name)
    if _network_exists(net):
        podman.podman("network", "rm", "-f", net.name)
    deleted = 0
    if netbox is not None:
        # Only the lab's own hosts: the names it gave its containers, tagged by the lab.
        recorded = {p.stem for p in profiles_dir(net).glob("*.json")}
        wanted = sorted(set(names) | recorded)
        # No lab tag in NetBox (a fresh database) means no lab devices to remove.
        lab_tagged = netbox.count("extras/tags", {"slug": tags.LAB}) > 0
        devices = netbox.get_all("dcim/devices", {"tag": tags.LAB, "name": wanted},
                                 fields=("id", "name")) if wanted and lab_tagged else []
        netbox.delete("dcim/devices", [d["id"] for d in devices])
        deleted = len(devices)
        # Then the leaf switches their cables went to (the profiles hold the plan), with
        # their ports and cables: the lab's as well, as its tag and role say.
        switches = sorted({str(end[0]) for p in profiles_dir(net).glob("*.json")
                           for end in json.loads(p.read_text()).get("cables", {}).values()}
                          | set(ethernet_leaves))
        if switches and lab_tagged:
            netbox.delete("dcim/devices", [d["id"] for d in netbox.get_all(
                "dcim/devices", {"tag": tags.LAB, "role": seed.SWITCH_ROLE, "name": switches},
                fields=("id",))])
        # The profiles name the lab's hosts: keep them until NetBox has been cleaned too.
        shutil.rmtree(profiles_dir(net), ignore_errors=True)
    return DownResult(len(names), deleted)
