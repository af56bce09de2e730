"""What a rack's hosts are recorded as while they go through a run's stages, for the whole rack
at once: each host's HostRun (the run's report), the terminal's progress and NetBox (journal,
status, completed stage) as hosts start the run, enter a stage, complete it or fail it."""

from __future__ import annotations

import time
from collections.abc import Mapping

from racklift.lifecycle.result import of_stage_failure
from racklift.lifecycle.stages import ACCEPT, COMPLETED, IMAGE, VERIFY
from racklift.lifecycle.state import KEEP, Transition, apply
from racklift.netbox.client import NetBox
from racklift.pipeline.outcome import HostRun
from racklift.pipeline.progress import Progress
from racklift.text import journal_line


def failure_transitions(ids: Mapping[str, int], failures: Mapping[str, str], header: str,
                        stage: str, run: str | None = None) -> list[Transition]:
    """Each failed host's entry: `failed`, the journal quoting why on one line, the device's
    result naming the stage. The reason may be the deploy ramdisk's report or a module's
    message, any characters at any length."""
    return [Transition(ids[name], f"{header}: {stage} failed.\n{journal_line(f'- {why}')}",
                       kind="danger", status="failed",
                       result=of_stage_failure(stage, why, run))
            for name, why in failures.items()]


class RackRecord:
    """One rack's hosts in one run, and the record of what happens to them."""

    def __init__(self, netbox: NetBox, hosts: list[HostRun], verb: str, run_id: str,
                 progress: Progress) -> None:
        self.netbox, self.hosts, self.run_id, self.progress = netbox, hosts, run_id, progress
        self.header = f"racklift {verb} (run {run_id})"  # how each journal entry starts
        self.stage_started = time.monotonic()

    def going(self) -> list[HostRun]:
        """The hosts that have not ended the run (failed, interrupted, joined)."""
        return [h for h in self.hosts if not h.result]

    def due(self, stage: str) -> list[HostRun]:
        """The hosts still going whose plan has `stage`."""
        return [h for h in self.going() if stage in h.plan.stages]

    def started(self, hosts: list[HostRun]) -> None:
        """Each host staged for the stages it goes through. A pass that images it starts
        over (no completed stage); acceptance alone starts from verified."""
        apply(self.netbox, [Transition(
            h.host.netbox_id, f"{self.header}: started; stages {', '.join(h.plan.stages)}",
            status="staged",
            stage=None if IMAGE in h.plan.stages else COMPLETED[VERIFY]
            if h.plan.stages == (ACCEPT,) else KEEP) for h in hosts])

    def enter(self, stage: str) -> list[HostRun]:
        """The hosts that go through `stage` now, marked as having reached it."""
        entered = self.due(stage)
        if entered:
            self.progress.stage([h.name for h in entered], stage)
        for h in entered:
            h.reached = stage
        self.stage_started = time.monotonic()
        return entered

    def timed(self, entered: list[HostRun], stage: str) -> None:
        """The stage's time on each host that went through it (a rack's hosts go through a
        stage together, so each has the batch's time), for the report."""
        seconds = round(time.monotonic() - self.stage_started, 1)
        for h in entered:
            h.timings[stage] = seconds

    def completed(self, entered: list[HostRun], stage: str, what: str) -> None:
        """`stage` recorded as completed on the hosts that went through it and did not fail."""
        apply(self.netbox, [Transition(h.host.netbox_id, f"{self.header}: {what}",
                                       stage=COMPLETED[stage])
                            for h in entered if not h.result])

    def fail(self, failures: Mapping[str, str], stage: str) -> None:
        """Each named host failed `stage` for the reason given: its run ends there."""
        by_name = {h.name: h for h in self.hosts}
        for name, why in failures.items():
            by_name[name].fail(stage, why)
            self.progress.failed(name, stage, why)
        apply(self.netbox, failure_transitions(
            {name: h.host.netbox_id for name, h in by_name.items()}, failures, self.header,
            stage, self.run_id))
