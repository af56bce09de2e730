"""The Slurm hook against a real Slurm cluster from Debian's packages: munged, slurmctld and
one slurmd per node (racklift.lab.slurm), with what the hook did checked through scontrol
itself.

RACKLIFT_TEST_SLURM (cluster name) and RACKLIFT_TEST_SLURM_PORT (slurmctld's port; the nodes
take the next ones) let two test sessions run side by side on one machine.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from racklift.lab import slurm
from racklift.pipeline.scheduler import Slurm, is_drained

pytestmark = pytest.mark.slurm

NAME = os.environ.get("RACKLIFT_TEST_SLURM", "test")
PORT = int(os.environ.get("RACKLIFT_TEST_SLURM_PORT", 16917))
NODES = ("gpu-s01", "gpu-s02", "gpu-s03")
REASON = 'racklift reimage: ticket "7" $HOME; x=1'


def scontrol(lab: slurm.SlurmLab, *args: str) -> str:
    return subprocess.run(["scontrol", *args], env=lab.env, capture_output=True, text=True,
                          check=True, timeout=20).stdout


def shown(lab: slurm.SlurmLab, node: str) -> tuple[str, str]:
    """(State=..., Reason=...) lines as scontrol itself prints them for `node`."""
    lines = [line.strip() for line in scontrol(lab, "show", "node", node).splitlines()]
    state = next(line.split()[0] for line in lines if line.startswith("State="))
    reason = next((line for line in lines if line.startswith("Reason=")), "")
    return state, reason


def wait_for(lab: slurm.SlurmLab, check, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            queue = subprocess.run(["squeue", "--format=%i %T %R %N"], env=lab.env,
                                   capture_output=True, text=True).stdout
            pytest.fail(f"timed out waiting for {what}; squeue:\n{queue}\n"
                        f"{scontrol(lab, 'show', 'node')}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster() -> Iterator[slurm.SlurmLab]:
    lab = slurm.SlurmLab(NAME, NODES, PORT)
    seconds = slurm.up(lab)
    print(f"\n[slurm] {len(NODES)}-node cluster up in {seconds:.1f} s")
    yield lab
    slurm.down(lab)
    assert not lab.root.exists()


@pytest.fixture
def hook(cluster: slurm.SlurmLab) -> Slurm:
    """The hook on a cluster with no jobs and every node IDLE."""
    slurm.cancel_jobs(cluster)
    for node in NODES:
        state = shown(cluster, node)[0]
        if "DRAIN" in state or state.startswith("State=DOWN"):
            scontrol(cluster, "update", f"nodename={node}", "state=resume")
    # Slurm marks a resumed node NOT_RESPONDING until its next ping of the slurmd (~1 s).
    wait_for(cluster, lambda: all(shown(cluster, node)[0] == "State=IDLE" for node in NODES),
             "every node IDLE")
    return cluster.hook()


def test_drain_and_resume_two_nodes(cluster, hook):
    result = hook.drain(["gpu-s01", "gpu-s02"], REASON)
    assert (result.ok, result.errors) == ({"gpu-s01": "drained", "gpu-s02": "drained"}, {})
    for node in ("gpu-s01", "gpu-s02"):
        state, reason = shown(cluster, node)
        assert state == "State=IDLE+DRAIN"
        assert reason.startswith(f"Reason={REASON} [root@")
    assert shown(cluster, "gpu-s03") == ("State=IDLE", "")
    assert hook.state(NODES) == {"gpu-s01": "IDLE+DRAIN", "gpu-s02": "IDLE+DRAIN",
                                 "gpu-s03": "IDLE"}

    again = hook.drain(["gpu-s01"], "another reason")
    assert again.ok == {"gpu-s01": "already drained"}
    assert shown(cluster, "gpu-s01")[1].startswith(f"Reason={REASON} [")  # the first one kept

    resumed = hook.resume(["gpu-s01", "gpu-s02", "gpu-s03"], "racklift: verified, in pool")
    assert resumed.ok == {"gpu-s01": "resumed", "gpu-s02": "resumed", "gpu-s03": "not drained"}
    assert resumed.errors == {}
    for node in NODES:
        state, reason = shown(cluster, node)
        assert "DRAIN" not in state and reason == ""


def test_unknown_node_is_its_own_error(cluster, hook):
    result = hook.drain(["gpu-s01", "gpu-new", "gpu-s02"], REASON)
    assert result.ok == {"gpu-s01": "drained", "gpu-s02": "drained"}
    assert list(result.errors) == ["gpu-new"]
    assert result.unknown == {"gpu-new"}
    assert result.errors["gpu-new"].startswith("gpu-new: Slurm does not know this node")
    assert shown(cluster, "gpu-s02")[0] == "State=IDLE+DRAIN"

    resumed = hook.resume(["gpu-new", "gpu-s01", "gpu-s02"], "racklift: in pool")
    assert resumed.ok == {"gpu-s01": "resumed", "gpu-s02": "resumed"}
    assert resumed.unknown == {"gpu-new"}
    assert "a brand-new host may not be in slurm.conf yet" in resumed.errors["gpu-new"]


def test_down_node_is_drained_and_resumed(cluster, hook):
    """A failed host racklift reimages is often DOWN already: draining it too keeps Slurm from
    returning it to service when its slurmd registers before racklift has verified it."""
    scontrol(cluster, "update", "nodename=gpu-s02", "state=down", "reason=dead GPU")
    result = hook.drain(["gpu-s02"], REASON)
    assert result.ok == {"gpu-s02": "drained"}
    assert shown(cluster, "gpu-s02")[0] == "State=DOWN+DRAIN"
    assert hook.resume(["gpu-s02"], "racklift: in pool").ok == {"gpu-s02": "resumed"}
    assert not {"DOWN", "DRAIN"} & set(hook.state(["gpu-s02"])["gpu-s02"].split("+"))


def test_nodes_an_operator_took_out_stay_out(cluster, hook):
    """Only racklift's own drains are undone: a node an operator drained or set down for a
    reason of their own stays so after racklift reimaged and resumed it."""
    scontrol(cluster, "update", "nodename=gpu-s02", "state=drain", "reason=GPU 3 Xid 79")
    scontrol(cluster, "update", "nodename=gpu-s03", "state=down", "reason=cable")
    drained = hook.drain(["gpu-s01", "gpu-s02"], "GPU swap")  # reimage: drain first
    assert drained.ok == {"gpu-s01": "drained", "gpu-s02": "already drained"}
    assert shown(cluster, "gpu-s01")[1].startswith("Reason=racklift: GPU swap [")

    resumed = hook.resume(NODES, "racklift: verified, in pool")
    assert resumed.ok == {"gpu-s01": "resumed"}
    assert resumed.errors["gpu-s02"].startswith(
        "gpu-s02: Slurm shows IDLE+DRAIN with reason 'GPU 3 Xid 79', which racklift did not "
        "set: left as it is")
    assert resumed.errors["gpu-s03"].startswith(
        "gpu-s03: Slurm shows DOWN with reason 'cable', which racklift did not set")
    assert shown(cluster, "gpu-s02")[1].startswith("Reason=GPU 3 Xid 79 [")
    assert shown(cluster, "gpu-s02")[0] == "State=IDLE+DRAIN"
    assert shown(cluster, "gpu-s03")[0].startswith("State=DOWN")
    assert "DRAIN" not in shown(cluster, "gpu-s01")[0]


def test_failed_batch_update_is_retried_per_host(cluster, hook):
    """Names are checked against `scontrol show node` first, so the batch call fails only when
    the node list changes in between; here it is called with an unknown name directly."""
    errors = hook._update(["gpu-s03", "gpu-gone"], "state=drain", f"reason={REASON}")
    assert list(errors) == ["gpu-gone"]
    assert errors["gpu-gone"].startswith(
        "gpu-gone: Slurm: `scontrol update nodename=gpu-gone state=drain 'reason=")
    assert "Invalid node name specified" in errors["gpu-gone"]
    assert shown(cluster, "gpu-s03")[0] == "State=IDLE+DRAIN"


def test_node_with_a_running_job_is_draining_until_it_ends(cluster, hook):
    subprocess.run(["sbatch", "--nodelist=gpu-s01", "--output=/dev/null", "--wrap=sleep 300"],
                   env=cluster.env, check=True, capture_output=True, timeout=20)
    wait_for(cluster, lambda: hook.state(["gpu-s01"])["gpu-s01"] == "ALLOCATED",
             "the job to start")
    result = hook.drain(["gpu-s01"], REASON)
    assert result.ok["gpu-s01"].startswith("drained (jobs still running: ALLOCATED+DRAIN;")
    assert not is_drained(hook.state(["gpu-s01"])["gpu-s01"])
    slurm.cancel_jobs(cluster)
    wait_for(cluster, lambda: is_drained(hook.state(["gpu-s01"])["gpu-s01"]),
             "the node to be DRAINED")
    assert hook.drain(["gpu-s01"], REASON).ok == {"gpu-s01": "already drained"}


@pytest.fixture
def lone_cluster() -> Iterator[slurm.SlurmLab]:
    """A cluster of its own, since the test stops its controller."""
    lab = slurm.SlurmLab(f"{NAME}-down", ("gpu-s09",), PORT + 10)
    slurm.up(lab)
    yield lab
    slurm.down(lab)
    assert not lab.root.exists()


def test_controller_down_or_hung_is_a_clear_error(lone_cluster):
    hook = lone_cluster.hook()
    assert hook.state(["gpu-s09"]) == {"gpu-s09": "IDLE"}
    slurm.stop_controller(lone_cluster)

    started = time.monotonic()
    result = hook.drain(["gpu-s09"], REASON)
    assert result.ok == {}
    assert result.errors["gpu-s09"] == (
        "gpu-s09: Slurm: `scontrol show node` failed: slurm_load_node error: Unable to contact "
        "slurm controller (connect failure); check that slurmctld is running and reachable "
        "from this controller (`scontrol ping`), then retry")
    assert time.monotonic() - started < 5  # no per-host retries against a dead controller

    # Something holds the controller's port and never answers: a hung slurmctld.
    with socket.create_server(("127.0.0.1", lone_cluster.port)):
        result = lone_cluster.hook(timeout=1.0).resume(["gpu-s09"], "racklift: in pool")
    assert result.errors["gpu-s09"] == (
        "gpu-s09: Slurm: `scontrol show node` did not finish within 1 s: check that slurmctld "
        "answers (`scontrol ping`), or raise RACKLIFT_SLURM_TIMEOUT")
