"""provision, reimage and accept, end to end: select hosts in NetBox, plan each one's stages,
lock them, then per rack (racklift.pipeline.rack_stages): (drain, offline,) image, configure,
verify + health, accept, join. Racks run at once within the run's limits
(racklift.pipeline.racks); a site's boot server serves all its racks' deploys at once
(racklift.pipeline.boot_server_hosts). One host's failure never stops the others, nor one
rack's another; NetBox records every transition; nothing is admitted without a passing verify
and, where its context asks for them, passing acceptance tests; a re-run resumes where each host
stopped."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Any

from racklift.errors import RackliftError
from racklift.lifecycle import lock
from racklift.lifecycle.stages import ACCEPT, IMAGE
from racklift.lifecycle.state import read_stages
from racklift.netbox.bootstrap import bootstrap
from racklift.netbox.client import NetBox
from racklift.netbox.expected import ExpectedHost
from racklift.netbox.reader import Selection, read_hosts
from racklift.pipeline import racks, run_report
from racklift.pipeline.image_plan import imaging_problems
from racklift.pipeline.outcome import (
    INTERRUPTED,
    LOCKED,
    PLANNED,
    PREFLIGHT,
    SKIPPED,
    HostRun,
    PipelineRun,
)
from racklift.pipeline.plan import Options, plan_host
from racklift.pipeline.progress import Progress
from racklift.pipeline.rack_stages import ImageStage, RackBatch, run_rack
from racklift.pipeline.site_share import SiteShare
from racklift.runs import new_run_dir
from racklift.verify.acceptance import acceptance_problems, asks_acceptance

if TYPE_CHECKING:
    from racklift.pipeline.scheduler import Scheduler


def _preflight(h: HostRun) -> None:
    if h.plan.skip:
        h.result = SKIPPED
        return
    problems = [f"{p.field}: {p.message}" for p in h.host.problems]
    if IMAGE in h.plan.stages:
        problems += [f"{p.field}: {p.message}" for p in imaging_problems(h.host)]
    if ACCEPT in h.plan.stages:
        problems += [f"{p.field}: {p.message}" for p in acceptance_problems(h.host)]
    if problems:
        h.result, h.reached, h.error = PREFLIGHT, "preflight", "; ".join(problems)


def run(netbox: NetBox, selection: Selection, options: Options, *, check: bool = False,
        progress: Progress, scheduler: Scheduler | None = None,
        image: ImageStage | None = None, extravars: Mapping[str, Any] | None = None,
        owner: lock.Owner | None = None) -> PipelineRun:
    started = time.monotonic()
    run_dir = new_run_dir(options.verb + ("-check" if check else ""))
    run_id = f"{run_dir.name}-{uuid.uuid4().hex[:6]}"
    if not check:
        bootstrap(netbox)  # the custom field racklift_stage, the tags: created once
    hosts = read_hosts(netbox, selection)
    completed = read_stages(netbox, [h.netbox_id for h in hosts]) if hosts else {}
    runs = [HostRun(h, plan_host(h.status, completed.get(h.netbox_id), _for(options, h)),
                    completed.get(h.netbox_id)) for h in hosts]
    for h in runs:
        _preflight(h)
    todo = [h for h in runs if not h.result]
    progress.note(f"{len(runs)} hosts selected ({selection.describe()}); {len(todo)} to work on"
                  f"; run {run_id}")
    if check:
        for h in todo:
            h.result = PLANNED
        return _reported(PipelineRun(run_id, options.verb, runs, run_dir,
                                     time.monotonic() - started, check=True), selection)
    # A host another run holds, or that changed since it was selected, is refused.
    refused = lock.acquire(netbox, [h.host.netbox_id for h in todo], run_id, options.verb,
                           owner, seen={h.host.netbox_id: (h.host.status, h.completed)
                                        for h in todo})
    for h in todo:
        if h.host.netbox_id in refused:
            h.result, h.error = LOCKED, refused[h.host.netbox_id].describe()
            progress.failed(h.name, "lock", h.error)
    mine = [h for h in todo if not h.result]
    errors: list[str] = []
    try:
        _batches(netbox, mine, options, run_id, run_dir, progress, scheduler, image,
                 extravars or {}, errors)
    finally:
        try:
            lock.release(netbox, [h.host.netbox_id for h in mine], run_id)
        except RackliftError as exc:
            errors.append(f"the locks of run {run_id} could not be released ({exc}); once "
                          f"NetBox answers: racklift unlock --host "
                          f"{','.join(h.name for h in mine)}")
    return _reported(PipelineRun(run_id, options.verb, runs, run_dir,
                                 time.monotonic() - started, errors=tuple(errors)), selection)


def _for(options: Options, host: ExpectedHost) -> Options:
    """The run's options as they apply to this host: no accept stage where its context asks
    for no acceptance tests (verify admits it)."""
    return options if asks_acceptance(host) else replace(options, accept=False)


def _reported(result: PipelineRun, selection: Selection) -> PipelineRun:
    """The run's report.json, next to its Ansible artifacts and support bundles."""
    run_report.write(result, selection.describe())
    return result


def _batches(netbox: NetBox, mine: list[HostRun], options: Options, run_id: str,
             run_dir: Path, progress: Progress, scheduler: Scheduler | None,
             image: ImageStage | None, extravars: Mapping[str, Any], errors: list[str]) -> None:
    """Each rack is one batch through every stage (one Ansible job per stage); racks run at
    once within options.limits. A rack that NetBox or Ansible failed under stops alone: its
    unfinished hosts say where they stopped, NetBox still has them staged (never active), a
    re-run resumes them; `errors` says which rack and why."""
    groups = [list(g) for _, g in groupby(sorted(mine, key=_rack_key), key=_rack_key)]
    shares = {h.host.site: SiteShare(h.host.site) for h in mine}

    # Among several racks, each says when it starts and how it ended (stopped ones too).
    announce = len(groups) > 1

    def run_one_rack(group: list[HostRun]) -> None:
        started = time.monotonic()
        batch = RackBatch(netbox, group, options, run_id, run_dir, progress, extravars)
        if announce:
            progress.note(f"rack {batch.rack} ({batch.site}): started, {len(group)} hosts")
        try:
            run_rack(batch, shares[batch.site], scheduler, image)
        except RackliftError as exc:
            errors.append(f"rack {batch.rack} ({batch.site}) stopped: {exc}")
            for h in group:
                if not h.result:
                    h.result, h.error = INTERRUPTED, f"stopped during {h.reached}: {exc}"
        finally:
            seconds = time.monotonic() - started
            for h in group:
                h.seconds = seconds
            progress.done([h.name for h in group])
            if announce:
                counts = Counter(h.result for h in group)
                progress.note(f"rack {batch.rack} ({batch.site}): finished in {seconds:.0f} s: "
                              + ", ".join(f"{n} {r}" for r, n in sorted(counts.items())))

    racks.run_all(groups, run_one_rack, site_of=lambda g: g[0].host.site,
                  limits=options.limits, name_of=lambda g: g[0].host.rack or "no-rack")


def _rack_key(h: HostRun) -> tuple[str, str]:
    return h.host.site, h.host.rack or ""
