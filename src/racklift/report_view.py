"""A run's report.json, read the one way every other view of it needs: verify's and
provision's (reimage's, accept's) alike, as hosts with a result, a place in a rack, their
failures (check id, found, wanted, what to do), stage times and acceptance figures.

The metrics file and report.html are both rendered from report.json's dict through this, so
they can never disagree with it or with each other. Pure: a dict in, a RunView out.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from racklift.lifecycle.result import Failure
from racklift.pipeline.outcome import FAILED, SKIPPED
from racklift.verify.failures import mismatch_failures, verdict_failures

VERIFY = "verify"
PASSED = "passed"  # verify's results: PASSED, FAILED, SKIPPED
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # report.json's generated_at


@dataclass(frozen=True)
class HostView:
    name: str
    rack: str | None
    position: float | None  # NetBox's rack unit (the device's lowest); None: not racked
    result: str
    failures: tuple[Failure, ...] = ()
    seconds: float | None = None  # None: the verb does not time hosts (verify)
    stage_seconds: Mapping[str, float] = field(default_factory=dict)
    acceptance: Mapping[str, Any] | None = None  # report.json's: passed, figures, ...


@dataclass(frozen=True)
class RunView:
    verb: str
    selection: str
    generated_at: str
    timestamp: float  # generated_at as Unix time
    seconds: float | None
    ok: bool
    counts: Mapping[str, int]  # result → hosts
    hosts: tuple[HostView, ...]


def view(report: Mapping[str, Any]) -> RunView:
    """report.json's dict (run_report.to_json or verdict_report.to_json) as a RunView."""
    verb = report.get("verb", VERIFY)
    hosts = tuple(_verified(h) if verb == VERIFY else _run(h) for h in report["hosts"])
    counts = {k: v for k, v in report["summary"].items() if k != "hosts"}
    ok = report["ok"] if "ok" in report else not counts.get("failed")
    return RunView(verb, report["selection"], report["generated_at"],
                   float(calendar.timegm(time.strptime(report["generated_at"], TIME_FORMAT))),
                   report.get("seconds"), ok, counts, hosts)


def _verified(host: Mapping[str, Any]) -> HostView:
    result = PASSED if host["passed"] else SKIPPED if host["skipped"] else FAILED
    return HostView(host["host"], host.get("rack"), host.get("position"), result,
                    tuple(verdict_failures(host)) if host["failed"] else ())


def _run(host: Mapping[str, Any]) -> HostView:
    verdict, acceptance = host["verdict"], host["acceptance"]
    failures = verdict_failures(verdict) if verdict and verdict["failed"] else []
    if acceptance and not acceptance["passed"]:
        failures += mismatch_failures(acceptance.get("mismatches", []))
    if not failures and host["error"]:
        # Failed outside the gate and acceptance (image, configure, drain): the stage it
        # reached is the cause, its error what was found; refused before any stage (locked,
        # preflight) or interrupted: the result is.
        cause = (f"stage.{host['stage_reached']}" if host["result"] == FAILED
                 else f"result.{host['result'].replace(' ', '_')}")
        failures.append(Failure(cause, host["error"], "-", "-"))
    return HostView(host["host"], host["rack"], host.get("position"), host["result"],
                    tuple(failures), host["seconds"], host["stage_seconds"], acceptance)
