"""The acceptance stage's reading of what hosts printed (pure parts): real captures judged
against a context's thresholds, outputs that are missing, unreadable or too large, the rails a
host's ports are paired on, and the summary that goes to the journal and the device."""

from dataclasses import replace
from pathlib import Path

import emulated
from racklift.netbox.desired import Acceptance
from racklift.pipeline.accept_stage import (
    DCGM_TASK,
    MAX_OUTPUT,
    NCCL_TASK,
    HostAcceptance,
    judge_local,
    rail_ports,
    untestable,
)
from racklift.verify.mismatch import CRITICAL, Mismatch
from racklift.verify.pairing import UNPROVEN

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
HOST = emulated.expected_host()
H100_NCCL = (REAL / "nccl-tests-all_reduce_perf_8x-h100-80gb-hbm3_single-node.txt").read_text()
H200_DCGM = (REAL / "dcgmi-diag-r3_8x-h200_3.3.9_pass-all-eud-skip.txt").read_text()
FAILING_DCGM = (REAL / "dcgmi-diag-r2_8x-rtx-3090_3.3.0_pcie-fail-all-cuda-driver-mismatch.txt"
                ).read_text()


def ran(stdout: str, rc: int = 0) -> dict:
    """An Ansible command task's result, as the runner's event carries it."""
    return {"stdout": stdout, "stderr": "", "rc": rc}


def test_real_runs_that_reach_their_thresholds_pass_with_their_figures():
    mismatches, figures = judge_local(HOST, Acceptance(dcgm_level=3, nccl_busbw=400),
                                      {DCGM_TASK: ran(H200_DCGM), NCCL_TASK: ran(H100_NCCL)})
    assert mismatches == []
    assert figures == {"dcgm": {"level": 3, "result": "pass"}, "nccl_busbw": 439.369}


def test_a_failed_diagnostic_and_a_slow_all_reduce_are_named_with_their_figures():
    mismatches, figures = judge_local(HOST, Acceptance(dcgm_level=2, nccl_busbw=450),
                                      {DCGM_TASK: ran(FAILING_DCGM), NCCL_TASK: ran(H100_NCCL)})
    assert [m.field for m in mismatches] == ["accept.dcgm.PCIe", "accept.dcgm.memory",
                                             "accept.nccl.busbw"]
    assert mismatches[2].observed == "439.369 GB/s"
    assert figures["dcgm"]["result"] == "failed PCIe, memory"  # memory: skipped, and required


def test_a_tool_that_is_missing_or_prints_something_else_fails_that_test_alone():
    missing = {"rc": 2, "stdout": "", "msg": "[Errno 2] No such file or directory: b'dcgmi'"}
    mismatches, figures = judge_local(HOST, Acceptance(dcgm_level=2, nccl_busbw=400),
                                      {DCGM_TASK: missing, NCCL_TASK: ran("Segmentation fault")})
    assert [(m.field, m.severity) for m in mismatches] == [
        ("accept.dcgm", CRITICAL), ("accept.nccl.busbw", CRITICAL)]
    assert mismatches[0].observed == "not run: [Errno 2] No such file or directory: b'dcgmi'"
    assert mismatches[1].observed.startswith("output not readable: ")
    assert figures == {"dcgm": {"level": 2, "result": "not run"}, "nccl_busbw": None}


def test_an_output_over_the_limit_is_refused_unread():
    (refused,) = judge_local(HOST, Acceptance(nccl_busbw=1),
                             {NCCL_TASK: ran("#" * (MAX_OUTPUT + 1))})[0]
    assert "over the 4 MiB racklift reads" in refused.observed


def test_nothing_asked_is_nothing_judged():
    assert judge_local(HOST, Acceptance(), {DCGM_TASK: ran(FAILING_DCGM)}) == ([], {})


