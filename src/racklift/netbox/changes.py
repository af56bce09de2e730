"""Which inventory hosts a batch of NetBox change records touches: pure.

NetBox logs every write made through its API, UI or scripts as an object change
(`core/object-changes`: the object's type and id, and its data before and after). The warm
inventory (racklift.netbox.warm_inventory) reads the changes since its last read and asks
this module what they mean for the cached model:

- a device, or a component of one (interface, GPU module, module bay): that device;
- a MAC or IP address: the devices of the interfaces it was and is assigned to (resolved by
  the caller, which knows the interfaces);
- a tag: the cached devices carrying it, before and after a rename;
- a config context, or what one can be assigned by (cluster, tenant): every device's context;
- a device type or its templates, a manufacturer: the device types;
- what the selection or the groups are made of (site, rack, role, platform, region,
  location, site group) or which modules are GPUs (module type, its profile): a full read,
  which these rare edits are worth;
- anything else (cables, circuits, users, ...): nothing the inventory reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]

DEVICE_KINDS = frozenset({"dcim.device"})
COMPONENT_KINDS = frozenset({"dcim.interface", "dcim.module", "dcim.modulebay"})
ADDRESS_KINDS = frozenset({"dcim.macaddress", "ipam.ipaddress"})
TYPE_KINDS = frozenset({"dcim.devicetype", "dcim.interfacetemplate",
                        "dcim.inventoryitemtemplate", "dcim.manufacturer",
                        "dcim.inventoryitemrole"})  # the GPU templates are found by role
CONTEXT_KINDS = frozenset({"extras.configcontext", "extras.configcontextprofile",
                           "virtualization.cluster", "virtualization.clustergroup",
                           "virtualization.clustertype", "tenancy.tenant",
                           "tenancy.tenantgroup"})
TAG_KINDS = frozenset({"extras.tag"})
FULL_READ_KINDS = frozenset({"dcim.site", "dcim.rack", "dcim.devicerole", "dcim.platform",
                             "dcim.region", "dcim.location", "dcim.sitegroup",
                             "dcim.moduletype", "dcim.moduletypeprofile"})
# The kinds whose objects the inventory reads: their `last_updated` is checked against the
# changes read (warm_inventory), so that a write NetBox did not log is not missed. Each with
# its endpoint and the fields that say which device an object belongs to.
UPDATE_CHECKED: dict[str, tuple[str, tuple[str, ...]]] = {
    "dcim.device": ("dcim/devices", ()), "dcim.interface": ("dcim/interfaces", ("device",)),
    "dcim.macaddress": ("dcim/mac-addresses", ("assigned_object_id",)),
    "ipam.ipaddress": ("ipam/ip-addresses", ("assigned_object_id",)),
    "dcim.module": ("dcim/modules", ("device",)), "extras.tag": ("extras/tags", ()),
    "extras.configcontext": ("extras/config-contexts", ()),
    "dcim.devicetype": ("dcim/device-types", ()),
    "dcim.interfacetemplate": ("dcim/interface-templates", ()),
    "dcim.inventoryitemtemplate": ("dcim/inventory-item-templates", ()),
    "dcim.manufacturer": ("dcim/manufacturers", ()),
    "dcim.inventoryitemrole": ("dcim/inventory-item-roles", ()),
    "extras.configcontextprofile": ("extras/config-context-profiles", ()),
    "virtualization.cluster": ("virtualization/clusters", ()),
    "virtualization.clustergroup": ("virtualization/cluster-groups", ()),
    "virtualization.clustertype": ("virtualization/cluster-types", ()),
    "tenancy.tenant": ("tenancy/tenants", ()), "tenancy.tenantgroup": ("tenancy/tenant-groups", ()),
    "dcim.site": ("dcim/sites", ()), "dcim.rack": ("dcim/racks", ()),
    "dcim.devicerole": ("dcim/device-roles", ()), "dcim.platform": ("dcim/platforms", ()),
    "dcim.region": ("dcim/regions", ()), "dcim.location": ("dcim/locations", ()),
    "dcim.sitegroup": ("dcim/site-groups", ()), "dcim.moduletype": ("dcim/module-types", ()),
    "dcim.moduletypeprofile": ("dcim/module-type-profiles", ()),
}


@dataclass
class Touched:
    """What a batch of changes touches of the inventory."""

    devices: set[int] = field(default_factory=set)  # device ids: read again
    interfaces: set[int] = field(default_factory=set)  # ids to resolve to their devices
    types: bool = False  # read the device types and their templates again
    contexts: bool = False  # read every selected device's config context again
    full_read: str | None = None  # why only a full read will do

    def merge_full_read(self, why: str) -> None:
        if self.full_read is None:
            self.full_read = why


def _ref(value: Any) -> int | None:
    """An id in a change's data: a bare id, or an object with one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("id"), int):
        return value["id"]
    return None


