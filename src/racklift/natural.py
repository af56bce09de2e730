"""Natural order of names: "GPU2" before "GPU10", as device types number their slots. Pure."""

from __future__ import annotations

import re


def natural_key(name: str) -> tuple[str | tuple[int, str], ...]:
    """Sort key of ``name``: its digit runs compare by value, the text between as text.

    A digit run compares by its length without leading zeros, then as text: its value's order,
    without int() (whose digit limit a long run would hit).
    """
    parts = re.split(r"([0-9]+)", name)
    return tuple(part if i % 2 == 0 else (len(part.lstrip("0")), part.lstrip("0"))
                 for i, part in enumerate(parts))
