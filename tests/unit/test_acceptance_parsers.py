"""nccl-tests and perftest bandwidth runs on real captures (tests/fixtures/real/SOURCES.md):
all_reduce_perf on 8x H100 in one node, 16 ranks over two under `srun -l` with validation off,
a GH200 run with wrong values and failed bounds, one that failed before its table; ib_write_bw
on ConnectX-5 RoCE in MiB/sec, a ConnectX-6 InfiniBand -a sweep in Gb/sec, a bidirectional
4-QP sweep; and what is neither."""

from pathlib import Path

import pytest

from racklift.facts.parsers import ParseError, parse_nccl_tests, parse_perftest_bw

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def _nccl(name: str):
    return parse_nccl_tests((REAL / f"nccl-tests-all_reduce_perf_{name}.txt").read_text())


def _perftest(name: str):
    return parse_perftest_bw((REAL / f"ib_write_bw_{name}.txt").read_text())


def test_eight_h100_in_one_node():
    run = _nccl("8x-h100-80gb-hbm3_single-node")
    assert (run.ranks, len(run.rows), run.out_of_bounds, run.avg_busbw) == (8, 6, 0, 439.369)
    largest = run.rows[-1]
    assert (largest.size, largest.busbw, largest.busbw_in_place) == (4294967296, 473.60, 476.53)
    assert {(r.wrong, r.wrong_in_place) for r in run.rows} == {(0, 0)} and run.errors == ()


def test_srun_label_prefixes_and_validation_off():
    run = _nccl("16x-h100-80gb-hbm3_2-nodes_srun-label-prefix_validation-off")
    assert (run.ranks, run.avg_busbw, run.out_of_bounds) == (16, 142.735, 0)
    assert run.rows[0].size == 8388608 and {r.wrong for r in run.rows} == {None}


def test_wrong_values_failed_bounds_and_failures():
    run = _nccl("2x-gh200-2-nodes_wrong-96-32_oob-4-FAILED")
    assert run.test == "all_reduce_perf" and run.out_of_bounds == 4
    (bad,) = [r for r in run.rows if r.wrong or r.wrong_in_place]
    assert (bad.size, bad.wrong, bad.wrong_in_place) == (1048576, 96, 32)
    assert len(run.errors) == 2 and "Test failure common.cu:1189" in run.errors[0]


def test_a_run_that_failed_before_its_table():
    run = _nccl("8x-gh200-2-nodes_srun_cuda-busy-error-no-table")
    assert (run.rows, run.avg_busbw, run.out_of_bounds) == ((), None, None)
    assert any("busy or unavailable" in e for e in run.errors)


def test_ib_write_bw_in_each_unit():
    roce = _perftest("connectx5-roce-100g_default-mib-sec_client")
    assert (roce.device, roce.link_type, roce.qps, roce.bidirectional) == (
        "mlx5_0", "Ethernet", 1, False)
    (row,) = roce.rows  # 11030.45 MiB/s is 92.53 Gb/s
    assert (row.size, row.average_gbps) == (65536, 92.53)
    ib = _perftest("connectx6-ib-100g_a-sweep_report-gbits_client")
    assert ib.link_type == "IB" and len(ib.rows) == 23
    assert (ib.rows[0].size, ib.rows[-1].size, ib.rows[-1].average_gbps) == (2, 8388608, 98.38)
    both = _perftest("amd-ainic-ionic-roce_bidir-a-sweep-q4_report-gbits_client")
    assert (both.test, both.bidirectional, both.qps) == ("RDMA_Write Bidirectional BW Test",
                                                         True, 4)
    assert both.rows[-1].average_gbps == 779.21


@pytest.mark.parametrize("parse, text", [
    (parse_nccl_tests, "srun: error: node005: task 0: Exited with exit code 1\n"),
    (parse_perftest_bw, "Couldn't connect to 10.0.0.2:18515\n"),
    (parse_perftest_bw, "                    RDMA_Write BW Test\n #bytes #iterations\n"),
])
def test_what_is_no_run_is_refused(parse, text):
    with pytest.raises(ParseError):
        parse(text)


def test_the_figures_against_the_device_types_thresholds():
    from racklift.facts.parsers import parse_dcgmi_diag
    from racklift.netbox.desired import Acceptance
    from racklift.verify.acceptance import best_gbps, judge_acceptance
    from racklift.verify.pairing import Pair, PortVerdict, RailPort, judge_pairs

    h100 = _nccl("8x-h100-80gb-hbm3_single-node")
    ib = best_gbps(_perftest("connectx6-ib-100g_a-sweep_report-gbits_client"))
    assert ib == 98.38

    def rdma(threshold: float) -> dict[str, PortVerdict]:
        """This host's mlx5_0 measured at the real run's figure with a partner that is fast
        with a third host; its mlx5_1 alone on its rail."""
        me, partner, third = (RailPort(h, "mlx5_0", "leaf-1") for h in ("me", "p", "q"))
        results = {Pair(me, partner): ib, Pair(partner, third): threshold + 10}
        alone = RailPort("me", "mlx5_1", "leaf-2")
        verdicts = judge_pairs(results, threshold, [me, partner, third, alone])
        return {v.port.port: v for v in verdicts if v.port.host == "me"}

    assert judge_acceptance(Acceptance(nccl_busbw=400, rdma_gbps=95), nccl=h100,
                            rdma={"mlx5_0": rdma(95)["mlx5_0"]}) == []
    slow = judge_acceptance(Acceptance(nccl_busbw=450, rdma_gbps=190), nccl=h100,
                            rdma=rdma(190))
    assert [(m.field, m.expected, m.observed) for m in slow] == [
        ("accept.nccl.busbw", ">= 450 GB/s", "439.369 GB/s"),
        ("accept.rdma[mlx5_0]", ">= 190 Gb/s", "98.38 Gb/s (slow: 98.38 Gb/s with p mlx5_0; "
                                                "its partners are fast with others)"),
        ("accept.rdma[mlx5_1]", ">= 190 Gb/s", "unproven: no other host on rail leaf-2 to "
                                                "test with")]
    wrong = judge_acceptance(Acceptance(nccl_busbw=1), nccl=_nccl(
        "2x-gh200-2-nodes_wrong-96-32_oob-4-FAILED"))
    assert [m.field for m in wrong] == ["accept.nccl.wrong"]
    assert wrong[0].observed == "128 wrong values, 4 out of bounds"
    unfinished = judge_acceptance(Acceptance(nccl_busbw=1), nccl=_nccl(
        "8x-gh200-2-nodes_srun_cuda-busy-error-no-table"))
    assert "busy or unavailable" in unfinished[0].observed
    diag = parse_dcgmi_diag((REAL / "dcgmi-diag-r2_8x-rtx-3090_3.3.0_pcie-fail-all-cuda-"
                                     "driver-mismatch.txt").read_text())
    pcie, memory = judge_acceptance(Acceptance(dcgm_level=2), dcgm=diag)
    assert pcie.field == "accept.dcgm.PCIe" and pcie.observed.startswith("Fail: GPU 0 Error")
    # Its GPU Memory test said Skip: no pass either.
    assert (memory.field, memory.observed) == ("accept.dcgm.memory", "skipped: no reason printed")
    assert judge_acceptance(Acceptance(dcgm_level=2))[0].observed == "not run"
    assert judge_acceptance(Acceptance(), dcgm=diag, nccl=h100) == []  # nothing asked
