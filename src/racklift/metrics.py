"""A run as Prometheus metrics, in the text exposition format node_exporter's textfile
collector reads (`--metrics-file`): hosts per result and per failure cause, host and stage
times, acceptance figures. Rendered from report.json's dict (racklift.report_view), so the
file says what the report says.

Every sample carries the verb and the selection: node_exporter refuses a scrape where two
files hold the same series, so files of different verbs or selections must not collide.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from racklift.errors import RackliftError
from racklift.paths import write_atomically
from racklift.report_view import HostView, RunView, view

GAUGE = "gauge"
# Units as Prometheus wants them (bytes per second): nccl-tests prints GB/s, ib_write_bw Gb/s.
GB = 1e9
GBIT = 1e9 / 8

Labels = Mapping[str, str]


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    samples: tuple[tuple[Labels, float], ...]
    kind: str = GAUGE


def escape(value: str) -> str:
    """A label value as the exposition format writes it: backslash, double quote and newline
    escaped, so any host name or check id stays one sample line."""
    return value.replace("\\", r"\\").replace('"', r"\"").replace("\n", r"\n")


def number(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def sample(name: str, labels: Labels, value: float) -> str:
    inside = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
    return f"{name}{{{inside}}} {number(value)}"


def family_lines(family: Family) -> list[str]:
    """HELP, TYPE and the samples; nothing for a family without samples."""
    if not family.samples:
        return []
    return [f"# HELP {family.name} {family.help}", f"# TYPE {family.name} {family.kind}",
            *(sample(family.name, labels, value) for labels, value in family.samples)]


def _per_host(run: RunView, common: Labels,
              value: Callable[[HostView], Iterable[tuple[Labels, float]]]
              ) -> tuple[tuple[Labels, float], ...]:
    """A sample for each (extra labels, figure) `value` gives of a host."""
    return tuple(({**common, "host": h.name, **extra}, figure)
                 for h in run.hosts for extra, figure in value(h))


def _acceptance(h: HostView) -> Mapping[str, Any]:
    return (h.acceptance or {}).get("figures") or {}


def families(run: RunView) -> list[Family]:
    common = {"verb": run.verb, "selection": run.selection}
    causes: dict[str, int] = {}
    for h in run.hosts:
        for cause in sorted({f.cause for f in h.failures}):  # a host counts once per cause
            causes[cause] = causes.get(cause, 0) + 1
    return [
        Family("racklift_run_timestamp_seconds",
               "When the run's report was written, as Unix time.",
               ((common, run.timestamp),)),
        Family("racklift_run_duration_seconds", "How long the run took.",
               ((common, run.seconds),) if run.seconds is not None else ()),
        Family("racklift_run_ok",
               "1 when every host worked on passed (verify) or joined, 0 otherwise.",
               ((common, run.ok),)),
        Family("racklift_hosts", "Hosts of the run, by the result they ended it with.",
               tuple(({**common, "result": r}, n) for r, n in sorted(run.counts.items()))),
        Family("racklift_host_failures",
               "Hosts of the run failing a check, by check id (its port or GPU left out).",
               tuple(({**common, "cause": c}, n) for c, n in sorted(causes.items()))),
        Family("racklift_host_info", "Each host's result and rack in the run (always 1).",
               _per_host(run, common, lambda h: [({"rack": h.rack or "", "result": h.result},
                                                   1)])),
        Family("racklift_host_duration_seconds", "How long the run worked on the host.",
               _per_host(run, common, lambda h: [] if h.seconds is None else [({}, h.seconds)])),
        Family("racklift_stage_duration_seconds", "How long each stage took on the host.",
               _per_host(run, common, lambda h: [({"stage": s}, t)
                                                 for s, t in h.stage_seconds.items()])),
        Family("racklift_acceptance_passed",
               "1 when the host passed its acceptance tests, 0 when it failed them.",
               _per_host(run, common, lambda h: [] if h.acceptance is None
                         else [({}, bool(h.acceptance["passed"]))])),
        Family("racklift_acceptance_dcgm_passed",
               "1 when DCGM's diagnostic passed on the host at the level asked, 0 otherwise.",
               _per_host(run, common, lambda h: [
                   ({"level": str(d["level"])}, d["result"] == "pass")
                   for d in [_acceptance(h).get("dcgm")] if d])),
        Family("racklift_acceptance_nccl_bus_bandwidth_bytes_per_second",
               "NCCL all-reduce average bus bandwidth on the host (nccl-tests' busbw).",
               _per_host(run, common, lambda h: [
                   ({}, bw * GB) for bw in [_acceptance(h).get("nccl_busbw")]
                   if bw is not None])),
        Family("racklift_acceptance_rdma_bandwidth_bytes_per_second",
               "RDMA write bandwidth of the host's HCA port with its partners (ib_write_bw).",
               _per_host(run, common, lambda h: [
                   ({"port": port}, p["gbps"] * GBIT)
                   for port, p in sorted((_acceptance(h).get("rdma") or {}).items())
                   if p.get("gbps") is not None])),
    ]


def render_families(found: Iterable[Family]) -> str:
    return "".join(f"{line}\n" for f in found for line in family_lines(f))


def render(report: Mapping[str, Any]) -> str:
    """report.json's dict as the text of a metrics file."""
    return render_families(families(view(report)))


def write(path: Path, content: str) -> None:
    """Write the file as node_exporter asks: a temporary file beside it, renamed over it, so
    a scrape never reads half a file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # 0644: node_exporter runs as its own user. The temporary name never ends in .prom.
        write_atomically(path, content, mode=0o644)
    except OSError as exc:
        raise RackliftError(f"cannot write the metrics file {path}: {exc.strerror or exc}") \
            from None
