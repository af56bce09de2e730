"""dcgmi diag on real captures (tests/fixtures/real/SOURCES.md): DCGM 2.x, 3.3.x and 4.x text
tables, passes and failures (PCIe on a CUDA/driver mismatch, GPU memory on all GPUs or on GPU 0
alone, 4.x's child-process errors with every GPU passing), the table printed twice, text around
it, an early Error row; 3.1's -j JSON; and what is no dcgmi output."""

from pathlib import Path

import pytest

from racklift.facts.parsers import ParseError, parse_dcgmi_diag

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def _diag(name: str):
    # Excerpts keep the poster's "..." where lines were left out: not dcgmi's.
    text = (REAL / f"dcgmi-diag{name}").read_text()
    return parse_dcgmi_diag("\n".join(line for line in text.splitlines() if line.strip() != "..."))


def test_dcgm_2_level_4_passes_every_test():
    diag = _diag("-r4_gpus-unstated_2.x-unstated_pass-all-blacklist.txt")
    assert diag.version is None and diag.failed == ()
    assert {t.category for t in diag.tests} == {"Deployment", "Integration", "Hardware", "Stress"}
    assert ("Stress", "Targeted Stress", "Pass") in {(t.category, t.name, t.result)
                                                     for t in diag.tests}


def test_dcgm_3_pcie_fails_on_all_gpus_with_its_warning():
    diag = _diag("-r2_8x-rtx-3090_3.3.0_pcie-fail-all-cuda-driver-mismatch.txt")
    assert (diag.version, diag.driver) == ("3.3.0", "530.30.02")
    (pcie,) = diag.failed
    assert (pcie.category, pcie.name, pcie.result) == ("Integration", "PCIe", "Fail")
    assert pcie.warnings[0].startswith("GPU 0 Error using CUDA API cudaDeviceGetByPCIBusId")
    assert "unsupported display driver / cuda driver combination" in pcie.warnings[0]
    assert ("GPU Memory", "Skip") in {(t.name, t.result) for t in diag.tests}


def test_one_gpu_failing_fails_the_test_and_is_named():
    (memory,) = _diag("-r2_8-gpus_version-unstated_gpu-memory-fail-gpu0-thermal_excerpt.txt").tests
    assert memory.result == "Fail" and dict(memory.gpus)[0] == "Fail"
    assert sorted(g for g, r in memory.gpus if r == "Pass") == [1, 2, 3, 4, 5, 6, 7]
    assert "Thermal violations totaling 13.3 seconds" in memory.warnings[0]


def test_dcgm_4_per_gpu_rows_and_child_process_errors():
    diag = _diag("-r2_4x-l40s_4.2.3_pcie-fail-child-output-unparsable_excerpt.txt")
    assert diag.version == "4.2.3"
    (pcie,) = diag.failed
    assert pcie.name == "pcie" and len(pcie.warnings) == 4
    assert dict(pcie.gpus) == {0: "Pass", 1: "Pass", 2: "Pass", 3: "Pass"}  # yet it failed
    passed = _diag("-r2_1x-a10g_4.4.2_pass-per-gpu-layout.txt")
    assert [(t.name, t.gpus) for t in passed.tests] == [
        ("software", ((0, "Pass"),)), ("memory", ((0, "Pass"),)), ("pcie", ((0, "Pass"),))]


def test_a_table_printed_twice_is_read_once_and_text_around_it_is_not_read():
    diag = _diag("-r3_2x-rtx-pro-6000-blackwell-server_3.3.9_skip-all-printed-twice.txt")
    assert len(diag.tests) == len({t.name for t in diag.tests}) == 15
    assert diag.failed == ()
    b200 = _diag("-r2_8x-b200_4.4.1_pcie-fail-child-output-unparsable-under-srun.txt")
    assert [t.name for t in b200.failed] == ["pcie"]


def test_a_memory_failure_cut_short_and_an_early_error():
    diag = _diag("-r3_8x-h100-80gb-hbm3_3.3.8_gpu-memory-fail-all-cuinit_fail-early.txt")
    (memory,) = diag.failed
    assert "Unable to initialize CUDA library" in memory.warnings[0]
    persistence = next(t for t in diag.tests if t.name == "Persistence Mode")
    assert persistence.result == "Pass" and "Persistence mode for GPU 0" in persistence.info[0]
    (error,) = _diag("_level-unstated_gpus-unstated_version-unstated_deployment-error-row-remap-"
                     "pending_excerpt.txt").failed
    assert error.result == "Error" and "row remappings are pending" in error.warnings[0]


def test_dcgm_3_json():
    diag = _diag("-j_8-gpus_3.1.0_deployment-pass_nvidia-unit-test-warning-prefix-nulls.txt")
    assert diag.failed == () and len(diag.tests) == 10
    denylist = diag.tests[0]
    assert (denylist.category, denylist.name, denylist.result) == ("Deployment", "Denylist",
                                                                   "Pass")
    assert [g for g, _ in denylist.gpus] == list(range(8))


@pytest.mark.parametrize("text", [
    "",
    "Error: unable to establish a connection to the specified host: localhost\n",
    "+---------------------------+------------------------------------------------+\n"
    "| PCIe                      | Exploded                                       |\n",
    '{"DCGM GPU Diagnostic": {"test_categories": [{"tests": 3}]}}',
])
def test_what_is_no_diagnostic_is_refused(text):
    with pytest.raises(ParseError):
        parse_dcgmi_diag(text)
