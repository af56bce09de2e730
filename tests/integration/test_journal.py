"""A rack's journal against the real test NetBox. NetBox refuses a NUL in a journal entry, and
a stage writes all of a rack's entries in one request: what one host said (the deploy
ramdisk's report, a module's message) must not stop the record of the others. NetBox only: no
lab hosts."""

from __future__ import annotations

import pytest

from racklift.errors import NetBoxError
from racklift.lab import hosts, seed
from racklift.lifecycle.result import RESULT_FIELD
from racklift.netbox.client import NetBox
from racklift.netbox.reader import Selection, read_hosts
from racklift.pipeline.outcome import HostRun
from racklift.pipeline.plan import PROVISION, HostPlan
from racklift.pipeline.progress import Progress
from racklift.pipeline.rack_record import RackRecord

RACK = "J01"


def journal(netbox: NetBox, device: int) -> list[str]:
    return [e["comments"] for e in netbox.get_all(
        "extras/journal-entries", {"assigned_object_type": "dcim.device",
                                   "assigned_object_id": device}, fields=("comments",))]


def test_one_hosts_nul_does_not_stop_its_racks_failures_being_recorded(empty_netbox):
    plan = hosts.plan(3, RACK)
    seed.apply(empty_netbox, plan)
    rack = read_hosts(empty_netbox, Selection(names=tuple(h.name for h in plan.hosts)))
    hostile, *others = sorted(rack, key=lambda h: h.name)
    # The threat is real: NetBox refuses the whole request for one entry's NUL.
    with pytest.raises(NetBoxError):
        empty_netbox.create("extras/journal-entries", [
            {"assigned_object_type": "dcim.device", "assigned_object_id": h.netbox_id,
             "comments": "x\x00" if h is hostile else "fine"} for h in rack])
    record = RackRecord(empty_netbox, [HostRun(h, HostPlan(), None) for h in rack], PROVISION,
                        "r1", Progress(lambda _: None))
    # Planted: one host's ramdisk reports `x<NUL>`; the others fail for reasons of their own.
    record.fail({hostile.name: "deploy report: x\x00",
                **{h.name: f"unreachable: {h.name} no route" for h in others}}, "image")
    assert journal(empty_netbox, hostile.netbox_id) == [
        "racklift provision (run r1): image failed.\n- deploy report: x\\x00"]
    for h in others:
        assert journal(empty_netbox, h.netbox_id) == [
            f"racklift provision (run r1): image failed.\n- unreachable: {h.name} no route"]
    statuses = {d["id"]: d["status"]["value"] for d in empty_netbox.get_for_ids(
        "dcim/devices", "id", [h.netbox_id for h in rack], {}, fields=("id", "status"))}
    assert statuses == {h.netbox_id: "failed" for h in rack}
    # The device's result quotes it the same way (PostgreSQL stores no NUL in JSON either).
    (device,) = empty_netbox.get_all("dcim/devices", {"id": hostile.netbox_id},
                                     fields=("custom_fields",))
    (failure,) = device["custom_fields"][RESULT_FIELD]["last"]["failures"]
    assert (failure["cause"], failure["found"]) == ("stage.image", "deploy report: x\\x00")
