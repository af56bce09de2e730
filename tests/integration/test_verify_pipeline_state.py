"""verify respects the pipeline, against the real test NetBox: a host is promoted only when
no other run holds it and its last completed stage is `configured`, and a host moved while
verify ran stays where it was moved. The gate's code is real from the NetBox selection to the
write; only the SSH collection is replaced by the support bundle the lab's emulated hardware
yields (tests/emulated.py), so these tests need no containers."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

import emulated
from helpers import without_acceptance
from racklift.facts.bundle import Bundle, Output
from racklift.lab import hosts, seed
from racklift.lifecycle import lock
from racklift.lifecycle.state import STAGE_FIELD
from racklift.netbox.expected import GPU_ROLE
from racklift.netbox.reader import Selection, read_hosts
from racklift.verify import gate as verify_gate
from racklift.verify import verdict_report
from racklift.verify.gate import gate, verify

NAME = emulated.PLAN.name
SELECT = Selection(names=(NAME,))
BOB = lock.Owner("bob", "ctl02.example", 77)


@pytest.fixture(scope="module")
def host(netbox, tmp_path_factory) -> int:
    """The emulated lab host's NetBox record (no container); its device id."""
    os.environ["RACKLIFT_RUNS"] = str(tmp_path_factory.mktemp("runs"))
    seed.apply(netbox, hosts.plan(1, emulated.PLAN.rack))
    without_acceptance(netbox, [NAME])  # but for the test that asks for it
    yield netbox.get_all("dcim/devices", {"name": NAME}, fields=("id",))[0]["id"]
    os.environ.pop("RACKLIFT_RUNS")


def healthy_bundle() -> Bundle:
    """The emulated host's support bundle, passing as NetBox records it: the seed's HGX type
    has NVSwitches, so its fabric manager runs."""
    bundle = emulated.bundle(emulated.healthy_profile())
    return replace(bundle, outputs={**bundle.outputs,
                                    "services.txt": Output("nvidia-fabricmanager\tactive\n")})


@pytest.fixture
def collected(monkeypatch):
    """Collection brings back the healthy host's bundle; the actions in the list it returns
    run meanwhile."""
    during = []

    def collect(netbox, chosen, bundle_dir, **_):
        for action in during:
            action()
        return {h.name: healthy_bundle() for h in chosen}

    monkeypatch.setattr(verify_gate, "collect", collect)
    return during


def pipeline_state(netbox, device: int, status: str, stage: str | None) -> None:
    netbox.update("dcim/devices", [{"id": device, "status": status,
                                    "custom_fields": {STAGE_FIELD: stage}}])


def status(netbox) -> str:
    return read_hosts(netbox, SELECT)[0].status


def admitted(netbox, device: int) -> datetime | None:
    """The device's racklift_verified: when the gate last admitted it."""
    value = netbox.get_all("dcim/devices", {"id": device})[0]["custom_fields"][
        "racklift_verified"]
    return datetime.fromisoformat(value) if value else None


def verify_entries(netbox, device: int) -> list[str]:
    entries = netbox.get_all("extras/journal-entries", {"assigned_object_type": "dcim.device",
                                                        "assigned_object_id": device})
    return [e["comments"] for e in sorted(entries, key=lambda e: e["id"])
            if e["comments"].startswith("racklift verify")]


def test_a_staged_host_locked_by_another_run_is_not_promoted(netbox, host, collected):
    pipeline_state(netbox, host, "staged", "configured")
    assert admitted(netbox, host) is None  # held hosts (this and the next test) stay so
    assert lock.acquire(netbox, [host], "run-bob", "provision", BOB) == {}
    before = verify_entries(netbox, host)
    lines: list[str] = []
    try:
        run = verify(netbox, SELECT, progress=lines.append)
    finally:
        lock.release(netbox, [host], "run-bob")
    v = run.verdicts[0]
    assert v.passed and v.changes == ()
    assert v.held is not None and v.held.startswith(
        "locked by bob@ctl02.example (provision run run-bob, pid 77) since ")
    assert f"{NAME}: not recorded: {v.held}" in lines
    assert verdict_report.to_json(run.verdicts, "t")["hosts"][0]["held"] == v.held
    assert status(netbox) == "staged" and verify_entries(netbox, host) == before


@pytest.mark.parametrize("stage", [None, "imaged"])
def test_a_staged_host_not_configured_is_not_promoted(netbox, host, collected, stage):
    pipeline_state(netbox, host, "staged", stage)
    before = verify_entries(netbox, host)
    run = verify(netbox, SELECT)
    assert run.verdicts[0].passed and run.verdicts[0].held == (
        f"last completed stage {stage or 'none'}, not configured: left staged until "
        "provision has configured it")
    assert status(netbox) == "staged" and verify_entries(netbox, host) == before


