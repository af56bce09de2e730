"""``ibnetdiscover``: the InfiniBand fabric as the subnet sees it, one record per cabled port of
each node (switch, CA, router), with its peer and the width and speed the link trained at, and
one without a link for each port of a CA the map shows unlinked (the topology file prints a
port only with its link; the ports report prints unconnected ports), so a host whose HCA port
has no link is in the map as such. Both of its layouts: the topology file (the default) and
the ports report (``-p``), told apart by the topology file's header. Formats follow the real
captures in tests/fixtures/real (an NDR Quantum-2 DGX fabric, mixed EDR/FDR/QDR/SDR, QDR, a
GB200 HCA that found no links; an EDR ports report with unconnected ports)."""

from __future__ import annotations

import re

from racklift.facts.observed import IbLink
from racklift.facts.parsers.common import ParseError, shown, text_lines

KIND = "ibnetdiscover"
MAX_LINKS = 200_000  # a 4,000-GPU fabric has about 12,000 cables, seen from both ends
_TYPES = {"Switch": "switch", "Ca": "ca", "Rt": "router", "S": "switch", "H": "ca", "R": "router",
          "SW": "switch", "CA": "ca", "RT": "router"}
_GUID = r"[0-9a-fA-F]{1,16}"
_NODE = re.compile(rf'(Switch|Ca|Rt)\s+(\d{{1,4}})\s+"([SHR])-({_GUID})"\s+#\s+"([^"]{{0,128}})"'
                   r'(?:\s.*)?')
# [1]\t"H-e09d...."[1](e09d...) \t\t# "a08-p1-dgx-04-c01 mlx5_5" lid 647 4xNDR        (switch)
# [1](e09d....) \t"S-2c5e...."[17]\t\t# lid 657 lmc 0 "MF0;...:MQM9701/U1" lid 73 4xNDR  (CA)
_PORT = re.compile(rf'\[(\d{{1,4}})\](?:\({_GUID}\))?\s+"([SHR])-({_GUID})"\[(\d{{1,4}})\]'
                   rf'(?:\({_GUID}\))?\s+#\s+(?:lid \d+ lmc \d+ )?"([^"]{{0,128}})"\s+'
                   r'lid \d+ (\d{1,2}x)([A-Z][A-Z0-9]{1,7})(?:\s.*)?')
_HEADER = re.compile(r"(vendid|devid|sysimgguid|switchguid|caguid|routerguid)=\S{1,64}")


# -p: "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' -
# 'ib-i1l1s01' )": type, LID, port, GUID, width, speed, then the peer's; an unconnected port has
# no peer ("SW  2052 37 0x506b4b03005c2740 4x ???   'ib-i4l1s01'").
_REPORT_END = rf"(CA|SW|RT)\s+\d{{1,5}}\s+(\d{{1,4}})\s+0x({_GUID})"
_REPORT = re.compile(rf"{_REPORT_END}\s+(\d{{1,2}}x)\s+([A-Z][A-Z0-9]{{1,7}})\s+-\s+{_REPORT_END}"
                     r"\s+\(\s+'([^']{0,128})'\s+-\s+'([^']{0,128})'\s+\)")
_UNCONNECTED = re.compile(rf"{_REPORT_END}\s+\d{{1,2}}x\s+\S{{1,8}}\s+'([^']{{0,128}})'")


def _guid(digits: str) -> str:
    return "0x" + digits.lower().zfill(16)


def _add(links: list[IbLink], *new: IbLink) -> None:
    links.extend(new)
    if len(links) > MAX_LINKS:
        raise ParseError(KIND, f"more than {MAX_LINKS} links")


def _unlinked(node: tuple[str, str, str, int] | None, linked: set[int]) -> list[IbLink]:
    """The ports of a CA the map printed no link for (a switch's are not: its unused ports are
    of no host)."""
    if node is None or node[1] != "ca":
        return []
    guid, kind, desc, ports = node
    return [IbLink(guid, kind, desc, port, "", "", "", None, "", "")
            for port in range(1, ports + 1) if port not in linked]


def parse_ibnetdiscover(text: str) -> tuple[IbLink, ...]:
    lines = text_lines(text)
    # Anything before the header (a warning the tool wrote to the same terminal) is not the map.
    start = next((i for i, line in enumerate(lines) if line.startswith("# Topology file:")),
                 None)
    if start is None:
        if any(_REPORT.fullmatch(line.strip()) for line in lines[:8]):
            return _ports_report(lines)
        raise ParseError(KIND, "no '# Topology file:' header and no ports report line (not "
                         "ibnetdiscover's output)")
    links: list[IbLink] = []
    node: tuple[str, str, str, int] | None = None  # GUID, type, description, number of ports
    linked: set[int] = set()  # the ports of `node` printed with their link
    for line in lines[start:]:
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or _HEADER.fullmatch(stripped):
            continue
        if match := _NODE.fullmatch(stripped):
            _add(links, *_unlinked(node, linked))
            node, linked = (_guid(match[4]), _TYPES[match[1]], match[5], int(match[2])), set()
        elif (match := _PORT.fullmatch(stripped)) and node is not None:
            linked.add(int(match[1]))
            _add(links, IbLink(node[0], node[1], node[2], int(match[1]), _guid(match[3]),
                               _TYPES[match[2]], match[5], int(match[4]), match[6], match[7]))
        else:
            raise ParseError(KIND, f"a line that is no node, port or header: {shown(stripped)}")
    _add(links, *_unlinked(node, linked))
    return tuple(links)


def _ports_report(lines: list[str]) -> tuple[IbLink, ...]:
    """``ibnetdiscover -p``: one line per port, each cabled one with its peer, an unconnected
    one with its node's description alone. The GUID it prints is the node's for a switch port,
    the port's own for a CA port."""
    links: list[IbLink] = []
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        if match := _UNCONNECTED.fullmatch(stripped):
            _add(links, IbLink(_guid(match[3]), _TYPES[match[1]], match[4], int(match[2]), "",
                               "", "", None, "", ""))
        elif match := _REPORT.fullmatch(stripped):
            _add(links, IbLink(_guid(match[3]), _TYPES[match[1]], match[9], int(match[2]),
                               _guid(match[8]), _TYPES[match[6]], match[10], int(match[7]),
                               match[4], match[5]))
        else:
            raise ParseError(KIND, f"a line that is no port of a ports report: {shown(stripped)}")
    return tuple(links)
