"""A run as one static web page (report.html beside report.json): the counts per result, each
rack as a column of units coloured by each host's result, every failed host with its failures
(check id, found, wanted, what to do), and each host's stage times as a bar.

Rendered from report.json's dict (racklift.report_view), like the metrics. Self-contained: inline
CSS, no script, nothing fetched (its Content-Security-Policy forbids it too), so it opens from a
run directory copied anywhere. Everything from NetBox or the hosts goes through html.escape.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any

from racklift.lifecycle.stages import STAGES
from racklift.pipeline.outcome import (
    FAILED,
    INTERRUPTED,
    JOINED,
    LOCKED,
    PLANNED,
    PREFLIGHT,
    SKIPPED,
    STAGED,
)
from racklift.report_view import PASSED, HostView, RunView, view

# A result's colour class: racklift's own words mapped to a fixed set, so no recorded text
# ever becomes a class name.
RESULT_CLASS = {JOINED: "ok", PASSED: "ok", FAILED: "bad", PREFLIGHT: "bad", SKIPPED: "skip",
                PLANNED: "plan", STAGED: "plan", LOCKED: "held", INTERRUPTED: "held"}
STAGE_CLASS = {s: s for s in (*STAGES, "join")}
NO_RACK = "no rack"

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}h3{font-size:1em;margin:.3em 0}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;
vertical-align:top}
.r-ok{background:#b7e4b0}.r-bad{background:#f4a6a6}.r-skip{background:#e4e4e4}
.r-plan{background:#b8dcf0}.r-held{background:#f7d38f}.r-other{background:#d9c8ef}
.racks{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start}
.rack{border:2px solid #555;padding:.4em;min-width:14em}
.units{list-style:none;margin:0;padding:0}
.unit{border-top:1px solid #999;height:1.5em;display:flex;gap:.5em;padding:0 .3em;
white-space:nowrap;overflow:hidden}
.unit.empty{background:#fafafa;color:#aaa}.u{width:2.2em;text-align:right;color:#555}
.unplaced{margin:.4em 0 0;padding-left:1.2em}
.bar{display:flex;width:40em;height:1.2em;background:#f3f3f3}
.bar span{display:block;height:100%;overflow:hidden;font-size:.8em;white-space:nowrap}
.s-image{background:#8fb3de}.s-configure{background:#9fd3a8}.s-verify{background:#f2c879}
.s-accept{background:#d9a3d9}.s-join{background:#a3d9d6}.s-other{background:#c8c8c8}
"""


def result_class(result: str) -> str:
    return f"r-{RESULT_CLASS.get(result, 'other')}"


def _place(h: HostView) -> str:
    where = h.rack or NO_RACK
    return f"{where} U{h.position:g}" if h.position is not None else where


def summary_html(run: RunView) -> str:
    rows = "".join(f'<tr class="{result_class(r)}"><td>{escape(r)}</td><td>{n}</td></tr>'
                   for r, n in run.counts.items())
    return (f"<table class=\"summary\"><tr><th>result</th><th>hosts</th></tr>{rows}"
            f"<tr><th>all</th><th>{len(run.hosts)}</th></tr></table>")


def _host_line(h: HostView) -> str:
    return (f'<li class="{result_class(h.result)}" title="{escape(h.result)}">'
            f"{escape(h.name)} ({escape(h.result)})</li>")


def rack_html(name: str, hosts: list[HostView]) -> str:
    """One rack, its highest occupied unit at the top down to U1; a host in the unit its
    position (its lowest unit) names. Hosts without a position are listed below."""
    by_unit: dict[int, list[HostView]] = {}
    for h in hosts:
        if h.position is not None:
            by_unit.setdefault(math.floor(h.position), []).append(h)
    units = []
    for unit in range(max(by_unit, default=0), 0, -1):
        here = by_unit.get(unit, [])
        if not here:
            units.append(f'<li class="unit empty"><span class="u">{unit}</span></li>')
            continue
        cls = result_class(here[0].result) if len(here) == 1 else "r-other"
        names = ", ".join(f"{escape(h.name)} ({escape(h.result)})" for h in here)
        units.append(f'<li class="unit {cls}"><span class="u">{unit}</span>{names}</li>')
    unplaced = [h for h in hosts if h.position is None]
    below = (f"<p>without a position:</p><ul class=\"unplaced\">"
             f"{''.join(map(_host_line, unplaced))}</ul>" if unplaced else "")
    return (f'<section class="rack"><h3>{escape(name)}</h3><ol class="units">{"".join(units)}'
            f"</ol>{below}</section>")


