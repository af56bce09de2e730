"""Realistic seed data for the lab and the benchmarks: any number of racks of 8-GPU servers,
modelled the NetBox way (device type components, MAC objects, primary and OOB IPs, config
contexts for the desired software).

`plan()` is pure and deterministic; `apply()` writes a plan through the bulk API and converges:
a re-run creates only what is missing, so an interrupted seed is finished by running it again.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from racklift.lab import tags as lab_tags
from racklift.netbox.bootstrap import ROLE_GPU_SERVER, bootstrap
from racklift.netbox.client import NetBox
from racklift.netbox.desired import ROLE_LEAF_SWITCH
from racklift.netbox.expected import CONTEXT_KEY, GPU_ROLE

ORM_SCRIPT = Path(__file__).with_name("orm_seed.py")
HOSTS_PER_RACK = 8
SERVER_U = 4  # 8 servers of 4U fill 32U of a 42U rack

GPU_PART = "NVIDIA H100 80GB HBM3"
IB_PORTS = tuple(f"mlx5_{n}" for n in range(8))  # one ConnectX-7 NDR port per GPU
PROVISIONING = "eno1"
INBAND = "eno2"
BMC = "bmc"

DEVICE_TYPE: dict[str, Any] = {
    "manufacturer": "Supermicro",
    "model": "SYS-421GE-TNHR2-LCC",
    "slug": "supermicro-sys-421ge-tnhr2-lcc",
    "part_number": "SYS-421GE-TNHR2-LCC",
    "u_height": SERVER_U,
    "is_full_depth": True,
    # An HGX H100 8-GPU board: NVSwitches, so fabric manager; every GPU pair joined by 18
    # NVLinks, each GPU behind one PCIe switch with its HCA. Kept in a config context assigned
    # to the device type, where the node roles and the gate read it (racklift.hardware).
    "hardware": {"nvswitch": True, "gpu_link": "NV18", "nic_affinity": "PXB", "nvlinks": 18,
                 "nvlink_speed": 26.562},
    "interfaces": [
        {"name": BMC, "type": "1000base-t", "mgmt_only": True, "label": "BMC"},
        {"name": PROVISIONING, "type": "25gbase-x-sfp28", "label": "provisioning"},
        {"name": INBAND, "type": "100gbase-x-qsfp28", "label": "in-band"},
        *({"name": p, "type": "infiniband-ndr", "label": f"ConnectX-7 {p}"} for p in IB_PORTS),
    ],
    "gpus": [{"name": f"GPU{n}", "manufacturer": "NVIDIA", "part_id": GPU_PART}
             for n in range(8)],
}

# What the lab's GPU servers should run; production keeps this in config contexts too. The OS
# image is racklift's default, the one it builds (racklift.netbox.desired).
DESIRED_SOFTWARE: dict[str, Any] = {
    "provisioning_interface": PROVISIONING,
    "nvidia_driver": {"branch": "550", "version": "550.127.08", "kernel_modules": "open"},
    "cuda_version": "12.4",
    "ofed": {"source": "doca", "version": "2.9.1-1"},  # doca-ofed's, DOCA 2.9.1
    "container_toolkit": {"version": "1.17.3"},
    "registry_mirror": {"url": "https://registry-mirror.lab.racklift.test:5000"},
}
# What an 8x H100 HGX node must show under load before it joins: DCGM level 2, all-reduce and
# NDR rails at what healthy ones reach (the lab's emulated tools print figures shaped on real
# captures).
HGX_ACCEPTANCE: dict[str, Any] = {"dcgm_level": 2, "nccl_busbw": 350, "rdma_gbps": 370}

# The cable plan: one Ethernet leaf per rack takes every host's provisioning and in-band ports;
# InfiniBand is rail-optimised, as in NVIDIA's reference designs: the hosts of a rail group
# (a scalable unit) share one leaf per rail, and HCA i of every host goes to leaf i.
RAIL_GROUP = 32
SWITCH_ROLE = ROLE_LEAF_SWITCH
SWITCH_PORTS = 64
SWITCH_TYPES: dict[str, dict[str, Any]] = {
    "ethernet": {"model": "MSN4600C", "slug": "nvidia-msn4600c", "port": "swp{}",
                 "type": "100gbase-x-qsfp28"},
    "infiniband": {"model": "MQM9700", "slug": "nvidia-mqm9700", "port": "p{}",
                   "type": "infiniband-ndr"},
}

PROVISIONING_NET = ipaddress.ip_network("10.16.0.0/16")
OOB_NET = ipaddress.ip_network("10.32.0.0/16")


@dataclass(frozen=True)
class HostPlan:
    name: str
    rack: str
    position: int | None  # None: in the rack, no position
    serial: str
    asset_tag: str
    macs: dict[str, str]  # interface name → MAC
    primary_ip: str  # on the provisioning interface
    oob_ip: str  # on the BMC interface
    links: dict[str, tuple[str, str]] = field(default_factory=dict)  # interface → switch, port


@dataclass(frozen=True)
class SwitchPlan:
    name: str
    rack: str  # in the rack, no position
    kind: str  # a key of SWITCH_TYPES


@dataclass(frozen=True)
class SeedPlan:
    site: str
    racks: tuple[str, ...]
    hosts: tuple[HostPlan, ...]
    context_name: str = "racklift-gpu-servers"
    software: dict[str, Any] = field(default_factory=lambda: dict(DESIRED_SOFTWARE))
    status: str = "planned"  # of new devices
    tags: tuple[str, ...] = (lab_tags.LAB,)  # of new devices
    # The config context applies to GPU servers carrying all of these tags, with this weight.
    context_tags: tuple[str, ...] = ()
    context_weight: int = 1000
    provisioning_interface: str = PROVISIONING  # the interface that holds the primary IP

    @property
    def switches(self) -> tuple[SwitchPlan, ...]:
        """The switches the hosts' links name, each in the rack of the first host cabled to it."""
        found: dict[str, SwitchPlan] = {}
        for h in self.hosts:
            for iface, (switch, _) in h.links.items():
                kind = "infiniband" if iface in IB_PORTS else "ethernet"
                found.setdefault(switch, SwitchPlan(switch, h.rack, kind))
        return tuple(found.values())


