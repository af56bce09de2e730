"""``iblinkinfo``: each port of each node in the fabric with the link it trained (width, lane
rate, state) and its peer (LID, port, node description), into the same links as
``ibnetdiscover``. Its default layout: a ``CA: <desc>:`` or ``Switch: 0x<guid> <desc>:`` line,
then one line per port (a CA's begins with the port GUID); ``| grep Up`` leaves the port lines
alone. The per-lane rate names the speed (25.78125 Gbps is EDR). A port that is down has no
peer and no link. Formats follow the real captures in tests/fixtures/real (EDR SB7700 with
Down/Polling ports, DDR ConnectX CAs cabled back to back)."""

from __future__ import annotations

import re

from racklift.facts.observed import IbLink
from racklift.facts.parsers.common import ParseError, shown, text_lines
from racklift.facts.parsers.ibnetdiscover import MAX_LINKS

KIND = "iblinkinfo"
# Per-lane signalling rates, as iblinkinfo prints them, by speed name.
LANE_RATES = {"2.5": "SDR", "5.0": "DDR", "10.0": "QDR", "10.3125": "FDR10", "14.0625": "FDR",
              "25.78125": "EDR", "53.125": "HDR", "106.25": "NDR", "212.5": "XDR"}
_GUID = r"0x([0-9a-fA-F]{1,16})"
_DESC = r'"([^"]{0,128})"'
_NODE = re.compile(rf"(CA|Switch|Router): (?:{_GUID} )?(.{{0,128}}):")
# "[  ]" holds the port's extended number where there is one.
_END = r"(\d{1,5})\s+(\d{1,4})\[[^\]]{0,8}\]"
_UP = re.compile(rf"(?:{_GUID}\s+)?{_END} ==\(\s*(\d{{1,2}})X\s+([0-9.]{{1,10}}) Gbps\s+"
                 rf"(\w{{1,16}})/\s*(\w{{1,24}})\)==>\s+(?:{_GUID}\s+)?{_END} {_DESC}"
                 r"(?: \([^)]{0,128}\))?")
_DOWN = re.compile(rf"(?:{_GUID}\s+)?{_END} ==\(\s*\w{{1,16}}/\s*\w{{1,24}}\)==>\s+"
                   r'\[[^\]]{0,8}\] "" \([^)]{0,128}\)')
_TYPES = {"CA": "ca", "Switch": "switch", "Router": "router"}


def _guid(digits: str | None) -> str:
    return "0x" + digits.lower().zfill(16) if digits else ""


def parse_iblinkinfo(text: str) -> tuple[IbLink, ...]:
    links: list[IbLink] = []
    node: tuple[str, str, str] = ("", "", "")  # type, GUID, description of the node above
    for line in text_lines(text):
        stripped = line.strip()
        if not stripped or _DOWN.fullmatch(stripped):
            continue
        if match := _NODE.fullmatch(stripped):
            node = (_TYPES[match[1]], _guid(match[2]), match[3])
        elif match := _UP.fullmatch(stripped):
            # Without a header (grep): a port line that begins with a GUID is a CA's.
            kind = node[0] or ("ca" if match[1] else "switch")
            speed = LANE_RATES.get(match[5], f"{match[5]}Gbps")
            links.append(IbLink(_guid(match[1]) or node[1], kind, node[2], int(match[3]),
                                _guid(match[8]), "", match[11], int(match[10]),
                                f"{match[4]}x", speed))
            if len(links) > MAX_LINKS:
                raise ParseError(KIND, f"more than {MAX_LINKS} links")
        else:
            raise ParseError(KIND, f"a line that is no node or port: {shown(stripped)}")
    return tuple(links)
