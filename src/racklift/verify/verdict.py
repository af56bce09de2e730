"""The gate's verdict per host, judged from what NetBox expects and what the host showed:
pure, nothing here reads or writes NetBox. A host passes when everything does; otherwise its
verdict lists every mismatch and failed check. Recording it in NetBox is record_verdicts.py's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from racklift.facts.host import HostFacts
from racklift.netbox.expected import ExpectedHost, Problem
from racklift.text import journal_line
from racklift.verify.check import NOT_CHECKED, PASSING, WARNING, CheckResult, failing
from racklift.verify.compare import CRITICAL, Mismatch, compare
from racklift.verify.health import run_checks

JOURNAL_HEADER = "racklift verify"
# Statuses whose hosts the gate admits (active) or rejects (failed).
GATED = ("staged", "failed")
# Statuses whose hosts are looked at: others (planned, offline, ...) are not running racklift's
# image yet, or are out of service, and are not connected to at all.
VERIFIED = (*GATED, "active")


@dataclass(frozen=True)
class HostVerdict:
    host: str
    netbox_id: int
    status: str  # the NetBox status when verify started
    mismatches: tuple[Mismatch, ...] = ()
    checks: tuple[CheckResult, ...] = ()
    problems: tuple[Problem, ...] = ()  # the NetBox record itself is incomplete
    error: str | None = None  # could not collect: unreachable, collector failed
    not_collected: tuple[str, ...] = ()
    skipped: str | None = None  # not looked at, and why: neither a pass nor a failure
    changes: tuple[str, ...] = field(default=(), compare=False)  # what was written to NetBox
    held: str | None = field(default=None, compare=False)  # why nothing was written to NetBox
    # Whether passing admits the host (active); False: acceptance tests follow (staged,
    # stage verified).
    admit: bool = field(default=True, compare=False)
    # Where NetBox places the host, for the reports' rack view (not part of the verdict).
    rack: str | None = field(default=None, compare=False)
    position: float | None = field(default=None, compare=False)

    @property
    def failures(self) -> list[str]:
        """Everything that keeps the host out of the pool, one line each."""
        lines = [f"NetBox record: {p.field}: {p.message}" for p in self.problems]
        if self.error:
            lines.append(f"collection: {self.error}")
        lines += [str(m) for m in self.mismatches if m.severity == CRITICAL]
        lines += [str(c) for c in self.checks if failing(c.status)]
        return lines

    @property
    def warnings(self) -> list[str]:
        """What does not keep the host out but is told: non-critical mismatches, checks that
        warn, and checks NOT CHECKED (why, and what to do)."""
        return ([str(m) for m in self.mismatches if m.severity != CRITICAL]
                + [str(c) for c in self.checks if c.status in (WARNING, NOT_CHECKED)])

    @property
    def passed(self) -> bool:
        # Nothing is admitted on partial evidence: no check passed means no pass.
        return not self.failures and any(c.status in PASSING for c in self.checks)

    @property
    def failed(self) -> bool:
        return not self.passed and self.skipped is None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(passed=self.passed, failed=self.failed, failures=self.failures,
                    warnings=self.warnings)
        return data


def judge(expected: ExpectedHost, facts: HostFacts,
          controller_checks: Sequence[CheckResult] = ()) -> HostVerdict:
    """`controller_checks`: what the controller checked of the host itself, not from its facts
    (its BMC's firmware and BIOS: racklift.verify.firmware_pins)."""
    return HostVerdict(expected.name, expected.netbox_id, expected.status,
                       mismatches=tuple(compare(expected, facts)),
                       checks=(*run_checks(expected, facts), *controller_checks),
                       problems=expected.problems, not_collected=facts.not_collected,
                       rack=expected.rack, position=expected.position)


def not_verified(expected: ExpectedHost, error: str | None,
                 controller_checks: Sequence[CheckResult] = ()) -> HostVerdict:
    """A host that could not be looked at: incomplete record, or unreachable; with what the
    controller checked of it all the same (see `judge`)."""
    return HostVerdict(expected.name, expected.netbox_id, expected.status,
                       checks=tuple(controller_checks), problems=expected.problems,
                       error=error, rack=expected.rack, position=expected.position)


def skipped(expected: ExpectedHost) -> HostVerdict:
    return HostVerdict(expected.name, expected.netbox_id, expected.status,
                       skipped=f"status {expected.status}: only {', '.join(VERIFIED)} hosts are "
                               "verified", rack=expected.rack, position=expected.position)


def journal_text(verdict: HostVerdict) -> str:
    if verdict.passed:
        lines = [f"{JOURNAL_HEADER}: passed: the host matches NetBox and is healthy"
                 + ("." if verdict.admit else "; acceptance tests next.")]
        lines += [f"- warning: {w}" for w in verdict.warnings]
    else:
        lines = [f"{JOURNAL_HEADER}: failed: {len(verdict.failures)} problem(s)."]
        lines += [f"- {f}" for f in verdict.failures]
    return "\n".join(map(journal_line, lines))


def target_status(verdict: HostVerdict) -> str:
    if not verdict.passed:
        return "failed"
    return "active" if verdict.admit else "staged"
