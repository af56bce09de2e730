"""Which observed InfiniBand port each NetBox interface is. NetBoxes name ports their own way:
after the CA (`mlx5_0`, racklift's seed), after the netdev (`ibp12s0`), by position, or not
at all, and may keep the port GUID in the interface's WWN field. So the port GUID decides
first, then the label, then the name, each port taken once; every match says which rule made
it. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from racklift.facts.observed import HCAPortFacts
from racklift.facts.parsers.common import normalize_guid
from racklift.netbox.expected import ExpectedInterface

RULES = ("port GUID", "label", "name")


def match_ib_ports(expected: Iterable[ExpectedInterface],
                   observed: Iterable[HCAPortFacts]) -> dict[str, tuple[HCAPortFacts, str]]:
    """NetBox interface name → (the observed port, the rule that matched it)."""
    wanted = list(expected)
    free = [p for p in observed if not p.is_vf]
    found: dict[str, tuple[HCAPortFacts, str]] = {}
    keys = {
        "port GUID": (lambda i: normalize_guid(i.wwn) if i.wwn else None,
                      lambda p: p.port_guid),
        "label": (lambda i: i.label, lambda p: p.ca),
        "name": (lambda i: i.name, lambda p: p.ca),
    }
    for rule in RULES:
        of_iface, of_port = keys[rule]
        for iface in wanted:
            key = of_iface(iface)
            if iface.name in found or not key:
                continue
            port = next((p for p in free if of_port(p) == key), None)
            if port is not None:
                found[iface.name] = (port, rule)
                free.remove(port)
    return found
