"""What a provision/reimage run did to each host: the record the pipeline keeps and reports."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from racklift.netbox.expected import ExpectedHost
from racklift.pipeline.accept_stage import HostAcceptance
from racklift.pipeline.plan import HostPlan
from racklift.verify.verdict import HostVerdict

# Results a host ends a run with. STAGED: it went through the stages asked for (--until) and
# waits, staged, for the rest.
JOINED, FAILED, SKIPPED, LOCKED, PREFLIGHT, PLANNED, INTERRUPTED, STAGED = (
    "joined", "failed", "skipped", "locked", "preflight failed", "would run", "interrupted",
    "staged")


@dataclass
class HostRun:
    host: ExpectedHost
    plan: HostPlan
    completed: str | None  # racklift_stage when the run started
    result: str = ""
    reached: str = "select"  # the last stage the host entered
    error: str | None = None
    verdict: HostVerdict | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)  # stage → seconds on this host
    acceptance: HostAcceptance | None = None

    @property
    def name(self) -> str:
        return self.host.name

    def fail(self, stage: str, why: str) -> None:
        self.result, self.reached, self.error = FAILED, stage, why

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.name, "netbox_id": self.host.netbox_id, "rack": self.host.rack,
                "position": self.host.position,
                "status_before": self.host.status, "completed_before": self.completed,
                "stages": list(self.plan.stages), "skip": self.plan.skip,
                "result": self.result, "stage_reached": self.reached, "error": self.error,
                "warnings": self.warnings, "seconds": round(self.seconds, 1),
                "stage_seconds": self.timings,
                "verdict": self.verdict.to_dict() if self.verdict else None,
                "acceptance": None if self.acceptance is None else {
                    "passed": self.acceptance.passed, "summary": self.acceptance.summary(),
                    "failures": self.acceptance.failures, "figures": self.acceptance.figures,
                    "mismatches": [asdict(m) for m in self.acceptance.mismatches]}}


@dataclass(frozen=True)
class PipelineRun:
    run_id: str
    verb: str
    hosts: list[HostRun]
    run_dir: Path
    seconds: float
    check: bool = False
    errors: tuple[str, ...] = ()  # run-level trouble (e.g. locks that could not be released)
