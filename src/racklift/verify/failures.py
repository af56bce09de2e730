"""A verdict's failures read the one way every view of them needs: each reason a host is kept
out as check id, found, wanted and what to do. report.json's views (report.html, the metrics)
and the device's `racklift_result` field (racklift's NetBox plugin) all read verdicts through
this, so none can disagree with another. Pure: dicts in, Failures (the lifecycle's record of
one, racklift.lifecycle.result.Failure) out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from racklift.lifecycle.result import Failure, text
from racklift.verify.check import failing
from racklift.verify.mismatch import CRITICAL


def mismatch_failures(rows: Iterable[Mapping[str, Any]]) -> list[Failure]:
    """The critical ones of mismatches' dicts (Mismatch as asdict gives it)."""
    return [Failure(m["field"], text(m["observed"]), text(m["expected"]), m["hint"])
            for m in rows if m["severity"] == CRITICAL]


def verdict_failures(verdict: Mapping[str, Any]) -> list[Failure]:
    """The failure lines of a verdict's dict (HostVerdict.to_dict), structured, in the order
    its `failures` lists them."""
    out = [Failure(f"netbox.{p['field']}", "incomplete NetBox record", "-", p["message"])
           for p in verdict["problems"]]
    if verdict["error"]:
        out.append(Failure("collection", verdict["error"], "the host's facts", "-"))
    out += mismatch_failures(verdict["mismatches"])
    out += [Failure(c["name"], f"{c['status']}: {c['detail']}", "OK", "-")
            for c in verdict["checks"] if failing(c["status"])]
    return out
