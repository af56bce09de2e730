"""Pure: the records a read took from NetBox (`RawModel`) → the expected model, each host an
`ExpectedHost` with its record's problems (`build_hosts`); its record helpers serve the Ansible
inventory's lighter model too (racklift.netbox.inventory_hosts)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from racklift.natural import natural_key
from racklift.netbox import desired
from racklift.netbox.expected import (
    CONTEXT_KEY,
    GPU_ROLE,
    DeviceTypeRef,
    ExpectedGPU,
    ExpectedHost,
    ExpectedInterface,
    LinkPeer,
    Problem,
)
from racklift.netbox.identity import name_problems
from racklift.netbox.raw_records import INTERFACE_TYPE, Json, RawModel, ref_id
from racklift.netbox.record_problems import choice_value, with_problems

__all__ = ["build_hosts", "expected_gpus", "gpu_templates", "group_by_ref", "link_peers",
           "port_names", "record_fields"]


def _slug(ref: Mapping[str, Any] | None) -> str | None:
    return ref.get("slug") if ref else None


def _name(ref: Mapping[str, Any] | None) -> str | None:
    return ref.get("name") if ref else None


def _address(ref: Mapping[str, Any] | None) -> str | None:
    return ref.get("address") if ref else None


def group_by_ref(rows: Iterable[Json], key: str) -> dict[int, list[Json]]:
    """Rows by the id of their nested reference `key` (a device's, a device type's); rows
    without one are left out."""
    grouped: dict[int, list[Json]] = defaultdict(list)
    for row in rows:
        ref = row.get(key)
        if ref:
            grouped[ref["id"]].append(row)
    return grouped


def port_names(raw: RawModel) -> dict[int, LinkPeer]:
    """Every interface the model read, as a cable's far end names it: device, port, WWN."""
    devices = {d["id"]: d.get("name") for d in raw.devices}
    return {i["id"]: LinkPeer(_name(i.get("device")) or devices.get(ref_id(i, "device"))
                              or f"device-{ref_id(i, 'device')}", i["name"], i.get("wwn") or None)
            for i in (*raw.interfaces, *raw.peer_interfaces)}


def link_peers(cable_ends: Iterable[Json], ports: Mapping[int, LinkPeer]) -> dict[int, LinkPeer]:
    """Each interface's far end, by interface id, for cables with one interface at each end.
    A breakout (several terminations on one end) or a patch panel's port is not followed."""
    by_cable: dict[int, dict[str, list[Json]]] = defaultdict(lambda: defaultdict(list))
    for end in cable_ends:
        if (cable := ref_id(end, "cable")) is not None:
            by_cable[cable][str(end.get("cable_end"))].append(end)
    peers: dict[int, LinkPeer] = {}
    for ends in by_cable.values():
        a, b = ends.get("A", []), ends.get("B", [])
        if len(a) != 1 or len(b) != 1:
            continue
        if a[0].get("termination_type") == b[0].get("termination_type") == INTERFACE_TYPE:
            for near, far in ((a[0], b[0]), (b[0], a[0])):
                if (peer := ports.get(far["termination_id"])) is not None:
                    peers[near["termination_id"]] = peer
    return peers


def build_hosts(raw: RawModel) -> list[ExpectedHost]:
    """Pure: what NetBox returned → the expected model, each host with its record's problems."""
    types = {t["id"]: t for t in raw.device_types}
    peers = link_peers(raw.cable_ends, port_names(raw))
    identity = name_problems(raw.devices)
    iface_templates = group_by_ref(raw.interface_templates, "device_type")
    item_templates = group_by_ref(raw.item_templates, "device_type")
    interfaces = group_by_ref(raw.interfaces, "device")
    items = group_by_ref(raw.items, "device")
    modules = group_by_ref(raw.modules, "device")
    ips_by_interface: dict[int, list[str]] = defaultdict(list)
    for ip in raw.ip_addresses:
        if ip.get("assigned_object_type") == "dcim.interface" and ip.get("assigned_object_id"):
            ips_by_interface[ip["assigned_object_id"]].append(ip["address"])
    hosts = [
        _build_host(device, types.get(device["device_type"]["id"], device["device_type"]),
                    iface_templates.get(device["device_type"]["id"], []),
                    item_templates.get(device["device_type"]["id"], []),
                    interfaces.get(device["id"], []), ips_by_interface,
                    items.get(device["id"], []), modules.get(device["id"], []), peers,
                    identity.get(device["id"], []))
        for device in raw.devices
    ]
    return sorted(hosts, key=lambda h: h.name)


