"""What each boot server deploys for the racks of a run (racklift.pipeline.boot_server_hosts):
racks add their hosts and see the others', the whole role runs once per boot server and
settings, role runs on one boot server take turns, a failed one is not listed again and makes
the next whole, a release drops only its own hosts."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from racklift.pipeline.boot_server_hosts import BootServerHosts

SETTINGS = '{"boot_server_files": ["image-1"]}'


def _entry(name: str) -> dict[str, Any]:
    return {"name": name, "mac": "02:00:00:00:00:01", "ip": "10.0.0.1", "deploy": True}


class _Runs:
    """Role runs as a boot server sees them: the host names listed, whole or not."""

    def __init__(self, error: str | None = None) -> None:
        self.seen: list[tuple[list[str], bool]] = []
        self.error = error

    def __call__(self, entries: list[dict[str, Any]], whole: bool) -> str | None:
        self.seen.append(([e["name"] for e in entries], whole))
        return self.error


def _names(listed: BootServerHosts, server: str) -> list[str]:
    runs = _Runs()
    assert listed.serve(server, [], SETTINGS, runs) is None
    return runs.seen[0][0]


def test_each_racks_role_run_lists_the_hosts_other_racks_still_deploy_there() -> None:
    listed, runs = BootServerHosts(), _Runs()
    assert listed.serve("boot-a", [_entry("a1"), _entry("a2")], SETTINGS, runs) is None
    assert listed.serve("boot-a", [_entry("b1")], SETTINGS, runs) is None
    assert listed.serve("boot-b", [_entry("c1")], SETTINGS, runs) is None
    assert [names for names, _ in runs.seen] == [["a1", "a2"], ["a1", "a2", "b1"], ["c1"]]


def test_the_whole_role_runs_once_per_boot_server_and_settings() -> None:
    listed, runs = BootServerHosts(), _Runs()
    for server, name, settings in (("boot-a", "a1", SETTINGS), ("boot-a", "b1", SETTINGS),
                                   ("boot-b", "c1", SETTINGS),
                                   ("boot-a", "d1", '{"boot_server_files": ["image-2"]}'),
                                   ("boot-a", "e1", '{"boot_server_files": ["image-2"]}')):
        assert listed.serve(server, [_entry(name)], settings, runs) is None
    assert [whole for _, whole in runs.seen] == [True, False, True, True, False]


def test_a_release_drops_its_own_hosts_and_returns_what_its_run_returned() -> None:
    listed = BootServerHosts()
    listed.serve("boot-a", [_entry("a1"), _entry("b1")], SETTINGS, _Runs())
    assert listed.release("boot-a", ["a1"], lambda: 7) == 7
    assert _names(listed, "boot-a") == ["b1"]


def test_a_failed_or_stopped_role_run_leaves_its_own_hosts_unlisted_and_the_next_run_whole(
        ) -> None:
    listed, runs = BootServerHosts(), _Runs()
    listed.serve("boot-a", [_entry("a1")], SETTINGS, runs)
    assert listed.serve("boot-a", [_entry("b1")], SETTINGS,
                        _Runs("apt: no network")) == "apt: no network"
    assert listed.serve("boot-a", [], SETTINGS, runs) is None
    with pytest.raises(KeyboardInterrupt):
        listed.serve("boot-a", [_entry("c1")], SETTINGS, _interrupted)
    assert listed.serve("boot-a", [], SETTINGS, runs) is None
    assert runs.seen == [(["a1"], True), (["a1"], True), (["a1"], True)]


def _interrupted(entries: list[dict[str, Any]], whole: bool) -> str | None:
    raise KeyboardInterrupt


def test_role_runs_on_one_boot_server_take_turns_and_the_waiting_rack_says_so() -> None:
    listed = BootServerHosts()
    inside, leave = threading.Event(), threading.Event()
    waited: list[str] = []

    def slow(entries: list[dict[str, Any]], whole: bool) -> None:
        inside.set()
        leave.wait(5)

    first = threading.Thread(target=listed.serve, args=("boot-a", [_entry("a1")], SETTINGS,
                                                        slow))
    first.start()
    assert inside.wait(5)
    # Another boot server is not held by it.
    assert listed.serve("boot-b", [_entry("c1")], SETTINGS, _Runs(),
                        waiting=lambda: waited.append("boot-b")) is None
    runs = _Runs()
    second = threading.Thread(target=listed.serve, args=("boot-a", [_entry("b1")], SETTINGS,
                                                         runs),
                              kwargs={"waiting": lambda: (waited.append("boot-a"), leave.set())})
    second.start()
    second.join(5)
    first.join(5)
    assert waited == ["boot-a"]
    assert runs.seen == [(["a1", "b1"], False)]
