"""What each boot server deploys for the racks of a run (racklift.pipeline.boot_server_hosts):
racks add their hosts and see the others', the whole role runs once per boot server and
settings, role runs and releases on one boot server take turns and one run serves every rack
that waited, a failed run is not listed again and makes the next whole, a release drops only
its own hosts."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from racklift.errors import RackliftError
from racklift.pipeline.boot_server_hosts import BootServerHosts

SETTINGS = '{"boot_server_files": ["image-1"]}'


def _entry(name: str) -> dict[str, Any]:
    return {"name": name, "mac": "02:00:00:00:00:01", "ip": "10.0.0.1", "deploy": True}


class _Runs:
    """Role runs as a boot server sees them: the host names listed, whole or not."""

    def __init__(self, error: str | None = None) -> None:
        self.seen: list[tuple[list[str], bool]] = []
        self.error = error

    def __call__(self, entries: list[dict[str, Any]], whole: bool) -> tuple[str | None, Any]:
        self.seen.append(([e["name"] for e in entries], whole))
        return self.error, len(self.seen)


def _names(listed: BootServerHosts, server: str) -> list[str]:
    runs = _Runs()
    assert listed.serve(server, [], SETTINGS, runs) == (None, 1)
    return runs.seen[0][0]


def test_each_racks_role_run_lists_the_hosts_other_racks_still_deploy_there() -> None:
    listed, runs = BootServerHosts(), _Runs()
    assert listed.serve("boot-a", [_entry("a1"), _entry("a2")], SETTINGS, runs) == (None, 1)
    assert listed.serve("boot-a", [_entry("b1")], SETTINGS, runs) == (None, 2)
    assert listed.serve("boot-b", [_entry("c1")], SETTINGS, runs) == (None, 3)
    assert [names for names, _ in runs.seen] == [["a1", "a2"], ["a1", "a2", "b1"], ["c1"]]


def test_the_whole_role_runs_once_per_boot_server_and_settings() -> None:
    listed, runs = BootServerHosts(), _Runs()
    for server, name, settings in (("boot-a", "a1", SETTINGS), ("boot-a", "b1", SETTINGS),
                                   ("boot-b", "c1", SETTINGS),
                                   ("boot-a", "d1", '{"boot_server_files": ["image-2"]}'),
                                   ("boot-a", "e1", '{"boot_server_files": ["image-2"]}')):
        listed.serve(server, [_entry(name)], settings, runs)
    assert [whole for _, whole in runs.seen] == [True, False, True, True, False]


def test_a_release_drops_its_own_hosts_and_returns_what_its_run_returned() -> None:
    listed = BootServerHosts()
    listed.serve("boot-a", [_entry("a1"), _entry("b1")], SETTINGS, _Runs())
    removed: list[list[dict[str, Any]]] = []
    assert listed.release("boot-a", [{"name": "a1", "mac": "m"}],
                          lambda hosts: removed.append(hosts) or 7) == 7
    assert removed == [[{"name": "a1", "mac": "m"}]]
    assert _names(listed, "boot-a") == ["b1"]


def test_a_failed_or_stopped_role_run_leaves_its_own_hosts_unlisted_and_the_next_run_whole(
        ) -> None:
    listed, runs = BootServerHosts(), _Runs()
    listed.serve("boot-a", [_entry("a1")], SETTINGS, runs)
    assert listed.serve("boot-a", [_entry("b1")], SETTINGS,
                        _Runs("apt: no network")) == ("apt: no network", 1)
    listed.serve("boot-a", [], SETTINGS, runs)
    with pytest.raises(KeyboardInterrupt):
        listed.serve("boot-a", [_entry("c1")], SETTINGS, _interrupted)
    listed.serve("boot-a", [], SETTINGS, runs)
    assert runs.seen == [(["a1"], True), (["a1"], True), (["a1"], True)]


def _interrupted(entries: list[dict[str, Any]], whole: bool) -> tuple[str | None, Any]:
    raise KeyboardInterrupt


class _Busy:
    """A first role run on boot-a that holds it until told to end; racks that queue meanwhile
    are counted as they say they wait."""

    def __init__(self, listed: BootServerHosts, run: Any = None) -> None:
        self.inside, self.leave = threading.Event(), threading.Event()
        self.waited: list[str] = []
        self.cond = threading.Condition()
        self.first = threading.Thread(target=listed.serve, args=(
            "boot-a", [_entry("a1")], SETTINGS, run or self.slow))
        self.first.start()
        assert self.inside.wait(5)

    def slow(self, entries: list[dict[str, Any]], whole: bool) -> tuple[str | None, Any]:
        self.inside.set()
        self.leave.wait(5)
        return None, "first"

    def waiting(self, rack: str) -> Any:
        def say() -> None:
            with self.cond:
                self.waited.append(rack)
                self.cond.notify_all()
        return say

    def behind(self, rack: Any, names: tuple[str, ...]) -> None:
        """`rack(name)` for each of `names` at once, queued behind the first run; that run
        ends once all of them wait, and all are done when this returns."""
        racks = [threading.Thread(target=rack, args=(n,)) for n in names]
        for thread in racks:
            thread.start()
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.waited) == len(names), 5)
        self.leave.set()
        for thread in [*racks, self.first]:
            thread.join(5)


def test_racks_that_waited_are_served_by_one_role_run_and_each_gets_its_answer() -> None:
    listed = BootServerHosts()
    busy = _Busy(listed)
    # Another boot server is not held by it.
    assert listed.serve("boot-b", [_entry("c1")], SETTINGS, _Runs(),
                        waiting=busy.waiting("boot-b")) == (None, 1)
    runs, answers = _Runs(), {}

    def rack(name: str) -> None:
        answers[name] = listed.serve("boot-a", [_entry(name)], SETTINGS, runs,
                                     waiting=busy.waiting(name))

    busy.behind(rack, ("b1", "d1"))
    assert sorted(busy.waited) == ["b1", "d1"]
    (names, whole), = runs.seen  # one run for both
    assert (sorted(names), whole) == (["a1", "b1", "d1"], False)
    assert answers == {"b1": (None, 1), "d1": (None, 1)}


def test_releases_that_waited_are_one_run_and_a_stopped_run_stops_those_it_served() -> None:
    listed = BootServerHosts()
    busy = _Busy(listed)
    removed: list[list[str]] = []
    got: dict[str, Any] = {}

    def remove(hosts: list[dict[str, Any]]) -> str:
        removed.append(sorted(h["name"] for h in hosts))
        raise KeyboardInterrupt

    def rack(name: str) -> None:
        try:
            got[name] = listed.release("boot-a", [{"name": name, "mac": "m"}], remove,
                                       waiting=busy.waiting(name))
        except (KeyboardInterrupt, RackliftError) as exc:
            got[name] = type(exc).__name__

    busy.behind(rack, ("a1", "x1"))
    assert removed == [["a1", "x1"]]
    assert sorted(got.values()) == ["KeyboardInterrupt", "RackliftError"]
    assert _names(listed, "boot-a") == []
