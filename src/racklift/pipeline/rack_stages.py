"""One rack's hosts through the stages asked for, one Ansible job per stage: `run_rack` takes
the hosts (out of service first where the verb asks), runs each stage's runner in pipeline
order (`run_image`, `run_configure`, `run_verify`, `run_accept`) and resumes the hosts that
joined in the scheduler. Each runner takes the rack's `RackBatch` and records what the stage did
through its `RackRecord`; a host that fails a stage goes no further, the others go on."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from racklift.ansible import PlaybookResult, run_playbook
from racklift.errors import RackliftError
from racklift.imaging import host_keys
from racklift.lifecycle.stages import ACCEPT, CONFIGURE, IMAGE, VERIFY
from racklift.lifecycle.state import ACCEPTANCE_FIELD, KEEP, VERIFIED_FIELD, Transition, apply
from racklift.netbox.client import NetBox
from racklift.netbox.expected import ExpectedHost
from racklift.netbox.reader import Selection, read_hosts
from racklift.pipeline.accept_stage import accept
from racklift.pipeline.boot_server_hosts import BootServerHosts
from racklift.pipeline.drain import take_out_of_service
from racklift.pipeline.outcome import FAILED, INTERRUPTED, JOINED, STAGED, HostRun
from racklift.pipeline.plan import ACCEPT_ONLY, REIMAGE, Options
from racklift.pipeline.progress import Progress
from racklift.pipeline.rack_record import RackRecord
from racklift.pipeline.scheduler import Scheduler
from racklift.pipeline.site_share import SiteShare
from racklift.text import journal_line
from racklift.verify.acceptance import asks_acceptance
from racklift.verify.gate import gate
from racklift.verify.reach import Reached


class ImageStage(Protocol):
    """The image stage (racklift.pipeline.image_stage.image_hosts): host name → error, None
    when imaged; `boot_servers`: what the site's boot servers deploy for its other racks."""

    def __call__(self, netbox: NetBox, hosts: list[ExpectedHost], run_dir: Path,
                 progress: Progress, *, boot_servers: BootServerHosts,
                 ) -> Mapping[str, str | None]: ...


@dataclass
class RackBatch:
    """One rack's hosts in a run and what its stages need."""

    netbox: NetBox
    hosts: list[HostRun]
    options: Options
    run_id: str
    run_dir: Path
    progress: Progress
    # Every Ansible job of the rack gets these; a stage may change them for the stages after it.
    extravars: Mapping[str, Any]
    record: RackRecord = field(init=False)
    # How its hosts are reached (and their roles), asked once for configure, verify and
    # acceptance.
    reached: Reached = field(default_factory=Reached)

    def __post_init__(self) -> None:
        self.record = RackRecord(self.netbox, self.hosts, self.options.verb, self.run_id,
                                 self.progress)

    @property
    def rack(self) -> str:
        return self.hosts[0].host.rack or "no-rack"

    @property
    def site(self) -> str:
        return self.hosts[0].host.site

    @property
    def ident(self) -> str:
        """The rack's name in artifact directories: racks run at once, and rack names repeat
        across sites."""
        return f"{self.site}-{self.rack}"


def run_rack(batch: RackBatch, share: SiteShare, scheduler: Scheduler | None,
             image_stage: ImageStage | None) -> None:
    """Every stage asked for; the site's `share` held while this rack uses what its site's
    racks share."""
    take_hosts(batch, scheduler)
    record = batch.record
    run_image(batch, image_stage, share.boot_servers)
    run_configure(batch)
    run_verify(batch)
    with share.partners(batch.rack, batch.progress,
                        needed=batch.options.pair_with_active and bool(record.due(ACCEPT))):
        run_accept(batch)
    resume_joined(batch, scheduler)
    for h in batch.hosts:
        if not h.result:  # went through every stage asked for (--until)
            h.result = STAGED


def take_hosts(batch: RackBatch, scheduler: Scheduler | None) -> None:
    """The run starts on the rack's hosts: out of service where the verb asks (re-imaging;
    pool hosts taken for acceptance tests), then staged."""
    record, options = batch.record, batch.options
    going = record.going()
    if options.verb == REIMAGE:
        take_out_of_service(record, scheduler, options, going)
        going = [h for h in going if not h.result]
    elif options.verb == ACCEPT_ONLY:
        # Pool hosts taken with --force: out of the scheduler before the load runs.
        take_out_of_service(record, scheduler, options,
                            [h for h in going if h.host.status == "active"],
                            "for acceptance tests", status=None, stage=KEEP)
        going = [h for h in going if not h.result]
    record.started(going)


def run_image(batch: RackBatch, image_stage: ImageStage | None,
              boot_servers: BootServerHosts) -> None:
    """`boot_servers`: what the site's boot servers deploy for its other racks."""
    entered = batch.record.enter(IMAGE)
    if not entered:
        return
    if image_stage is None:
        raise RackliftError("the image stage is not available here: pass --no-image")
    outcome = image_stage(batch.netbox, [h.host for h in entered], batch.run_dir, batch.progress,
                          boot_servers=boot_servers)
    # The rack's later stages reach each imaged host with the host key it was given alone.
    if imaged := [h.name for h in entered if h.name in outcome and not outcome[h.name]]:
        batch.extravars = {**batch.extravars, **host_keys.extravars(batch.run_dir, imaged)}
    batch.record.timed(entered, IMAGE)
    batch.record.fail({n: why for n, why in outcome.items() if why}, IMAGE)
    batch.record.completed(entered, IMAGE, "imaged")