def rack_name(number: int) -> str:
    return f"R{number:02d}"


def host_name(index: int) -> str:
    return f"gpu-{index:04d}"


def mac_for(index: int, port: int) -> str:
    # Locally administered, racklift's own prefix 02:52:4C ("RL"); 4 MACs per host.
    n = index * 4 + port
    return f"02:52:4C:{(n >> 16) & 0xFF:02X}:{(n >> 8) & 0xFF:02X}:{n & 0xFF:02X}"


def _ip(network: ipaddress.IPv4Network, index: int) -> str:
    # .1 to .250 of each /24 inside the /16, leaving gateways and services at the top.
    address = network.network_address + (index // 250) * 256 + index % 250 + 1
    return f"{address}/{network.prefixlen}"


def ethernet_leaf(rack: str) -> str:
    return f"leaf-{rack.lower()}"


def ib_links(group: str, member: int) -> dict[str, tuple[str, str]]:
    """HCA port i of the `member`-th host (0-based) of a rail group to leaf i of the group."""
    port = SWITCH_TYPES["infiniband"]["port"].format(member + 1)
    return {hca: (f"ib-leaf-{group}-{rail}", port) for rail, hca in enumerate(IB_PORTS)}


def ethernet_links(rack: str, slot: int) -> dict[str, tuple[str, str]]:
    """The provisioning and in-band ports of the host in `slot` (0-based) to its rack's leaf."""
    port = SWITCH_TYPES["ethernet"]["port"]
    return {PROVISIONING: (ethernet_leaf(rack), port.format(2 * slot + 1)),
            INBAND: (ethernet_leaf(rack), port.format(2 * slot + 2))}


def plan(racks: int, hosts_per_rack: int = HOSTS_PER_RACK, site: str = "lab1",
         first_rack: int = 1) -> SeedPlan:
    """`racks` racks of `hosts_per_rack` GPU servers, numbered from `first_rack`, with their
    leaf switches and the cables between them."""
    if 2 * hosts_per_rack > SWITCH_PORTS:
        raise ValueError(f"a rack's leaf has {SWITCH_PORTS} ports: at most "
                         f"{SWITCH_PORTS // 2} hosts per rack, not {hosts_per_rack}")
    rack_names = tuple(rack_name(first_rack + r) for r in range(racks))
    hosts = []
    for r, rack in enumerate(rack_names):
        for slot in range(hosts_per_rack):
            index = (first_rack - 1 + r) * hosts_per_rack + slot  # 0-based, unique per site
            hosts.append(HostPlan(
                name=host_name(index + 1), rack=rack, position=1 + slot * SERVER_U,
                serial=f"S{index + 1:09d}", asset_tag=f"{site}-{index + 1:06d}",
                macs={BMC: mac_for(index, 0), PROVISIONING: mac_for(index, 1),
                      INBAND: mac_for(index, 2)},
                primary_ip=_ip(PROVISIONING_NET, index), oob_ip=_ip(OOB_NET, index),
                links={**ethernet_links(rack, slot),
                       **ib_links(f"{index // RAIL_GROUP + 1:03d}", index % RAIL_GROUP)},
            ))
    return SeedPlan(site=site, racks=rack_names, hosts=tuple(hosts))


# ---------------------------------------------------------------------------------------------
# Writing a plan through the API


@dataclass
class SeedReport:
    created: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, what: str, count: int, seconds: float) -> None:
        self.created[what] = self.created.get(what, 0) + count
        self.seconds[what] = self.seconds.get(what, 0.0) + seconds


