"""Read what the Ansible inventory needs of many hosts: lighter than the expected model.

The inventory needs each host's groups, address, serial, config context and its MAC and IP
addresses by interface; not the interfaces' types, nor the GPUs. So it reads only the
interfaces that hold a primary MAC and the IP addresses with their interface's name, not every
interface (at 10,000 hosts: 30,000 of 110,000) nor the inventory items. The selection, the
device read and the device-type templates (for the same problems `read_hosts` reports) are
shared with the expected model's read (racklift.netbox.bulk_reads, racklift.netbox.expected_hosts).
`build_inventory_hosts` is pure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from racklift.netbox.bulk_reads import (
    FETCH_WORKERS,
    MODULE_PARAMS,
    choose,
    read_gpu_modules,
    read_selection,
    read_types,
)
from racklift.netbox.client import NetBox
from racklift.netbox.expected import InventoryHost
from racklift.netbox.expected_hosts import expected_gpus, group_by_ref, record_fields
from racklift.netbox.identity import name_problems
from racklift.netbox.raw_records import DEVICE_FIELDS, IP_FIELDS, MODULE_FIELDS, Json, ref_id
from racklift.netbox.record_problems import with_problems
from racklift.netbox.selection import Selection

# Interfaces with a primary MAC, through GraphQL for a whole site; the IP addresses are
# read as read_hosts reads them (interface ids only), and the few interfaces holding one
# without a MAC are then asked for by id.
MAC_FILTER = "primary_mac_address: {id: {gte: 1}}"
# The MAC's id too: the warm inventory finds an unlogged MAC's interface by it.
INTERFACE_GRAPHQL = "id name device { id } primary_mac_address { id mac_address }"
INTERFACE_FIELDS = ("id", "device", "name", "primary_mac_address")


@dataclass(frozen=True)
class RawInventory:
    devices: list[Json]
    device_types: list[Json]
    interface_templates: list[Json]
    item_templates: list[Json]
    interfaces: list[Json]  # those holding a primary MAC or an IP address: INTERFACE_FIELDS
    ip_addresses: list[Json]  # REST's shape: address, assigned_object_id
    modules: list[Json] = field(default_factory=list)  # GPU modules: MODULE_FIELDS


def _mac_interfaces(netbox: NetBox) -> list[Json]:
    # About one page of MAC interfaces per window (a window per page of all interfaces made
    # NetBox answer four times as many requests).
    macs = netbox.count("dcim/mac-addresses", {"assigned_object_type": "dcim.interface"})
    found = netbox.graph_scan("dcim/interfaces", "interface_list", INTERFACE_GRAPHQL,
                              filters=MAC_FILTER, expected=macs)
    if found is None:
        found = netbox.scan("dcim/interfaces", fields=INTERFACE_FIELDS)
    return [i for i in found if i.get("primary_mac_address")]


def fetch_inventory(netbox: NetBox, selection: Selection) -> RawInventory:
    with ThreadPoolExecutor(FETCH_WORKERS) as pool:
        chosen = choose(netbox, selection, pool)
        reads = read_selection(pool, netbox, chosen, _mac_interfaces, INTERFACE_FIELDS)
        modules_read = read_gpu_modules(pool, netbox, chosen)
        devices = [d for d in reads.devices.result() if chosen.holds(d["id"])]
        return _completed(pool, netbox, devices, reads.interfaces.result(),
                          reads.ip_addresses.result(), modules_read.result())


def fetch_devices(netbox: NetBox, params: Mapping[str, Any], ids: Iterable[int]) -> RawInventory:
    """What the inventory reads of the devices among `ids` that match `params` (a selection's
    filters, `device_params`), but their device types: how the warm inventory reads the devices
    changes touched (it keeps the types, and reads them again when they changed)."""
    with ThreadPoolExecutor(FETCH_WORKERS) as pool:
        devices = netbox.get_for_ids("dcim/devices", "id", ids, params, DEVICE_FIELDS)
        found = sorted(d["id"] for d in devices)
        interfaces = pool.submit(netbox.get_for_ids, "dcim/interfaces", "device_id", found,
                                 fields=INTERFACE_FIELDS)
        ip_addresses = pool.submit(netbox.get_for_ids, "ipam/ip-addresses", "device_id",
                                   found, fields=IP_FIELDS)
        modules = pool.submit(netbox.get_for_ids, "dcim/modules", "device_id", found,
                              MODULE_PARAMS, MODULE_FIELDS)
        return _completed(pool, netbox, devices, interfaces.result(),
                          ip_addresses.result(), modules.result(), types=False)


def _completed(pool: ThreadPoolExecutor, netbox: NetBox, devices: list[Json],
               interfaces_read: list[Json], ips_read: list[Json], modules: list[Json],
               *, types: bool = True) -> RawInventory:
    """The raw inventory of `devices` from what was read: their types and templates, the
    interfaces holding a MAC or an IP address (the latter asked for by id where no MAC
    brought them), those addresses and the devices' GPU modules."""
    type_reads = read_types(pool, netbox, devices) if types else None
    interfaces = {i["id"]: i for i in interfaces_read}
    ip_addresses = [ip for ip in ips_read if ip.get("assigned_object_type") == "dcim.interface"]
    holders = {ip["assigned_object_id"] for ip in ip_addresses}
    for iface in netbox.get_for_ids("dcim/interfaces", "id", holders - set(interfaces),
                                    fields=INTERFACE_FIELDS):
        interfaces[iface["id"]] = iface
    device_ids = {d["id"] for d in devices}
    kept = {k: i for k, i in interfaces.items() if ref_id(i, "device") in device_ids
            and (i.get("primary_mac_address") or k in holders)}
    return RawInventory(
        devices,
        type_reads.device_types.result() if type_reads else [],
        type_reads.interface_templates.result() if type_reads else [],
        type_reads.item_templates.result() if type_reads else [],
        list(kept.values()),
        [ip for ip in ip_addresses if ip["assigned_object_id"] in kept],
        [m for m in modules if ref_id(m, "device") in device_ids])


