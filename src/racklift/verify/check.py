"""What a health check returns, shared by the checks in health and containers. A check that
could not run is UNKNOWN, and UNKNOWN never counts as passing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from racklift.facts.host import HostFacts
from racklift.netbox.expected import ExpectedHost

OK, WARNING, CRITICAL, UNKNOWN = "OK", "WARNING", "CRITICAL", "UNKNOWN"
PASSING = (OK, WARNING)


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: str
    detail: str

    def __str__(self) -> str:
        return f"{self.name}: {self.status}: {self.detail}"


Check = Callable[[ExpectedHost, HostFacts], CheckResult]