def racks_html(run: RunView) -> str:
    racks: dict[str, list[HostView]] = {}
    for h in run.hosts:
        racks.setdefault(h.rack or NO_RACK, []).append(h)
    return f'<div class="racks">{"".join(rack_html(n, hs) for n, hs in racks.items())}</div>'


def failures_html(run: RunView) -> str:
    failed = [h for h in run.hosts if h.failures]
    if not failed:
        return "<p>No host failed.</p>"
    out = []
    for h in failed:
        rows = "".join(f"<tr><td>{escape(f.check)}</td><td>{escape(f.found)}</td>"
                       f"<td>{escape(f.wanted)}</td><td>{escape(f.todo)}</td></tr>"
                       for f in h.failures)
        out.append(f'<section class="failed"><h3 class="{result_class(h.result)}">'
                   f"{escape(h.name)} ({escape(_place(h))}, {escape(h.result)})</h3>"
                   "<table><tr><th>check</th><th>found</th><th>wanted</th>"
                   f"<th>what to do</th></tr>{rows}</table></section>")
    return "".join(out)


def stages_html(run: RunView) -> str:
    """A bar per host, each stage a segment as wide as its seconds, on one scale for all."""
    timed = [h for h in run.hosts if h.stage_seconds]
    if not timed:
        return "<p>No stage times: this verb times no stages.</p>"
    longest = max(sum(h.stage_seconds.values()) for h in timed) or 1.0
    rows = []
    for h in timed:
        parts = "".join(
            f'<span class="s-{STAGE_CLASS.get(stage, "other")}" '
            f'style="width:{100 * seconds / longest:.1f}%" '
            f'title="{escape(stage)} {seconds:g} s">{escape(stage)}</span>'
            for stage, seconds in h.stage_seconds.items())
        rows.append(f"<tr><td>{escape(h.name)}</td><td><div class=\"bar\">{parts}</div></td>"
                    f"<td>{sum(h.stage_seconds.values()):g} s</td></tr>")
    return ("<table class=\"stages\"><tr><th>host</th><th>stages</th><th>seconds</th></tr>"
            f"{''.join(rows)}</table>")


def render_view(run: RunView) -> str:
    title = escape(f"racklift {run.verb}: {run.selection}")
    took = f"; {run.seconds:g} s" if run.seconds is not None else ""
    verdict = "every host worked on passed" if run.ok else "not every host passed"
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" "
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{title}</title><style>{CSS}</style></head><body>\n"
        f"<h1>{title}</h1><p>generated {escape(run.generated_at)}{took}; {verdict}</p>\n"
        f"<h2>Summary</h2>{summary_html(run)}\n"
        f"<h2>Racks</h2>{racks_html(run)}\n"
        f"<h2>Failed hosts</h2>{failures_html(run)}\n"
        f"<h2>Stage times</h2>{stages_html(run)}\n"
        "</body></html>\n")


def render(report: Mapping[str, Any]) -> str:
    """report.json's dict as report.html."""
    return render_view(view(report))


def save(run_dir: Path, report: Mapping[str, Any]) -> Path:
    """The run's report.json and, rendered from what it holds, report.html beside it: the one
    place both are written. Returns report.json's path."""
    path = run_dir / "report.json"
    text = json.dumps(report, indent=2, default=str) + "\n"
    path.write_text(text)
    (run_dir / "report.html").write_text(render(json.loads(text)))
    return path
