"""The lock's pure parts: the saved filter that is a device's lock, reading holders back from
NetBox's rows, and which hosts moved between selection and lock. Taking locks against a real
NetBox, with racing controllers, is in tests/integration/test_lock.py."""

from racklift.lifecycle.lock import (
    GONE,
    Moved,
    Owner,
    Ticket,
    broken_text,
    holders,
    lock_object,
    moved,
    taken_text,
    ticket,
)

ALICE = Owner("alice", "ctl01", 4242)
BOB = Owner("bob", "ctl02", 77)


def row(id_, obj, created="2026-11-30T10:00:00Z"):
    """A saved filter as NetBox returns it for `lock_object(...)`."""
    return {"id": id_, "slug": obj["slug"], "parameters": obj["parameters"], "created": created}


def test_a_lock_is_a_disabled_shared_saved_filter_named_after_its_device():
    obj = lock_object(42, "run-a", ALICE, "provision")
    assert obj["name"] == obj["slug"] == "racklift-lock-42"
    assert (obj["enabled"], obj["shared"], obj["object_types"]) == (False, True, ["dcim.device"])
    assert obj["parameters"] == {"id": [42], "racklift_lock": {
        "run": "run-a", "owner": "alice@ctl01", "pid": 4242, "verb": "provision"}}
    assert len(lock_object(42, "r" * 300, ALICE, "provision")["description"]) == 200


def test_holders_read_back_from_the_saved_filters():
    rows = [row(7, lock_object(1, "run-a", ALICE, "provision"), "2026-11-30T09:00:00Z"),
            row(9, lock_object(2, "run-b", BOB, "reimage")),
            {"id": 3, "slug": "gpu-planned", "parameters": {"status": "planned"},
             "created": "x"},  # an operator's saved filter: no lock
            {"id": 4, "slug": "racklift-lock-x", "parameters": {}, "created": "x"}]
    assert holders(rows) == {
        1: Ticket(7, 1, "run-a", "alice@ctl01", 4242, "provision", "2026-11-30T09:00:00Z"),
        2: Ticket(9, 2, "run-b", "bob@ctl02", 77, "reimage", "2026-11-30T10:00:00Z")}


def test_a_lock_whose_holder_record_was_edited_still_locks():
    for parameters in ({"id": [5]}, {"racklift_lock": "gone"}, [], None,
                       {"racklift_lock": {"run": "run-a", "pid": "77"}}):
        held = ticket({"id": 11, "slug": "racklift-lock-5", "parameters": parameters,
                       "created": "then"})
        assert held is not None and held.device_id == 5 and held.lock_id == 11
        assert held.pid is None and held.owner == "?"
    assert "locked by ? (? run ?, pid None) since then" in ticket(
        {"id": 11, "slug": "racklift-lock-5", "parameters": None, "created": "then"}).describe()


def test_hosts_moved_since_selection_are_refused_with_both_states():
    seen = {1: ("planned", None), 2: ("staged", "imaged"), 3: ("planned", None),
            4: ("staged", "imaged")}
    now = {1: ("planned", None), 2: ("staged", "configured"), 3: ("active", None)}
    assert moved(seen, now) == {2: Moved(2, ("staged", "imaged"), ("staged", "configured")),
                                3: Moved(3, ("planned", None), ("active", None)),
                                4: Moved(4, ("staged", "imaged"), GONE)}
    assert moved(seen, now)[3].describe() == (
        "changed since this run selected it (planned → active): left as it is; run again to "
        "plan it anew")
    assert "(staged, stage imaged → staged, stage configured)" in moved(seen, now)[2].describe()
    assert moved(seen, now)[4].describe() == "no longer in NetBox since this run selected it"


def test_a_dead_holder_on_this_controller_is_called_stale():
    held = Ticket(1, 1, "run-a", "alice@ctl01", 2**22 + 12345, "provision", "then")
    assert held.alive(here="ctl01") is False
    assert held.describe(here="ctl01").endswith("its process is gone: the lock is stale")
    assert held.alive(here="elsewhere") is None  # another controller's process: unknown
    text = Ticket(1, 1, "run-a", "alice@ctl01", None, "provision", "then").describe()
    assert "locked by alice@ctl01 (provision run run-a" in text and "since then" in text


def test_the_audit_trail_names_run_holder_and_breaker():
    assert taken_text("run-a", ALICE, "provision").startswith(
        "racklift lock: taken run=run-a by=alice@ctl01 pid=4242 verb=provision\n")
    held = Ticket(1, 1, "run-a", "alice@ctl01", 4242, "provision", "then")
    assert broken_text(held, BOB, "stale") == (
        "racklift lock: broken run=run-a by=bob@ctl02\n"
        "Lock of alice@ctl01 (provision run run-a, pid 4242, since then) broken: stale")
