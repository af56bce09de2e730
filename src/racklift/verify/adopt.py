"""`verify --adopt`: record first-seen GPU serials on the device's GPU inventory items.

Only blanks are filled: a serial NetBox already has is never overwritten (a different one on
the host is a mismatch, for a person to resolve). Without --adopt nothing observed is written.
"""

from __future__ import annotations

from collections.abc import Iterable

from racklift.facts.host import HostFacts
from racklift.netbox.client import NetBox
from racklift.netbox.model import GPU_ROLE, ExpectedHost


def gpu_serials_to_adopt(expected: ExpectedHost, facts: HostFacts) -> dict[str, str]:
    """Inventory item name → observed serial, for GPU slots NetBox has no serial for.
    Slot n is the n-th GPU nvidia-smi lists (by PCI bus order, as the device type's)."""
    if facts.nvidia is None:
        return {}
    seen = {g.index: g.serial for g in facts.nvidia.gpus if g.serial}
    return {slot.name: seen[n] for n, slot in enumerate(expected.gpus)
            if not slot.serial and n in seen}


def adopt(netbox: NetBox, observed: Iterable[tuple[ExpectedHost, HostFacts]]) -> int:
    """Write the serials to adopt; returns how many inventory items were updated."""
    wanted = {h.netbox_id: gpu_serials_to_adopt(h, f) for h, f in observed}
    wanted = {device: serials for device, serials in wanted.items() if serials}
    if not wanted:
        return 0
    items = netbox.get_for_ids("dcim/inventory-items", "device_id", wanted,
                               {"role": GPU_ROLE}, fields=("id", "device", "name", "serial"))
    updates = [{"id": item["id"], "serial": wanted[item["device"]["id"]][item["name"]]}
               for item in items
               if not item["serial"] and item["name"] in wanted[item["device"]["id"]]]
    netbox.update("dcim/inventory-items", updates)
    return len(updates)
