"""Which stages each host goes through in a run: pure, from its NetBox status, the stage it
last completed (custom field `racklift_stage`) and the operator's options. The stages
themselves are the lifecycle's (racklift.lifecycle.stages)."""

from __future__ import annotations

from dataclasses import dataclass, field

from racklift.lifecycle.stages import ACCEPT, COMPLETED, IMAGE, STAGES, VERIFY
from racklift.pipeline.racks import Limits

# The run's verbs (racklift provision, reimage, accept).
PROVISION, REIMAGE, ACCEPT_ONLY = "provision", "reimage", "accept"


@dataclass(frozen=True)
class Options:
    verb: str = PROVISION
    image: bool = True  # False: hosts keep the OS they run (container lab, pre-imaged hosts)
    retry_failed: bool = False  # provision: take `failed` hosts again
    reimage: bool = False  # provision: image again even where imaging finished
    force: bool = False  # reimage: also hosts that are `active` (in the pool)
    reason: str = ""  # reimage: why, for the journal and the scheduler
    drain_timeout: float = 3600.0  # reimage: how long running jobs may take to finish
    until: str | None = None  # stop after this stage (e.g. image a rack now, configure later)
    accept: bool = True  # False: admit on verify alone (--no-accept; the journal says so)
    pair_with_active: bool = False  # accept: RDMA partners may be active hosts of the site
    limits: Limits = field(default_factory=Limits)  # racks at once: in all, per site


@dataclass(frozen=True)
class HostPlan:
    stages: tuple[str, ...] = ()
    skip: str | None = None  # why the host is left alone


def _remaining(completed: str | None, options: Options,
               from_scratch: bool) -> tuple[str, ...]:
    stages = [s for s in STAGES if (options.image or s != IMAGE)
              and (options.accept or s != ACCEPT)]
    if from_scratch or completed is None:
        return tuple(stages)
    done = [s for s, mark in COMPLETED.items() if mark == completed]
    if not done:  # an unknown mark: trust nothing
        return tuple(stages)
    if done[0] not in stages:
        return tuple(stages)
    # Verified and acceptance skipped (--no-accept): verify again, and that admits it.
    return tuple(stages[stages.index(done[0]) + 1:]) or (VERIFY,)


def plan_host(status: str, completed: str | None, options: Options) -> HostPlan:
    plan = _plan(status, completed, options)
    if options.until and plan.stages:
        cut = STAGES[:STAGES.index(options.until) + 1]
        plan = HostPlan(tuple(s for s in plan.stages if s in cut))
        if not plan.stages:
            return HostPlan(skip=f"already past {options.until}")
    return plan


def _plan(status: str, completed: str | None, options: Options) -> HostPlan:
    if options.verb == ACCEPT_ONLY:
        return _plan_accept(status, completed, options)
    if options.verb == REIMAGE:
        if status == "active" and not options.force:
            return HostPlan(skip="active (in the pool): pass --force to re-image it; it is "
                                 "drained from the scheduler first when a hook is configured")
        return HostPlan(_remaining(None, options, from_scratch=True))
    if status == "active":
        return HostPlan(skip="active: provision never touches hosts in the pool (use "
                             "`reimage --force` to rebuild one, `verify` to check them)")
    if status == "failed" and not options.retry_failed:
        return HostPlan(skip="failed: pass --retry-failed to provision it again (its NetBox "
                             "journal says why it failed)")
    if status == "planned":
        return HostPlan(_remaining(None, options, from_scratch=True))
    if status in ("staged", "failed"):
        # Resume: continue after the last stage this host completed.
        return HostPlan(_remaining(completed, options, from_scratch=options.reimage))
    return HostPlan(skip=f"status {status}: provision takes planned hosts, staged ones (to "
                         "resume) and failed ones with --retry-failed")


def _plan_accept(status: str, completed: str | None, options: Options) -> HostPlan:
    """`racklift accept`: the acceptance tests alone, on hosts the gate has passed."""
    if status == "active":
        return (HostPlan((ACCEPT,)) if options.force else
                HostPlan(skip="active (in the pool): pass --force to test it again; it is "
                              "drained from the scheduler first when a hook is configured"))
    if status == "failed" and not options.retry_failed:
        return HostPlan(skip="failed: pass --retry-failed to test it again (its NetBox "
                             "journal says why it failed)")
    if status in ("staged", "failed") and completed == COMPLETED[VERIFY]:
        return HostPlan((ACCEPT,))
    return HostPlan(skip=f"status {status}, last stage {completed or 'none'}: acceptance takes "
                         "hosts verify has passed (provision takes them there)")
