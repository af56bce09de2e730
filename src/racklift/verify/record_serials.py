"""`verify --record-serials`: record first-seen GPU serials on the device's GPU inventory items.

Only blanks are filled: a serial NetBox already has is never overwritten (a different one on
the host is a mismatch, for a person to resolve). Without the flag nothing observed is written.
What is recorded is the host's word, so only from a host that passes the identity checks (its
chassis serial is NetBox's, its GPUs the device type's and the recorded ones), and only what
looks like a serial: NetBox keeps what a later verify trusts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from racklift.facts.host import HostFacts
from racklift.netbox.client import NetBox
from racklift.netbox.expected import GPU_ROLE, ExpectedHost
from racklift.verify.compare import gpu_slots, identity

# NVIDIA's board serials are 13 digits; NetBox keeps at most 50 characters of a serial.
SERIAL = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,49}")


def gpu_serials_to_record(expected: ExpectedHost, facts: HostFacts) -> dict[str, str]:
    """Inventory item name → observed serial, for GPU slots NetBox has no serial for.
    Slot n is the n-th GPU nvidia-smi lists (by PCI bus order, as the device type's). None
    from a host that fails an identity check."""
    if facts.nvidia is None or identity(expected, facts):
        return {}
    seen = {g.index: g.serial for g in facts.nvidia.gpus
            if g.serial and SERIAL.fullmatch(g.serial)}
    return {slot.name: seen[n] for n, slot in enumerate(gpu_slots(expected))
            if not slot.serial and n in seen}


def record_serials(netbox: NetBox, observed: Iterable[tuple[ExpectedHost, HostFacts]]) -> int:
    """Write the serials to record; returns how many inventory items were updated."""
    wanted = {h.netbox_id: gpu_serials_to_record(h, f) for h, f in observed}
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
