"""The pipeline's lock against the real test NetBox, with the attacks planted: controllers
racing for the same hosts, a release posted by a run that holds nothing, NetBox failing
halfway through taking locks, a host changed between selection and lock, and a lock broken.
NetBox only: no lab hosts."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from racklift.errors import NetBoxError, RackliftError
from racklift.lifecycle import lock
from racklift.lifecycle.state import STAGE_FIELD
from racklift.netbox.bootstrap import bootstrap
from racklift.netbox.client import NetBox, NetBoxSettings

ALICE = lock.Owner("alice", "ctl01.example", 4242)
BOB = lock.Owner("bob", "ctl02.example", 77)
WORKERS = 6  # controllers racing for the same hosts
TRIALS = 10


@pytest.fixture(scope="module")
def hosts(netbox) -> list[int]:
    """Four planned devices, with the custom fields racklift relies on."""
    bootstrap(netbox)
    site = netbox.create("dcim/sites", [{"name": "lock-site", "slug": "lock-site"}])[0]
    maker = netbox.create("dcim/manufacturers", [{"name": "lockco", "slug": "lockco"}])[0]
    model = netbox.create("dcim/device-types", [{"manufacturer": maker["id"], "model": "L1",
                                                 "slug": "l1"}])[0]
    role = netbox.get_all("dcim/device-roles", {"slug": "gpu-server"})[0]
    devices = netbox.create("dcim/devices", [
        {"name": f"gpu-l{n:02}", "device_type": model["id"], "role": role["id"],
         "site": site["id"], "status": "planned"} for n in range(4)])
    return [d["id"] for d in devices]


@pytest.fixture(autouse=True)
def no_locks_left(netbox, hosts) -> Iterator[None]:
    """Each test starts with its hosts planned, unlocked and with an empty journal, whatever
    the one before left."""
    yield
    rows = netbox.get_all(lock.ENDPOINT, {"slug__isw": lock.NAME_PREFIX}, fields=("id",))
    netbox.delete(lock.ENDPOINT, [r["id"] for r in rows])
    entries = netbox.get_for_ids("extras/journal-entries", "assigned_object_id", hosts,
                                 {"assigned_object_type": "dcim.device"}, fields=("id",))
    netbox.delete("extras/journal-entries", [e["id"] for e in entries])
    netbox.update("dcim/devices", [{"id": d, "status": "planned",
                                    "custom_fields": {STAGE_FIELD: None}} for d in hosts])


def holders(netbox: NetBox, ids: list[int]) -> dict[int, str]:
    return {device: t.run for device, t in lock.current(netbox, ids).items()}


def audit(netbox: NetBox, device: int) -> list[str]:
    """The host's lock journal entries, first line each, oldest first."""
    entries = netbox.get_all("extras/journal-entries", {"assigned_object_type": "dcim.device",
                                                        "assigned_object_id": device})
    return [e["comments"].split("\n")[0] for e in sorted(entries, key=lambda e: e["id"])
            if e["comments"].startswith(lock.PREFIX)]


# -- racing controllers ----------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _start_worker(settings: NetBoxSettings, barrier: Any) -> None:
    _WORKER.update(netbox=NetBox.connect(settings), barrier=barrier)


def _contend(task: tuple[int, int, list[int]]) -> tuple[str, dict[int, str]]:
    """One controller's try at the hosts, let go with every other at once: (its run, the
    hosts refused to it with their holder's run)."""
    trial, worker, ids = task
    run = f"race{trial}-w{worker}"
    _WORKER["barrier"].wait(timeout=300)
    refused = lock.acquire(_WORKER["netbox"], ids, run, "provision",
                           lock.Owner(f"op{worker}", "ctl.example", os.getpid()))
    return run, {device: held.run for device, held in refused.items()}