def run_configure(batch: RackBatch) -> None:
    entered = batch.record.enter(CONFIGURE)
    if not entered:
        return
    names = [h.name for h in entered]
    # A host the inventory gives no roles has nothing to configure: no Ansible run for it (the
    # lab's simulated hosts; a site whose image holds all it needs). Asked once for the batch:
    # verify and acceptance reach the hosts with the same answer.
    entries = batch.reached.get(names, batch.netbox.settings, batch.extravars)
    busy = [n for n in names if entries[n].get("roles") != []]
    if len(busy) < len(names):
        batch.progress.note(f"{len(names) - len(busy)} hosts get no roles "
                            "(racklift_roles is empty): nothing to configure on them")
    result = (run_playbook("configure.yml", busy, batch.netbox.settings,
                           artifacts=batch.run_dir / "ansible", ident=f"configure-{batch.ident}",
                           extravars=batch.extravars, on_event=batch.progress.event)
              if busy else PlaybookResult(0))
    batch.record.timed(entered, CONFIGURE)
    failures = dict(result.failed)
    for name in busy:
        if name not in failures and name not in result.ok:
            # Aborted by the batch's max-fail percentage, or never reached.
            failures[name] = ("not configured: the rack's batch stopped (too many hosts "
                              "failed; see the others' errors)")
    batch.record.fail(failures, CONFIGURE)
    batch.record.completed(entered, CONFIGURE, "configured")


def run_verify(batch: RackBatch) -> None:
    entered = batch.record.enter(VERIFY)
    if not entered:
        return
    # The gate judges hosts as NetBox has them now: staged.
    hosts = [replace(h.host, status="staged") for h in entered]
    # Where acceptance tests follow (the context asks for them, --no-accept was not
    # given), passing verify leaves the host staged, its stage verified.
    verdicts = gate(batch.netbox, hosts, batch.run_dir, run=batch.run_id,
                    ident=f"collect-{batch.ident}",
                    admit=lambda h: not (batch.options.accept and asks_acceptance(h)),
                    progress=batch.progress.note, on_event=batch.progress.event,
                    extravars=batch.extravars, reached=batch.reached)
    batch.record.timed(entered, VERIFY)
    skipped: list[HostRun] = []
    for h, verdict in zip(entered, verdicts, strict=True):
        h.verdict = verdict
        if verdict.held:
            # NetBox was not written (the status moved, the lock was broken or taken):
            # nothing is admitted that NetBox does not say is active; a re-run resumes.
            h.result, h.error = INTERRUPTED, f"not recorded in NetBox: {verdict.held}"
            batch.progress.failed(h.name, VERIFY, h.error)
        elif verdict.passed:
            if verdict.admit:
                h.result = JOINED
                if not batch.options.accept and asks_acceptance(h.host):
                    skipped.append(h)
        else:
            h.result, h.error = FAILED, "; ".join(verdict.failures) or "no checks ran"
            batch.progress.failed(h.name, VERIFY, h.error)
    for h in skipped:
        h.warnings.append("acceptance tests skipped (--no-accept)")
    apply(batch.netbox, [Transition(
        h.host.netbox_id, f"{batch.record.header}: acceptance tests skipped "
        "(--no-accept): admitted on verify alone", "warning") for h in skipped])


def run_accept(batch: RackBatch) -> None:
    entered = batch.record.enter(ACCEPT)
    if not entered:
        return
    partners = (active_partners(batch.netbox, entered) if batch.options.pair_with_active
                else [])
    results = accept(batch.netbox, [h.host for h in entered], batch.run_dir, partners=partners,
                     ident=f"accept-{batch.ident}", progress=batch.progress.note,
                     on_event=batch.progress.event, extravars=batch.extravars,
                     reached=batch.reached)
    batch.record.timed(entered, ACCEPT)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    header = batch.record.header
    transitions = []
    for h in entered:
        got = h.acceptance = results[h.name]
        summary = got.summary()
        if got.passed:
            h.result = JOINED
            transitions.append(Transition(
                h.host.netbox_id, journal_line(f"{header}: acceptance passed: {summary}"),
                "success", status="active",
                fields={VERIFIED_FIELD: now, ACCEPTANCE_FIELD: summary},
                result=got.result(batch.run_id)))
        else:
            h.fail(ACCEPT, "; ".join(got.failures))
            batch.progress.failed(h.name, ACCEPT, h.error or "")
            transitions.append(Transition(
                h.host.netbox_id, "\n".join(map(journal_line, [
                    f"{header}: acceptance failed: {summary}",
                    *(f"- {line}" for line in got.failures)])),
                "danger", status="failed", fields={ACCEPTANCE_FIELD: summary},
                result=got.result(batch.run_id)))
    apply(batch.netbox, transitions)


def active_partners(netbox: NetBox, entered: list[HostRun]) -> list[ExpectedHost]:
    """Active hosts of the same sites: known-good ends for the RDMA pairs."""
    taken = {h.name for h in entered}
    sites = tuple(sorted({h.host.site for h in entered}))
    return [h for h in read_hosts(netbox, Selection(sites=sites, statuses=("active",),
                                                    roles=("gpu-server",)))
            if h.name not in taken and h.address]


def resume_joined(batch: RackBatch, scheduler: Scheduler | None) -> None:
    """The join: the hosts that joined the pool back in the scheduler."""
    joined = [h for h in batch.hosts if h.result == JOINED]
    if not joined or scheduler is None:
        return
    started = time.monotonic()
    result = scheduler.resume([h.name for h in joined],
                              f"racklift {batch.options.verb} run {batch.run_id}: passed")
    for h in joined:
        h.reached = "join"
        h.timings["join"] = round(time.monotonic() - started, 1)
        if h.name in result.errors:
            h.warnings.append(f"{scheduler.name} resume: {result.errors[h.name]}")
