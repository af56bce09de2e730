"""Which links a BMC gives may be followed: a path on the BMC itself, under /redfish/v1 (and
under the collection a member is listed in), at most MAX_LINK characters, with no host, no `.`
or `..` segment (plain or percent-escaped), no query or fragment. A BMC's answers are untrusted:
every link racklift follows (the inventory reader, actions, task monitors, ActionInfo) is
checked here first. Pure."""

from __future__ import annotations

import re

from racklift.text import printable

ROOT = "/redfish/v1"
MAX_LINK = 512  # characters of a link followed
_ESCAPE = re.compile(r"%(.{0,2})", re.DOTALL)


def _bad_escape(value: str) -> bool:
    """A percent-escape that is malformed or stands for a separator (. / \\ ? #), a percent
    sign (a double escape), a space, a control character or anything not ASCII."""
    for match in _ESCAPE.finditer(value):
        digits = match.group(1)
        if not re.fullmatch(r"[0-9A-Fa-f]{2}", digits):
            return True
        char = chr(int(digits, 16))
        if char in "./\\?#%" or not 0x20 < ord(char) < 0x7F:
            return True
    return False


def check_link(value: object, within: str = ROOT) -> tuple[str | None, str]:
    """(path, "") for a link that may be followed: a path under /redfish/v1 and under
    `within` (ignoring case), without a trailing slash; else (None, why not)."""
    if not isinstance(value, str):
        return None, f"is {type(value).__name__}, not a link"
    if len(value) > MAX_LINK:
        return None, f"is a link of {len(value)} characters (at most {MAX_LINK} followed)"
    shown = printable(value)
    if not value.isascii() or any(not c.isprintable() or c.isspace() for c in value):
        return None, f"'{shown}' has control characters, spaces or characters not ASCII"
    if not value.startswith("/") or value.startswith("//"):
        return None, f"'{shown}' is not a path on this BMC (only {ROOT} is followed)"
    if "\\" in value or "?" in value or "#" in value or _bad_escape(value):
        return None, f"'{shown}' has a backslash, query, fragment or escaped separator"
    path = value.rstrip("/")
    segments = path.split("/")[1:]
    if any(s in ("", ".", "..") for s in segments):
        return None, f"'{shown}' has an empty, '.' or '..' segment"
    if path != ROOT and not path.startswith(ROOT + "/"):
        return None, f"'{shown}' is not under {ROOT}"
    if within != ROOT and not path.lower().startswith(within.lower() + "/"):
        return None, f"'{shown}' is not under {within}"
    return path, ""


def as_given(value: object) -> tuple[str | None, str]:
    """check_link, but the link as the BMC gave it (a trailing slash kept: some BMCs, iLO among
    them, write their action targets and settings objects so) where it may be followed."""
    path, why = check_link(value)
    return (value if path is not None and isinstance(value, str) else None), why
