"""Read the expected state of many hosts from NetBox in a bounded number of bulk requests.

For any selection: the devices (with rendered config contexts), their device types' interface
and inventory item templates, their interfaces (with primary MAC objects), their IP addresses
and their inventory items. Each is a paginated list request with only the fields we use.
Nothing is per device. The component lists of a small selection are asked for by device id,
as many ids per request as fit a URL; a selection holding most of NetBox's interfaces (a whole
site) reads every component and keeps its own, which costs NetBox far less (see
`reads_everything`). `build_hosts` turns the raw JSON into the model and is a pure function.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from racklift.errors import NetBoxError
from racklift.netbox.client import NetBox
from racklift.netbox.model import (
    CONTEXT_KEY,
    DEFAULT_PROVISIONING_INTERFACE,
    GPU_ROLE,
    DeviceTypeRef,
    ExpectedGPU,
    ExpectedHost,
    ExpectedInterface,
    Problem,
)

Json = dict[str, Any]

# Keys a config context assigned to a device type carries (what the hardware has); they are
# not the desired software a host needs a context for.
DEVICE_TYPE_KEYS = frozenset({"hardware"})

DEVICE_FIELDS = ("id", "name", "status", "site", "rack", "position", "role", "platform",
                 "device_type", "serial", "asset_tag", "primary_ip4", "primary_ip6", "oob_ip",
                 "config_context", "tags", "interface_count")
INTERFACE_FIELDS = ("id", "device", "name", "type", "mgmt_only", "enabled",
                    "primary_mac_address")
IP_FIELDS = ("id", "address", "assigned_object_type", "assigned_object_id")
ITEM_FIELDS = ("id", "device", "name", "role", "manufacturer", "part_id", "serial")
IFACE_TEMPLATE_FIELDS = ("id", "device_type", "name", "type", "mgmt_only")
ITEM_TEMPLATE_FIELDS = ("id", "device_type", "name", "role", "manufacturer", "part_id")
DEVICE_TYPE_FIELDS = ("id", "manufacturer", "model", "slug", "part_number")


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
# all (each request validates its ids, and IP addresses join through interfaces); so once a
# selection holds this share of all interfaces, reading everything and keeping ours is cheaper.
WHOLE_READ_SHARE = 0.5
# Only the serials NetBox records matter (the slots come from the templates): on a new site
# that is none of 8 items per host, a third of the read at 10,000 hosts.
ITEM_PARAMS = {"serial__empty": "false"}


def reads_everything(selected_interfaces: int, all_interfaces: int) -> bool:
    """Whether to read every device's components rather than ask for the selection's."""
    return selected_interfaces >= WHOLE_READ_SHARE * all_interfaces


def _ref_id(row: Json, key: str) -> int | None:
    ref = row.get(key)
    return ref["id"] if ref else None


# The same fields as INTERFACE_FIELDS, in GraphQL: what build_hosts reads of an interface.
INTERFACE_GRAPHQL = ("id name type mgmt_only enabled device { id } "
                     "primary_mac_address { mac_address }")


def _all_interfaces(netbox: NetBox) -> list[Json]:
    """Every interface in NetBox: through GraphQL where it is there (half NetBox's work)."""
    found = netbox.graph_scan("dcim/interfaces", "interface_list", INTERFACE_GRAPHQL)
    if found is None:
        found = netbox.scan("dcim/interfaces", fields=INTERFACE_FIELDS)
    return found


def fetch(netbox: NetBox, selection: Selection) -> RawModel:
    params = device_params(netbox, selection)
    devices = netbox.scan("dcim/devices", params, fields=DEVICE_FIELDS)
    device_ids = {d["id"] for d in devices}
    type_ids = sorted({d["device_type"]["id"] for d in devices})
    # No filter selects every device: no need to count.
    whole = not params or reads_everything(
        sum(d.get("interface_count") or 0 for d in devices), netbox.count("dcim/interfaces"))
    if whole:
        interfaces = [i for i in _all_interfaces(netbox) if _ref_id(i, "device") in device_ids]
        interface_ids = {i["id"] for i in interfaces}
        ip_addresses = [ip for ip in netbox.scan("ipam/ip-addresses",
                                                 {"assigned_object_type": "dcim.interface"},
                                                 fields=IP_FIELDS)
                        if ip.get("assigned_object_id") in interface_ids]
        items = [i for i in netbox.scan("dcim/inventory-items", ITEM_PARAMS, fields=ITEM_FIELDS)
                 if _ref_id(i, "device") in device_ids]
    else:
        interfaces = netbox.get_for_ids("dcim/interfaces", "device_id", device_ids,
                                        fields=INTERFACE_FIELDS)
        ip_addresses = netbox.get_for_ids("ipam/ip-addresses", "device_id", device_ids,
                                          fields=IP_FIELDS)
        items = netbox.get_for_ids("dcim/inventory-items", "device_id", device_ids,
                                   ITEM_PARAMS, fields=ITEM_FIELDS)
    return RawModel(
        devices=devices,
        device_types=netbox.get_for_ids("dcim/device-types", "id", type_ids,
                                        fields=DEVICE_TYPE_FIELDS),
        interface_templates=netbox.get_for_ids("dcim/interface-templates", "device_type_id",
                                               type_ids, fields=IFACE_TEMPLATE_FIELDS),
        item_templates=netbox.get_for_ids("dcim/inventory-item-templates", "device_type_id",
                                          type_ids, fields=ITEM_TEMPLATE_FIELDS),
        interfaces=interfaces, ip_addresses=ip_addresses, items=items,
    )


def read_hosts(netbox: NetBox, selection: Selection) -> list[ExpectedHost]:
    return build_hosts(fetch(netbox, selection))


# ---------------------------------------------------------------------------------------------
# Pure: raw JSON → model


def _slug(ref: Mapping[str, Any] | None) -> str | None:
    return ref.get("slug") if ref else None


def _name(ref: Mapping[str, Any] | None) -> str | None:
    return ref.get("name") if ref else None


def _address(ref: Mapping[str, Any] | None) -> str | None:
    return ref.get("address") if ref else None


def _value(choice: Any) -> str:
    return choice.get("value") if isinstance(choice, Mapping) else str(choice)


def _group(rows: Iterable[Json], key: str) -> dict[int, list[Json]]:
    grouped: dict[int, list[Json]] = defaultdict(list)
    for row in rows:
        ref = row.get(key)
        if ref:
            grouped[ref["id"]].append(row)
    return grouped


def build_hosts(raw: RawModel) -> list[ExpectedHost]:
    types = {t["id"]: t for t in raw.device_types}
    iface_templates = _group(raw.interface_templates, "device_type")
    item_templates = _group(raw.item_templates, "device_type")
    interfaces = _group(raw.interfaces, "device")
    items = _group(raw.items, "device")
    ips_by_interface: dict[int, list[str]] = defaultdict(list)
    for ip in raw.ip_addresses:
        if ip.get("assigned_object_type") == "dcim.interface" and ip.get("assigned_object_id"):
            ips_by_interface[ip["assigned_object_id"]].append(ip["address"])
    hosts = [
        _build_host(device, types.get(device["device_type"]["id"], device["device_type"]),
                    iface_templates.get(device["device_type"]["id"], []),
                    item_templates.get(device["device_type"]["id"], []),
                    interfaces.get(device["id"], []), ips_by_interface,
                    items.get(device["id"], []))
        for device in raw.devices
    ]
    return sorted(hosts, key=lambda h: h.name)


def _build_host(device: Json, device_type: Json, iface_templates: list[Json],
                item_templates: list[Json], interfaces: list[Json],
                ips_by_interface: Mapping[int, list[str]], items: list[Json]) -> ExpectedHost:
    name = device.get("name") or f"device-{device['id']}"
    context = (device.get("config_context") or {}).get(CONTEXT_KEY) or {}
    provisioning = context.get("provisioning_interface", DEFAULT_PROVISIONING_INTERFACE)
    expected_ifaces = tuple(sorted(
        (ExpectedInterface(
            name=i["name"], type=_value(i["type"]), mgmt_only=bool(i.get("mgmt_only")),
            enabled=bool(i.get("enabled", True)),
            mac=(i["primary_mac_address"]["mac_address"].upper()
                 if i.get("primary_mac_address") else None),
            ips=tuple(sorted(ips_by_interface.get(i["id"], ()))),
        ) for i in interfaces), key=lambda i: i.name))
    primary = _address(device.get("primary_ip4")) or _address(device.get("primary_ip6"))
    oob = _address(device.get("oob_ip"))
    serial_by_slot = {i["name"]: i.get("serial") or None for i in items}
    gpus = tuple(
        ExpectedGPU(name=t["name"], manufacturer=_name(t.get("manufacturer")) or "",
                    part_id=t.get("part_id") or "", serial=serial_by_slot.get(t["name"]))
        for t in sorted(item_templates, key=lambda t: t["name"])
        if _slug(t.get("role")) == GPU_ROLE
    )
    host = ExpectedHost(
        name=name, netbox_id=device["id"], status=_value(device.get("status")),
        site=_slug(device.get("site")) or "", rack=_name(device.get("rack")),
        position=device.get("position"), role=_slug(device.get("role")),
        platform=_slug(device.get("platform")),
        device_type=DeviceTypeRef(
            manufacturer=_name(device_type.get("manufacturer")) or "",
            model=device_type.get("model", ""), slug=device_type.get("slug", ""),
            part_number=device_type.get("part_number") or None),
        serial=device.get("serial") or None, asset_tag=device.get("asset_tag") or None,
        primary_ip=primary,
        primary_ip_interface=_holder(expected_ifaces, primary),
        oob_ip=oob, oob_interface=_holder(expected_ifaces, oob),
        provisioning_interface=provisioning, interfaces=expected_ifaces, gpus=gpus,
        config=context, tags=tuple(sorted(_slug(t) or "" for t in device.get("tags", []))),
    )
    problems = find_problems(host, has_context=bool(set(context) - DEVICE_TYPE_KEYS),
                             iface_templates=iface_templates, gpu_templates=len(gpus))
    return replace(host, problems=tuple(problems))


def _holder(interfaces: Iterable[ExpectedInterface], address: str | None) -> str | None:
    if not address:
        return None
    return next((i.name for i in interfaces if address in i.ips), None)


def find_problems(host: ExpectedHost, *, has_context: bool, iface_templates: list[Json],
                  gpu_templates: int) -> list[Problem]:
    """Everything racklift needs that this host's record lacks; every one, not the first."""
    n = host.name
    problems: list[Problem] = []

    def add(field: str, message: str) -> None:
        problems.append(Problem(n, field, message))

    if not host.serial:
        add("serial", "no serial number: set the chassis serial on the device in NetBox")
    if not host.primary_ip:
        add("primary_ip4", "no primary IP: assign an IP to the provisioning interface "
            f"({host.provisioning_interface}) and mark it primary")
    elif not host.primary_ip_interface:
        add("primary_ip4", f"primary IP {host.primary_ip} is not assigned to an interface of "
            "this device: assign it to the provisioning interface")
    if not host.oob_ip:
        add("oob_ip", "no OOB (BMC) IP: assign the BMC's IP to the mgmt-only interface and "
            "set it as the device's OOB IP")
    iface = host.interface(host.provisioning_interface)
    if iface is None:
        add(f"interfaces.{host.provisioning_interface}",
            "the provisioning interface does not exist on the device: create it, or set "
            f"{CONTEXT_KEY}.provisioning_interface in the config context")
    elif not iface.mac:
        add(f"interfaces.{host.provisioning_interface}.primary_mac_address",
            "no MAC address on the provisioning interface: add a MAC address object and make "
            "it the interface's primary MAC")
    if not has_context:
        add(f"config_context.{CONTEXT_KEY}", "no racklift desired-software config context "
            "applies to this device (a device type's racklift.hardware alone is not one): "
            "scope one to its site, role or platform")
    type_name = host.device_type.slug or host.device_type.model
    if not any(t.get("mgmt_only") for t in iface_templates):
        add("device_type.interface_templates", f"device type {type_name} has no mgmt-only "
            "(BMC) interface template: add one")
    if not any(_value(t.get("type")).startswith("infiniband-") for t in iface_templates):
        add("device_type.interface_templates", f"device type {type_name} has no InfiniBand "
            "interface templates: add one per HCA port")
    if gpu_templates == 0:
        add("device_type.inventory_item_templates", f"device type {type_name} has no "
            f"inventory item templates with role '{GPU_ROLE}': add one per GPU")
    return problems
