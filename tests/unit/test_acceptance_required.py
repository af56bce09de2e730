"""What acceptance requires to have run, not only to have passed: the DCGM tests the device
type names (or its level's defaults), judged on real captures (tests/fixtures/real/SOURCES.md)
where DCGM skipped tests, left them out or ran a lower level; and a record asking for a test
with nothing in NetBox to run it on, refused at the pipeline's preflight."""

from dataclasses import replace
from pathlib import Path

import pytest

import emulated
from racklift.facts.observed import DcgmDiag, DcgmTest, NcclRow, NcclRun
from racklift.facts.parsers import parse_dcgmi_diag
from racklift.lifecycle.stages import ACCEPT, CONFIGURE, VERIFY
from racklift.netbox.desired import Acceptance, parse
from racklift.pipeline.outcome import PREFLIGHT
from racklift.pipeline.plan import HostPlan
from racklift.pipeline.provision import HostRun, _preflight
from racklift.verify.acceptance import acceptance_problems, asks_acceptance, judge_acceptance

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
HOST = emulated.expected_host()  # its context asks for DCGM level 2, NCCL and RDMA


def _diag(name: str) -> DcgmDiag:
    return parse_dcgmi_diag((REAL / f"dcgmi-diag{name}").read_text())


def _not_run(want: Acceptance, diag: DcgmDiag) -> list[tuple[str, str]]:
    return [(m.field, m.observed) for m in judge_acceptance(want, dcgm=diag)]


H200_R3 = _diag("-r3_8x-h200_3.3.9_pass-all-eud-skip.txt")
A100_R2 = _diag("-r2_8x-a100-sxm4-80gb-p4de_3.3.3_pass-empty-stress-section.txt")


def test_each_level_requires_what_every_datacenter_gpu_runs_unless_the_type_names_tests():
    assert Acceptance().dcgm_tests == ()
    assert Acceptance(dcgm_level=1).dcgm_tests == ("software",)
    assert Acceptance(dcgm_level=2).dcgm_tests == ("software", "pcie", "memory")
    assert Acceptance(dcgm_level=3).dcgm_tests == (
        "software", "pcie", "memory", "diagnostic", "targeted_stress", "targeted_power",
        "memory_bandwidth")
    assert Acceptance(dcgm_level=4).dcgm_tests[-2:] == ("pulse_test", "memtest")
    state = parse({"acceptance": {"dcgm_level": 3, "dcgm_required": ["software", "eud"]}})
    assert not isinstance(state, list)
    assert state.acceptance.dcgm_tests == ("software", "eud")


@pytest.mark.parametrize("value", [["GPU Memory"], ["pcie", "nvlink"], "pcie", [["pcie"]]])
def test_a_test_dcgm_does_not_have_is_refused_naming_the_field(value):
    (problem,) = parse({"acceptance": {"dcgm_level": 2, "dcgm_required": value}})
    assert problem.field == "config_context.racklift.acceptance.dcgm_required"
    assert "memory_bandwidth" in problem.message  # the names it takes


def test_printed_titles_are_the_names_dcgmi_takes():
    """3.x titles, 3.x's deployment rows (together `software`) and 4.x's names; the level is
    the highest of the tests printed, skipped ones too."""
    assert {t.test for t in H200_R3.tests} == {
        "software", "pcie", "memory", "diagnostic", "targeted_stress", "targeted_power",
        "memory_bandwidth", "eud"}
    assert (H200_R3.level, A100_R2.level) == (3, 2)
    dcgm4 = _diag("-r3_4x-25b6_4.0.0_pass-per-gpu-layout_nvidia-docs.txt")
    assert dcgm4.level == 3 and {t.test for t in dcgm4.tests} == {
        "software", "memory", "diagnostic", "pcie", "memory_bandwidth", "targeted_stress",
        "targeted_power"}
    assert _diag("-r4_gpus-unstated_2.x-unstated_pass-all-blacklist.txt").level == 4


@pytest.mark.parametrize(("level", "capture"), [
    (3, "-r3_8x-h200_3.3.9_pass-all-eud-skip.txt"),  # the EUD skipped: not required
    (3, "-r3_4x-25b6_4.0.0_pass-per-gpu-layout_nvidia-docs.txt"),
    (2, "-r2_1x-a10g_4.4.2_pass-per-gpu-layout.txt"),
    (2, "-r2_8x-a100-sxm4-80gb-p4de_3.3.3_pass-empty-stress-section.txt"),
    (4, "-r4_gpus-unstated_2.x-unstated_pass-all-blacklist.txt"),
])
def test_a_run_of_every_required_test_passes(level, capture):
    assert judge_acceptance(Acceptance(dcgm_level=level), dcgm=_diag(capture)) == []


