"""The records a read takes from NetBox, as its REST API shapes them: the fields asked of each
kind, `RawModel` holding a selection's, and `ref_id` following their references."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CABLE_END_FIELDS", "DEVICE_FIELDS", "DEVICE_TYPE_FIELDS", "IFACE_TEMPLATE_FIELDS",
    "INTERFACE_FIELDS", "INTERFACE_TYPE", "IP_FIELDS", "ITEM_FIELDS", "ITEM_TEMPLATE_FIELDS",
    "MODULE_FIELDS", "PEER_FIELDS", "Json", "RawModel", "ref_id",
]

Json = dict[str, Any]

# Each list request asks for only the fields the model reads of it.
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
MODULE_FIELDS = ("id", "device", "module_bay", "module_type", "serial")  # GPU modules

INTERFACE_TYPE = "dcim.interface"  # a cable termination's type when it ends on an interface


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


def ref_id(row: Json, key: str) -> int | None:
    """A reference's id: nested (most objects) or the bare key (a cable termination's cable)."""
    ref = row.get(key)
    if isinstance(ref, int):
        return ref
    return ref["id"] if ref else None
