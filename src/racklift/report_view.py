"""A run's report.json, read the one way every other view of it needs: verify's and
provision's (reimage's, accept's) alike, as hosts with a result, a place in a rack, their
failures (check id, found, wanted, what to do), stage times and acceptance figures.

The metrics file and report.html are both rendered from report.json's dict through this, so
they can never disagree with it or with each other. Pure: a dict in, a RunView out.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from racklift.pipeline.outcome import FAILED, SKIPPED
from racklift.verify.check import PASSING
from racklift.verify.mismatch import CRITICAL

VERIFY = "verify"
PASSED = "passed"  # verify's results: PASSED, FAILED, SKIPPED
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # report.json's generated_at
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


def text(value: Any) -> str:
    """A recorded value as one line of text: strings as they are, the rest as JSON."""
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _mismatches(rows: list[Mapping[str, Any]]) -> list[Failure]:
    return [Failure(m["field"], text(m["observed"]), text(m["expected"]), m["hint"])
            for m in rows if m["severity"] == CRITICAL]


def verdict_failures(verdict: Mapping[str, Any]) -> list[Failure]:
    """The failure lines of a verdict's dict (HostVerdict.to_dict), structured, in the order
    its `failures` lists them."""
    out = [Failure(f"netbox.{p['field']}", "incomplete NetBox record", "-", p["message"])
           for p in verdict["problems"]]
    if verdict["error"]:
        out.append(Failure("collection", verdict["error"], "the host's facts", "-"))
    out += _mismatches(verdict["mismatches"])
    out += [Failure(c["name"], f"{c['status']}: {c['detail']}", "OK", "-")
            for c in verdict["checks"] if c["status"] not in PASSING]
    return out


def _verified(host: Mapping[str, Any]) -> HostView:
    result = PASSED if host["passed"] else SKIPPED if host["skipped"] else FAILED
    return HostView(host["host"], host.get("rack"), host.get("position"), result,
                    tuple(verdict_failures(host)) if host["failed"] else ())


def _run(host: Mapping[str, Any]) -> HostView:
    verdict, acceptance = host["verdict"], host["acceptance"]
    failures = verdict_failures(verdict) if verdict and verdict["failed"] else []
    if acceptance and not acceptance["passed"]:
        failures += _mismatches(acceptance.get("mismatches", []))
    if not failures and host["error"]:
        # Failed outside the gate and acceptance (image, configure, drain): the stage it
        # reached is the cause, its error what was found; refused before any stage (locked,
        # preflight) or interrupted: the result is.
        cause = (f"stage.{host['stage_reached']}" if host["result"] == FAILED
                 else f"result.{host['result'].replace(' ', '_')}")
        failures.append(Failure(cause, host["error"], "-", "-"))
    return HostView(host["host"], host["rack"], host.get("position"), host["result"],
                    tuple(failures), host["seconds"], host["stage_seconds"], acceptance)
