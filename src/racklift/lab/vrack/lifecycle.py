"""`up`, `down` and `status` of a virtual rack."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from racklift import podman
from racklift.lab.vrack.bmc import _auth_file, _emulator_pid, _ensure_ca, _ensure_emulator
from racklift.lab.vrack.commands import _alive_pid, _in_our_ns, _netns_path, _run, _stop, _terminate
from racklift.lab.vrack.layout import BMC_PORT, LAB, VmPlan, Vrack, ib_leaves, plan, vrack_dir
from racklift.lab.vrack.network import (
    LIBVIRTD_PID,
    UPLINK,
    VIRTLOGD_PID,
    _ensure_uplink,
    _uplink_pid_file,
    ensure_libvirtd,
    ensure_network,
)
from racklift.lab.vrack.records import _unregister, _unregister_rack, register
from racklift.lab.vrack.services import (
    STANDIN_SERVER,
    _ensure_boot_server,
    _ensure_registry,
    _ensure_standin_server,
    _standin_pid_file,
    boot_server_containers,
)
from racklift.lab.vrack.vms import _ensure_profiles, _ensure_vm, _remove_vm, domains
from racklift.netbox.client import NetBox


def _state_file(rack: Vrack) -> Path:
    return vrack_dir(rack) / "state.json"


def _state(rack: Vrack) -> dict:
    """{"vms": names up() made, "registered": whether they went into NetBox}"""
    try:
        return dict(json.loads(_state_file(rack).read_text()))
    except (OSError, ValueError):
        return {}


def _recorded(rack: Vrack) -> list[str]:
    return list(_state(rack).get("vms", []))


@dataclass(frozen=True)
class VmsUp:
    vms: tuple[VmPlan, ...]
    created: int  # domains defined
    emulators: int  # BMC emulators started
    removed: tuple[str, ...]  # VMs beyond `count`, removed


def start_vms(rack: Vrack, count: int) -> VmsUp:
    """The namespace, libvirtd, and `count` VMs (powered off, as racks arrive) each behind its
    BMC emulator; VMs beyond `count` are removed. No boot server, no NetBox."""
    vms = plan(count, rack)
    vrack_dir(rack).mkdir(parents=True, exist_ok=True)
    # Recorded first: a failure half-way still leaves `down` knowing what to remove.
    previous = _recorded(rack)
    _state_file(rack).write_text(json.dumps(
        {**_state(rack), "vms": sorted({*previous, *(vm.name for vm in vms)})}))
    ensure_network(rack)
    ensure_libvirtd(rack)
    _ensure_ca()
    auth_file = _auth_file(rack)
    existing = domains(rack)
    extra = tuple(sorted({*existing, *previous} - {vm.name for vm in vms}))
    for name in extra:
        _remove_vm(rack, name, existing)
    created = sum(_ensure_vm(rack, vm, existing) for vm in vms)
    emulators = sum(_ensure_emulator(rack, vm, auth_file) for vm in vms)
    return VmsUp(vms, created, emulators, extra)


@dataclass(frozen=True)
class VrackUp:
    vms: tuple[VmPlan, ...]
    boot_server: str
    created_vms: int
    started_emulators: int
    seconds: float


def up(netbox: NetBox, count: int, rack: Vrack = LAB) -> VrackUp:
    started = time.monotonic()
    result = start_vms(rack, count)
    _ensure_uplink(rack)
    _ensure_standin_server(rack)
    _ensure_profiles(rack, result.vms)
    # Lab group vars read the rack's gateway (apt proxy, stand-in repositories) from here.
    (vrack_dir(rack) / "gateway").write_text(f"{rack.gateway}\n")
    _ensure_boot_server(rack)
    _state_file(rack).write_text(json.dumps({**_state(rack), "registered": True}))
    register(netbox, rack, result.vms)
    _unregister(netbox, list(result.removed))
    _ensure_registry(netbox.settings, rack)
    _state_file(rack).write_text(json.dumps({"vms": sorted(vm.name for vm in result.vms),
                                             "registered": True}))
    return VrackUp(result.vms, rack.boot_server, result.created, result.emulators,
                   time.monotonic() - started)


@dataclass(frozen=True)
class VrackDown:
    vms: int
    containers: int
    devices: int


def down(netbox: NetBox | None, rack: Vrack = LAB) -> VrackDown:
    """Remove the VMs (with disks), their emulators, the boot server container, libvirtd
    and the namespace, and the rack's NetBox devices; nothing else."""
    recorded = _recorded(rack)
    if recorded and _alive_pid(LIBVIRTD_PID, "libvirtd") is None:
        # The VMs are defined persistently: only a libvirtd can undefine them.
        ensure_network(rack)
        ensure_libvirtd(rack)
    existing = domains(rack) if _libvirtd_is_ours(rack) else {}
    names = sorted({*existing, *recorded})
    for name in names:
        _remove_vm(rack, name, existing)
    containers = boot_server_containers(rack)
    for name in containers:
        podman.podman("rm", "-f", "-t", "2", name)
    _terminate("uplink proxy", _uplink_pid_file(rack), UPLINK)
    _terminate("stand-in repository server", _standin_pid_file(rack), STANDIN_SERVER)
    _stop(LIBVIRTD_PID, "libvirtd", rack)
    _stop(VIRTLOGD_PID, "virtlogd", rack)
    if _netns_path(rack).exists():
        _run("ip", "netns", "del", rack.netns)
    devices = 0
    if netbox is not None:
        devices = _unregister(netbox, [*names, rack.boot_server, *ib_leaves(rack)])
        _unregister_rack(netbox, rack)
    # The state names what to remove from NetBox: kept until NetBox is clean too.
    if netbox is not None or not _state(rack).get("registered"):
        shutil.rmtree(vrack_dir(rack), ignore_errors=True)
    return VrackDown(len(names), len(containers), devices)


def _libvirtd_is_ours(rack: Vrack) -> bool:
    pid = _alive_pid(LIBVIRTD_PID, "libvirtd")
    return pid is not None and _in_our_ns(rack, pid)


@dataclass(frozen=True)
class VmStatus:
    name: str
    state: str  # libvirt's domain state
    bmc: str  # the emulator's URL
    bmc_running: bool


def status(rack: Vrack = LAB) -> list[VmStatus]:
    existing = domains(rack) if _libvirtd_is_ours(rack) else {}
    by_name = {vm.name: vm for vm in plan(rack.capacity, rack)}
    return [VmStatus(name, existing.get(name, "not defined"),
                     f"https://{by_name[name].bmc}:{BMC_PORT}" if name in by_name else "?",
                     _emulator_pid(rack, name) is not None)
            for name in sorted({*existing, *_recorded(rack)})]
