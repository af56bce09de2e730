"""``/etc/os-release``, ``lscpu -J`` and ``/proc/meminfo``."""

from __future__ import annotations

import re
from typing import Any

from racklift.facts.observed import CPUFacts
from racklift.facts.parsers.common import ParseError, load_json, shown, text_lines, to_int

_OS_RELEASE_LINE = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")


def _shell_unquote(value: str) -> str:
    """os-release values are shell-quoted: "..." with \\-escapes, '...' literal, or bare."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r'\\([\\$"`])', r"\1", value[1:-1])
    return value


def parse_os_release(text: str) -> dict[str, str]:
    """``/etc/os-release``: KEY -> unquoted value (comments and blank lines skipped)."""
    result = {}
    for line in text_lines(text):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if m := _OS_RELEASE_LINE.match(stripped):
            result[m.group(1)] = _shell_unquote(m.group(2))
    if not result and any(line.strip() for line in text_lines(text)):
        raise ParseError("os-release", "no KEY=value lines")
    return result


def _lscpu_entries(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise ParseError("lscpu", "not the JSON of lscpu -J: fields are not a list of objects")
    return value


def _lscpu_text(entry: dict[str, Any], key: str) -> str:
    value = entry.get(key)
    if isinstance(value, list | dict):  # str() of a host's nesting may recurse too deep
        raise ParseError("lscpu", f"not the JSON of lscpu -J: a {key} is not a value")
    return "" if value is None else str(value)


def _lscpu_fields(entries: Any) -> dict[str, str]:
    """Flatten lscpu's JSON: util-linux >= 2.39 nests fields under "children". In document
    order, the last of a name wins; a loop, not recursion: a host nests as deep as it likes."""
    fields: dict[str, str] = {}
    pending = _lscpu_entries(entries)[::-1]
    while pending:
        entry = pending.pop()
        fields[_lscpu_text(entry, "field").rstrip(":")] = _lscpu_text(entry, "data")
        pending.extend(reversed(_lscpu_entries(entry.get("children") or [])))
    return fields


def parse_lscpu_json(text: str) -> CPUFacts:
    """``lscpu -J``: CPU model and topology. A count lscpu leaves out ("-" on Arm) is None."""
    document = load_json(text, "lscpu")
    if not isinstance(document, dict) or "lscpu" not in document:
        raise ParseError("lscpu", "not the JSON of lscpu -J: no \"lscpu\" list")
    fields = _lscpu_fields(document["lscpu"])

    def number(key: str) -> int | None:
        return to_int(fields.get(key), "lscpu", key)

    return CPUFacts(model=fields.get("Model name") or None, sockets=number("Socket(s)"),
                    cores_per_socket=number("Core(s) per socket"), threads=number("CPU(s)"))


def parse_meminfo(text: str) -> int | None:
    """``/proc/meminfo``: MemTotal in MiB."""
    for line in text_lines(text):
        if line.startswith("MemTotal:"):
            kib = to_int(line.removeprefix("MemTotal:"), "meminfo", "MemTotal")
            if kib is None:
                raise ParseError("meminfo", f"MemTotal: no number in {shown(line)}")
            return kib // 1024
    raise ParseError("meminfo", "no MemTotal line")
