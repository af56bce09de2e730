"""``iblinkinfo``: each port of each node in the fabric with its state, the link it trained
(width, lane rate) and its peer (LID, port, node description), into the same records as
``ibnetdiscover``. Its default layout: a ``CA: <desc>:`` or ``Switch: 0x<guid> <desc>:`` line,
then one line per port (a CA's begins with the port GUID); ``| grep Up`` leaves the port lines
alone. The per-lane rate names the speed (25.78125 Gbps is EDR). Every port is kept with its
state: one that is Down (or whose peer the tool could not reach) has no peer and no link, so a
host whose port has none is in the map as such. Formats follow the real captures in
tests/fixtures/real (EDR SB7700 with Down/Polling ports, DDR ConnectX CAs cabled back to back)
and iblinkinfo's source (infiniband-diags) for what they do not show."""

from __future__ import annotations

import re

from racklift.facts.observed import IbLink
from racklift.facts.parsers.common import ParseError, shown, text_lines
from racklift.facts.parsers.ibnetdiscover import MAX_LINKS

KIND = "iblinkinfo"
# Per-lane signalling rates, as iblinkinfo prints them, by speed name.
LANE_RATES = {"2.5": "SDR", "5.0": "DDR", "10.0": "QDR", "10.3125": "FDR10", "14.0625": "FDR",
              "25.78125": "EDR", "53.125": "HDR", "106.25": "NDR", "212.5": "XDR"}
_GUID = r"0x[0-9a-fA-F]{1,16}"
_NODE = re.compile(rf"(CA|Switch|Router): (?:({_GUID}) )?(.{{0,128}}):")
_TYPES = {"CA": "ca", "Switch": "switch", "Router": "router"}


def _end(name: str) -> str:
    """A port: its LID, its number and, in "[  ]", its extended number where it has one."""
    return rf"(?P<{name}_lid>\d{{1,5}})\s+(?P<{name}_port>\d{{1,4}})\[[^\]]{{0,8}}\]"


# "( 4X      25.78125 Gbps Active/  LinkUp)": width, lane rate (FDR10 named after "10.0 Gbps"),
# logical and physical state; a Down port prints its states alone.
_LINK = (r"==\(\s*(?:(?P<width>\d{1,2})X\s+(?P<rate>[0-9.]{1,10}) Gbps(?P<fdr10> \(FDR10\))?"
         r"\s+)?(?P<state>\w{1,16})/\s*(?P<phys>\w{1,32})\)==>")
_PEER = (rf"(?:(?P<peer_guid>{_GUID})\s+)?{_end('peer')} \"(?P<desc>[^\"]{{0,128}})\""
         r"(?: \([^)]{0,128}\))?")
_NO_PEER = r'\[[^\]]{0,8}\] "" \( \)|"Port not available"'
_PORT = re.compile(rf"(?:(?P<guid>{_GUID})\s+)?{_end('own')} {_LINK}\s+(?:{_PEER}|{_NO_PEER})")


def _guid(text: str | None) -> str:
    return "0x" + text.lower().removeprefix("0x").zfill(16) if text else ""


def _port(match: re.Match[str], node: tuple[str, str, str]) -> IbLink:
    """One port line under `node` (type, GUID, description; empty without a header)."""
    # Without a header (grep): a port line that begins with a GUID is a CA's.
    kind = node[0] or ("ca" if match["guid"] else "switch")
    guid = _guid(match["guid"]) or node[1]
    if match["peer_port"] is None:
        return IbLink(guid, kind, node[2], int(match["own_port"]), "", "", "", None, "", "",
                      match["state"], match["phys"])
    rate = match["rate"]
    speed = "FDR10" if match["fdr10"] else LANE_RATES.get(rate, f"{rate}Gbps") if rate else ""
    return IbLink(guid, kind, node[2], int(match["own_port"]), _guid(match["peer_guid"]), "",
                  match["desc"], int(match["peer_port"]),
                  f"{match['width']}x" if match["width"] else "", speed, match["state"],
                  match["phys"])


def parse_iblinkinfo(text: str) -> tuple[IbLink, ...]:
    links: list[IbLink] = []
    node: tuple[str, str, str] = ("", "", "")  # type, GUID, description of the node above
    for line in text_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        if match := _NODE.fullmatch(stripped):
            node = (_TYPES[match[1]], _guid(match[2]), match[3])
        elif match := _PORT.fullmatch(stripped):
            links.append(_port(match, node))
            if len(links) > MAX_LINKS:
                raise ParseError(KIND, f"more than {MAX_LINKS} links")
        else:
            raise ParseError(KIND, f"a line that is no node or port: {shown(stripped)}")
    return tuple(links)
