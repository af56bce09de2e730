"""How a selection's records are read from NetBox in a bounded number of bulk requests, REST or
GraphQL, a few lists at once.

For any selection: the devices (with rendered config contexts), their device types' interface
and inventory item templates, their interfaces (with primary MAC objects), their IP addresses,
their inventory items and GPU modules, and both ends of their interfaces' cables. Each is a
paginated list request with only the fields used (racklift.netbox.raw_records). Nothing is per
device. The component lists of a small selection are asked for by device id, as many ids per
request as fit a URL; a selection holding most of NetBox's devices (a whole site) reads every
device (through GraphQL, racklift.netbox.graphql_records) and every component and keeps its
own, which costs NetBox far less (see `reads_everything`). NetBox's own filters select the
device ids first; then the lists are read at the same time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from racklift.netbox.client import NetBox
from racklift.netbox.graphql_records import (
    DEVICE_GRAPHQL,
    INTERFACE_GRAPHQL,
    IP_GRAPHQL,
    rest_shaped_device,
    rest_shaped_ip,
)
from racklift.netbox.raw_records import (
    CABLE_END_FIELDS,
    DEVICE_FIELDS,
    DEVICE_TYPE_FIELDS,
    IFACE_TEMPLATE_FIELDS,
    INTERFACE_FIELDS,
    INTERFACE_TYPE,
    IP_FIELDS,
    ITEM_FIELDS,
    ITEM_TEMPLATE_FIELDS,
    MODULE_FIELDS,
    PEER_FIELDS,
    Json,
    RawModel,
    ref_id,
)
from racklift.netbox.selection import Selection, device_params

__all__ = [
    "FETCH_WORKERS", "MODULE_PARAMS", "Chosen", "SelectionReads", "TypeReads", "choose",
    "read_gpu_modules", "read_raw_model", "read_selection", "read_types", "reads_everything",
]

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
# Reads in flight at once, for a reader's thread pool (each list pages with the client's own
# READ_WORKERS threads): the selected ids, the devices and the three component lists overlap, so
# NetBox's workers never wait for one list's last page.
FETCH_WORKERS = 5


def reads_everything(selected: int, total: int) -> bool:
    """Whether to read every device with its components rather than ask for the selection's."""
    return selected >= WHOLE_READ_SHARE * total


def _all_interfaces(netbox: NetBox) -> list[Json]:
    """Every interface in NetBox: through GraphQL where it is there (half NetBox's work)."""
    found = netbox.graph_scan("dcim/interfaces", "interface_list", INTERFACE_GRAPHQL)
    if found is None:
        found = netbox.scan("dcim/interfaces", fields=INTERFACE_FIELDS)
    return found


def interface_ips(netbox: NetBox) -> list[Json]:
    """Every IP address assigned to an interface, shaped as REST returns it (IP_FIELDS):
    through GraphQL where it is there (two thirds of REST's work)."""
    found = netbox.graph_scan("ipam/ip-addresses", "ip_address_list", IP_GRAPHQL)
    if found is None:
        return netbox.scan("ipam/ip-addresses", {"assigned_object_type": "dcim.interface"},
                           fields=IP_FIELDS)
    return [row for row in map(rest_shaped_ip, found) if row]


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


def read_raw_model(netbox: NetBox, selection: Selection) -> RawModel:
    """Every list the selection's expected model is built from, FETCH_WORKERS reads at once."""
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
