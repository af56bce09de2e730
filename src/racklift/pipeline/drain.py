"""A rack's hosts out of service before racklift works on them: the workload scheduler
(racklift.pipeline.scheduler) drains them, the jobs still running on them end first, and NetBox
records them out of service. A host the scheduler could not drain, or whose jobs outlast
--drain-timeout, fails the `drain` stage; one the scheduler does not know runs no jobs and
goes on with a warning."""

from __future__ import annotations

import time

from racklift.lifecycle.state import Transition, apply
from racklift.pipeline.outcome import HostRun
from racklift.pipeline.plan import Options
from racklift.pipeline.rack_record import RackRecord
from racklift.pipeline.scheduler import Scheduler, is_drained

DRAIN_POLL = 5.0  # seconds between scheduler state reads while hosts drain


def take_out_of_service(record: RackRecord, scheduler: Scheduler | None, options: Options,
                        hosts: list[HostRun], what: str = "for re-imaging",
                        status: str | None = "offline", stage: object = None) -> None:
    """Out of the scheduler and, in NetBox, out of service `what` for (status and stage:
    what the host is set to; None and KEEP leave them)."""
    reason = f"racklift {options.verb}: {options.reason or 'no reason given'}"
    if scheduler is not None and hosts:
        record.progress.stage([h.name for h in hosts], "drain")
        result = scheduler.drain([h.name for h in hosts], reason)
        for h in hosts:
            if h.name in result.unknown:  # not in the scheduler: it runs no jobs
                h.warnings.append(f"{scheduler.name}: {result.errors[h.name]}")
        record.fail({n: f"{scheduler.name} drain: {why}"
                     for n, why in result.errors.items() if n not in result.unknown}, "drain")
        wait_drained(record, scheduler, options.drain_timeout,
                     [h for h in hosts if not h.result and h.name in result.ok])
    apply(record.netbox, [Transition(h.host.netbox_id,
                                     f"{record.header}: out of service {what} ({reason})",
                                     kind="warning", status=status, stage=stage)
                          for h in hosts if not h.result])


def wait_drained(record: RackRecord, scheduler: Scheduler, timeout: float,
                 hosts: list[HostRun]) -> None:
    """Jobs still running on a draining host finish first; re-imaging waits for them."""
    deadline = time.monotonic() + timeout
    waiting = {h.name for h in hosts}
    while waiting:
        states = scheduler.state(sorted(waiting))
        waiting = {n for n in waiting if not is_drained(states.get(n, ""))}
        if not waiting or time.monotonic() > deadline:
            break
        record.progress.beat()
        time.sleep(DRAIN_POLL)
    record.fail({n: f"{scheduler.name}: jobs still running after {timeout:.0f} s of "
                    "draining; re-run when they ended" for n in waiting}, "drain")
