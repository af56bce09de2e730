"""What every parser shares: ParseError, the one number conversion, N/A spellings, PCI and
GUID normal forms. Every input is a host's word: numbers are ASCII digits within 64 bits."""

from __future__ import annotations

import json
import re
from typing import Any


class ParseError(ValueError):
    """The input is not the output of the tool ``kind`` at all."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


# --------------------------------------------------------------------------- shared helpers

# What nvidia-smi prints instead of a value it does not have; nvidia-smi -q -x prints them
# bare, --query-gpu in brackets ("[N/A]").
_NA_TOKENS = frozenset({
    "", "n/a", "na", "not supported", "not available", "unknown", "unknown error",
    "requested functionality has been deprecated", "insufficient permissions",
    "gpu is lost", "gpu requires reset", "no data",
})

# ASCII digits only: \d and str.isdigit() also take "٣" and "²", which int() reads or refuses.
_NUMBER = re.compile(r"[-+]?[0-9]+(?:\.[0-9]+)?")
# Every count, size, rate, id and timestamp these tools print fits a signed 64-bit integer: a
# larger number is no tool's output. Refusing it keeps int() off CPython's 4300-digit limit
# (ValueError), float() off infinity (OverflowError in int() and round()) and facts in JSON.
_LIMIT = 2**63 - 1
_LONGEST = 24  # characters of the longest number taken, sign and fraction included


def na(value: str | None) -> str | None:
    """``value`` stripped, or None when it is empty or one of the tools' N/A spellings."""
    if value is None:
        return None
    text = value.strip()
    bare = text[1:-1].strip() if text.startswith("[") and text.endswith("]") else text
    return None if bare.lower() in _NA_TOKENS else text


def shown(text: str) -> str:
    """A host's text in a message: quoted, and short."""
    return repr(text[:40] + "..." if len(text) > 40 else text)


def to_number(digits: str, kind: str, field: str) -> int | float:
    """A match of _NUMBER as a number; ParseError (naming kind and field) when out of range."""
    if len(digits) > _LONGEST:
        value: int | float = float("inf")
    else:
        value = float(digits) if "." in digits else int(digits)
    if not -_LIMIT <= value <= _LIMIT:
        raise ParseError(kind, f"{field}: {shown(digits)} is out of range for any {kind} value")
    return value


def to_int(value: str | None, kind: str, field: str) -> int | None:
    """The leading integer of "81920 MiB", "16x", "27 C", "400 (NDR)", "-1"; None if there is
    none (N/A, no digits). A number beyond 64 bits raises ParseError naming ``kind`` (the
    tool) and ``field``: the one conversion every parser uses for a host's numbers."""
    text = na(value)
    match = _NUMBER.search(text) if text else None
    return int(to_number(match.group(), kind, field)) if match else None


def to_float(value: str | None, kind: str, field: str) -> float | None:
    text = na(value)
    match = _NUMBER.search(text) if text else None
    return to_number(match.group(), kind, field) if match else None


def load_json(text: str, kind: str) -> Any:
    """``text`` decoded as JSON, or ParseError: also for nesting deeper than the decoder's
    recursion (a RecursionError, which is no ValueError) and for numbers past its digit limit."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(kind, f"not JSON ({str(exc)[:100]})") from None


def yes_no(value: str | None) -> bool | None:
    text = na(value)
    if text is None:
        return None
    return {"yes": True, "no": False, "true": True, "false": False}.get(text.lower())


def masked(value: str | None) -> str | None:
    """Serials and UUIDs that nvidia-smi or a capture tool masked ("0", "000...0") -> None."""
    text = na(value)
    if text is None:
        return None
    significant = text.removeprefix("GPU-").replace("-", "")
    return None if not significant or set(significant) == {"0"} else text


def normalize_pci_address(address: str | None) -> str | None:
    """"00000000:18:00.0" / "18:00.0" / "0000:9A:00.0" -> "0000:18:00.0" (lower case).

    nvidia-smi prints an 8-digit domain, lspci a 4-digit one or none; the kernel uses 4.
    """
    text = na(address)
    if text is None:
        return None
    match = re.fullmatch(
        r"(?:(?P<dom>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})"
        r"(?:\.(?P<fn>[0-7]))?",
        text,
    )
    if match is None:
        return text.lower()
    domain = int(match["dom"] or "0", 16)
    return (f"{domain:04x}:{int(match['bus'], 16):02x}:{int(match['dev'], 16):02x}."
            f"{match['fn'] or '0'}")


def normalize_guid(guid: str | None) -> str | None:
    """"0x946dae0300cde72c" / "946d:ae03:00cd:e72c" -> "0x946dae0300cde72c"."""
    text = na(guid)
    if text is None:
        return None
    digits = text.lower().removeprefix("0x").replace(":", "")
    if not re.fullmatch(r"[0-9a-f]{1,16}", digits):
        return text
    return "0x" + digits.zfill(16)


def text_lines(text: str) -> list[str]:
    # Captures copied from Windows or web pages carry CRs and non-breaking spaces.
    return text.replace("\r", "").replace("\u00a0", " ").split("\n")