def read_inventory_hosts(netbox: NetBox, selection: Selection) -> list[InventoryHost]:
    return build_inventory_hosts(fetch_inventory(netbox, selection))


# ---------------------------------------------------------------------------------------------
# Pure: raw JSON → model


def build_inventory_hosts(raw: RawInventory) -> list[InventoryHost]:
    types = {t["id"]: t for t in raw.device_types}
    iface_templates = group_by_ref(raw.interface_templates, "device_type")
    item_templates = group_by_ref(raw.item_templates, "device_type")
    modules = group_by_ref(raw.modules, "device")
    interfaces = {i["id"]: i for i in raw.interfaces}
    macs: dict[int, dict[str, str]] = defaultdict(dict)
    for iface in raw.interfaces:
        if iface.get("primary_mac_address"):
            macs[iface["device"]["id"]][iface["name"]] = (
                iface["primary_mac_address"]["mac_address"].upper())
    ips: dict[int, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for ip in raw.ip_addresses:
        holder = interfaces[ip["assigned_object_id"]]
        ips[holder["device"]["id"]][holder["name"]].append(ip["address"])
    hosts = []
    identity = name_problems(raw.devices)
    for device in raw.devices:
        type_id = device["device_type"]["id"]
        record = record_fields(device)
        addresses = {name: tuple(sorted(found)) for name, found in ips[device["id"]].items()}
        holder = next((name for name, found in addresses.items()
                       if record["primary_ip"] in found), None)
        host = InventoryHost(**record, primary_ip_interface=holder, macs=macs[device["id"]],
                             ips=addresses)
        hosts.append(with_problems(host, types.get(type_id, device["device_type"]),
                                   iface_templates.get(type_id, []),
                                   len(expected_gpus(item_templates.get(type_id, []), (),
                                                     modules.get(device["id"], []))),
                                   identity.get(device["id"], [])))
    return sorted(hosts, key=lambda h: h.name)
