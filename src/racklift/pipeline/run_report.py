"""A provision/reimage/accept run for people (a summary table, report.html) and for scripts
(report.json)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from rich.table import Table

from racklift import __version__, report_html
from racklift.console import plain
from racklift.pipeline.outcome import JOINED, PLANNED, SKIPPED, STAGED, HostRun, PipelineRun

STYLE = {JOINED: "green", SKIPPED: "dim", PLANNED: "cyan", STAGED: "cyan"}


def summary(run: PipelineRun) -> dict[str, int]:
    counts = Counter(h.result for h in run.hosts)
    return {"hosts": len(run.hosts), **dict(sorted(counts.items()))}


def ok(run: PipelineRun) -> bool:
    """Every host that was worked on joined (skipped hosts are not failures)."""
    return not run.errors and all(h.result in (JOINED, SKIPPED, PLANNED, STAGED)
                                  for h in run.hosts)


def _first_problem(h: HostRun) -> str:
    if h.error:
        return h.error
    if h.plan.skip:
        return h.plan.skip
    if h.verdict and h.verdict.warnings:
        return f"warning: {h.verdict.warnings[0]}"
    return "; ".join(h.warnings) or "-"


def table(run: PipelineRun, title: str) -> Table:
    out = Table(title=title, title_justify="left")
    for column in ("host", "rack", "status before", "result", "stage reached", "mismatches",
                   "acceptance", "time", "first problem"):
        out.add_column(column, overflow="fold")
    for h in run.hosts:
        style = STYLE.get(h.result, "red")
        stages = ", ".join(h.plan.stages) if h.result == PLANNED else h.reached
        out.add_row(plain(h.name), plain(h.host.rack or "-"), h.host.status,
                    plain(h.result, style), stages,
                    str(len(h.verdict.mismatches)) if h.verdict else "-",
                    plain(h.acceptance.figures_line()) if h.acceptance else "-",
                    f"{h.seconds:.0f} s" if h.seconds else "-", plain(_first_problem(h)))
    return out


def to_json(run: PipelineRun, selection: str) -> dict[str, Any]:
    return {"racklift": __version__, "run": run.run_id, "verb": run.verb, "check": run.check,
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "selection": selection, "seconds": round(run.seconds, 1),
            "summary": summary(run), "ok": ok(run), "errors": list(run.errors),
            "hosts": [h.to_dict() for h in run.hosts]}


def write(run: PipelineRun, selection: str) -> Path:
    """report.json and report.html in the run directory."""
    return report_html.save(run.run_dir, to_json(run, selection))