def test_a_level_3_run_that_skipped_everything_but_the_deployment_checks_fails():
    """The RTX PRO 6000 capture: `dcgmi diag -r 3` exits 0 with Deployment passing and every
    other test "Skip - All"; its table has no Diagnostic row."""
    diag = _diag("-r3_2x-rtx-pro-6000-blackwell-server_3.3.9_skip-all-printed-twice.txt")
    assert diag.failed == ()
    assert _not_run(Acceptance(dcgm_level=3), diag) == [
        ("accept.dcgm.pcie", "skipped: no reason printed"),
        ("accept.dcgm.memory", "skipped: no reason printed"),
        ("accept.dcgm.diagnostic", "absent from the output"),
        ("accept.dcgm.targeted_stress", "skipped: no reason printed"),
        ("accept.dcgm.targeted_power", "skipped: no reason printed"),
        ("accept.dcgm.memory_bandwidth", "skipped: no reason printed")]
    # A type whose GPUs DCGM tests no further says so: what it names must run.
    assert judge_acceptance(Acceptance(dcgm_level=3, dcgm_required=("software",)),
                            dcgm=diag) == []


def test_an_output_of_a_lower_level_than_asked_names_both():
    assert _not_run(Acceptance(dcgm_level=4), H200_R3) == [
        ("accept.dcgm.pulse_test", "not run: the run was level 3, level 4 asked"),
        ("accept.dcgm.memtest", "not run: the run was level 3, level 4 asked")]
    assert _not_run(Acceptance(dcgm_level=3), A100_R2)[0] == (
        "accept.dcgm.diagnostic", "not run: the run was level 2, level 3 asked")


def test_a_run_stopped_early_and_a_run_that_errored_prove_nothing_of_the_rest():
    early = _diag("-r3_8x-h100-80gb-hbm3_3.3.8_gpu-memory-fail-all-cuinit_fail-early.txt")
    assert [f for f, _ in _not_run(Acceptance(dcgm_level=3), early)] == [
        "accept.dcgm.GPU Memory", "accept.dcgm.pcie", "accept.dcgm.diagnostic",
        "accept.dcgm.targeted_stress", "accept.dcgm.targeted_power",
        "accept.dcgm.memory_bandwidth"]
    # The Error row before any test is the run's own, not DCGM's Diagnostic test.
    errored = _diag("_level-unstated_gpus-unstated_version-unstated_deployment-error-row-remap-"
                    "pending_excerpt.txt")
    assert _not_run(Acceptance(dcgm_level=3), errored) == [
        ("accept.dcgm.run", "Error: GPU 3 has uncorrectable memory errors and row remappings "
                            "are pending"),
        *((f"accept.dcgm.{name}", "absent from the output") for name in (
            "software", "pcie", "memory", "diagnostic", "targeted_stress", "targeted_power",
            "memory_bandwidth"))]


def test_a_gpu_a_required_test_skipped_is_named_with_dcgms_reason():
    """3.x splits a result by GPU ("Pass - GPUs: 0, 1" over "Skip - GPU: 2"): the test passed,
    yet GPU 2 was not tested."""
    pcie = DcgmTest("Integration", "PCIe", "Pass", ((0, "Pass"), (1, "Pass"), (2, "Skip")),
                    info=("GPU 2 is in MIG mode",))
    diag = replace(A100_R2, tests=tuple(pcie if t.name == "PCIe" else t
                                        for t in A100_R2.tests))
    assert _not_run(Acceptance(dcgm_level=2), diag) == [
        ("accept.dcgm.pcie", "skipped on GPU 2: GPU 2 is in MIG mode")]


def test_rdma_asked_with_no_port_tested_is_no_pass():
    (none,) = judge_acceptance(Acceptance(rdma_gbps=370), rdma={})
    assert (none.field, none.observed) == ("accept.rdma", "no HCA port tested")


def _problems(host) -> list[tuple[str, str]]:
    return [(p.field.removeprefix("config_context.racklift.acceptance."), p.message)
            for p in acceptance_problems(host)]


def test_a_test_asked_with_nothing_in_netbox_to_run_it_on_is_a_record_problem():
    assert acceptance_problems(HOST) == []
    no_ib = replace(HOST, interfaces=tuple(i for i in HOST.interfaces if not i.is_infiniband),
                    parsed=None)
    assert [f for f, _ in _problems(no_ib)] == ["rdma_gbps"]
    assert "no InfiniBand interfaces in NetBox" in _problems(no_ib)[0][1]
    no_gpus = replace(HOST, gpus=(), parsed=None)
    assert [f for f, _ in _problems(no_gpus)] == ["nccl_busbw"]
    assert "records no GPUs for the device" in _problems(no_gpus)[0][1]
    unasked = replace(no_gpus, interfaces=no_ib.interfaces, config={
        **HOST.config, "acceptance": {"dcgm_level": 2}}, parsed=None)
    assert acceptance_problems(unasked) == []


