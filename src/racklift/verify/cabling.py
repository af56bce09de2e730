"""Cabling: the neighbour each cabled port sees, against the far end of its NetBox cable.

Pure: an ExpectedHost and HostFacts in, Mismatches out. Ethernet ports are read from LLDP
(`lldpctl`), InfiniBand ports from the fabric map (`ibnetdiscover`), found by the GUIDs of the
CA each NetBox port matched (racklift.verify.ports). Findings, each naming the port, what
NetBox records and what the host sees: `cable.no_neighbor[port]`, `cable.wrong_peer[port]`,
`cable.swapped[port]` (two ports each see the other's peer), `cable.degraded[port]` (an
InfiniBand link not at its type's speed and 4x) and `cable.link_state[port]` (an InfiniBand
link not Active/LinkUp, where the map says). A port cabled elsewhere is critical on every port:
that is evidence. A port that hears no one is critical on InfiniBand rails, on the provisioning
port, on an Ethernet port whose link is down, and on one whose link is up where the device
type's switches speak LLDP (`racklift.hardware.lldp_switches`, the default); elsewhere it warns.

An InfiniBand switch port is the NetBox one by the switch's GUID where NetBox keeps it (the
WWN of the switch's interface) and the map prints the peer's, else by the name the switch gives
itself in its node description (switch_name); and by the number its name ends in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from racklift.facts.host import HostFacts
from racklift.facts.observed import IbLink, LldpNeighbor
from racklift.facts.parsers.common import normalize_guid
from racklift.netbox.desired import DesiredState
from racklift.netbox.expected import IB_LINK_TYPES, ExpectedHost, ExpectedInterface, LinkPeer
from racklift.verify.mismatch import CRITICAL, WARNING, Mismatch
from racklift.verify.ports import match_ib_ports, match_nics

LINK_DOWN = frozenset({"DOWN", "LOWERLAYERDOWN", "NOTPRESENT"})  # operstates of a dead link
IB_WIDTH = "4x"  # what every HCA port racklift checks should train at
# NVIDIA's switch systems (MLNX-OS, Onyx, NVOS) describe themselves "MF0;<hostname>:<model>/U1".
MF0 = re.compile(r"MF0;([^;:]+):[^;:]*")
PORT_NUMBER = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class Seen:
    """What one cabled port sees: shown as text, and whether it is a given NetBox far end."""

    shown: str | None  # None: no neighbour
    matches: Callable[[LinkPeer], bool]
    no_link: str | None = None  # where it has no neighbour: what the tool says of it


def _same(a: str | None, b: str) -> bool:
    return (a or "").strip().casefold() == b.strip().casefold()


def _is_device(name: str | None, device: str) -> bool:
    """The far end's own name, or its first DNS label, is the NetBox device's."""
    return _same(name, device) or _same((name or "").split(".")[0], device)


def lldp_is(neighbor: LldpNeighbor, peer: LinkPeer) -> bool:
    """Whether an LLDP neighbour is this switch port: the system name (or its first DNS label)
    is the device, and the port id or, where a switch sends its name there, the port
    description is the port."""
    return _is_device(neighbor.chassis_name, peer.device) and (
        _same(neighbor.port_id, peer.port) or _same(neighbor.port_descr, peer.port))


def switch_name(desc: str) -> str | None:
    """The name an InfiniBand node gives itself in its description, as the real fabrics print
    it: "MF0;<hostname>:<model>/U1" (the words every such switch shares, MF0 and U1, are never
    the name), "<hostname>", or "<hostname> <device>" (a host's CA, "n02 HCA-1", or a switch
    named by a node name map). A longer description is a vendor's default ("SwitchIB Mellanox
    Technologies", "Sun DCS 36 QDR switch localhost"), which every such switch shares: no name,
    and only the GUID tells the switch."""
    if match := MF0.fullmatch(desc):
        return match[1]
    words = desc.split()
    return words[0] if 1 <= len(words) <= 2 else None


def ib_is(link: IbLink, peer: LinkPeer) -> bool:
    """Whether a fabric link ends at this switch port: the switch by its GUID where NetBox
    keeps it (the WWN of its port) and the map prints the peer's, else by the name its node
    description gives; the port by its number (the trailing digits of its name)."""
    number = PORT_NUMBER.search(peer.port)
    if number is None or link.peer_port != int(number[1]):
        return False
    if peer.wwn and link.peer_guid:
        return normalize_guid(peer.wwn) == link.peer_guid
    name = switch_name(link.peer_desc)
    return name is not None and _is_device(name, peer.device)


def _ethernet_seen(host_name: str, lldp: tuple[LldpNeighbor, ...]) -> Seen:
    """What lldpd heard on the host's NIC of this name."""
    heard = [n for n in lldp if n.interface == host_name]
    shown = ", ".join(f"{n.chassis_name or n.chassis_id} {n.port_id or n.port_descr}"
                      for n in heard)
    return Seen(shown or None, lambda peer: any(lldp_is(n, peer) for n in heard))


def _ib_seen(link: IbLink | None) -> Seen:
    if link is None:
        return Seen(None, lambda _: False)
    if not link.linked:
        state = link.state_shown
        return Seen(None, lambda _: False, f"no link ({state})" if state else "no link")
    guid = f" ({link.peer_guid})" if link.peer_guid else ""
    return Seen(f"{link.peer_desc}{guid} port {link.peer_port}",
                lambda peer: ib_is(link, peer))


