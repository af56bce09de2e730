"""Kernel logs (``dmesg``, ``dmesg -T``, ``dmesg --reltime``, syslog, ``journalctl -k``):
Xid, SXid, PCIe AER and NVRM "fallen off the bus" events.

A message the kernel printed over several lines is read as one: dmesg indents the lines that
continue it, journald and syslog repeat the prefix (an NVRM line that ends no sentence,
followed by one that continues it at the same time)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from racklift.facts.observed import KernelEvent
from racklift.facts.parsers.common import text_lines, to_int, to_number
from racklift.facts.xid import CRITICAL, WARNING, classify_sxid, classify_xid

# Prefixes a kernel log line can carry: dmesg "[ 1234.567890]", dmesg -T
# "[Sun Feb 23 16:24:18 2025]", syslog "Jan  3 07:39:44 host kernel: [ ...]",
# journalctl -o short-iso "2024-01-05T06:18:52+0000 host kernel:", dmesg --time-format iso.
_UPTIME = re.compile(r"^\[\s*([0-9]+\.[0-9]+)\]\s?")
_RELTIME = re.compile(r"^\[\s*\+[0-9]+\.[0-9]+\]\s?")  # dmesg --reltime / -H: since the line before
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
    if m := _RELTIME.match(rest):
        return None, wallclock, rest[m.end():]
    return None, wallclock, rest


# printk keeps a message under 1024 bytes: a handful of lines. More continuation lines than
# this are a host's doing, each read as a message of its own (no quadratic joining).
_MOST_LINES = 16


@dataclass
class _Message:
    """One kernel message, over however many lines it was printed."""

    uptime: float | None
    wallclock: str | None
    text: str
    line: str
    lines: int = 1


# A continued NVRM sentence goes on with a word or a parenthesis, never "Name:" (a new message
# such as "NVRM: osInitNvMapping: ..." starts with its function's name).
_NVRM_GOES_ON = re.compile(r"NVRM: (?:\(|[a-z]+(?:[ ,.]|$))")


def _continues(last: _Message, raw: str, uptime: float | None, wallclock: str | None,
               text: str) -> bool:
    if raw[:1].isspace() and uptime is None and wallclock is None:
        return True  # dmesg's own continuation lines: indented, no prefix
    return (last.text.startswith("NVRM: ") and not last.text.rstrip().endswith(".")
            and (uptime, wallclock) == (last.uptime, last.wallclock)
            and bool(_NVRM_GOES_ON.match(text)))


def _messages(text: str) -> list[_Message]:
    messages: list[_Message] = []
    for raw in text_lines(text):
        line = raw.rstrip()
        if not line.strip():
            continue
        uptime, wallclock, message = _split_prefix(line)
        message = message.strip()
        if messages and messages[-1].lines < _MOST_LINES and _continues(
                messages[-1], raw, uptime, wallclock, message):
            last = messages[-1]
            more = message.removeprefix("NVRM: ") if last.text.startswith("NVRM: ") else message
            last.text, last.line = f"{last.text} {more}", f"{last.line}\n{line}"
            last.lines += 1
            continue
        messages.append(_Message(uptime, wallclock, message, line))
    return messages


# "NVRM: Xid (PCI:0000:9a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off..."
# and the older "NVRM: Xid (0000:01:00): 3, ..." and "...: 79, GPU has fallen off the bus."
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<dev>[0-9a-fA-F:.]+)\): (?P<code>[0-9]+)"
                  r"(?:, ?(?P<msg>.*))?")
_XID_PROC = re.compile(r"^pid=(?:'[^']*'|[^,\s]*),\s*(?:name=[^,]*,\s*)?")
_NVLINK5 = range(144, 151)
_NVLINK5_CLASS = re.compile(r"\b(Fatal|Nonfatal)\b")
# "Ch 00000001 caused by previous Xid 149": an Xid 45 that another Xid's recovery caused.
_CAUSE = re.compile(r"caused by previous Xid ([0-9]{1,6})\b")
# The open kernel module's three-line message, read as one (_messages): "NVRM: The NVIDIA GPU
# 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system has fallen off the bus and is not
# responding to commands." It carries no Xid number.
_FALLEN = re.compile(r"NVRM: The NVIDIA GPU (?P<dev>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}"
                     r"\.[0-7])\s.{0,80}?\bfallen off the bus\b")
# "nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)": the endpoint that a
# port's AER error took down (its driver has no recovery). Found by its fixed text, then the two
# words before it read: a pattern with a run of word characters first would backtrack
# quadratically over a hostile host's long line.
_CANT_RECOVER = ": AER: can't recover"
_DRIVER = re.compile(r"[\w-]{1,64}")
_PCI_FUNCTION = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


def _cant_recover_endpoint(body: str) -> tuple[str, str] | None:
    """(driver, device) of an "AER: can't recover" line."""
    at = body.find(_CANT_RECOVER)
    words = body[:at].rsplit(None, 2)[-2:] if at > 0 else []
    if len(words) == 2 and _DRIVER.fullmatch(words[0]) and _PCI_FUNCTION.fullmatch(words[1]):
        return words[0], words[1]
    return None
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
    severity = info.severity
    # NVLink5 Xids say their class in the message ("SAW_MVB Nonfatal XC0 ...").
    if code in _NVLINK5 and (word := _NVLINK5_CLASS.search(message)):
        severity = CRITICAL if word.group(1) == "Fatal" else WARNING
    cause = _CAUSE.search(message)
    return KernelEvent(kind="xid", code=code, device=m.group("dev"), message=message,
                       timestamp=uptime, severity=severity, line=line,
                       wallclock=wallclock, name=info.name,
                       caused_by=to_int(cause.group(1), "dmesg", "Xid cause") if cause else None)


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


def _fallen_event(m: re.Match[str], message: _Message) -> KernelEvent:
    return KernelEvent(kind="nvrm", code=None, device=m.group("dev").lower(),
                       message="fallen off the bus and not responding (no Xid)",
                       timestamp=message.uptime, severity=CRITICAL, line=message.line,
                       wallclock=message.wallclock, name="GPU has fallen off the bus")


def _cant_recover(driver: str, device: str, message: _Message,
                  events: list[KernelEvent]) -> None:
    """Name the endpoint in the AER event its port reported just before; else its own event."""
    endpoint = f"{driver} {device}"
    last = events[-1] if events else None
    if last is not None and last.kind == "aer" and last.severity == CRITICAL:
        if last.endpoint is None:
            events[-1] = replace(last, device=device, endpoint=endpoint, reported_by=last.device)
        elif endpoint != last.endpoint and f"also {endpoint}" not in last.notes:
            events[-1] = replace(last, notes=(*last.notes, f"also {endpoint}"))
        return
    events.append(KernelEvent(kind="aer", code=None, device=device,
                              message="Uncorrected error: can't recover", endpoint=endpoint,
                              timestamp=message.uptime, severity=CRITICAL, line=message.line,
                              wallclock=message.wallclock, name="PCIe AER Uncorrected"))


def parse_dmesg(text: str) -> list[KernelEvent]:
    """Xid, SXid, PCIe AER and NVRM fallen-off-the-bus events of a kernel log, in order.

    Accepts ``dmesg``, ``dmesg -T``, ``dmesg --reltime``, syslog/journal lines ("Jan  3
    07:39:44 host kernel:") and bare messages. Any text is a kernel log: unrelated text has no
    events; only a number no kernel prints (an Xid code or a timestamp beyond 64 bits) raises
    ParseError. AER detail lines ("PCIe Bus Error: ...", "[14] CmpltTO") become ``notes`` of the
    event they follow, and the endpoint a fatal AER took down (its "AER: can't recover" line)
    becomes its ``device``, the reporting port a note.
    """
    events: list[KernelEvent] = []
    for message in _messages(text):
        uptime, wallclock, body, line = message.uptime, message.wallclock, message.text, \
            message.line
        if m := _XID.search(body):
            events.append(_xid_event(m, uptime, wallclock, line))
        elif m := _SXID.search(body):
            events.append(_sxid_event(m, uptime, wallclock, line))
        elif m := _AER.search(body):
            events.append(_aer_event(m, uptime, wallclock, line))
        elif m := _FALLEN.search(body):
            events.append(_fallen_event(m, message))
        elif endpoint := _cant_recover_endpoint(body):
            _cant_recover(*endpoint, message, events)
        elif (m := _AER_DETAIL.search(body)) and events and events[-1].kind == "aer":
            last = events[-1]
            events[-1] = replace(last, notes=(*last.notes, m.group("detail").strip()))
    return events
