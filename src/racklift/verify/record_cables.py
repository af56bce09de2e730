"""`verify --record-cables`: create NetBox cables for the links hosts see and NetBox has none
for.

Only host ports without a cable in NetBox; only to a switch port NetBox has (the device by its
name among the devices of the host's site whose role the host's context names as a switch's,
`racklift.cabling.switch_roles`; the port by its name or, on InfiniBand, by its number) that
no cable holds; only from a host that passes the identity checks. What is recorded is what
the far end says of itself (LLDP's system name, a switch's node description), so a recorded
cable is never replaced: a different neighbour there is a finding for a person. Without the
flag nothing is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from racklift.facts.host import HostFacts
from racklift.netbox.client import NetBox
from racklift.netbox.desired import DesiredState
from racklift.netbox.expected import ExpectedHost
from racklift.verify.cabling import PORT_NUMBER, ib_links_by_port, switch_name
from racklift.verify.compare import identity
from racklift.verify.ports import match_nics

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,63}")  # what may be a device or port name


@dataclass(frozen=True)
class SeenLink:
    """A host port NetBox has no cable for, and the switch port it sees: `devices` the names
    the far end may have (the name its node description or LLDP gives), `port` its name or
    number; `site` the host's (slug) and `switch_roles` the roles its context names as
    switches', where the far end must be."""

    host_id: int
    interface: str
    devices: tuple[str, ...]
    port: str | int
    site: str
    switch_roles: tuple[str, ...]


def links_to_record(expected: ExpectedHost, facts: HostFacts) -> list[SeenLink]:
    """Pure: the uncabled ports of a host that passes the identity checks, with what each sees
    (one neighbour only: a port hearing several is not recorded)."""
    if identity(expected, facts):
        return []
    found = []
    where = {"site": expected.site,
             "switch_roles": (expected.desired or DesiredState()).cabling.switch_roles}
    ib_links = ib_links_by_port(expected, facts)
    nics = {name: nic.name for name, (nic, _) in match_nics(expected, facts.nics).items()}
    for iface in expected.interfaces:
        if iface.peer is not None or iface.mgmt_only:
            continue
        if iface.is_infiniband:
            link = ib_links.get(iface.name)
            if link is not None and link.peer_port is not None \
                    and (name := switch_name(link.peer_desc)) and _NAME.fullmatch(name):
                found.append(SeenLink(expected.netbox_id, iface.name, (name,), link.peer_port,
                                      **where))
            continue
        heard = [n for n in facts.lldp or () if n.interface == nics.get(iface.name, iface.name)]
        if len(heard) == 1 and heard[0].chassis_name:
            name, port = heard[0].chassis_name.split(".")[0], heard[0].port_id or ""
            if _NAME.fullmatch(name) and _NAME.fullmatch(port):
                found.append(SeenLink(expected.netbox_id, iface.name, (name,), port, **where))
    return found


def _port(ports: list[dict], port: str | int) -> dict | None:
    """The switch port by name, or by the number its name ends in (InfiniBand)."""
    if isinstance(port, str):
        return next((p for p in ports if p["name"] == port), None)
    return next((p for p in ports if (m := PORT_NUMBER.search(p["name"]))
                 and int(m[1]) == port), None)


def _slug(ref: dict | None) -> str | None:
    return ref.get("slug") if isinstance(ref, dict) else None


def far_device(link: SeenLink, devices: Iterable[dict]) -> int | None:
    """Pure: the id of the device the far end names, among NetBox's `devices` (id, name, site,
    role): one of a switch role the host's context names, in the host's site; by the first of
    its names that one such device has. A claim is no identity: never another server, never a
    switch elsewhere, and no guess where two devices share the name (NetBox makes names unique
    per site and tenant only)."""
    switches = [d for d in devices if _slug(d.get("site")) == link.site
                and _slug(d.get("role")) in link.switch_roles]
    for name in link.devices:
        named = [d["id"] for d in switches if d["name"].casefold() == name.casefold()]
        if named:
            return named[0] if len(named) == 1 else None
    return None


def record_cables(netbox: NetBox, observed: Iterable[tuple[ExpectedHost, HostFacts]]) -> int:
    """Create the cables; returns how many."""
    seen = [link for host, facts in observed for link in links_to_record(host, facts)]
    if not seen:
        return 0
    names = {name for link in seen for name in link.devices}
    roles = sorted({role for link in seen for role in link.switch_roles})
    # Only the hosts' sites' switches are asked for; far_device picks each link's among them.
    devices = netbox.get_for_ids(
        "dcim/devices", "name__ie", names,  # type: ignore[arg-type]
        params={"site": sorted({link.site for link in seen}), "role": roles},
        fields=("id", "name", "site", "role")) if roles else []
    fields = ("id", "name", "device", "cable")
    ports: dict[int, list[dict]] = {}
    for p in netbox.get_for_ids("dcim/interfaces", "device_id",
                                {*(d["id"] for d in devices), *(link.host_id for link in seen)},
                                fields=fields):
        ports.setdefault(p["device"]["id"], []).append(p)
    new, taken = [], set()
    for link in seen:
        near = _port(ports.get(link.host_id, []), link.interface)
        device = far_device(link, devices)
        port = _port(ports.get(device, []), link.port) if device else None
        if near is None or port is None or near.get("cable") or port.get("cable") \
                or port["id"] in taken:
            continue
        taken.add(port["id"])
        new.append({"a_terminations": [{"object_type": "dcim.interface", "object_id": near["id"]}],
                    "b_terminations": [{"object_type": "dcim.interface", "object_id": port["id"]}],
                    "status": "connected",
                    "description": "recorded by racklift verify --record-cables"})
    return len(netbox.create("dcim/cables", new))