def test_the_same_host_configured_and_unlocked_is_promoted(netbox, host, collected):
    pipeline_state(netbox, host, "staged", "configured")
    before = verify_entries(netbox, host)
    run = verify(netbox, SELECT)
    assert run.verdicts[0].passed and run.verdicts[0].held is None
    assert run.verdicts[0].changes == ("status staged → active", "journal entry")
    assert status(netbox) == "active"
    assert verify_entries(netbox, host)[len(before):] == [
        "racklift verify: passed: the host matches NetBox and is healthy."]
    assert datetime.now(UTC) - admitted(netbox, host) < timedelta(minutes=5)


def test_where_acceptance_follows_a_passing_host_stays_staged_as_verified(netbox, host,
                                                                           collected):
    """The lab's context asks for acceptance tests: verify passes the host but does not admit
    it; a re-run writes nothing; failing afterwards sends a retry back to verify."""
    netbox.update("dcim/devices", [{"id": host, "local_context_data": None}])
    try:
        pipeline_state(netbox, host, "staged", "configured")
        run = verify(netbox, SELECT)
        assert run.verdicts[0].passed and not run.verdicts[0].admit
        assert run.verdicts[0].changes == ("journal entry",)
        device = netbox.get_all("dcim/devices", {"id": host})[0]
        assert (device["status"]["value"], device["custom_fields"][STAGE_FIELD]) == (
            "staged", "verified")
        assert verify_entries(netbox, host)[-1] == (
            "racklift verify: passed: the host matches NetBox and is healthy; acceptance tests "
            "next.")
        assert verify(netbox, SELECT).verdicts[0].changes == ()
    finally:
        without_acceptance(netbox, [NAME])


def test_the_pipeline_run_holding_the_lock_promotes_its_host(netbox, host, collected,
                                                             tmp_path):
    pipeline_state(netbox, host, "staged", "configured")
    assert lock.acquire(netbox, [host], "run-mine", "provision") == {}
    try:
        verdicts = gate(netbox, read_hosts(netbox, SELECT), tmp_path, run="run-mine")
    finally:
        lock.release(netbox, [host], "run-mine")
    assert verdicts[0].passed and verdicts[0].held is None
    assert status(netbox) == "active"


def test_a_host_moved_while_verify_ran_stays_where_it_was_moved(netbox, host, collected):
    pipeline_state(netbox, host, "staged", "configured")
    # An operator takes the host out while its facts are collected.
    collected.append(lambda: netbox.update("dcim/devices", [{"id": host,
                                                             "status": "offline"}]))
    before = verify_entries(netbox, host)
    run = verify(netbox, SELECT)
    assert run.verdicts[0].passed and run.verdicts[0].held == (
        "status changed to offline since verify started: left as it is")
    assert status(netbox) == "offline" and verify_entries(netbox, host) == before


def gpu_serials(netbox, device: int) -> list[str]:
    return sorted(i["serial"] for i in netbox.get_all(
        "dcim/inventory-items", {"device_id": device, "role": GPU_ROLE}, fields=("serial",)))


def inband_cable(netbox, device: int) -> int | None:
    """The id of the cable on the host's in-band port (the lab leaf's LLDP is heard there)."""
    cable = netbox.get_all("dcim/interfaces", {"device_id": device, "name": seed.INBAND},
                           fields=("cable",))[0]["cable"]
    return cable["id"] if cable else None


@pytest.mark.parametrize("state", ["staged", "active"])
def test_what_a_host_shows_is_not_recorded_while_another_run_holds_it(netbox, host, collected,
                                                                      state):
    """--record-serials and --record-cables write only where the verdict could be written: planted,
    another run's lock (a re-image of an active host too): no serial recorded, no cable
    recorded. Freed, the same run writes both."""
    pipeline_state(netbox, host, state, "configured")
    blank = gpu_serials(netbox, host)
    assert blank and not any(blank)  # the seed records none: --record-serials would fill them
    # The in-band port's cable gone: the leaf the host hears there is --record-cables' to add.
    netbox.delete("dcim/cables", [inband_cable(netbox, host)])
    assert lock.acquire(netbox, [host], "run-bob", "provision", BOB) == {}
    lines: list[str] = []
    try:
        verify(netbox, SELECT, record_observed_serials=True, record_observed_cables=True,
               progress=lines.append)
    finally:
        lock.release(netbox, [host], "run-bob")
    assert gpu_serials(netbox, host) == blank and inband_cable(netbox, host) is None
    assert any(line.startswith(f"{NAME}: nothing observed recorded: locked by "
                               "bob@ctl02.example") for line in lines)
    assert "recorded 0 first-seen GPU serials into NetBox" in lines
    assert "recorded 0 observed cables into NetBox" in lines
    pipeline_state(netbox, host, state, "configured")
    try:
        verify(netbox, SELECT, record_observed_serials=True, record_observed_cables=True)
        assert all(gpu_serials(netbox, host)) and inband_cable(netbox, host) is not None
    finally:  # the module's other tests start from the seed's blanks
        netbox.update("dcim/inventory-items", [
            {"id": i["id"], "serial": ""} for i in netbox.get_all(
                "dcim/inventory-items", {"device_id": host, "role": GPU_ROLE}, fields=("id",))])