def _ensure_device_type(netbox: NetBox) -> int:
    manufacturer, _ = netbox.get_or_create(
        "dcim/manufacturers", {"slug": "supermicro"}, {"name": DEVICE_TYPE["manufacturer"]})
    nvidia, _ = netbox.get_or_create("dcim/manufacturers", {"slug": "nvidia"}, {"name": "NVIDIA"})
    device_type, created = netbox.get_or_create(
        "dcim/device-types", {"slug": DEVICE_TYPE["slug"]},
        {"manufacturer": manufacturer["id"], "model": DEVICE_TYPE["model"],
         "part_number": DEVICE_TYPE["part_number"], "u_height": DEVICE_TYPE["u_height"],
         "is_full_depth": DEVICE_TYPE["is_full_depth"]})
    if created:
        netbox.create("dcim/interface-templates",
                      [{**t, "device_type": device_type["id"]} for t in DEVICE_TYPE["interfaces"]])
        gpu_role = netbox.get_all("dcim/inventory-item-roles", {"slug": GPU_ROLE})[0]
        netbox.create("dcim/inventory-item-templates", [
            {"device_type": device_type["id"], "name": g["name"], "role": gpu_role["id"],
             "manufacturer": nvidia["id"], "part_id": g["part_id"]}
            for g in DEVICE_TYPE["gpus"]])
    ensure_hardware_context(netbox, int(device_type["id"]), DEVICE_TYPE["model"],
                            DEVICE_TYPE["hardware"])
    return int(device_type["id"])


def ensure_hardware_context(netbox: NetBox, device_type_id: int, model: str,
                            hardware: dict[str, Any]) -> None:
    """A config context on the device type with what its board has (racklift.hardware), where
    the node roles and the gate read it; brought to `hardware` if it says otherwise."""
    data = {CONTEXT_KEY: {"hardware": hardware}}
    context, created = netbox.get_or_create("extras/config-contexts",
                                            {"name": f"racklift hardware: {model}"}, {
        "weight": 500, "device_types": [device_type_id], "data": data,
        "description": "What the device type has that the node roles must know (racklift)"})
    if not created and context["data"] != data:
        netbox.update("extras/config-contexts", [{"id": context["id"], "data": data}])


def _ensure_switch_types(netbox: NetBox) -> dict[str, int]:
    """The leaf switches' device types (kind → id), their ports made from templates."""
    nvidia, _ = netbox.get_or_create("dcim/manufacturers", {"slug": "nvidia"}, {"name": "NVIDIA"})
    ids = {}
    for kind, spec in SWITCH_TYPES.items():
        device_type, created = netbox.get_or_create(
            "dcim/device-types", {"slug": spec["slug"]},
            {"manufacturer": nvidia["id"], "model": spec["model"], "u_height": 1})
        if created:
            netbox.create("dcim/interface-templates", [
                {"device_type": device_type["id"], "name": spec["port"].format(n),
                 "type": spec["type"]} for n in range(1, SWITCH_PORTS + 1)])
        ids[kind] = int(device_type["id"])
    return ids


# Runs the hosts part of a seed elsewhere (NetBox's own shell); gets the payload, returns
# {"created": {what: count}, "seconds": s}.
HostLoader = Callable[[dict[str, Any]], dict[str, Any]]


