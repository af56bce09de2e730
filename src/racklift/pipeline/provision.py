"""provision, reimage and accept, end to end: select hosts in NetBox, plan each one's stages,
lock them, then per rack: (drain, offline,) image, configure, verify + health, accept, join.
Racks run at once within the run's limits (racklift.pipeline.racks); a site's boot server
images one rack at a time. One host's failure never stops the others, nor one rack's another;
NetBox records every transition; nothing is admitted without a passing verify and, where its
context asks for them, passing acceptance tests; a re-run resumes where each host stopped."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Any

from racklift.ansible import run_playbook
from racklift.errors import RackliftError
from racklift.imaging import host_keys
from racklift.lifecycle import lock
from racklift.lifecycle.result import of_stage_failure
from racklift.lifecycle.stages import ACCEPT, COMPLETED, CONFIGURE, IMAGE, VERIFY
from racklift.lifecycle.state import (
    ACCEPTANCE_FIELD,
    KEEP,
    VERIFIED_FIELD,
    Transition,
    apply,
    read_stages,
)
from racklift.netbox.bootstrap import bootstrap
from racklift.netbox.client import NetBox
from racklift.netbox.expected import ExpectedHost
from racklift.netbox.reader import Selection, read_hosts
from racklift.pipeline import racks, run_report
from racklift.pipeline.accept_stage import accept
from racklift.pipeline.image_plan import imaging_problems
from racklift.pipeline.outcome import (
    FAILED,
    INTERRUPTED,
    JOINED,
    LOCKED,
    PLANNED,
    PREFLIGHT,
    SKIPPED,
    STAGED,
    HostRun,
    PipelineRun,
)
from racklift.pipeline.plan import ACCEPT_ONLY, REIMAGE, Options, plan_host
from racklift.pipeline.progress import Progress
from racklift.pipeline.scheduler import is_drained
from racklift.runs import new_run_dir
from racklift.text import journal_line
from racklift.verify.acceptance import acceptance_problems, asks_acceptance
from racklift.verify.gate import gate

if TYPE_CHECKING:
    from racklift.pipeline.scheduler import Scheduler

DRAIN_POLL = 5.0  # seconds between scheduler state reads while hosts drain
# What a rack's stage shares with the other racks of its site (held one rack at a time).
SHARED = {IMAGE: "its boot server", ACCEPT: "its active hosts as RDMA partners"}
# image(netbox, hosts, run_dir, progress) → host name → error (None: imaged)
ImageStage = Callable[[NetBox, list[ExpectedHost], Path, Progress], Mapping[str, str | None]]


def _header(options: Options, run_id: str) -> str:
    return f"racklift {options.verb} (run {run_id})"


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


def failure_transitions(ids: Mapping[str, int], failures: Mapping[str, str], header: str,
                        stage: str, run: str | None = None) -> list[Transition]:
    """Each failed host's entry: `failed`, the journal quoting why on one line, the device's
    result naming the stage. The reason may be the deploy ramdisk's report or a module's
    message, any characters at any length."""
    return [Transition(ids[name], f"{header}: {stage} failed.\n{journal_line(f'- {why}')}",
                       kind="danger", status="failed",
                       result=of_stage_failure(stage, why, run))
            for name, why in failures.items()]


class _Batch:
    """One rack's hosts through the stages."""

    def __init__(self, netbox: NetBox, runs: list[HostRun], options: Options, run_id: str,
                 run_dir: Path, progress: Progress, scheduler: Scheduler | None,
                 image: ImageStage | None, extravars: Mapping[str, Any]) -> None:
        self.netbox, self.runs, self.options, self.run_id = netbox, runs, options, run_id
        self.run_dir, self.progress, self.scheduler = run_dir, progress, scheduler
        self.image, self.extravars = image, extravars
        self.rack = runs[0].host.rack or "no-rack"
        self.site = runs[0].host.site
        # Artifact directories per rack: racks run at once, and rack names repeat across sites.
        self.ident = f"{self.site}-{self.rack}"
        self.stage_started = time.monotonic()

    def live(self, stage: str) -> list[HostRun]:
        return [h for h in self.runs if not h.result and stage in h.plan.stages]

    def fail(self, failures: Mapping[str, str], stage: str) -> None:
        by_name = {h.name: h for h in self.runs}
        for name, why in failures.items():
            by_name[name].fail(stage, why)
            self.progress.failed(name, stage, why)
        apply(self.netbox, failure_transitions(
            {name: h.host.netbox_id for name, h in by_name.items()}, failures,
            _header(self.options, self.run_id), stage, self.run_id))

    def start(self) -> None:
        live = [h for h in self.runs if not h.result]
        if self.options.verb == REIMAGE:
            self.drain(live)
            live = [h for h in live if not h.result]
        elif self.options.verb == ACCEPT_ONLY:
            # Pool hosts taken with --force: out of the scheduler before the load runs.
            self.drain([h for h in live if h.host.status == "active"], "for acceptance tests",
                       status=None, stage=KEEP)
            live = [h for h in live if not h.result]
        transitions = []
        for h in live:
            text = (f"{_header(self.options, self.run_id)}: started; stages "
                    f"{', '.join(h.plan.stages)}")
            fresh = IMAGE in h.plan.stages
            transitions.append(Transition(
                h.host.netbox_id, text, status="staged",
                stage=None if fresh else COMPLETED[VERIFY] if h.plan.stages == (ACCEPT,)
                else KEEP))
        apply(self.netbox, transitions)

    def drain(self, live: list[HostRun], what: str = "for re-imaging",
              status: str | None = "offline", stage: object = None) -> None:
        """Out of the scheduler and, in NetBox, out of service `what` for (status and stage:
        what the host is set to; None and KEEP leave them)."""
        reason = f"racklift {self.options.verb}: {self.options.reason or 'no reason given'}"
        if self.scheduler is not None and live:
            self.progress.stage([h.name for h in live], "drain")
            result = self.scheduler.drain([h.name for h in live], reason)
            for h in live:
                if h.name in result.unknown:  # not in the scheduler: it runs no jobs
                    h.warnings.append(f"{self.scheduler.name}: {result.errors[h.name]}")
            self.fail({n: f"{self.scheduler.name} drain: {why}"
                       for n, why in result.errors.items() if n not in result.unknown}, "drain")
            self.wait_drained([h for h in live if not h.result and h.name in result.ok])
        apply(self.netbox, [Transition(h.host.netbox_id, f"{_header(self.options, self.run_id)}:"
                                       f" out of service {what} ({reason})",
                                       kind="warning", status=status, stage=stage)
                            for h in live if not h.result])

    def wait_drained(self, hosts: list[HostRun]) -> None:
        """Jobs still running on a draining host finish first; re-imaging waits for them."""
        assert self.scheduler is not None
        deadline = time.monotonic() + self.options.drain_timeout
        waiting = {h.name for h in hosts}
        while waiting:
            states = self.scheduler.state(sorted(waiting))
            waiting = {n for n in waiting if not is_drained(states.get(n, ""))}
            if not waiting or time.monotonic() > deadline:
                break
            self.progress.beat()
            time.sleep(DRAIN_POLL)
        self.fail({n: f"{self.scheduler.name}: jobs still running after "
                      f"{self.options.drain_timeout:.0f} s of draining; re-run when they ended"
                   for n in waiting}, "drain")

    def enter(self, stage: str) -> list[HostRun]:
        """The hosts that go through `stage` now, marked as having reached it."""
        live = self.live(stage)
        if live:
            self.progress.stage([h.name for h in live], stage)
        for h in live:
            h.reached = stage
        self.stage_started = time.monotonic()
        return live

    def timed(self, live: list[HostRun], stage: str) -> None:
        """The stage's time on each host that went through it (a rack's hosts go through a
        stage together, so each has the batch's time), for the report."""
        seconds = round(time.monotonic() - self.stage_started, 1)
        for h in live:
            h.timings[stage] = seconds

    def completed(self, live: list[HostRun], stage: str, what: str) -> None:
        apply(self.netbox, [Transition(h.host.netbox_id,
                                       f"{_header(self.options, self.run_id)}: {what}",
                                       stage=COMPLETED[stage])
                            for h in live if not h.result])

    def run_image(self) -> None:
        live = self.enter(IMAGE)
        if not live:
            return
        if self.image is None:
            raise RackliftError("the image stage is not available here: pass --no-image")
        outcome = self.image(self.netbox, [h.host for h in live], self.run_dir, self.progress)
        # The rack's later stages reach each imaged host with the host key it was given alone.
        if imaged := [h.name for h in live if h.name in outcome and not outcome[h.name]]:
            self.extravars = {**self.extravars, **host_keys.extravars(self.run_dir, imaged)}
        self.timed(live, IMAGE)
        self.fail({n: why for n, why in outcome.items() if why}, IMAGE)
        self.completed(live, IMAGE, "imaged")

    def run_configure(self) -> None:
        live = self.enter(CONFIGURE)
        if not live:
            return
        names = [h.name for h in live]
        result = run_playbook("configure.yml", names, self.netbox.settings,
                              artifacts=self.run_dir / "ansible", ident=f"configure-{self.ident}",
                              extravars=self.extravars, on_event=self.progress.event)
        self.timed(live, CONFIGURE)
        failures = dict(result.failed)
        for name in names:
            if name not in failures and name not in result.ok:
                # Aborted by the batch's max-fail percentage, or never reached.
                failures[name] = ("not configured: the rack's batch stopped (too many hosts "
                                  "failed; see the others' errors)")
        self.fail(failures, CONFIGURE)
        self.completed(live, CONFIGURE, "configured")

    def run_verify(self) -> None:
        live = self.enter(VERIFY)
        if not live:
            return
        # The gate judges hosts as NetBox has them now: staged.
        hosts = [replace(h.host, status="staged") for h in live]
        # Where acceptance tests follow (the context asks for them, --no-accept was not
        # given), passing verify leaves the host staged, its stage verified.
        verdicts = gate(self.netbox, hosts, self.run_dir, run=self.run_id,
                        ident=f"collect-{self.ident}",
                        admit=lambda h: not (self.options.accept and asks_acceptance(h)),
                        progress=self.progress.note, on_event=self.progress.event,
                        extravars=self.extravars)
        self.timed(live, VERIFY)
        skipped: list[HostRun] = []
        for h, verdict in zip(live, verdicts, strict=True):
            h.verdict = verdict
            if verdict.held:
                # NetBox was not written (the status moved, the lock was broken or taken):
                # nothing is admitted that NetBox does not say is active; a re-run resumes.
                h.result, h.error = INTERRUPTED, f"not recorded in NetBox: {verdict.held}"
                self.progress.failed(h.name, VERIFY, h.error)
            elif verdict.passed:
                if verdict.admit:
                    h.result = JOINED
                    if not self.options.accept and asks_acceptance(h.host):
                        skipped.append(h)
            else:
                h.result, h.error = FAILED, "; ".join(verdict.failures) or "no checks ran"
                self.progress.failed(h.name, VERIFY, h.error)
        for h in skipped:
            h.warnings.append("acceptance tests skipped (--no-accept)")
        apply(self.netbox, [Transition(
            h.host.netbox_id, f"{_header(self.options, self.run_id)}: acceptance tests skipped "
            "(--no-accept): admitted on verify alone", "warning") for h in skipped])

    def run_accept(self) -> None:
        live = self.enter(ACCEPT)
        if not live:
            return
        partners = self.partners(live) if self.options.pair_with_active else []
        results = accept(self.netbox, [h.host for h in live], self.run_dir, partners=partners,
                         ident=f"accept-{self.ident}", progress=self.progress.note,
                         on_event=self.progress.event, extravars=self.extravars)
        self.timed(live, ACCEPT)
        now = datetime.now(UTC).isoformat(timespec="seconds")
        header = _header(self.options, self.run_id)
        transitions = []
        for h in live:
            got = h.acceptance = results[h.name]
            summary = got.summary()
            if got.passed:
                h.result = JOINED
                transitions.append(Transition(
                    h.host.netbox_id, journal_line(f"{header}: acceptance passed: {summary}"),
                    "success", status="active",
                    fields={VERIFIED_FIELD: now, ACCEPTANCE_FIELD: summary},
                    result=got.result(self.run_id)))
            else:
                h.fail(ACCEPT, "; ".join(got.failures))
                self.progress.failed(h.name, ACCEPT, h.error or "")
                transitions.append(Transition(
                    h.host.netbox_id, "\n".join(map(journal_line, [
                        f"{header}: acceptance failed: {summary}",
                        *(f"- {line}" for line in got.failures)])),
                    "danger", status="failed", fields={ACCEPTANCE_FIELD: summary},
                    result=got.result(self.run_id)))
        apply(self.netbox, transitions)

    def partners(self, live: list[HostRun]) -> list[ExpectedHost]:
        """Active hosts of the same sites: known-good ends for the RDMA pairs."""
        taken = {h.name for h in live}
        sites = tuple(sorted({h.host.site for h in live}))
        return [h for h in read_hosts(self.netbox, Selection(sites=sites, statuses=("active",),
                                                             roles=("gpu-server",)))
                if h.name not in taken and h.address]

    def go(self, site_lock: threading.Lock) -> None:
        """Every stage asked for; `site_lock` held while this rack uses what its site's racks
        share."""
        self.start()
        with self.shared(site_lock, IMAGE, bool(self.live(IMAGE))):
            self.run_image()
        self.run_configure()
        self.run_verify()
        with self.shared(site_lock, ACCEPT,
                         self.options.pair_with_active and bool(self.live(ACCEPT))):
            self.run_accept()
        self.join()
        for h in self.runs:
            if not h.result:  # went through every stage asked for (--until)
                h.result = STAGED

    @contextmanager
    def shared(self, site_lock: threading.Lock, stage: str, needed: bool) -> Iterator[None]:
        """The site's shared resources for `stage`, waiting (and saying so) while another rack
        of the site holds them."""
        if not needed:
            yield
            return
        if not site_lock.acquire(blocking=False):
            self.progress.note(f"rack {self.rack}: {stage} waits for another rack of site "
                               f"{self.site} ({SHARED[stage]})")
            site_lock.acquire()
        try:
            yield
        finally:
            site_lock.release()

    def join(self) -> None:
        joined = [h for h in self.runs if h.result == JOINED]
        if not joined or self.scheduler is None:
            return
        started = time.monotonic()
        result = self.scheduler.resume([h.name for h in joined],
                                       f"racklift {self.options.verb} run {self.run_id}: passed")
        for h in joined:
            h.reached = "join"
            h.timings["join"] = round(time.monotonic() - started, 1)
            if h.name in result.errors:
                h.warnings.append(f"{self.scheduler.name} resume: {result.errors[h.name]}")


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
    # Shared by a site's racks: its boot servers (their DHCP configuration lists the hosts
    # being deployed) and, with --pair-with-active, its active hosts as RDMA partners.
    site_locks = {h.host.site: threading.Lock() for h in mine}

    # Among several racks, each says when it starts and how it ended (stopped ones too).
    announce = len(groups) > 1

    def one(group: list[HostRun]) -> None:
        started = time.monotonic()
        batch = _Batch(netbox, group, options, run_id, run_dir, progress, scheduler, image,
                       extravars)
        if announce:
            progress.note(f"rack {batch.rack} ({batch.site}): started, {len(group)} hosts")
        try:
            batch.go(site_locks[batch.site])
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

    racks.run_all(groups, one, site_of=lambda g: g[0].host.site, limits=options.limits,
                  name_of=lambda g: g[0].host.rack or "no-rack")


def _rack_key(h: HostRun) -> tuple[str, str]:
    return h.host.site, h.host.rack or ""
