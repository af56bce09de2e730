"""Read the expected state of many hosts from NetBox in a bounded number of bulk requests.

For any selection: the devices (with rendered config contexts), their device types' interface
and inventory item templates, their interfaces (with primary MAC objects), their IP addresses
and their inventory items. Each is a paginated list request with only the fields we use.
Nothing is per device. The component lists of a small selection are asked for by device id,
as many ids per request as fit a URL; a selection holding most of NetBox's devices (a whole
site) reads every device (through GraphQL) and every component and keeps its own, which costs
NetBox far less (see `reads_everything`). NetBox's own filters select the device ids first;
then the lists are read at the same time. `build_hosts` turns the raw JSON into the model and
is a pure function; what each host's record lacks is racklift.netbox.record_problems'.

The public surface is `__all__`: `Selection` and `read_hosts` for everyone; the read's parts
(how a selection is chosen and its lists read, the field lists, the pure record helpers) for
racklift.netbox.inventory_hosts and racklift.netbox.warm_inventory, which read the Ansible
inventory's lighter model the same way. Anything else is this module's own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from racklift.errors import NetBoxError
from racklift.natural import natural_key
from racklift.netbox import desired
from racklift.netbox.client import NetBox
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
from racklift.netbox.record_problems import choice_value, with_problems

__all__ = [
    "DEVICE_FIELDS", "FETCH_WORKERS", "IP_FIELDS", "MODULE_FIELDS", "MODULE_PARAMS", "Chosen",
    "Json", "RawModel", "Selection", "SelectionReads", "TypeReads", "build_hosts", "choose",
    "device_params", "expected_gpus", "gpu_templates", "group_by_ref", "link_peers", "port_names",
    "read_gpu_modules", "read_hosts", "read_selection", "read_types", "reads_everything",
    "record_fields", "ref_id", "rest_shaped_device", "rest_shaped_ip",
]

Json = dict[str, Any]

DEVICE_FIELDS = ("id", "name", "status", "site", "rack", "position", "role", "platform",
                 "device_type", "serial", "asset_tag", "primary_ip4", "primary_ip6", "oob_ip",
                 "config_context", "tags")
INTERFACE_FIELDS = ("id", "device", "name", "label", "wwn", "type", "mgmt_only", "enabled",
                    "primary_mac_address")
IP_FIELDS = ("id", "address", "assigned_object_type", "assigned_object_id")
ITEM_FIELDS = ("id", "device", "name", "role", "manufacturer", "part_id", "serial")
IFACE_TEMPLATE_FIELDS = ("id", "device_type", "name", "type", "mgmt_only")
ITEM_TEMPLATE_FIELDS = ("id", "device_type", "name", "role", "manufacturer", "part_id")
DEVICE_TYPE_FIELDS = ("id", "manufacturer", "model", "slug", "part_number")
CABLE_END_FIELDS = ("id", "cable", "cable_end", "termination_type", "termination_id")
PEER_FIELDS = ("id", "name", "device", "wwn")


@dataclass(frozen=True)
class Selection:
    """Which devices: every field narrows the selection; empty fields select everything."""

    sites: tuple[str, ...] = ()  # site slugs
    racks: tuple[str, ...] = ()  # rack names
    roles: tuple[str, ...] = ()  # device role slugs
    statuses: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    @classmethod
    def of(cls, **values: str | Iterable[str] | None) -> Selection:
        """From CLI flags or plugin options: each a comma-separated string or a list."""
        def split(value: str | Iterable[str] | None) -> tuple[str, ...]:
            items = value.split(",") if isinstance(value, str) else (value or ())
            return tuple(v.strip() for v in items if v and v.strip())

        return cls(**{key: split(value) for key, value in values.items()})

    def describe(self) -> str:
        parts = [f"{key}={','.join(values)}" for key, values in vars(self).items() if values]
        return " ".join(parts) or "all devices"


@dataclass(frozen=True)
class RawModel:
    """What NetBox returned for a selection, before it becomes the model."""

    devices: list[Json]
    device_types: list[Json]
    interface_templates: list[Json]
    item_templates: list[Json]
    interfaces: list[Json]
    ip_addresses: list[Json]
    items: list[Json]
    cable_ends: list[Json] = field(default_factory=list)  # both ends of their interfaces' cables
    modules: list[Json] = field(default_factory=list)  # their GPU modules: MODULE_FIELDS
    peer_interfaces: list[Json] = field(default_factory=list)  # the interfaces at those ends


def _rack_ids(netbox: NetBox, selection: Selection) -> list[int]:
    params: dict[str, Any] = {"name": list(selection.racks)}
    if selection.sites:
        params["site"] = list(selection.sites)
    racks = netbox.get_all("dcim/racks", params, fields=("id", "name"))
    unknown = set(selection.racks) - {r["name"] for r in racks}
    if unknown:
        where = f" at site {','.join(selection.sites)}" if selection.sites else ""
        raise NetBoxError(f"no rack named {', '.join(sorted(unknown))}{where} in NetBox "
                          f"at {netbox.url}: check the rack name")
    return [r["id"] for r in racks]


def device_params(netbox: NetBox, selection: Selection) -> dict[str, Any]:
    """The REST filters of `dcim/devices` that select `selection` (racks by id, so a rack name
    another site shares is not mixed in); raises NetBoxError for a rack NetBox lacks."""
    params: dict[str, Any] = {}
    for key, values in (("site", selection.sites), ("role", selection.roles),
                        ("status", selection.statuses), ("name", selection.names),
                        ("tag", selection.tags)):
        if values:
            params[key] = list(values)
    if selection.racks:
        params["rack_id"] = _rack_ids(netbox, selection)
    return params


# Components filtered by device id cost NetBox about twice as much per object as reading them
# all (each request validates its ids, and IP addresses join through interfaces), and REST
# devices about twice what GraphQL's do; so once a selection holds this share of all devices,
# reading everything and keeping ours is cheaper.
WHOLE_READ_SHARE = 0.5
# Only the serials NetBox records matter (the slots come from the templates): on a new site
# that is none of 8 items per host, a third of the read at 10,000 hosts.
ITEM_PARAMS = {"serial__empty": "false"}
# GPUs a NetBox records as modules (a GPU tray's modules in module bays): those whose module
# type has NetBox's built-in profile "GPU".
MODULE_PARAMS = {"profile": "GPU"}
MODULE_FIELDS = ("id", "device", "module_bay", "module_type", "serial")
# Reads in flight at once, for a reader's thread pool (each list pages with the client's own
# READ_WORKERS threads): the selected ids, the devices and the three component lists overlap, so
# NetBox's workers never wait for one list's last page.
FETCH_WORKERS = 5


def reads_everything(selected: int, total: int) -> bool:
    """Whether to read every device with its components rather than ask for the selection's."""
    return selected >= WHOLE_READ_SHARE * total