def test_ports_are_paired_on_the_switch_their_cable_ends_at_or_on_their_own_name():
    ports = {p.port: p.rail for p in rail_ports(HOST)}
    assert ports["mlx5_0"] == "ib-leaf-u01-1-0" and ports["mlx5_7"] == "ib-leaf-u01-1-7"
    uncabled = replace(HOST, interfaces=tuple(replace(i, peer=None) for i in HOST.interfaces),
                       parsed=None)
    assert {p.rail for p in rail_ports(uncabled)} == {f"mlx5_{i}" for i in range(8)}
    # Named by netdev, the CA in the label: ib_write_bw takes the CA. A label that is prose
    # (the seed's "ConnectX-7 mlx5_0") is no device name.
    netdev = replace(HOST, interfaces=tuple(
        replace(i, name=f"ibp{n}s0", label=i.name) if i.is_infiniband else i
        for n, i in enumerate(HOST.interfaces)), parsed=None)
    assert sorted(p.port for p in rail_ports(netdev)) == [f"mlx5_{i}" for i in range(8)]
    prose = replace(HOST, interfaces=tuple(
        replace(i, label=f"ConnectX-7 {i.name}") for i in HOST.interfaces), parsed=None)
    assert rail_ports(prose)[0].port == "mlx5_0"


def test_a_port_no_device_name_can_be_told_for_is_never_on_a_command_line():
    """A NetBox name is text anyone with edit rights wrote: `mlx5_0 -p 1; x` goes on no
    ib_write_bw command line; the port is unproven, saying what to set."""
    planted = "mlx5_0 -p 1; touch /tmp/racklift-planted"
    hostile = replace(HOST, interfaces=tuple(
        replace(i, name=planted, label=None) if i.name == "mlx5_0" else i
        for i in HOST.interfaces), parsed=None)
    assert planted not in {p.port for p in rail_ports(hostile)}
    assert len(rail_ports(hostile)) == 7
    (unproven,) = untestable(hostile)
    assert unproven.outcome == UNPROVEN and "set its label to the CA" in unproven.why
    assert untestable(HOST) == []


def test_the_summary_names_the_figures_against_their_thresholds():
    want = Acceptance(dcgm_level=2, nccl_busbw=350, rdma_gbps=370)
    slow = Mismatch("accept.rdma[mlx5_3]", ">= 370 Gb/s", "118 Gb/s", CRITICAL, "")
    got = HostAcceptance("h", want, (slow,), {
        "dcgm": {"level": 2, "result": "pass"}, "nccl_busbw": 480.5,
        "rdma": {"mlx5_0": {"gbps": 391.2}, "mlx5_3": {"gbps": 118.0}}})
    assert not got.passed and got.failures == [str(slow)]
    assert got.figures_line() == ("dcgm r2 pass; nccl 480.5 GB/s (>= 350); rdma min 118 Gb/s "
                                  "(>= 370) on 2 ports")
    assert got.summary().split(" ", 1)[1].startswith("failed: dcgm r2 pass")


def test_a_test_asked_for_that_never_ran_is_no_pass():
    """No GPUs in NetBox (all_reduce_perf had nothing to run on) or a play that stopped: the
    test asked for fails, it is not skipped."""
    mismatches, figures = judge_local(HOST, Acceptance(dcgm_level=2, nccl_busbw=350), {})
    assert [(m.field, m.observed.split(":")[0]) for m in mismatches] == [
        ("accept.dcgm", "not run"), ("accept.nccl.busbw", "not run")]
    assert figures == {"dcgm": {"level": 2, "result": "not run"}, "nccl_busbw": None}
    skipped = {"skipped": True, "skip_reason": "Conditional result was False"}
    (nccl,) = judge_local(HOST, Acceptance(nccl_busbw=350), {NCCL_TASK: skipped})[0]
    assert nccl.severity == CRITICAL and "did not run on the host" in nccl.observed


SKIPPED_DCGM = (REAL / "dcgmi-diag-r3_2x-rtx-pro-6000-blackwell-server_3.3.9_skip-all-printed-twice"
                ".txt").read_text()


def test_a_run_that_skipped_required_tests_is_not_summed_up_as_a_pass():
    mismatches, figures = judge_local(HOST, Acceptance(dcgm_level=3),
                                      {DCGM_TASK: ran(SKIPPED_DCGM)})
    assert mismatches and all(m.severity == CRITICAL for m in mismatches)
    assert figures["dcgm"]["result"].startswith("failed ")
    assert "targeted_stress" in figures["dcgm"]["result"]


def test_the_contexts_own_required_tests_are_the_ones_judged():
    # The H200 capture skips the EUD test: required by this context, not by the default.
    want = Acceptance(dcgm_level=3, dcgm_required=("software", "eud"))
    mismatches, figures = judge_local(HOST, want, {DCGM_TASK: ran(H200_DCGM)})
    assert [m.field for m in mismatches] == ["accept.dcgm.eud"]
    assert figures["dcgm"]["result"] == "failed eud"
