"""What a check returns, shared by the checks in health, containers and firmware_pins. A check
that could not run is UNKNOWN, and UNKNOWN never counts as passing. A check that did not apply
to the host for a reason the operator can fix (it lacks what the check needs: a BMC address) is
NOT CHECKED, saying why and what to do: neither a pass nor a failure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from racklift.facts.host import HostFacts
from racklift.netbox.expected import ExpectedHost

OK, WARNING, CRITICAL, UNKNOWN = "OK", "WARNING", "CRITICAL", "UNKNOWN"
NOT_CHECKED = "NOT CHECKED"
PASSING = (OK, WARNING)


def failing(status: str) -> bool:
    """Whether a check with this status keeps its host out: all but a pass and NOT CHECKED."""
    return status not in (*PASSING, NOT_CHECKED)


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: str
    detail: str

    def __str__(self) -> str:
        return f"{self.name}: {self.status}: {self.detail}"


Check = Callable[[ExpectedHost, HostFacts], CheckResult]
