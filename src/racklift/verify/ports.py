"""Which observed port each NetBox interface is. NetBoxes name ports their own way: after the
CA (`mlx5_0`, racklift's seed), after the netdev (`ibp12s0`), after another template (`eth0`
for the OS's `eno1`), or not at all, and may keep an InfiniBand port's GUID in the interface's
WWN field. An InfiniBand port: the port GUID decides first, then the label, then the name. A
NIC: the name, else its MAC where the NIC that has it bears no other NetBox port's name (that
is a swap, not a naming scheme). Each port is taken once; every match says which rule made
it. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from racklift.facts.host import NICFacts
from racklift.facts.observed import HCAPortFacts
from racklift.facts.parsers.common import normalize_guid
from racklift.netbox.expected import ExpectedHost, ExpectedInterface

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


def match_nics(expected: ExpectedHost,
               nics: Iterable[NICFacts]) -> dict[str, tuple[NICFacts, str]]:
    """NetBox NIC name → (the host's NIC, "name" or "MAC"), for the in-band ports NetBox
    records a MAC for (the BMC is not visible from the OS; InfiniBand ports are CAs)."""
    by_name = {n.name: n for n in nics}
    by_mac = {(n.mac or "").upper(): n for n in nics if n.mac}
    netbox_names = {i.name for i in expected.interfaces}
    found: dict[str, tuple[NICFacts, str]] = {}
    for iface in expected.interfaces:
        if iface.mgmt_only or iface.is_infiniband or not iface.mac:
            continue
        if iface.name in by_name:
            found[iface.name] = (by_name[iface.name], "name")
        elif (nic := by_mac.get(iface.mac.upper())) and nic.name not in netbox_names:
            found[iface.name] = (nic, "MAC")
    return found
