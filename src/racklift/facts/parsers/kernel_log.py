"""Kernel logs (``dmesg``, ``dmesg -T``, syslog, ``journalctl -k``): Xid, SXid and PCIe AER
events."""

from __future__ import annotations

import re
from dataclasses import replace

from racklift.facts.model import KernelEvent
from racklift.facts.parsers.common import text_lines, to_int, to_number
from racklift.facts.xid import CRITICAL, WARNING, classify_sxid, classify_xid

# Prefixes a kernel log line can carry: dmesg "[ 1234.567890]", dmesg -T
# "[Sun Feb 23 16:24:18 2025]", syslog "Jan  3 07:39:44 host kernel: [ ...]",
# journalctl -o short-iso "2024-01-05T06:18:52+0000 host kernel:", dmesg --time-format iso.
_UPTIME = re.compile(r"^\[\s*([0-9]+\.[0-9]+)\]\s?")
_HUMAN = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]\s?")
_SYSLOG = re.compile(r"^(\w{3} +\d+ \d\d:\d\d:\d\d) \S+ kernel: ?")
_ISO = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:?\d\d|Z)?)"
                  r"(?: \S+ kernel:)? ?")


def _split_prefix(line: str) -> tuple[float | None, str | None, str]:
    """(seconds since boot, wall-clock time as printed, message) of one log line."""
    wallclock = None
    rest = line
    for pattern in (_SYSLOG, _ISO):
        if m := pattern.match(rest):
            wallclock, rest = " ".join(m.group(1).split()), rest[m.end():]
            break
    if m := _HUMAN.match(rest):
        return None, " ".join(m.group(1).split()), rest[m.end():]
    if m := _UPTIME.match(rest):
        return to_number(m.group(1), "dmesg", "timestamp"), wallclock, rest[m.end():]
    return None, wallclock, rest


# "NVRM: Xid (PCI:0000:9a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off..."
# and the older "NVRM: Xid (0000:01:00): 3, ..." and "...: 79, GPU has fallen off the bus."
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<dev>[0-9a-fA-F:.]+)\): (?P<code>[0-9]+)"
                  r"(?:, ?(?P<msg>.*))?")
_XID_PROC = re.compile(r"^pid=(?:'[^']*'|[^,\s]*),\s*(?:name=[^,]*,\s*)?")
# "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63 LTSSM Fault Up"
_SXID = re.compile(r"(?P<sw>nvidia-nvswitch\d*): SXid \((?:PCI:)?(?P<dev>[0-9a-fA-F:.]+)\): "
                   r"(?P<code>[0-9]+)(?:, ?(?P<msg>.*))?")
# "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0"; kernels
# since 2024 print "AER: Correctable error message received from 0000:09:04.0".
_AER = re.compile(r"(?P<rep>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): AER: "
                  r"(?P<multi>Multiple )?(?P<cls>Correct(?:ed|able)|"
                  r"Uncorrect(?:ed|able) \((?:Non-)?Fatal\)) error(?: message)? received"
                  r"(?: from)?:? ?(?P<src>\S*)")
# Detail lines the AER driver prints after the "error received" line.
_AER_DETAIL = re.compile(r"(?P<dev>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):"
                         r"(?: AER:)?\s+(?P<detail>PCIe Bus Error: .*|device \[.*|\[\s*\d+\] .*|"
                         r"TLP Header: .*)$")


def _xid_event(m: re.Match[str], uptime: float | None, wallclock: str | None,
               line: str) -> KernelEvent:
    code = to_int(m.group("code"), "dmesg", "Xid code")
    info = classify_xid(code)
    message = _XID_PROC.sub("", (m.group("msg") or "").strip()) or info.name
    return KernelEvent(kind="xid", code=code, device=m.group("dev"), message=message,
                       timestamp=uptime, severity=info.severity, line=line,
                       wallclock=wallclock, name=info.name)


def _sxid_event(m: re.Match[str], uptime: float | None, wallclock: str | None,
                line: str) -> KernelEvent:
    code = to_int(m.group("code"), "dmesg", "SXid code")
    message = (m.group("msg") or "").strip()
    info = classify_sxid(code, message)
    return KernelEvent(kind="sxid", code=code, device=m.group("dev"), message=message,
                       timestamp=uptime, severity=info.severity, line=line,
                       wallclock=wallclock, name=info.name, notes=(m.group("sw"),))


def _aer_event(m: re.Match[str], uptime: float | None, wallclock: str | None,
               line: str) -> KernelEvent:
    cls = m.group("cls").replace("Uncorrectable", "Uncorrected").replace("Correctable",
                                                                          "Corrected")
    # Any uncorrected error lost data (non-fatal) or the link (fatal); corrected ones are
    # signal-quality warnings that matter when they repeat.
    severity = WARNING if cls == "Corrected" else CRITICAL
    source = m.group("src")
    # Old kernels print "received: id=0008" (a requester id, not an address).
    device = source if re.fullmatch(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]",
                                    source) else m.group("rep")
    notes = () if device == source else (f"source {source}",) if source else ()
    return KernelEvent(kind="aer", code=None, device=device,
                       message=f"{m.group('multi') or ''}{cls} error",
                       timestamp=uptime, severity=severity, line=line, wallclock=wallclock,
                       name=f"PCIe AER {cls}", notes=notes)


def parse_dmesg(text: str) -> list[KernelEvent]:
    """Xid, SXid and PCIe AER events of a kernel log, in order.

    Accepts ``dmesg``, ``dmesg -T``, syslog/journal lines ("Jan  3 07:39:44 host kernel:")
    and bare messages. Any text is a kernel log: unrelated text has no events; only a number no
    kernel prints (an Xid code or a timestamp beyond 64 bits) raises ParseError. AER detail
    lines ("PCIe Bus Error: ...", "[14] CmpltTO") become ``notes`` of the event they follow.
    """
    events: list[KernelEvent] = []
    for raw in text_lines(text):
        line = raw.rstrip()
        if not line.strip():
            continue
        uptime, wallclock, message = _split_prefix(line)
        if m := _XID.search(message):
            events.append(_xid_event(m, uptime, wallclock, line))
        elif m := _SXID.search(message):
            events.append(_sxid_event(m, uptime, wallclock, line))
        elif m := _AER.search(message):
            events.append(_aer_event(m, uptime, wallclock, line))
        elif (m := _AER_DETAIL.search(message)) and events and events[-1].kind == "aer":
            last = events[-1]
            events[-1] = replace(last, notes=(*last.notes, m.group("detail").strip()))
    return events