def ref_id(row: Json, key: str) -> int | None:
    """A reference's id: nested (most objects) or the bare key (a cable termination's cable)."""
    ref = row.get(key)
    if isinstance(ref, int):
        return ref
    return ref["id"] if ref else None


# The same fields as INTERFACE_FIELDS, in GraphQL: what build_hosts reads of an interface.
INTERFACE_GRAPHQL = ("id name label wwn type mgmt_only enabled device { id name } "
                     "primary_mac_address { mac_address }")
# The fields of DEVICE_FIELDS but the config context and tags, in GraphQL (all_devices).
DEVICE_GRAPHQL = ("id name status serial asset_tag position site { slug } rack { name } "
                  "role { slug } platform { slug } device_type { id } primary_ip4 { address } "
                  "primary_ip6 { address } oob_ip { address }")


def _all_interfaces(netbox: NetBox) -> list[Json]:
    """Every interface in NetBox: through GraphQL where it is there (half NetBox's work)."""
    found = netbox.graph_scan("dcim/interfaces", "interface_list", INTERFACE_GRAPHQL)
    if found is None:
        found = netbox.scan("dcim/interfaces", fields=INTERFACE_FIELDS)
    return found


# What build_hosts reads of an IP address; only interfaces' addresses matter.
IP_GRAPHQL = "id address assigned_object { ... on InterfaceType { id } }"


