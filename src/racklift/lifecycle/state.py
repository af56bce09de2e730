"""A host's place in its lifecycle, in NetBox: its status, the stage it last completed
(custom field `racklift_stage`), racklift's other fields (the image marker, when the gate last
admitted it, its acceptance figures, its result) and a journal entry for every transition. The
one writer of all of it: the pipeline, the gate's verdicts and the lock's audit trail hand it
transitions.

Journal first, then the device: if the device update then fails, the journal already says
what was attempted, and the re-run sees the old status and does the transition again."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from racklift.lifecycle.result import RESULT_FIELD, merged
from racklift.netbox.client import NetBox
from racklift.text import journal, recorded

# racklift's custom fields on a device (netbox/bootstrap.py creates them), besides
# RESULT_FIELD (result.py).
STAGE_FIELD = "racklift_stage"  # the stage it last completed (stages.COMPLETED)
IMAGE_FIELD = "racklift_image"  # the image it was installed with
VERIFIED_FIELD = "racklift_verified"  # when the gate last admitted it
ACCEPTANCE_FIELD = "racklift_acceptance"  # its last acceptance summary
KEEP = object()  # a Transition field left as it is


@dataclass(frozen=True)
class Transition:
    netbox_id: int
    journal: str | None  # None: no entry (a field whose change another entry explains)
    kind: str = "info"  # journal kind: info, success, warning, danger
    status: str | None = None  # None: unchanged
    stage: Any = KEEP  # str, None (cleared) or KEEP
    fields: Mapping[str, Any] = field(default_factory=dict)  # other racklift custom fields
    # Sections of the `racklift_result` field this transition replaces (result.py); the
    # field's other sections are kept.
    result: Mapping[str, Any] | None = None


def read_stages(netbox: NetBox, device_ids: Iterable[int]) -> dict[int, str | None]:
    rows = netbox.get_for_ids("dcim/devices", "id", list(device_ids), {},
                              fields=("id", "custom_fields"))
    return {row["id"]: (row.get("custom_fields") or {}).get(STAGE_FIELD) or None
            for row in rows}


def apply(netbox: NetBox, transitions: Iterable[Transition]) -> None:
    transitions = list(transitions)
    if not transitions:
        return
    netbox.create("extras/journal-entries", [
        {"assigned_object_type": "dcim.device", "assigned_object_id": t.netbox_id,
         # Every entry's text made printable here, whoever built it: one NUL would make NetBox
         # refuse every entry of the request.
         "kind": t.kind, "comments": journal(t.journal)}
        for t in transitions if t.journal is not None])
    results = _read_results(netbox, [t.netbox_id for t in transitions if t.result])
    updates = []
    for t in transitions:
        change: dict[str, Any] = {}
        if t.status is not None:
            change["status"] = t.status
        fields = {**t.fields, **({} if t.stage is KEEP else {STAGE_FIELD: t.stage})}
        if t.result:
            # Printable like the journal, whoever built it: one host's NUL would make NetBox
            # refuse the whole rack's update.
            fields[RESULT_FIELD] = results[t.netbox_id] = recorded(
                merged(results.get(t.netbox_id), t.result))
        if fields:
            change["custom_fields"] = fields
        if change:
            updates.append({"id": t.netbox_id, **change})
    netbox.update("dcim/devices", updates)


def _read_results(netbox: NetBox, device_ids: list[int]) -> dict[int, Any]:
    """The devices' racklift_result as NetBox has it (the sections a transition keeps)."""
    if not device_ids:
        return {}
    rows = netbox.get_for_ids("dcim/devices", "id", device_ids, {},
                              fields=("id", "custom_fields"))
    return {row["id"]: (row.get("custom_fields") or {}).get(RESULT_FIELD) for row in rows}
