from racklift.pipeline.lock import Owner, Ticket, holders, taken_text


def entry(id_, device, text, created="2026-11-30T10:00:00Z"):
    return {"id": id_, "assigned_object_id": device, "comments": text, "created": created}


ALICE = Owner("alice", "ctl01", 4242)
BOB = Owner("bob", "ctl02", 77)


def test_the_oldest_open_ticket_holds():
    entries = [entry(12, 1, taken_text("run-b", BOB, "reimage")),
               entry(10, 1, taken_text("run-a", ALICE, "provision"), "2026-11-30T09:00:00Z"),
               entry(11, 2, taken_text("run-a", ALICE, "provision"))]
    held = holders(entries)
    assert held[1].run == "run-a" and held[1].owner == "alice@ctl01" and held[1].pid == 4242
    assert held[1].verb == "provision" and held[1].created == "2026-11-30T09:00:00Z"
    assert held[2].run == "run-a"


def test_released_and_broken_tickets_hold_nothing():
    entries = [entry(10, 1, taken_text("run-a", ALICE, "provision")),
               entry(11, 1, taken_text("run-b", BOB, "reimage")),
               entry(12, 1, "racklift lock: released run=run-a"),
               entry(13, 2, taken_text("run-c", BOB, "provision")),
               entry(14, 2, "racklift lock: broken run=run-c by=alice@ctl01\nstale"),
               entry(15, 3, "racklift provision (run x): started")]  # not a lock entry
    held = holders(entries)
    assert held[1].run == "run-b"  # the next in line holds once run-a released
    assert 2 not in held and 3 not in held


def test_a_dead_holder_on_this_controller_is_called_stale():
    ticket = Ticket(1, 1, "run-a", "alice@ctl01", 2**22 + 12345, "provision", "then")
    assert ticket.alive(here="ctl01") is False
    assert ticket.describe(here="ctl01").endswith("its process is gone: the lock is stale")
    assert ticket.alive(here="elsewhere") is None  # another controller's process: unknown
    text = Ticket(1, 1, "run-a", "alice@ctl01", None, "provision", "then").describe()
    assert "locked by alice@ctl01 (provision run run-a" in text and "since then" in text