def test_of_controllers_racing_for_the_same_hosts_exactly_one_gets_them(netbox, settings,
                                                                         hosts):
    ids = hosts[:3]
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WORKERS)
    with context.Pool(WORKERS, _start_worker, (settings, barrier)) as pool:
        for trial in range(TRIALS):
            results = dict(pool.map_async(_contend, [(trial, w, ids) for w in range(WORKERS)],
                                          chunksize=1).get(timeout=600))
            winners = [run for run, refused in results.items() if not refused]
            assert len(winners) == 1, f"trial {trial}: {results}"
            winner = winners[0]
            assert {run: refused for run, refused in results.items() if run != winner} == {
                run: dict.fromkeys(ids, winner) for run in results if run != winner}
            assert holders(netbox, ids) == dict.fromkeys(ids, winner)
            lock.release(netbox, ids, winner)
            assert holders(netbox, ids) == {}
    # Only the winners wrote the audit trail: a refused controller leaves no trace.
    assert len(audit(netbox, ids[0])) == 2 * TRIALS


# -- who may give a lock back ----------------------------------------------------------------

def test_a_release_by_another_run_or_a_forged_journal_entry_frees_nothing(netbox, hosts):
    host = hosts[0]
    assert lock.acquire(netbox, [host], "run-a", "provision", ALICE) == {}
    lock.release(netbox, [host], "run-b")
    # The journal is the audit trail, not the lock: anyone may write there.
    netbox.create("extras/journal-entries", [
        {"assigned_object_type": "dcim.device", "assigned_object_id": host, "comments": text}
        for text in ("racklift lock: released run=run-a",
                     "racklift lock: broken run=run-a by=mallory@x")])
    assert holders(netbox, [host]) == {host: "run-a"}
    refused = lock.acquire(netbox, [host], "run-b", "reimage", BOB)
    assert refused[host].describe().startswith(
        "locked by alice@ctl01.example (provision run run-a, pid 4242) since ")
    lock.release(netbox, [host], "run-a")
    assert holders(netbox, [host]) == {}
    assert audit(netbox, host) == [
        "racklift lock: taken run=run-a by=alice@ctl01.example pid=4242 verb=provision",
        "racklift lock: released run=run-a", "racklift lock: broken run=run-a by=mallory@x",
        "racklift lock: released run=run-a"]


# -- NetBox failing halfway ------------------------------------------------------------------

