"""Which stages each host goes through in a run: pure, from its NetBox status, the stage it
last completed (custom field `racklift_stage`) and the operator's options."""

from __future__ import annotations

from dataclasses import dataclass

# Stages in pipeline order. preflight and join always run for a host that is worked on.
IMAGE, CONFIGURE, VERIFY = "image", "configure", "verify"
STAGES = (IMAGE, CONFIGURE, VERIFY)
# What `racklift_stage` says a host completed; cleared when a new pass starts from imaging.
COMPLETED = {IMAGE: "imaged", CONFIGURE: "configured"}
PROVISION, REIMAGE = "provision", "reimage"


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


@dataclass(frozen=True)
class HostPlan:
    stages: tuple[str, ...] = ()
    skip: str | None = None  # why the host is left alone


def _remaining(completed: str | None, image: bool, from_scratch: bool) -> tuple[str, ...]:
    stages = [s for s in STAGES if image or s != IMAGE]
    if from_scratch or completed is None:
        return tuple(stages)
    done = [s for s, mark in COMPLETED.items() if mark == completed]
    if not done:  # an unknown mark: trust nothing
        return tuple(stages)
    return tuple(stages[stages.index(done[0]) + 1:]) if done[0] in stages else tuple(stages)


def plan_host(status: str, completed: str | None, options: Options) -> HostPlan:
    plan = _plan(status, completed, options)
    if options.until and plan.stages:
        cut = STAGES[:STAGES.index(options.until) + 1]
        plan = HostPlan(tuple(s for s in plan.stages if s in cut))
        if not plan.stages:
            return HostPlan(skip=f"already past {options.until}")
    return plan


def _plan(status: str, completed: str | None, options: Options) -> HostPlan:
    if options.verb == REIMAGE:
        if status == "active" and not options.force:
            return HostPlan(skip="active (in the pool): pass --force to re-image it; it is "
                                 "drained from the scheduler first when a hook is configured")
        return HostPlan(_remaining(None, options.image, from_scratch=True))
    if status == "active":
        return HostPlan(skip="active: provision never touches hosts in the pool (use "
                             "`reimage --force` to rebuild one, `verify` to check them)")
    if status == "failed" and not options.retry_failed:
        return HostPlan(skip="failed: pass --retry-failed to provision it again (its NetBox "
                             "journal says why it failed)")
    if status == "planned":
        return HostPlan(_remaining(None, options.image, from_scratch=True))
    if status in ("staged", "failed"):
        # Resume: continue after the last stage this host completed.
        return HostPlan(_remaining(completed, options.image, from_scratch=options.reimage))
    return HostPlan(skip=f"status {status}: provision takes planned hosts, staged ones (to "
                         "resume) and failed ones with --retry-failed")