def interface_ips(netbox: NetBox) -> list[Json]:
    """Every IP address assigned to an interface, shaped as REST returns it (IP_FIELDS):
    through GraphQL where it is there (two thirds of REST's work)."""
    found = netbox.graph_scan("ipam/ip-addresses", "ip_address_list", IP_GRAPHQL)
    if found is None:
        return netbox.scan("ipam/ip-addresses", {"assigned_object_type": "dcim.interface"},
                           fields=IP_FIELDS)
    return [row for row in map(rest_shaped_ip, found) if row]


def rest_shaped_ip(ip: Json) -> Json | None:
    """A GraphQL IP address as REST returns it; None unless it is an interface's (the
    fragment leaves an address assigned to anything else an empty object)."""
    holder = (ip.get("assigned_object") or {}).get("id")
    if holder is None:
        return None
    return {"id": ip["id"], "address": ip["address"], "assigned_object_type": "dcim.interface",
            "assigned_object_id": holder}


def rest_shaped_device(device: Json, context: Json, tags: list[str]) -> Json:
    """A GraphQL device as REST returns it, with its config context and tags: GraphQL gives
    the position (a decimal) as text."""
    shaped = {**device, "config_context": context, "tags": [{"slug": t} for t in tags]}
    if device.get("position") is not None:
        shaped["position"] = float(device["position"])
    return shaped


def _device_tags(netbox: NetBox) -> dict[int, list[str]]:
    """Each device's tag slugs, from the ids of every tag's devices."""
    tags = [t["slug"] for t in netbox.get_all("extras/tags", fields=("slug", "tagged_items"))
            if t.get("tagged_items", 1)]
    found: dict[int, list[str]] = defaultdict(list)
    with ThreadPoolExecutor(FETCH_WORKERS) as pool:
        tagged = pool.map(lambda slug: netbox.scan("dcim/devices", {"tag": slug}, ("id",)),
                          sorted(tags))
        for slug, devices in zip(sorted(tags), tagged, strict=True):
            for device in devices:
                found[device["id"]].append(slug)
    return found


def all_devices(netbox: NetBox, params: Mapping[str, Any]) -> list[Json]:
    """Every device through GraphQL where it is there, else the selected ones through REST.

    GraphQL costs NetBox about half the work of REST, which renders each nested object with
    its URL, except for config contexts and tags (rendered per device, about a third of the
    whole): those come from a flat REST read of the contexts and each tag's device ids.
    """
    if not netbox.has_cursor_pages():
        return netbox.scan("dcim/devices", params, fields=DEVICE_FIELDS)
    with ThreadPoolExecutor(3) as pool:
        found_read = pool.submit(netbox.graph_scan, "dcim/devices", "device_list",
                                 DEVICE_GRAPHQL)
        contexts_read = pool.submit(netbox.scan, "dcim/devices", None, ("config_context",))
        tags_read = pool.submit(_device_tags, netbox)
        found = found_read.result()
        if found is None:  # GraphQL is off
            return netbox.scan("dcim/devices", params, fields=DEVICE_FIELDS)
        contexts = {d["id"]: d.get("config_context") or {} for d in contexts_read.result()}
        tags = tags_read.result()
    # A device created between the reads has no context read: the next read has it.
    return [rest_shaped_device(d, contexts[d["id"]], tags.get(d["id"], []))
            for d in found if d["id"] in contexts]