def cabling(expected: ExpectedHost, facts: HostFacts) -> Iterator[Mismatch]:
    cabled = [i for i in expected.interfaces if i.peer is not None and not i.mgmt_only]
    ethernet = [i for i in cabled if not i.is_infiniband]
    infiniband = [i for i in cabled if i.is_infiniband]
    provisioning = expected.provisioning_interface
    # A context that does not parse is a problem of its own: meanwhile, racklift's default.
    speaks_lldp = (expected.desired or DesiredState()).hardware.lldp_switches
    if ethernet:
        if facts.lldp is None:
            yield Mismatch("cable.lldp", "lldpctl -f json", "not collected",
                           CRITICAL if speaks_lldp or any(i.name == provisioning
                                                          for i in ethernet) else WARNING,
                           "install and start lldpd (the base_os role does), then read "
                           "`lldpctl` on the host")
        else:
            nics = {name: nic for name, (nic, _) in match_nics(expected, facts.nics).items()}

            def silent(iface: ExpectedInterface) -> str:
                nic = nics.get(iface.name)
                down = nic is not None and (nic.state or "").upper() in LINK_DOWN
                return CRITICAL if speaks_lldp or iface.name == provisioning or down \
                    else WARNING

            yield from _judge({i.name: (i, _ethernet_seen(nics[i.name].name if i.name in nics
                                                          else i.name, facts.lldp))
                               for i in ethernet}, silent)
    if infiniband:
        if facts.ib_links is None:
            yield Mismatch("cable.infiniband", "ibnetdiscover", "not collected", CRITICAL,
                           "install infiniband-diags (the ofed role does), then read "
                           "`ibnetdiscover` on the host")
        else:
            links = ib_links_by_port(expected, facts)
            yield from _judge({i.name: (i, _ib_seen(links.get(i.name))) for i in infiniband},
                              lambda _: CRITICAL)
            yield from _degraded(infiniband, links)
            yield from _link_states(infiniband, links)


def ib_links_by_port(expected: ExpectedHost, facts: HostFacts) -> dict[str, IbLink]:
    """Each NetBox InfiniBand port's record in the fabric map (its link, or none), through the
    CA it is, however NetBox names the port (racklift.verify.ports); by name where ibstat gave
    no ports."""
    if facts.hca_ports:
        cas = {name: port.ca for name, (port, _) in
               match_ib_ports(expected.ib_ports, facts.hca_ports).items()}
    else:
        cas = {i.name: i.name for i in expected.ib_ports}
    links = facts.ib_links or {}
    return {name: links[ca] for name, ca in cas.items() if ca in links}


def _judge(ports: dict[str, tuple[ExpectedInterface, Seen]],
           silent: Callable[[ExpectedInterface], str]) -> Iterator[Mismatch]:
    """Findings for these ports; `silent` gives a port's severity when it hears no one."""
    for name, (iface, seen) in ports.items():
        peer = iface.peer
        if peer is None:
            continue  # not cabled in NetBox: nothing to compare with
        if seen.shown is None:
            yield Mismatch(f"cable.no_neighbor[{name}]", str(peer), seen.no_link, silent(iface),
                           f"{name} sees no neighbour: check that the cable is seated at both "
                           f"ends ({peer}) and the switch port is enabled")
        elif not seen.matches(peer):
            other = next((o for o, (o_iface, o_seen) in ports.items()
                          if o != name and o_iface.peer and seen.matches(o_iface.peer)
                          and o_seen.matches(peer)), None)
            if other is not None:
                yield Mismatch(f"cable.swapped[{name}]", str(peer), seen.shown, CRITICAL,
                               f"the cables of {name} and {other} are swapped: move them so "
                               f"{name} goes to {peer}")
            else:
                yield Mismatch(f"cable.wrong_peer[{name}]", str(peer), seen.shown,
                               CRITICAL, f"{name} is cabled to another port than NetBox "
                               f"records: move its cable to {peer}, or correct the NetBox cable")


def _degraded(ports: list[ExpectedInterface], links: dict[str, IbLink]) -> Iterator[Mismatch]:
    for iface in ports:
        link = links.get(iface.name)
        # A Down port prints no width or speed: cable.link_state says what it is.
        if link is None or not link.width or iface.type not in IB_LINK_TYPES:
            continue
        want = IB_LINK_TYPES[iface.type][0]
        if link.speed != want or link.width.lower() != IB_WIDTH:
            yield Mismatch(f"cable.degraded[{iface.name}]", f"{IB_WIDTH}{want}",
                           f"{link.width}{link.speed}", CRITICAL,
                           f"{iface.name}'s link to {link.peer_desc} port {link.peer_port} "
                           "trained below its type: reseat or replace the cable (or the "
                           "transceiver), then check the switch port's errors")


def _link_states(ports: list[ExpectedInterface],
                 links: dict[str, IbLink]) -> Iterator[Mismatch]:
    """A link is a good one only Active/LinkUp: Initialize or Armed carries no traffic (no
    subnet manager has brought it up), and any other state is no link."""
    for iface in ports:
        link = links.get(iface.name)
        if link is not None and link.linked and not link.up:
            yield Mismatch(f"cable.link_state[{iface.name}]", "Active/LinkUp",
                           link.state_shown, CRITICAL,
                           f"{iface.name}'s link to {link.peer_desc} port {link.peer_port} is "
                           f"{link.state_shown}, no good link: check that a subnet manager runs "
                           "and sees the port (Initialize, Armed), else the cable")