class Faulty(NetBox):
    """The test NetBox with planted faults: (method, endpoint) → "before" (the request never
    reaches NetBox) or "after" (NetBox did it, and the answer is lost)."""

    def __init__(self, settings: NetBoxSettings, faults: Mapping[tuple[str, str], str]):
        super().__init__(settings)
        self.faults = dict(faults)

    def _fault(self, method: str, endpoint: str, when: str) -> None:
        if self.faults.get((method, endpoint)) == when:
            raise NetBoxError(f"planted: {method} {endpoint} failed {when} NetBox")

    def create(self, endpoint: str, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self._fault("create", endpoint, "before")
        created = super().create(endpoint, objects)
        self._fault("create", endpoint, "after")
        return created

    def delete(self, endpoint: str, ids: list[int]) -> None:
        self._fault("delete", endpoint, "before")
        super().delete(endpoint, ids)

    def get_for_ids(self, endpoint: str, key: str, ids: Any, params: Any = None,
                    fields: Any = None) -> list[dict[str, Any]]:
        self._fault("get", endpoint, "before")
        return super().get_for_ids(endpoint, key, ids, params, fields)


def test_a_lock_whose_answer_was_lost_is_still_its_takers(netbox, settings, hosts):
    faulty = Faulty(settings, {("create", lock.ENDPOINT): "after"})
    assert lock.acquire(faulty, hosts[:2], "run-a", "provision", ALICE) == {}
    assert holders(netbox, hosts) == {hosts[0]: "run-a", hosts[1]: "run-a"}
    lock.release(netbox, hosts[:2], "run-a")
    assert holders(netbox, hosts) == {}


def test_a_netbox_error_after_locking_gives_the_locks_back(netbox, settings, hosts):
    seen = {d: ("planned", None) for d in hosts[:2]}
    faulty = Faulty(settings, {("get", "dcim/devices"): "before"})
    with pytest.raises(NetBoxError, match="planted: get dcim/devices failed"):
        lock.acquire(faulty, hosts[:2], "run-a", "provision", ALICE, seen=seen)
    assert holders(netbox, hosts) == {}
    assert audit(netbox, hosts[0]) == [
        "racklift lock: taken run=run-a by=alice@ctl01.example pid=4242 verb=provision",
        "racklift lock: released run=run-a"]


def test_locks_that_cannot_be_given_back_are_named_with_what_to_do(netbox, settings, hosts):
    faulty = Faulty(settings, {("create", "extras/journal-entries"): "before",
                               ("delete", lock.ENDPOINT): "before"})
    with pytest.raises(RackliftError) as error:
        lock.acquire(faulty, hosts[:1], "run-a", "provision", ALICE)
    assert str(error.value).startswith("planted: create extras/journal-entries failed")
    assert str(error.value).endswith(
        "the locks run run-a took could not be given back either: once NetBox answers, "
        "`racklift locks` lists them and `racklift unlock` breaks them")
    assert holders(netbox, hosts) == {hosts[0]: "run-a"}
    assert lock.break_locks(netbox, hosts[:1], "test: NetBox was down").keys() == {hosts[0]}
    assert holders(netbox, hosts) == {}


def test_netbox_refusing_the_lock_raises_and_locks_nothing(netbox, settings, hosts):
    faulty = Faulty(settings, {("create", lock.ENDPOINT): "before"})
    with pytest.raises(NetBoxError, match="planted: create extras/saved-filters"):
        lock.acquire(faulty, hosts[:2], "run-a", "provision", ALICE)
    assert holders(netbox, hosts) == {}
    assert audit(netbox, hosts[0]) == []


# -- state moved between selection and lock; breaking ------------------------------------------

def test_a_host_changed_since_selection_is_refused_and_given_back(netbox, hosts):
    planned, finished, imaged = hosts[:3]
    seen = dict.fromkeys((planned, finished, imaged), ("planned", None))
    # Another run took two of them on while this one planned: one to the pool, one imaged.
    netbox.update("dcim/devices", [{"id": finished, "status": "active"},
                                   {"id": imaged, "status": "staged",
                                    "custom_fields": {STAGE_FIELD: "imaged"}}])
    refused = lock.acquire(netbox, [planned, finished, imaged], "run-a", "provision", ALICE,
                           seen=seen)
    assert refused == {finished: lock.Moved(finished, ("planned", None), ("active", None)),
                       imaged: lock.Moved(imaged, ("planned", None), ("staged", "imaged"))}
    assert holders(netbox, hosts) == {planned: "run-a"}
    assert audit(netbox, finished) == [
        "racklift lock: taken run=run-a by=alice@ctl01.example pid=4242 verb=provision",
        "racklift lock: released run=run-a"]


def test_breaking_a_lock_is_journaled_and_frees_the_host(netbox, hosts):
    host = hosts[0]
    assert lock.acquire(netbox, [host], "run-a", "provision", ALICE) == {}
    broken = lock.break_locks(netbox, [host, hosts[1]], "stale: ctl01 died", owner=BOB)
    assert list(broken) == [host] and broken[host].run == "run-a"
    assert holders(netbox, hosts) == {}
    entry = max(netbox.get_all("extras/journal-entries",
                               {"assigned_object_type": "dcim.device",
                                "assigned_object_id": host}), key=lambda e: e["id"])
    assert entry["kind"]["value"] == "warning"
    assert entry["comments"] == lock.broken_text(broken[host], BOB, "stale: ctl01 died")
    assert "Lock of alice@ctl01.example (provision run run-a, pid 4242, since " in (
        entry["comments"])
    assert lock.acquire(netbox, [host], "run-b", "reimage", BOB) == {}
    # The run whose lock was broken gives back nothing of the new holder's.
    lock.release(netbox, [host], "run-a")
    assert holders(netbox, [host]) == {host: "run-b"}