@dataclass(frozen=True)
class Chosen:
    """The devices a selection holds, and how to read them."""

    params: dict[str, Any]  # REST filters of the selected devices
    whole: bool  # read every device and component, keep the selection's (reads_everything)
    ids_read: Future[set[int]] | None  # None: every device

    @property
    def ids(self) -> set[int] | None:
        return None if self.ids_read is None else self.ids_read.result()

    def holds(self, device_id: int | None) -> bool:
        ids = self.ids
        return ids is None or device_id in ids


def choose(netbox: NetBox, selection: Selection, pool: ThreadPoolExecutor) -> Chosen:
    """Two counts decide how to read; the selected ids are read in `pool` meanwhile (a whole
    site's reads need them only at the end, to keep the selection's)."""
    params = device_params(netbox, selection)
    # No filter selects every device: no need to ask which, nor to count.
    if not params:
        return Chosen(params, True, None)
    ids_read = pool.submit(lambda: {d["id"] for d in netbox.scan("dcim/devices", params,
                                                                 fields=("id",))})
    whole = reads_everything(netbox.count("dcim/devices", params), netbox.count("dcim/devices"))
    return Chosen(params, whole, ids_read)


@dataclass(frozen=True)
class TypeReads:
    """The device types of the selected devices and their templates, being read."""

    device_types: Future[list[Json]]
    interface_templates: Future[list[Json]]
    item_templates: Future[list[Json]]


def read_types(pool: ThreadPoolExecutor, netbox: NetBox, devices: list[Json]) -> TypeReads:
    """Start reading, in `pool`, the device types of `devices` and their interface and
    inventory item templates (the templates are what a record's problems are judged by)."""
    type_ids = sorted({d["device_type"]["id"] for d in devices})
    return TypeReads(
        pool.submit(netbox.get_for_ids, "dcim/device-types", "id", type_ids,
                    fields=DEVICE_TYPE_FIELDS),
        pool.submit(netbox.get_for_ids, "dcim/interface-templates", "device_type_id",
                    type_ids, fields=IFACE_TEMPLATE_FIELDS),
        pool.submit(netbox.get_for_ids, "dcim/inventory-item-templates", "device_type_id",
                    type_ids, fields=ITEM_TEMPLATE_FIELDS))


@dataclass(frozen=True)
class SelectionReads:
    """The selected devices, interfaces and interface IP addresses, being read."""

    devices: Future[list[Json]]
    interfaces: Future[list[Json]]
    ip_addresses: Future[list[Json]]


def read_selection(pool: ThreadPoolExecutor, netbox: NetBox, chosen: Chosen,
                   all_interfaces: Callable[[NetBox], list[Json]],
                   interface_fields: tuple[str, ...]) -> SelectionReads:
    """A whole site: every device, `all_interfaces` and every interface IP address; a small
    selection: its own, by device id (interfaces with `interface_fields`)."""
    if chosen.whole:
        return SelectionReads(pool.submit(all_devices, netbox, chosen.params),
                              pool.submit(all_interfaces, netbox),
                              pool.submit(interface_ips, netbox))
    ids = chosen.ids or set()
    return SelectionReads(
        pool.submit(netbox.scan, "dcim/devices", chosen.params, DEVICE_FIELDS),
        pool.submit(netbox.get_for_ids, "dcim/interfaces", "device_id", ids,
                    fields=interface_fields),
        pool.submit(netbox.get_for_ids, "ipam/ip-addresses", "device_id", ids,
                    fields=IP_FIELDS))


def read_gpu_modules(pool: ThreadPoolExecutor, netbox: NetBox,
                     chosen: Chosen) -> Future[list[Json]]:
    """The GPU modules of a whole read, or of the selection's devices."""
    if chosen.whole:
        return pool.submit(netbox.scan, "dcim/modules", MODULE_PARAMS, MODULE_FIELDS)
    return pool.submit(netbox.get_for_ids, "dcim/modules", "device_id", chosen.ids or set(),
                       MODULE_PARAMS, MODULE_FIELDS)