def apply(netbox: NetBox, seed: SeedPlan,
          progress: Callable[[str], None] = lambda _: None,
          host_loader: HostLoader | None = None) -> SeedReport:
    """Write `seed`: the shared objects through the API, then the racks and hosts through the
    API or, given a `host_loader`, in one transaction inside NetBox."""
    report = SeedReport()

    def step(what: str, fn: Callable[[], int]) -> None:
        started = time.monotonic()
        count = fn()
        report.add(what, count, time.monotonic() - started)
        progress(f"{what}: {count} created in {time.monotonic() - started:.1f} s")

    bootstrap(netbox)
    lab_tags.ensure(netbox)
    site, _ = netbox.get_or_create("dcim/sites", {"slug": seed.site},
                                   {"name": seed.site, "status": "active"})
    role = netbox.get_all("dcim/device-roles", {"slug": ROLE_GPU_SERVER})[0]
    tag = {"slug": lab_tags.LAB}
    device_tags = [{"slug": t} for t in seed.tags]
    type_id = _ensure_device_type(netbox)
    for net, desc in ((PROVISIONING_NET, "GPU server provisioning"), (OOB_NET, "BMC / OOB")):
        netbox.get_or_create("ipam/prefixes", {"prefix": str(net)},
                             {"description": desc, "status": "active", "tags": [tag]})
    context, created = netbox.get_or_create("extras/config-contexts",
                                            {"name": seed.context_name}, {
        "weight": seed.context_weight, "roles": [role["id"]],
        "tags": list(seed.context_tags), "data": {CONTEXT_KEY: seed.software},
        "description": "Desired software of GPU servers (racklift)"})
    if not created and context.get("data") != {CONTEXT_KEY: seed.software}:
        # The seed's own context follows its recipe (a newer racklift's lab asks for more).
        netbox.update("extras/config-contexts",
                      [{"id": context["id"], "data": {CONTEXT_KEY: seed.software}}])

    if host_loader is not None:
        switch_types, switch_role = _switch_kinds(netbox, seed)
        tag_ids = {t["slug"]: netbox.get_all("extras/tags", t)[0]["id"]
                   for t in [tag, *device_tags]}
        result = host_loader({
            "site_id": site["id"], "role_id": role["id"], "type_id": type_id,
            "tag_ids": [tag_ids[t["slug"]] for t in device_tags],
            "lab_tag_id": tag_ids[lab_tags.LAB],
            "provisioning_interface": PROVISIONING, "bmc_interface": BMC, "status": seed.status,
            "racks": list(seed.racks), "hosts": [asdict(h) for h in seed.hosts],
            "switch_role_id": switch_role, "switch_types": switch_types,
            "switches": [asdict(s) for s in seed.switches]})
        for what, count in result["created"].items():
            report.add(what, count, 0.0)
        progress(f"hosts loaded inside NetBox in {result['seconds']:.1f} s: {result['created']}")
        return report

    racks: dict[str, int] = {}

    def make_racks() -> int:
        existing = {r["name"]: r["id"] for r in netbox.get_all(
            "dcim/racks", {"site_id": site["id"]}, fields=("id", "name"))}
        new = netbox.create("dcim/racks", [
            {"name": name, "site": site["id"], "status": "active", "u_height": 42,
             "width": 19, "tags": [tag]} for name in seed.racks if name not in existing])
        racks.update(existing)
        racks.update({r["name"]: r["id"] for r in new})
        return len(new)

    devices: dict[str, int] = {}

    def make_devices() -> int:
        existing = {d["name"]: d["id"] for d in netbox.get_all(
            "dcim/devices", {"site_id": site["id"]}, fields=("id", "name"))}
        new = netbox.create("dcim/devices", [
            {"name": h.name, "device_type": type_id, "role": role["id"], "site": site["id"],
             "rack": racks[h.rack], "status": seed.status, "serial": h.serial,
             "asset_tag": h.asset_tag, "tags": device_tags,
             **({"position": h.position, "face": "front"} if h.position else {})}
            for h in seed.hosts if h.name not in existing])
        devices.update({h.name: existing[h.name] for h in seed.hosts if h.name in existing})
        devices.update({d["name"]: d["id"] for d in new})
        return len(new)

    def make_switches() -> int:
        found, created = ensure_switches(netbox, seed, site["id"], racks)
        switches.update(found)
        return created

    switches: dict[str, int] = {}
    step("racks", make_racks)
    step("devices", make_devices)
    step("switches", make_switches)
    step("mac addresses", lambda: _assign_macs(netbox, seed, devices))
    step("ip addresses", lambda: _assign_ips(netbox, seed, devices))
    step("cables", lambda: cable(netbox, seed, devices, switches))
    return report


def _switch_kinds(netbox: NetBox, seed: SeedPlan) -> tuple[dict[str, int], int]:
    """The switch device types the plan's links need (kind → id) and the leaf role's id."""
    types = _ensure_switch_types(netbox) if seed.switches else {}
    # The role is bootstrap's (apply and the virtual rack's register run it first).
    (role,) = netbox.get_all("dcim/device-roles", {"slug": SWITCH_ROLE}, fields=("id",))
    return types, int(role["id"])


