"""playbooks/accept.yml, for a host Ansible reaches another way than plain ssh: real
ansible-playbook runs against the controller itself (`-c local`) with the variables
racklift.pipeline.accept_run gives it, each part in turn, the stage's own commands and scripts
run by stand-in tools that log what they were asked (accept_stand_ins)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from accept_stand_ins import install_tools, pair
from helpers import BIN, REPO
from racklift.pipeline.accept_run import (
    CLIENT_TASK,
    DCGM_TASK,
    NCCL_TASK,
    RDMA_TIMEOUT,
    client_argv,
    dcgm_argv,
    nccl_argv,
    servers_script,
    stop_script,
)

pytestmark = pytest.mark.ansible


@pytest.fixture
def tools(tmp_path):
    return install_tools(tmp_path / "bin")


def play(part: str, variables: dict, tmp_path, tools) -> dict[str, dict]:
    """Each task's result on localhost, by task name."""
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "LOG": str(tmp_path / "log"),
           "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
           "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"}
    extravars = {"racklift_accept_part": part, "ansible_python_interpreter": sys.executable,
                 **variables}
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
         "-e", json.dumps(extravars), str(REPO / "playbooks" / "accept.yml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    tasks = json.loads(done.stdout)["plays"][0]["tasks"]
    return {t["task"]["name"]: t["hosts"]["localhost"] for t in tasks}


def test_each_part_runs_the_commands_the_controller_made_and_nothing_else(tmp_path, tools):
    log = tmp_path / "log"
    tests = {"localhost": {"dcgm": dcgm_argv(2), "nccl": nccl_argv(8)}}
    ran = play("local", {"racklift_accept_local": tests}, tmp_path, tools)
    assert ran[DCGM_TASK]["stdout"] == "dcgmi diag -r 2"
    assert ran[NCCL_TASK]["stdout"] == "all_reduce_perf -b 1G -e 8G -f 2 -g 8"
    assert log.read_text().splitlines() == ["dcgmi diag -r 2",
                                            "all_reduce_perf -b 1G -e 8G -f 2 -g 8"]

    pairs = [pair(0, "localhost", "localhost"), pair(1, "localhost", "localhost")]
    rdma = {"servers": {"localhost": servers_script(pairs)},
            "clients": {"localhost": [{"n": p["n"], "argv": client_argv(p)} for p in pairs]},
            "stops": {"localhost": stop_script(pairs)}, "timeout": RDMA_TIMEOUT}
    log.unlink()
    for part in ("servers", "clients", "stops"):
        ran = play(part, {"racklift_accept_rdma": rdma}, tmp_path, tools)
        if part == "clients":
            results = ran[CLIENT_TASK]["results"]
            assert [(r["item"]["n"], r["stdout"]) for r in results] == [
                (p["n"], " ".join(client_argv(p))) for p in pairs]
    kinds = [line.split()[0] for line in log.read_text().splitlines()]
    assert kinds == ["setsid", "setsid", "ss", "ss", "ib_write_bw", "ib_write_bw", "pkill",
                     "pkill"]
