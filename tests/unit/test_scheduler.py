"""Tests for racklift.pipeline.scheduler without a Slurm cluster: parsing and judging real
`scontrol show node` output, configuration from the environment, bad input. The hook against
a real slurmctld is in tests/integration/test_slurm_hook.py.

The two captures below are real: Debian 12's slurm-client 22.05.8 against racklift's lab
cluster (racklift.lab.slurm), after `scontrol update` calls and a running `sbatch` job.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from racklift.bmc.redfish import ENV_PASSWORD
from racklift.errors import RackliftError
from racklift.pipeline.scheduler import (
    SCHEDULER_VAR,
    Slurm,
    SlurmNode,
    bad_node_names,
    drain_outcome,
    failure,
    is_drained,
    marked,
    needs_resume,
    one_line,
    ours,
    parse_show_node,
    resume_outcome,
    scheduler_from_env,
)

# Slurmds running; gpu-001 runs a job and was drained; gpu-002 drained with Comment and Extra
# set (free text with "=" on lines of their own); gpu-003 set DOWN by hand.
CAPTURE_RESPONDING = """\
NodeName=gpu-001 Arch=x86_64 CoresPerSocket=1 
   CPUAlloc=1 CPUEfctv=1 CPUTot=1 CPULoad=2.09
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=(null)
   NodeAddr=127.0.0.1 NodeHostName=gpu-001 Version=22.05.8
   OS=Linux 6.18.44-fc-v857 #1 SMP PREEMPT_DYNAMIC @0 
   RealMemory=100 AllocMem=0 FreeMem=18225 Sockets=1 Boards=1
   State=ALLOCATED+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=lab 
   BootTime=2026-11-30T10:17:08 SlurmdStartTime=2026-11-30T15:47:37
   LastBusyTime=2026-11-30T15:47:38
   CfgTRES=cpu=1,mem=100M,billing=1
   AllocTRES=cpu=1,mem=100M,billing=1
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Reason=racklift reimage (issue 7) [root@2026-11-30T15:47:48]

NodeName=gpu-002 Arch=x86_64 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=2.09
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=(null)
   NodeAddr=127.0.0.1 NodeHostName=gpu-002 Port=16819 Version=22.05.8
   OS=Linux 6.18.44-fc-v857 #1 SMP PREEMPT_DYNAMIC @0 
   RealMemory=100 AllocMem=0 FreeMem=18225 Sockets=1 Boards=1
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=lab 
   BootTime=2026-11-30T10:17:08 SlurmdStartTime=2026-11-30T15:47:37
   LastBusyTime=2026-11-30T15:47:38
   CfgTRES=cpu=1,mem=100M,billing=1
   AllocTRES=
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Reason=GPU 3 Xid 79: fallen off the bus, x=1 [root@2026-11-30T15:47:48]
   Comment=rma ticket 42
   Extra=rack=R01 u=12

NodeName=gpu-003 Arch=x86_64 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=2.09
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=(null)
   NodeAddr=127.0.0.1 NodeHostName=gpu-003 Port=16820 Version=22.05.8
   OS=Linux 6.18.44-fc-v857 #1 SMP PREEMPT_DYNAMIC @0 
   RealMemory=100 AllocMem=0 FreeMem=18162 Sockets=1 Boards=1
   State=DOWN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=lab 
   BootTime=2026-11-30T10:17:08 SlurmdStartTime=2026-11-30T15:47:37
   LastBusyTime=2026-11-30T15:47:37
   CfgTRES=cpu=1,mem=100M,billing=1
   AllocTRES=
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Reason=cable [root@2026-11-30T15:47:48]
"""  # noqa: W291 (scontrol's own trailing spaces, kept as captured)

# No slurmd ever answered for these nodes (how racklift found out the lab needs slurmds);
# gpu-002 drained with a reason holding quotes and a dollar sign.
CAPTURE_SILENT = """\
NodeName=gpu-001 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=N/A
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=(null)
   NodeAddr=127.0.0.1 NodeHostName=gpu-001 
   RealMemory=100 AllocMem=0 FreeMem=N/A Sockets=1 Boards=1
   State=UNKNOWN+NOT_RESPONDING ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=lab 
   BootTime=None SlurmdStartTime=None
   LastBusyTime=Unknown
   CfgTRES=cpu=1,mem=100M,billing=1
   AllocTRES=
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s

