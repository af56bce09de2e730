"""How the acceptance stage runs its tests (racklift.pipeline.accept_run): each host's own tests
one after another over its SSH client, a round of ib_write_bw pairs as servers, then clients,
then stops, the stage's scripts run by a real `sh` with stand-in tools on the PATH that log
what they were asked; a host Ansible reaches another way gets the same commands through
accept.yml, and one that cannot be reached says why. Real containers run it in the integration
tier (test_accept.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from test_direct_collect import TRANSPORT_STAND_IN

from accept_stand_ins import install_tools, pair, transport_to
from racklift.ansible import PlaybookResult
from racklift.pipeline import accept_run
from racklift.pipeline.accept_run import (
    CLIENT_TASK,
    DCGM_TASK,
    NCCL_TASK,
    AcceptRunner,
    client_argv,
    dcgm_argv,
    nccl_argv,
    servers_script,
    stop_script,
)
from racklift.verify import reach as reach_module


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATH", f"{install_tools(tmp_path / 'bin')}:{os.environ['PATH']}")
    monkeypatch.setenv("LOG", str(tmp_path / "log"))
    return tmp_path / "log"


class FakeNetBox:
    settings = None


def runner(monkeypatch: pytest.MonkeyPatch, entries: dict[str, dict[str, Any]],
           plays: list[tuple[list[str], dict[str, Any]]],
           captured: dict[str, dict[str, Any]] | None = None) -> AcceptRunner:
    asked: list[list[str]] = []

    def reach(names, settings, extravars):
        asked.append(list(names))
        return {n: entries[n] for n in names}

    def run_playbook(name, hosts, settings, **kw):
        assert name == "accept.yml"
        plays.append((sorted(hosts), kw["extravars"]))
        return PlaybookResult(0, ok=frozenset(hosts), captured=captured or {})
    monkeypatch.setattr(reach_module, "reach", reach)
    monkeypatch.setattr(accept_run, "run_playbook", run_playbook)
    got = AcceptRunner(FakeNetBox(), Path("/nonexistent"), "accept-a01", None, {})
    got.asked = asked  # type: ignore[attr-defined]
    return got


def test_each_hosts_own_tests_run_one_after_another_and_others_go_through_ansible(
        log, monkeypatch):
    plays: list = []
    run = runner(monkeypatch, {"gpu-01": {"ssh": TRANSPORT_STAND_IN},
                               "gpu-02": {"ansible": "its connection is 'podman', not ssh"},
                               "gpu-03": {"error": "not in the inventory"}}, plays,
                 {"gpu-02": {DCGM_TASK: {"stdout": "from ansible", "rc": 0}}})
    tests = {DCGM_TASK: dcgm_argv(2), NCCL_TASK: nccl_argv(8)}
    captured, failed = run.local({"gpu-01": tests, "gpu-02": tests, "gpu-03": tests})
    assert captured["gpu-01"][DCGM_TASK]["stdout"] == "dcgmi diag -r 2\n"
    assert captured["gpu-01"][NCCL_TASK]["stdout"] == \
        "all_reduce_perf -b 1G -e 8G -f 2 -g 8\n"
    assert log.read_text().splitlines() == ["dcgmi diag -r 2",
                                            "all_reduce_perf -b 1G -e 8G -f 2 -g 8"]
    # The host Ansible reaches another way gets the same argv, and only it.
    ((hosts, extravars),) = plays
    assert hosts == ["gpu-02"] and extravars["racklift_accept_part"] == "local"
    assert extravars["racklift_accept_local"]["gpu-02"] == {"dcgm": tests[DCGM_TASK],
                                                           "nccl": tests[NCCL_TASK]}
    assert captured["gpu-02"][DCGM_TASK]["stdout"] == "from ansible"
    assert failed == {"gpu-03": "not in the inventory"}
    assert "gpu-03" not in captured


def test_an_unreachable_host_runs_nothing_more_and_says_why(log, monkeypatch):
    down = ["sh", "-c", "echo 'connect to host 10.9.9.9 port 22: No route' >&2; exit 255",
            "ssh"]
    run = runner(monkeypatch, {"gpu-01": {"ssh": down}}, [])
    captured, failed = run.local({"gpu-01": {DCGM_TASK: dcgm_argv(1), NCCL_TASK: nccl_argv(8)}})
    assert "No route" in failed["gpu-01"]
    assert list(captured["gpu-01"]) == [DCGM_TASK]  # NCCL never tried
    assert captured["gpu-01"][DCGM_TASK]["failed"] is True


def test_a_round_starts_every_server_before_any_client_and_stops_them_after(log, monkeypatch):
    plays: list = []
    run = runner(monkeypatch, {"gpu-01": {"ssh": transport_to("gpu-01")},
                               "gpu-02": {"ssh": transport_to("gpu-02")},
                               "gpu-03": {"ansible": "its connection is 'podman', not ssh"}},
                 plays, {"gpu-03": {CLIENT_TASK: {"results": [
                     {"item": {}, "skipped": True},  # not one of the round's pairs
                     {"item": {"n": 2}, "stdout": "from ansible", "rc": 0}]}}})
    pairs = [pair(0, "gpu-01", "gpu-02"), pair(1, "gpu-02", "gpu-01"),
             pair(2, "gpu-03", "gpu-01")]
    got = run.rdma_round(pairs)
    assert [g["stdout"] if g else None for g in got] == [
        f"{' '.join(client_argv(pairs[0]))}\n", f"{' '.join(client_argv(pairs[1]))}\n",
        "from ansible"]
    lines = log.read_text().splitlines()
    kinds = [line.split()[0] for line in lines]
    # Every server started and seen listening, then the clients, then the stops.
    assert kinds.index("ib_write_bw") > max(i for i, k in enumerate(kinds) if k in ("setsid", "ss"))
    assert min(i for i, k in enumerate(kinds) if k == "pkill") > \
        max(i for i, k in enumerate(kinds) if k == "ib_write_bw")
    # Each host starts the servers of its own pairs: gpu-01 two, gpu-02 one.
    assert sorted(" ".join(line.split()[1:6]) for line in lines if line.startswith("setsid")) == [
        "gpu-01 -f ib_write_bw -d mlx5_1", "gpu-01 -f ib_write_bw -d mlx5_2",
        "gpu-02 -f ib_write_bw -d mlx5_0"]
    # The host reached another way ran each phase through accept.yml, in the same order.
    assert [extravars["racklift_accept_part"] for _, extravars in plays] == [
        "clients"]  # gpu-03 serves nothing: only its client runs there
    assert plays[0][1]["racklift_accept_rdma"]["clients"]["gpu-03"] == [
        {"n": 2, "argv": client_argv(pairs[2])}]
    assert run.asked == [["gpu-01", "gpu-02", "gpu-03"]]  # reached once


def test_the_scripts_quote_what_they_run_and_wait_a_bounded_time() -> None:
    served = [pair(0, "gpu-01", "gpu-02")]
    start = servers_script(served)
    assert "setsid -f ib_write_bw -d mlx5_0 -p 18515 -F --report_gbits -D 5 >/dev/null" in start
    assert f'-ge {accept_run.LISTEN_WAIT} ] && break' in start
    assert stop_script(served).splitlines()[0] == \
        "pkill -f 'ib_write_bw -d mlx5_0 -p 18515 -F --report_gbits -D 5' || true"


def test_how_hosts_are_reached_is_asked_once_for_a_batch_while_its_extra_vars_stay(monkeypatch):
    asked: list[list[str]] = []

    def reach(names, settings, extravars):
        asked.append(list(names))
        return {n: {"ssh": ["ssh", n], "pinned": dict(extravars)} for n in names}
    monkeypatch.setattr(reach_module, "reach", reach)
    reached = reach_module.Reached()
    reached.get(["gpu-01", "gpu-02"], None, {"a": 1})  # verify
    assert reached.get(["gpu-02"], None, {"a": 1}) == {
        "gpu-02": {"ssh": ["ssh", "gpu-02"], "pinned": {"a": 1}}}  # acceptance
    reached.get(["gpu-02", "gpu-03"], None, {"a": 1})  # a partner not asked yet
    assert asked == [["gpu-01", "gpu-02"], ["gpu-03"]]
    # New extra vars (the image stage pinned new host keys): asked again.
    assert reached.get(["gpu-01"], None, {"a": 2})["gpu-01"]["pinned"] == {"a": 2}
    assert asked[-1] == ["gpu-01"]


def test_a_test_past_its_timeout_fails_alone_and_the_hosts_next_test_still_runs(
        log, tmp_path, monkeypatch):
    (tmp_path / "bin" / "dcgmi").write_text("#!/bin/sh\nexec sleep 30\n")
    monkeypatch.setitem(accept_run.DCGM_TIMEOUT, 1, 0.5)
    run = runner(monkeypatch, {"gpu-01": {"ssh": TRANSPORT_STAND_IN}}, [])
    captured, failed = run.local({"gpu-01": {DCGM_TASK: dcgm_argv(1), NCCL_TASK: nccl_argv(8)}})
    assert captured["gpu-01"][DCGM_TASK]["failed"] is True
    assert "no answer within" in captured["gpu-01"][DCGM_TASK]["msg"]
    assert captured["gpu-01"][NCCL_TASK]["stdout"].startswith("all_reduce_perf")
    assert failed == {}
    assert accept_run.DCGM_TIMEOUT[1] < accept_run.NCCL_TIMEOUT  # all-reduce's own, not DCGM's


def test_an_unreachable_client_host_gives_its_pairs_no_result(log, monkeypatch):
    down = ["sh", "-c", "echo 'connect to host 10.9.9.9 port 22: No route' >&2; exit 255",
            "ssh"]
    run = runner(monkeypatch, {"gpu-01": {"ssh": down}, "gpu-02": {"ssh": TRANSPORT_STAND_IN}},
                 [])
    pairs = [pair(0, "gpu-01", "gpu-02"), pair(1, "gpu-01", "gpu-02"), pair(2, "gpu-02", "gpu-01")]
    got = run.rdma_round(pairs)
    assert got[0]["failed"] is True and "No route" in got[0]["msg"]
    assert got[1] is None  # never tried: its host could not be reached
    assert got[2]["stdout"].startswith("ib_write_bw")