def _both(change: Json) -> list[Mapping[str, Any]]:
    """The object's data before and after the change (either is empty on create/delete)."""
    return [d for d in (change.get("prechange_data"), change.get("postchange_data"))
            if isinstance(d, Mapping)]


def _tag_names(data: Mapping[str, Any]) -> set[str]:
    return {str(data[k]) for k in ("slug", "name") if isinstance(data.get(k), str)}


def tag_names(change: Json) -> set[str]:
    """A tag change's slugs and names, before and after."""
    return {name for data in _both(change) for name in _tag_names(data)}


def device_tags(device: Json) -> set[str]:
    """A cached device's tags, by slug and name (a change's data names a tag either way)."""
    found: set[str] = set()
    for tag in device.get("tags") or ():
        if isinstance(tag, Mapping):
            found |= _tag_names(tag)
    return found


def _by_address(devices: Iterable[Json]) -> dict[str, set[int]]:
    """Devices by their primary and OOB addresses."""
    found: dict[str, set[int]] = {}
    for device in devices:
        for key in ("primary_ip4", "primary_ip6", "oob_ip"):
            ref = device.get(key)
            if isinstance(ref, Mapping) and isinstance(ref.get("address"), str):
                found.setdefault(ref["address"], set()).add(device["id"])
    return found


def touched(changes: Iterable[Json], devices: Iterable[Json]) -> Touched:
    """What `changes` (object-change records) touch of a model holding `devices`."""
    found = Touched()
    devices = list(devices)
    tagged: dict[str, set[int]] | None = None
    addressed: dict[str, set[int]] | None = None
    for change in changes:
        kind = str(change.get("changed_object_type") or "")
        object_id = _ref(change.get("changed_object_id"))
        if kind in DEVICE_KINDS and object_id is not None:
            found.devices.add(object_id)
        elif kind in COMPONENT_KINDS:
            found.devices |= {d for data in _both(change)
                              if (d := _ref(data.get("device"))) is not None}
        elif kind in ADDRESS_KINDS:
            # The holder may be another kind of object with the same id: resolving it as an
            # interface then reads one device too many, never one too few.
            found.interfaces |= {i for data in _both(change)
                                 if (i := _ref(data.get("assigned_object_id"))) is not None}
            # A device's primary or OOB address need not be on its own interface (a virtual
            # chassis member's, a NAT outside address): those devices are found by address.
            if addressed is None:
                addressed = _by_address(devices)
            for data in _both(change):
                found.devices |= addressed.get(str(data.get("address")), set())
        elif kind in TAG_KINDS:
            if tagged is None:
                tagged = {}
                for device in devices:
                    for name in device_tags(device):
                        tagged.setdefault(name, set()).add(device["id"])
            for name in tag_names(change):
                found.devices |= tagged.get(name, set())
        elif kind in TYPE_KINDS:
            found.types = True
        elif kind in CONTEXT_KINDS:
            found.contexts = True
        elif kind in FULL_READ_KINDS:
            found.merge_full_read(f"a {kind} changed (object {object_id})")
    return found