def record_fields(device: Json) -> dict[str, Any]:
    """What ExpectedHost and InventoryHost both take from a device as NetBox returns it (they
    parse the context into their desired state)."""
    context = (device.get("config_context") or {}).get(CONTEXT_KEY) or {}
    return {
        "name": device.get("name") or f"device-{device['id']}", "netbox_id": device["id"],
        "status": choice_value(device.get("status")), "site": _slug(device.get("site")) or "",
        "rack": _name(device.get("rack")), "role": _slug(device.get("role")),
        "platform": _slug(device.get("platform")), "serial": device.get("serial") or None,
        "primary_ip": _address(device.get("primary_ip4")) or _address(device.get("primary_ip6")),
        "oob_ip": _address(device.get("oob_ip")),
        "provisioning_interface": desired.setting_of(context, "provisioning_interface"),
        "config": context,
        "tags": tuple(sorted(_slug(t) or "" for t in device.get("tags", []))),
    }


def gpu_templates(item_templates: Iterable[Json]) -> list[Json]:
    """The inventory item templates of role gpu, in slot order (GPU2 before GPU10)."""
    return sorted((t for t in item_templates if _slug(t.get("role")) == GPU_ROLE),
                  key=lambda t: natural_key(t["name"]))


def expected_gpus(item_templates: Iterable[Json], items: Iterable[Json],
                  modules: Iterable[Json]) -> tuple[ExpectedGPU, ...]:
    """The GPUs a device should have, whichever way its NetBox records them: the device
    type's inventory item templates of role gpu (serials from the device's items of the same
    name), else the device's GPU modules, one per module bay (the module type's model is the
    name nvidia-smi prints)."""
    templates = gpu_templates(item_templates)
    if templates:
        serial_by_slot = {i["name"]: i.get("serial") or None for i in items}
        return tuple(ExpectedGPU(name=t["name"], manufacturer=_name(t.get("manufacturer")) or "",
                                 part_id=t.get("part_id") or "",
                                 serial=serial_by_slot.get(t["name"])) for t in templates)
    return tuple(
        ExpectedGPU(name=_name(m.get("module_bay")) or f"module-{m['id']}",
                    manufacturer=_name((m.get("module_type") or {}).get("manufacturer")) or "",
                    part_id=(m.get("module_type") or {}).get("model") or "",
                    serial=m.get("serial") or None)
        for m in sorted(modules, key=lambda m: natural_key(_name(m.get("module_bay")) or "")))


def _build_host(device: Json, device_type: Json, iface_templates: list[Json],
                item_templates: list[Json], interfaces: list[Json],
                ips_by_interface: Mapping[int, list[str]], items: list[Json],
                modules: list[Json], peers: Mapping[int, LinkPeer],
                identity: list[Problem]) -> ExpectedHost:
    record = record_fields(device)
    expected_ifaces = tuple(sorted(
        (ExpectedInterface(
            name=i["name"], type=choice_value(i["type"]), mgmt_only=bool(i.get("mgmt_only")),
            enabled=bool(i.get("enabled", True)),
            mac=(i["primary_mac_address"]["mac_address"].upper()
                 if i.get("primary_mac_address") else None),
            ips=tuple(sorted(ips_by_interface.get(i["id"], ()))), peer=peers.get(i["id"]),
            label=i.get("label") or None, wwn=i.get("wwn") or None,
        ) for i in interfaces), key=lambda i: i.name))
    gpus = expected_gpus(item_templates, items, modules)
    host = ExpectedHost(
        **record, position=device.get("position"),
        device_type=DeviceTypeRef(
            manufacturer=_name(device_type.get("manufacturer")) or "",
            model=device_type.get("model", ""), slug=device_type.get("slug", ""),
            part_number=device_type.get("part_number") or None),
        asset_tag=device.get("asset_tag") or None,
        primary_ip_interface=_holder(expected_ifaces, record["primary_ip"]),
        oob_interface=_holder(expected_ifaces, record["oob_ip"]),
        interfaces=expected_ifaces, gpus=gpus)
    return with_problems(host, device_type, iface_templates, len(gpus), identity)


def _holder(interfaces: Iterable[ExpectedInterface], address: str | None) -> str | None:
    if not address:
        return None
    return next((i.name for i in interfaces if address in i.ips), None)
