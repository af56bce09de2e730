"""One finding of the gate: a field where the host differs from its NetBox record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CRITICAL = "critical"  # keeps the host out of the pool
WARNING = "warning"  # reported; the host may join


@dataclass(frozen=True)
class Mismatch:
    field: str
    expected: Any
    observed: Any
    severity: str
    hint: str

    def __str__(self) -> str:
        return (f"{self.field}: expected {self.expected!r}, observed {self.observed!r} "
                f"[{self.severity}] — {self.hint}")
