"""The gate's verdict per host, judged from what NetBox expects and what the host showed:
pure, nothing here reads or writes NetBox. A host passes when everything does; otherwise its
verdict lists every mismatch and failed check. Recording it in NetBox is record_verdicts.py's."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from racklift.facts.host import HostFacts
from racklift.netbox.expected import ExpectedHost, Problem
from racklift.text import journal_line
from racklift.verify.check import PASSING, CheckResult
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
        lines += [str(c) for c in self.checks if c.status not in PASSING]
        return lines

    @property
    def warnings(self) -> list[str]:
        return ([str(m) for m in self.mismatches if m.severity != CRITICAL]
                + [str(c) for c in self.checks if c.status == "WARNING"])

    @property
    def passed(self) -> bool:
        # Nothing is admitted on partial evidence: no checks run means no pass.
        return not self.failures and bool(self.checks)

    @property
    def failed(self) -> bool:
        return not self.passed and self.skipped is None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(passed=self.passed, failed=self.failed, failures=self.failures,
                    warnings=self.warnings)
        return data


def judge(expected: ExpectedHost, facts: HostFacts) -> HostVerdict:
    return HostVerdict(expected.name, expected.netbox_id, expected.status,
                       mismatches=tuple(compare(expected, facts)),
                       checks=tuple(run_checks(expected, facts)),
                       problems=expected.problems, not_collected=facts.not_collected,
                       rack=expected.rack, position=expected.position)


def not_verified(expected: ExpectedHost, error: str | None) -> HostVerdict:
    """A host that could not be looked at: incomplete record, or unreachable."""
    return HostVerdict(expected.name, expected.netbox_id, expected.status,
                       problems=expected.problems, error=error, rack=expected.rack,
                       position=expected.position)


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
