"""Text that may quote a host or a record, made safe for where racklift writes it: the
operator's terminal, NetBox's journal and racklift's fields. One rule for all: every character
that is not printable is written out as its escape (\\x00, \\x1b, \\u202e), so nothing reaches
a terminal as a control sequence or NetBox as a NUL, and the operator still sees what was
sent."""

from __future__ import annotations

from typing import Any

# A journal line quotes what hosts said, which may be any characters at any length; NetBox
# refuses a NUL (PostgreSQL cannot store one), and a stage writes all of a rack's entries in
# one request: one host's text must not fail them all.
JOURNAL_LINE = 1000


def printable(text: str, keep: str = "") -> str:
    """`text` with each character that is not printable (control characters, format
    characters such as a bidi override, separators but the space) written out as its Python
    escape, but those in `keep`. Applied twice it changes nothing."""
    return "".join(c if c.isprintable() or c in keep
                   else c.encode("unicode_escape").decode("ascii") for c in text)


def journal_line(line: str) -> str:
    """One journal line from text that may quote a host: printable (a newline in it too, so a
    host's text stays on its line), at most JOURNAL_LINE long. Applied twice it changes
    nothing."""
    text = printable(line)
    return text[:JOURNAL_LINE] + " [...]" if len(text) > JOURNAL_LINE else text


def journal(text: str) -> str:
    """A journal entry of lines, each made a journal line."""
    return "\n".join(map(journal_line, text.split("\n")))


def recorded(value: Any) -> Any:
    """A JSON value for a NetBox field that may quote a host (racklift_result): every string in
    it, keys too, made a journal entry's text (PostgreSQL cannot store a NUL in JSON either),
    the structure as it is. Applied twice it changes nothing."""
    if isinstance(value, str):
        return journal(value)
    if isinstance(value, dict):
        return {recorded(k): recorded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [recorded(v) for v in value]
    return value
