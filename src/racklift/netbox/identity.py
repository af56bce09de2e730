"""One identity per host: the problems of a read's device names, by device id. Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from racklift.netbox.expected import Problem

Json = dict[str, Any]

AMBIGUOUS = "name.ambiguous"  # the field of a name several selected devices share
# A host with a problem in one of these fields has no name racklift can use as its identity
# (none, shared, or no host name): it is no Ansible host and no selection takes it.
IDENTITY_FIELDS = frozenset({AMBIGUOUS, "name"})


def has_identity(problems: Iterable[Problem]) -> bool:
    return not any(p.field in IDENTITY_FIELDS for p in problems)


def name_problems(devices: Iterable[Json]) -> dict[int, list[Problem]]:
    """One identity per host: a device without a name, or whose name (case aside) another
    device read with it also has, by device id. NetBox keeps names unique per site and tenant
    only; racklift's inventory, selections, locks and run directories key hosts by name, so a
    shared name is refused on every device that has it, never resolved by a guess."""
    by_name: dict[str, list[Json]] = defaultdict(list)
    found: dict[int, list[Problem]] = defaultdict(list)
    for device in devices:
        if not device.get("name"):
            found[device["id"]].append(Problem(
                f"device-{device['id']}", "name", "the device has no name: name it in NetBox "
                "(racklift reaches, selects and reports hosts by name)"))
        else:
            by_name[device["name"].casefold()].append(device)
    for same in by_name.values():
        for device in same if len(same) > 1 else ():
            others = ", ".join(f"device {d['id']} at site {_site(d)}"
                               for d in same if d is not device)
            found[device["id"]].append(Problem(
                device["name"], AMBIGUOUS, f"{device['name']!r} also names {others}: NetBox "
                "keeps names unique per site and tenant only, racklift needs one host per "
                "name: rename one, or select one site (--site)"))
    return found


def _site(device: Json) -> str:
    return (device.get("site") or {}).get("slug") or "?"