NodeName=gpu-002 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=N/A
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=(null)
   NodeAddr=127.0.0.1 NodeHostName=gpu-002 
   RealMemory=100 AllocMem=0 FreeMem=N/A Sockets=1 Boards=1
   State=UNKNOWN+DRAIN+NOT_RESPONDING ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=lab 
   BootTime=None SlurmdStartTime=None
   LastBusyTime=Unknown
   CfgTRES=cpu=1,mem=100M,billing=1
   AllocTRES=
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Reason=reimage by racklift; "quoted" $x [root@2026-11-30T15:44:14]
   Comment=a b=c
   Extra=c d=e

NodeName=gpu-003 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=N/A
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=(null)
   NodeAddr=127.0.0.1 NodeHostName=gpu-003 
   RealMemory=100 AllocMem=0 FreeMem=N/A Sockets=1 Boards=1
   State=DOWN+NOT_RESPONDING ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=lab 
   BootTime=None SlurmdStartTime=None
   LastBusyTime=Unknown
   CfgTRES=cpu=1,mem=100M,billing=1
   AllocTRES=
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Reason=down for x=1 [root@2026-11-30T15:44:26]
"""  # noqa: W291 (scontrol's own trailing spaces, kept as captured)

# Real stderr of `scontrol show node` with slurmctld stopped.
CONTROLLER_DOWN = "slurm_load_node error: Unable to contact slurm controller (connect failure)\n"


def test_parse_responding_nodes():
    nodes = parse_show_node(CAPTURE_RESPONDING)
    assert nodes == {
        "gpu-001": SlurmNode("gpu-001", "ALLOCATED+DRAIN", "racklift reimage (issue 7)"),
        "gpu-002": SlurmNode("gpu-002", "IDLE+DRAIN", "GPU 3 Xid 79: fallen off the bus, x=1"),
        "gpu-003": SlurmNode("gpu-003", "DOWN", "cable"),
    }
    assert nodes["gpu-002"].flags == {"DRAIN"}


def test_parse_silent_nodes_keeps_free_text_whole():
    nodes = parse_show_node(CAPTURE_SILENT)
    assert nodes["gpu-001"] == SlurmNode("gpu-001", "UNKNOWN+NOT_RESPONDING", "")
    assert nodes["gpu-002"].reason == 'reimage by racklift; "quoted" $x'
    assert nodes["gpu-002"].flags == {"DRAIN", "NOT_RESPONDING"}
    assert nodes["gpu-003"] == SlurmNode("gpu-003", "DOWN+NOT_RESPONDING", "down for x=1")


def test_parse_without_state_is_an_error():
    # Synthetic: a node block cut short, as from a scontrol racklift cannot read.
    with pytest.raises(RackliftError, match="no State= for gpu-009"):
        parse_show_node("NodeName=gpu-009 Arch=x86_64 CoresPerSocket=1\n   Partitions=lab\n")


@pytest.mark.parametrize(("state", "drained"), [
    ("IDLE+DRAIN", True),            # DRAINED: safe to reimage
    ("ALLOCATED+DRAIN", False),      # DRAINING: a job still runs
    ("MIXED+DRAIN", False),
    ("IDLE+DRAIN+COMPLETING", False),  # a job is still being cleaned up
    ("DOWN", True),                  # no job runs on a DOWN node
    ("DOWN+NOT_RESPONDING", True),
    ("UNKNOWN+DRAIN+NOT_RESPONDING", True),
    ("IDLE", False),
    ("ALLOCATED", False),
])
def test_is_drained(state, drained):
    assert is_drained(state) is drained


@pytest.mark.parametrize(("state", "needed"), [
    ("IDLE+DRAIN", True), ("ALLOCATED+DRAIN", True), ("DOWN", True),
    ("DOWN+NOT_RESPONDING", True), ("IDLE+FAIL", True), ("IDLE", False),
    ("ALLOCATED", False), ("IDLE+NOT_RESPONDING", False),
])
def test_needs_resume(state, needed):
    assert needs_resume(state) is needed


def test_drain_outcomes_from_real_states():
    nodes = parse_show_node(CAPTURE_RESPONDING)
    assert drain_outcome(nodes["gpu-002"], changed=True) == (True, "drained")
    assert drain_outcome(nodes["gpu-002"], changed=False) == (True, "already drained")
    fine, message = drain_outcome(nodes["gpu-001"], changed=True)
    assert fine and message.startswith("drained (jobs still running: ALLOCATED+DRAIN")
    fine, message = drain_outcome(nodes["gpu-003"], changed=True)  # DOWN, no DRAIN flag
    assert not fine
    assert message.startswith("gpu-003: Slurm still shows DOWN after `scontrol update "
                              "nodename=gpu-003 state=drain`")


def test_resume_outcomes_from_real_states():
    nodes = parse_show_node(CAPTURE_RESPONDING)
    fine, message = resume_outcome(nodes["gpu-001"], changed=True)  # racklift's drain
    assert not fine and "gpu-001: Slurm still shows ALLOCATED+DRAIN after" in message
    assert "slurmctld's log" in message
    fine, message = resume_outcome(nodes["gpu-002"], changed=False)  # an operator's drain
    assert not fine and message == (
        "gpu-002: Slurm shows IDLE+DRAIN with reason 'GPU 3 Xid 79: fallen off the bus, x=1', "
        "which racklift did not set: left as it is; once that is dealt with, `scontrol update "
        "nodename=gpu-002 state=resume` returns it to service")
    fine, message = resume_outcome(SlurmNode("gpu-005", "DOWN", ""), changed=False)
    assert not fine and message.startswith("gpu-005: Slurm shows DOWN with no reason, which")
    idle = SlurmNode("gpu-004", "IDLE", "")
    assert resume_outcome(idle, changed=True) == (True, "resumed")
    assert resume_outcome(idle, changed=False) == (True, "not drained")


@pytest.mark.parametrize(("reason", "mine"), [
    ("racklift reimage: GPU swap", True), ("racklift: ticket 7", True),
    ("GPU 3 Xid 79", False), ("", False), ("racklifting", False), ("racklift-lab", False),
    ("not racklift reimage", False), ("Not responding", False),
])
def test_racklift_drains_are_told_by_their_reason(reason, mine):
    assert ours(reason) is mine
    assert ours(marked(reason or "x"))


def test_marked_keeps_racklift_reasons_and_prefixes_others():
    assert marked("racklift reimage: GPU swap") == "racklift reimage: GPU swap"
    assert marked("GPU swap") == "racklift: GPU swap"


def stand_in_scontrol(tmp_path: Path) -> Path:
    """An scontrol that shows the captured nodes, logs updates and keeps its environment."""
    (tmp_path / "nodes.txt").write_text(CAPTURE_RESPONDING)
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(
        f"#!{sys.executable}\n"
        "import json, os, pathlib, sys\n"
        "here = pathlib.Path(__file__).parent\n"
        "(here / 'env.json').write_text(json.dumps(dict(os.environ)))\n"
        "if sys.argv[1:] == ['show', 'node']:\n"
        "    sys.stdout.write((here / 'nodes.txt').read_text())\n"
        "else:\n"
        "    with open(here / 'updates.log', 'a') as log:\n"
        "        log.write(' '.join(sys.argv[1:]) + '\\n')\n")
    scontrol.chmod(0o755)
    return scontrol


def test_resume_leaves_nodes_out_of_service_for_someone_elses_reason(tmp_path: Path):
    """A stand-in scontrol shows the captured nodes and records updates: only gpu-001, which
    racklift drained, is resumed; gpu-002 (an operator's drain for a GPU fault) and gpu-003
    (set DOWN by hand for a cable) are not even asked about."""
    scontrol = stand_in_scontrol(tmp_path)
    result = Slurm(scontrol=str(scontrol)).resume(["gpu-001", "gpu-002", "gpu-003"],
                                                   "racklift reimage run r1: passed")
    assert (tmp_path / "updates.log").read_text() == "update nodename=gpu-001 state=resume\n"
    assert result.errors["gpu-002"].startswith(
        "gpu-002: Slurm shows IDLE+DRAIN with reason 'GPU 3 Xid 79: fallen off the bus, x=1', "
        "which racklift did not set: left as it is")
    assert result.errors["gpu-003"].startswith(
        "gpu-003: Slurm shows DOWN with reason 'cable', which racklift did not set")


@pytest.mark.parametrize("conf", [False, True], ids=["own-conf", "slurm-conf"])
def test_scontrol_gets_racklifts_environment_without_its_secrets(tmp_path: Path, monkeypatch,
                                                                conf):
    # Planted: racklift runs with the NetBox token and a BMC password in its environment; the
    # stand-in scontrol (a wrapper could as well ssh to the head node) keeps what it got.
    secrets = {"NETBOX_TOKEN": "nb-s3cret", ENV_PASSWORD: "bmc-s3cret"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    slurm_conf = tmp_path / "slurm.conf"
    slurm_conf.write_text("ClusterName=x\n")
    hook = Slurm(scontrol=str(stand_in_scontrol(tmp_path)), conf=slurm_conf if conf else None)
    assert hook.state(["gpu-001"]) == {"gpu-001": "ALLOCATED+DRAIN"}
    env = json.loads((tmp_path / "env.json").read_text())
    assert not set(secrets) & set(env) and "s3cret" not in json.dumps(env)
    assert env["PATH"] == os.environ["PATH"]  # what scontrol needs still reaches it
    assert env.get("SLURM_CONF") == (str(slurm_conf) if conf else os.environ.get("SLURM_CONF"))


def test_bad_node_names_would_expand_or_split():
    bad = bad_node_names(["gpu-001", "gpu-[001-004]", "gpu-1,gpu-2", "gpu 1", "", "n1.r2_a"])
    assert set(bad) == {"gpu-[001-004]", "gpu-1,gpu-2", "gpu 1", ""}
    assert "not a Slurm node name" in bad["gpu-[001-004]"]


def test_failure_says_what_to_do():
    message = failure(["scontrol", "show", "node"], 1, CONTROLLER_DOWN)
    assert message == (
        "Slurm: `scontrol show node` failed: slurm_load_node error: Unable to contact slurm "
        "controller (connect failure); check that slurmctld is running and reachable from "
        "this controller (`scontrol ping`), then retry")
    quoted = failure(["scontrol", "update", "nodename=n1", "reason=a b"], 1, "")
    assert quoted == ("Slurm: `scontrol update nodename=n1 'reason=a b'` failed: "
                      "exit status 1; fix what it says and retry")


@pytest.mark.parametrize("reason", ["", "   ", "two\nlines", "tab\there"])
def test_reason_must_be_one_line(reason):
    with pytest.raises(RackliftError, match="must be one non-empty line"):
        one_line(reason)


@pytest.mark.parametrize("value", [None, "", "none", "NONE", " none "])
def test_no_scheduler(value):
    environ = {} if value is None else {SCHEDULER_VAR: value}
    assert scheduler_from_env(environ) is None


def test_slurm_from_env_defaults_and_options(tmp_path: Path):
    hook = scheduler_from_env({SCHEDULER_VAR: "slurm"})
    assert hook == Slurm()
    assert (hook.name, hook.scontrol, hook.conf, hook.timeout) == ("slurm", "scontrol", None, 60)
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    hook = scheduler_from_env({SCHEDULER_VAR: "Slurm", "RACKLIFT_SLURM_SCONTROL": "/opt/sc",
                               "RACKLIFT_SLURM_CONF": str(conf), "RACKLIFT_SLURM_TIMEOUT": "7.5"})
    assert hook == Slurm(scontrol="/opt/sc", conf=conf, timeout=7.5)


@pytest.mark.parametrize(("environ", "message"), [
    ({SCHEDULER_VAR: "pbs"},
     r"RACKLIFT_SCHEDULER='pbs' is not a scheduler racklift knows: set it to one of slurm, none"),
    ({SCHEDULER_VAR: "slurm", "RACKLIFT_SLURM_TIMEOUT": "soon"},
     r"RACKLIFT_SLURM_TIMEOUT='soon' is not a number of seconds above 0"),
    ({SCHEDULER_VAR: "slurm", "RACKLIFT_SLURM_TIMEOUT": "0"},
     r"RACKLIFT_SLURM_TIMEOUT='0' is not a number of seconds above 0"),
    ({SCHEDULER_VAR: "slurm", "RACKLIFT_SLURM_CONF": "/nonexistent/slurm.conf"},
     r"RACKLIFT_SLURM_CONF='/nonexistent/slurm.conf': no such file"),
])
def test_bad_configuration_names_the_variable(environ, message):
    with pytest.raises(RackliftError, match=message):
        scheduler_from_env(environ)


def test_missing_scontrol_is_a_clear_per_host_error(tmp_path: Path):
    hook = Slurm(scontrol=str(tmp_path / "scontrol"))
    result = hook.drain(["gpu-001", "gpu-002"], "racklift reimage")
    assert result.ok == {}
    assert set(result.errors) == {"gpu-001", "gpu-002"}
    assert result.errors["gpu-001"].startswith(
        f"gpu-001: Slurm: cannot run '{tmp_path / 'scontrol'}' (No such file or directory): "
        "install Debian's slurm-client on this controller, or set RACKLIFT_SLURM_SCONTROL")
    with pytest.raises(RackliftError, match="RACKLIFT_SLURM_SCONTROL"):
        hook.state(["gpu-001"])