def ensure_switches(netbox: NetBox, seed: SeedPlan, site_id: int,
                    racks: dict[str, int]) -> tuple[dict[str, int], int]:
    """The switches the plan's links name, as lab-tagged devices in their racks: their ids
    by name, and how many were created."""
    types, role = _switch_kinds(netbox, seed)
    existing = {d["name"]: d["id"] for d in netbox.get_all(
        "dcim/devices", {"site_id": site_id, "role": SWITCH_ROLE}, fields=("id", "name"))}
    new = netbox.create("dcim/devices", [
        {"name": s.name, "device_type": types[s.kind], "role": role, "site": site_id,
         "rack": racks[s.rack], "status": "active", "tags": [{"slug": lab_tags.LAB}]}
        for s in seed.switches if s.name not in existing])
    return {**existing, **{d["name"]: d["id"] for d in new}}, len(new)


def cable(netbox: NetBox, seed: SeedPlan, devices: dict[str, int],
           switches: dict[str, int]) -> int:
    """A cable for each planned link whose host port has none yet."""
    ports = _interface_ids(netbox, {**devices, **switches})

    def end(interface: dict) -> list[dict]:
        return [{"object_type": "dcim.interface", "object_id": interface["id"]}]

    links = [(near, ports[(switches[switch], port)])
             for h in seed.hosts for name, (switch, port) in h.links.items()
             if not (near := ports[(devices[h.name], name)]).get("cable")]
    # A switch port may still hold a cable whose host end went with a lab run that was
    # stopped half-way (its host removed, the cable left): the lab's own, so it goes.
    stale = sorted({far["cable"]["id"] for _, far in links if far.get("cable")})
    if stale:
        netbox.delete("dcim/cables", [c["id"] for c in netbox.get_for_ids(
            "dcim/cables", "id", stale, {"tag": lab_tags.LAB}, fields=("id",))])
    new = [{"a_terminations": end(near), "b_terminations": end(far), "status": "connected",
            "tags": [{"slug": lab_tags.LAB}]} for near, far in links]
    return len(netbox.create("dcim/cables", new))


def _interface_ids(netbox: NetBox, devices: dict[str, int]) -> dict[tuple[int, str], dict]:
    rows = netbox.get_for_ids("dcim/interfaces", "device_id", devices.values(),
                              fields=("id", "device", "name", "primary_mac_address", "cable"))
    return {(i["device"]["id"], i["name"]): i for i in rows}


def _assign_macs(netbox: NetBox, seed: SeedPlan, devices: dict[str, int]) -> int:
    interfaces = _interface_ids(netbox, devices)
    wanted = [(interfaces[(devices[h.name], name)], mac)
              for h in seed.hosts for name, mac in h.macs.items()
              if not interfaces[(devices[h.name], name)]["primary_mac_address"]]
    created = netbox.create("dcim/mac-addresses", [
        {"mac_address": mac, "assigned_object_type": "dcim.interface",
         "assigned_object_id": iface["id"]} for iface, mac in wanted])
    netbox.update("dcim/interfaces", [
        {"id": mac["assigned_object_id"], "primary_mac_address": mac["id"]} for mac in created])
    return len(created)


def _assign_ips(netbox: NetBox, seed: SeedPlan, devices: dict[str, int]) -> int:
    interfaces = _interface_ids(netbox, devices)
    existing = {ip["address"]: ip for ip in netbox.get_for_ids(
        "ipam/ip-addresses", "device_id", devices.values(), fields=("id", "address"))}
    wanted = [
        {"address": address, "status": "active", "assigned_object_type": "dcim.interface",
         "assigned_object_id": interfaces[(devices[h.name], iface_name)]["id"],
         "tags": [{"slug": lab_tags.LAB}]}
        for h in seed.hosts
        for address, iface_name in ((h.primary_ip, seed.provisioning_interface),
                                    (h.oob_ip, BMC))
        if address not in existing]
    created = netbox.create("ipam/ip-addresses", wanted)
    by_address = {**existing, **{ip["address"]: ip for ip in created}}
    current = {d["id"]: d for d in netbox.get_for_ids(
        "dcim/devices", "id", devices.values(), fields=("id", "primary_ip4", "oob_ip"))}

    def ref_id(ref: dict | None) -> int | None:
        return ref["id"] if ref else None

    changes = []
    for h in seed.hosts:
        device = current[devices[h.name]]
        primary, oob = by_address[h.primary_ip]["id"], by_address[h.oob_ip]["id"]
        if (ref_id(device["primary_ip4"]), ref_id(device["oob_ip"])) != (primary, oob):
            changes.append({"id": device["id"], "primary_ip4": primary, "oob_ip": oob})
    netbox.update("dcim/devices", changes)
    return len(created)
