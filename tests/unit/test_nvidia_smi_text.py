"""nvidia-smi -q (plain text): the real H200 and H100 HGX captures, the same facts as -q -x
gives for the same machine (the lab emulator prints both, in the captures' formats), and
hostile input."""

from dataclasses import replace
from pathlib import Path

import pytest

from racklift.facts.parsers import ParseError, parse_nvidia_smi_q, parse_nvidia_smi_xml
from racklift.lab import hwemu

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def test_an_h200():
    facts = parse_nvidia_smi_q((REAL / "nvidia-smi-q_h200_550.90.12.txt").read_text())
    assert (facts.driver_version, facts.cuda_version, facts.attached_gpus) == (
        "550.90.12", "12.4", 1)
    (gpu,) = facts.gpus
    assert (gpu.name, gpu.serial, gpu.pci_bus_id, gpu.module_id) == (
        "NVIDIA H200", "1753724031847", "0000:03:00.0", 3)
    assert (gpu.memory_total_mib, gpu.pcie_width_current, gpu.power_draw_w) == (143771, 16, 74.58)
    assert (gpu.ecc_volatile_uncorrected, gpu.remapped_rows_pending) == (0, False)
    assert (gpu.fabric_state, gpu.pci_device_id) == ("Completed", "233510DE")


def test_an_h100_of_an_hgx_board_with_r565_platform_info():
    facts = parse_nvidia_smi_q(
        (REAL / "nvidia-smi-q_h100-80gb-hbm3_565.57.01_gpu0.txt").read_text())
    assert facts.attached_gpus == 8 and len(facts.gpus) == 1  # the capture keeps GPU 0
    gpu = facts.gpus[0]
    assert (gpu.pci_bus_id, gpu.module_id, gpu.power_draw_w) == ("0000:18:00.0", 2, 100.89)


@pytest.mark.parametrize("fault", [None, "ecc-uncorrected", "pcie-degraded", "gpu-lost",
                                   "driver-version-wrong", "gpu-missing"])
def test_text_and_xml_give_the_same_facts(fault):
    profile = hwemu.generate_profile("gpu-q01", "S421GE0001X0001", 3)
    profile = hwemu.inject(profile, fault) if fault else profile
    text = parse_nvidia_smi_q(hwemu.nvidia_smi_q(profile))
    xml = parse_nvidia_smi_xml(hwemu.nvidia_smi_xml(profile))
    assert replace(text, schema=None, errors=()) == replace(xml, schema=None, errors=())


@pytest.mark.parametrize("text", [
    "",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
    "==============NVSMI LOG==============\n" + "x" * 2000 + " : 1\n",
    "==============NVSMI LOG==============\n   Odd Indent : 1\n",
    "==============NVSMI LOG==============\n    Orphan : 1\n",
    "==============NVSMI LOG==============\nAttached GPUs : 99999999999999999999999999\n",
    "==============NVSMI LOG==============\n" * 100_001,
])
def test_what_is_no_nvidia_smi_q_is_refused(text):
    with pytest.raises(ParseError):
        parse_nvidia_smi_q(text)
