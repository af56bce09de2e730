"""Recording the gate's verdicts in NetBox, through the host's lifecycle (racklift.lifecycle):
`active` only when everything passes (or, where acceptance tests follow, `staged` with the
stage `verified`); otherwise `failed` and one journal entry listing every mismatch and failed
check. Re-running with nothing changed writes nothing. A host the pipeline has not handed over
(locked by another run, or not configured) or whose status moved while verify ran is reported
only. The verdicts themselves are judged in verdict.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from racklift.lifecycle import lock
from racklift.lifecycle.result import of_verdict
from racklift.lifecycle.stages import COMPLETED, CONFIGURE, VERIFY
from racklift.lifecycle.state import KEEP, VERIFIED_FIELD, Transition, apply, read_stages
from racklift.netbox.client import NetBox
from racklift.verify.failures import verdict_failures
from racklift.verify.verdict import GATED, JOURNAL_HEADER, HostVerdict, journal_text, target_status

CONFIGURED = COMPLETED[CONFIGURE]  # the stage after which the pipeline hands a host to the gate
VERIFIED_STAGE = COMPLETED[VERIFY]  # passed the gate; acceptance tests next


def recorded(verdict: HostVerdict, mark_active_failed: bool = False) -> bool:
    """Whether `record` writes this verdict at all: `staged` and `failed` hosts are gated;
    `active` ones only get a drift report unless `mark_active_failed` (then a failing one is
    marked `failed`); any other status (planned, offline, ...) is not in the pipeline."""
    if verdict.status == "active":
        return mark_active_failed and not verdict.passed
    return verdict.status in GATED


@dataclass(frozen=True)
class InNetBox:
    """A host as NetBox has it right before its verdict is written."""

    status: str | None  # None: the device is gone
    stage: str | None  # racklift_stage: the last pipeline stage it completed
    holder: lock.Ticket | None  # the run that holds its lock


def hold(verdict: HostVerdict, now: InNetBox, *, run: str | None = None,
         mark_active_failed: bool = False) -> str | None:
    """Why the verdict must not be written to NetBox now; None: `record` may write it.

    `run` is the pipeline run calling the gate: its own lock is no reason to hold. A host held
    is left entirely as it is, a failing one too: a host that a run holds or that was never
    configured is half-built, failing is expected there, and `failed` would make the next
    `provision` skip it; its verdict is still reported."""
    if not recorded(verdict, mark_active_failed):
        return None
    return busy(verdict, now, run=run)


def busy(verdict: HostVerdict, now: InNetBox, *, run: str | None = None) -> str | None:
    """Why nothing at all may be written for the host now, whatever its status: the verdict,
    or what `verify --record-serials` and `--record-cables` would record of it."""
    if now.status != verdict.status:
        # Someone else moved it while the facts were collected: their change wins.
        return (f"status changed to {now.status} since verify started: left as it is"
                if now.status else "no longer in NetBox")
    if now.holder is not None and now.holder.run != run:
        return f"{now.holder.describe()}: left to that run"
    if verdict.status in GATED and now.stage not in (CONFIGURED, VERIFIED_STAGE):
        return (f"last completed stage {now.stage or 'none'}, not {CONFIGURED}: left "
                f"{verdict.status} until provision has configured it")
    return None


def read_now(netbox: NetBox, ids: Iterable[int]) -> dict[int, InNetBox]:
    """The hosts as NetBox has them now: status, last stage, lock."""
    ids = list(ids)
    if not ids:
        return {}
    holders = lock.current(netbox, ids)
    stages = read_stages(netbox, ids)
    statuses = {row["id"]: row["status"]["value"] for row in netbox.get_for_ids(
        "dcim/devices", "id", ids, {}, fields=("id", "status"))}
    return {i: InNetBox(statuses.get(i), stages.get(i), holders.get(i)) for i in ids}


def with_holds(verdicts: Iterable[HostVerdict], now: Mapping[int, InNetBox], *,
               run: str | None = None, mark_active_failed: bool = False) -> list[HostVerdict]:
    """The verdicts with why each must not be written (see `hold`), from NetBox as `now`
    (read_now) has it; a verdict `record` writes must be in it."""
    return [replace(v, held=hold(v, now[v.netbox_id], run=run,
                                 mark_active_failed=mark_active_failed))
            if recorded(v, mark_active_failed) else v for v in verdicts]


def record(netbox: NetBox, verdicts: Iterable[HostVerdict], *,
           mark_active_failed: bool = False, run: str | None = None) -> list[HostVerdict]:
    """Write each verdict to NetBox: status and a journal entry, unless both already say it;
    with them, the verdict in the device's `racklift_result` field, naming `run`.

    Verdicts that are not `recorded` or are `held` are only reported on. Returns the verdicts
    with what was written.
    """
    verdicts = list(verdicts)
    last = _last_journal(netbox, [v.netbox_id for v in verdicts])
    now = datetime.now(UTC).isoformat(timespec="seconds")
    transitions: list[Transition] = []
    written = []
    for v in verdicts:
        if v.held or not recorded(v, mark_active_failed):
            written.append(v)
            continue
        target = target_status(v)
        text = journal_text(v)
        changes: list[str] = []
        if v.status != target:
            changes.append(f"status {v.status} → {target}")
        if v.status != target or last.get(v.netbox_id) != text:
            admitted = v.passed and v.admit
            transitions.append(Transition(
                v.netbox_id, text, "success" if v.passed else "danger",
                status=target if v.status != target else None,
                # A gated host failing (its stage configured or verified): a retry starts at
                # verify again, not at acceptance.
                stage=(VERIFIED_STAGE if v.passed and not v.admit
                       else CONFIGURED if not v.passed and v.status in GATED else KEEP),
                fields={VERIFIED_FIELD: now} if admitted else {},
                result=_result(v, run)))
            changes.append("journal entry")
        written.append(replace(v, changes=tuple(changes)))
    # Journal first (state.apply): if the status update then fails, the re-run sees the status
    # unchanged and writes both again, so no verdict is ever recorded without its reasons.
    apply(netbox, transitions)
    return written


def _result(verdict: HostVerdict, run: str | None) -> dict[str, Any]:
    """The verdict's sections of the device's `racklift_result` field."""
    data = verdict.to_dict()
    return of_verdict(data, verdict_failures(data) if data["failed"] else [], run)


def _last_journal(netbox: NetBox, device_ids: list[int]) -> dict[int, str]:
    """The newest racklift verify journal text of each device."""
    entries = netbox.get_for_ids("extras/journal-entries", "assigned_object_id", device_ids,
                                 {"assigned_object_type": "dcim.device"},
                                 fields=("id", "assigned_object_id", "comments", "created"))
    newest: dict[int, dict[str, Any]] = {}
    for entry in entries:
        if not entry["comments"].startswith(JOURNAL_HEADER):
            continue
        current = newest.get(entry["assigned_object_id"])
        if current is None or (entry["created"], entry["id"]) > (current["created"],
                                                                  current["id"]):
            newest[entry["assigned_object_id"]] = entry
    return {device: entry["comments"] for device, entry in newest.items()}