def fetch(netbox: NetBox, selection: Selection) -> RawModel:
    with ThreadPoolExecutor(FETCH_WORKERS) as pool:
        chosen = choose(netbox, selection, pool)
        reads = read_selection(pool, netbox, chosen, _all_interfaces, INTERFACE_FIELDS)
        if chosen.whole:
            items_read = pool.submit(netbox.scan, "dcim/inventory-items", ITEM_PARAMS,
                                     ITEM_FIELDS)
        else:
            items_read = pool.submit(netbox.get_for_ids, "dcim/inventory-items", "device_id",
                                     chosen.ids or set(), ITEM_PARAMS, ITEM_FIELDS)
        modules_read = read_gpu_modules(pool, netbox, chosen)
        # Only the devices whose components were asked for: not one created meanwhile.
        devices = [d for d in reads.devices.result() if chosen.holds(d["id"])]
        types = read_types(pool, netbox, devices)
        device_ids = {d["id"] for d in devices}
        interfaces = [i for i in reads.interfaces.result()
                      if ref_id(i, "device") in device_ids]
        interface_ids = {i["id"] for i in interfaces}
        ip_addresses = [ip for ip in reads.ip_addresses.result()
                        if ip.get("assigned_object_id") in interface_ids]
        items = [i for i in items_read.result() if ref_id(i, "device") in device_ids]
        cable_ends, peers = read_cable_ends(
            netbox, interface_ids, reads.interfaces.result() if chosen.whole else None)
        return RawModel(
            devices=devices, device_types=types.device_types.result(),
            interface_templates=types.interface_templates.result(),
            item_templates=types.item_templates.result(),
            interfaces=interfaces, ip_addresses=ip_addresses, items=items,
            cable_ends=cable_ends, peer_interfaces=peers,
            modules=[m for m in modules_read.result() if ref_id(m, "device") in device_ids],
        )


def read_cable_ends(netbox: NetBox, interface_ids: set[int],
                    every_interface: list[Json] | None) -> tuple[list[Json], list[Json]]:
    """Both ends of every cable on these interfaces, and the interfaces at those ends (with
    their devices' names): flat lists, not NetBox's per-interface path lookups. A whole read
    (`every_interface`: all of NetBox's, read already) scans the terminations once and takes
    the far ends from what it has."""
    if not interface_ids:
        return [], []
    if every_interface is not None:
        every = netbox.scan("dcim/cable-terminations", fields=CABLE_END_FIELDS)
        ours = {ref_id(e, "cable") for e in every if e.get("termination_type") == INTERFACE_TYPE
                and e["termination_id"] in interface_ids}
        ends = [e for e in every if ref_id(e, "cable") in ours]  # not the switches' own
    else:
        near = netbox.get_for_ids("dcim/cable-terminations", "interface_id", interface_ids,
                                  fields=CABLE_END_FIELDS)
        ends = netbox.get_for_ids("dcim/cable-terminations", "cable_id",
                                  {c for e in near if (c := ref_id(e, "cable"))},
                                  fields=CABLE_END_FIELDS)
    far = {e["termination_id"] for e in ends if e.get("termination_type") == INTERFACE_TYPE
           and e["termination_id"] not in interface_ids}
    if every_interface is not None:
        return ends, [i for i in every_interface if i["id"] in far]
    peers = netbox.get_for_ids("dcim/interfaces", "id", far, fields=PEER_FIELDS) if far else []
    return ends, peers


def read_hosts(netbox: NetBox, selection: Selection) -> list[ExpectedHost]:
    """The expected model of every selected device, sorted by name."""
    return build_hosts(fetch(netbox, selection))


# ---------------------------------------------------------------------------------------------
# Pure: raw JSON → model


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


INTERFACE_TYPE = "dcim.interface"  # a cable termination's type when it ends on an interface


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
