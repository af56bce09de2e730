"""What the device's `racklift_result` custom field holds: the host's last result, its last
verdict and its last acceptance figures, as sections that each transition replaces on its own
(`state.apply` keeps the others), each dated and naming the run. Built here from what the
verdict and the acceptance stage already hold, with their failures as the gate reads them
(`racklift.verify.failures`, into this module's Failure); racklift's NetBox plugin only shows
it. Pure: dicts in, dicts out.

{"last": {"at", "run", "stage", "result", "failures": [{"check", "cause", "found", "wanted",
 "todo"}]}, "verdict": {"at", "run", "passed", "mismatches": [{"field", "expected",
 "observed", "severity", "hint"}], "checks": [{"name", "status", "detail"}]},
 "acceptance": {"at", "run", "passed", "summary", "rows": [{"test", "figure", "threshold",
 "passed"}]}}
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

RESULT_FIELD = "racklift_result"
PASSED, FAILED = "passed", "failed"
SECTIONS = ("last", "verdict", "acceptance")
INDEX = re.compile(r"\[[^\]]*\]")  # a check id's port or GPU: cable.wrong_peer[eth0]


@dataclass(frozen=True)
class Failure:
    """One reason a host is kept out, as the verdict and acceptance record it."""

    check: str  # the check id, with the port or GPU it is about
    found: str
    wanted: str
    todo: str

    @property
    def cause(self) -> str:
        """The check id without its port or GPU: one series per kind of failure, not per port."""
        return INDEX.sub("", self.check)


def text(value: Any) -> str:
    """A recorded value as one line of text: strings as they are, the rest as JSON."""
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _failures(failures: Iterable[Failure]) -> list[dict[str, str]]:
    return [{"check": f.check, "cause": f.cause, "found": f.found, "wanted": f.wanted,
             "todo": f.todo} for f in failures]


def last(stage: str, passed: bool, failures: Iterable[Failure], run: str | None,
         at: str | None = None) -> dict[str, Any]:
    return {"at": at or _now(), "run": run, "stage": stage,
            "result": PASSED if passed else FAILED, "failures": _failures(failures)}


def of_verdict(verdict: Mapping[str, Any], failures: Iterable[Failure],
               run: str | None) -> dict[str, Any]:
    """A verdict's sections (from HostVerdict.to_dict): every mismatch and health check, and
    its failures (racklift.verify.failures.verdict_failures) as the last result."""
    at = _now()
    return {
        "last": last("verify", verdict["passed"], failures, run, at),
        "verdict": {
            "at": at, "run": run, "passed": verdict["passed"],
            "mismatches": [{"field": m["field"], "expected": text(m["expected"]),
                            "observed": text(m["observed"]), "severity": m["severity"],
                            "hint": m["hint"]} for m in verdict["mismatches"]],
            "checks": [{"name": c["name"], "status": c["status"], "detail": c["detail"]}
                       for c in verdict["checks"]],
        },
    }


def of_stage_failure(stage: str, why: str, run: str | None) -> dict[str, Any]:
    """A stage that failed outside the gate and acceptance (image, configure, drain): the
    stage is the cause, as report.json's views name it."""
    return {"last": last(stage, False, [Failure(f"stage.{stage}", why, "-", "-")], run)}


def of_acceptance(passed: bool, summary: str, rows: Sequence[Mapping[str, Any]],
                  failures: Iterable[Failure], run: str | None) -> dict[str, Any]:
    """The acceptance stage's sections: its figures against the device type's thresholds, and
    its failures (racklift.verify.failures.mismatch_failures) as the last result."""
    at = _now()
    return {
        "last": last("accept", passed, failures, run, at),
        "acceptance": {"at": at, "run": run, "passed": passed, "summary": summary,
                       "rows": [dict(r) for r in rows]},
    }


def merged(current: Any, sections: Mapping[str, Any]) -> dict[str, Any]:
    """The field's value with `sections` replaced and the others kept (anything that is not
    one of racklift's sections dropped)."""
    kept = {k: v for k, v in current.items() if k in SECTIONS} if isinstance(current,
                                                                              dict) else {}
    return {**kept, **sections}