def test_dcgm_tests_its_level_does_not_run_are_a_record_problem():
    def asking(acceptance: dict) -> list[str]:
        host = replace(HOST, config={**HOST.config, "acceptance": acceptance}, parsed=None)
        return [m for _, m in _problems(host)]

    assert asking({"dcgm_level": 2, "dcgm_required": ["pcie", "targeted_power"]}) == [
        "targeted_power do not run at level 2: raise dcgm_level to 3 or drop them"]
    assert asking({"dcgm_required": ["pcie"]}) == [
        "is set but dcgm_level is null, so DCGM does not run: set the level or unset it"]
    assert asking({"dcgm_level": 4, "dcgm_required": ["memtest"]}) == []


def test_the_preflight_refuses_a_host_headed_for_acceptance_with_nothing_to_test():
    no_ib = replace(HOST, interfaces=tuple(i for i in HOST.interfaces if not i.is_infiniband),
                    parsed=None)
    refused = HostRun(no_ib, HostPlan((CONFIGURE, VERIFY, ACCEPT)), None)
    _preflight(refused)
    assert refused.result == PREFLIGHT and refused.reached == "preflight"
    assert refused.error is not None and refused.error.startswith(
        "config_context.racklift.acceptance.rdma_gbps: is set but the device has no InfiniBand")
    # Not headed for acceptance (--no-accept, --until verify): nothing asks it to be tested.
    until_verify = HostRun(no_ib, HostPlan((CONFIGURE, VERIFY)), None)
    _preflight(until_verify)
    assert until_verify.result == ""


def _with(acceptance) -> object:
    return replace(HOST, config={**HOST.config, "acceptance": acceptance}, parsed=None)


def test_only_a_context_asking_a_test_sends_the_host_to_acceptance():
    assert asks_acceptance(HOST)
    assert not asks_acceptance(_with({}))
    assert asks_acceptance(_with({"rdma_gbps": 370}))
    broken = _with({"dcgm_level": 9})  # does not parse: its problems say why
    assert broken.desired is None
    assert not asks_acceptance(broken) and acceptance_problems(broken) == []


def test_a_failed_dcgm_test_names_the_gpus_that_failed_or_errored():
    diag = DcgmDiag("3.3.9", "560", (DcgmTest("Hardware", "Memory", "Fail", (
        (0, "Pass"), (3, "Fail"), (5, "Error"), (6, "Skip")), ("DBE on GPU 3",)),))
    failed = [m for m in judge_acceptance(Acceptance(dcgm_level=1), dcgm=diag)
              if m.field == "accept.dcgm.Memory"]
    assert [m.observed for m in failed] == ["Fail on GPU 3, 5: DBE on GPU 3"]


def _nccl(rows=(), out_of_bounds=None, avg=None, errors=()) -> NcclRun:
    return NcclRun("all_reduce_perf", 8, rows, out_of_bounds, avg, errors)


def _busbw(run) -> list[tuple[str, str]]:
    return [(m.field, m.observed)
            for m in judge_acceptance(Acceptance(nccl_busbw=400.0), nccl=run)]


def test_an_nccl_run_that_did_not_finish_says_why_or_that_there_is_no_result():
    assert _busbw(None) == [("accept.nccl.busbw", "did not finish: no result")]
    assert _busbw(_nccl()) == [("accept.nccl.busbw", "did not finish: no result")]
    assert _busbw(_nccl(errors=("Test CUDA failure",))) == [
        ("accept.nccl.busbw", "did not finish: Test CUDA failure")]


def test_wrong_values_alone_fail_nccl_and_name_zero_out_of_bounds():
    rows = (NcclRow(8, 410.0, 220.0, 3, 410.0, 0),)
    assert _busbw(_nccl(rows, avg=410.0)) == [
        ("accept.nccl.wrong", "3 wrong values, 0 out of bounds")]
    [m] = judge_acceptance(Acceptance(nccl_busbw=400.0), nccl=_nccl(rows, avg=410.0))
    assert m.expected == 0  # no wrong value is acceptable


def test_an_nccl_bus_bandwidth_exactly_at_the_threshold_passes():
    rows = (NcclRow(8, 400.0, 220.0, 0, 400.0, 0),)
    assert _busbw(_nccl(rows, out_of_bounds=0, avg=400.0)) == []
    assert _busbw(_nccl(rows, out_of_bounds=0, avg=399.5)) == [
        ("accept.nccl.busbw", "399.5 GB/s")]
