"""nvidia-smi -q (plain text): the real H200 and H100 HGX captures, an 8x A100 node on driver 525
(its "Ecc Mode" label, as drivers before 530 print it), an L4 (Ada), the same facts as -q -x
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


def test_an_ampere_node_on_driver_525_and_an_ada_l4():
    a100 = parse_nvidia_smi_q(
        (REAL / "nvidia-smi-q_a100-sxm4-80gb-x8_525.60.13.txt").read_text())
    assert (a100.driver_version, a100.cuda_version, a100.attached_gpus, len(a100.gpus)) == (
        "525.60.13", "12.0", 8, 8)
    gpu = a100.gpus[0]
    assert (gpu.name, gpu.product_architecture, gpu.serial, gpu.pci_bus_id) == (
        "NVIDIA A100-SXM4-80GB", "Ampere", "1562221013740", "0000:07:00.0")
    assert (gpu.ecc_mode_current, gpu.mig_mode_current, gpu.memory_total_mib) == (
        "Enabled", "Disabled", 81920)
    assert (gpu.remapped_rows_pending, gpu.retired_pages_pending) == (False, None)
    assert len({g.serial for g in a100.gpus}) == 8
    (l4,) = parse_nvidia_smi_q((REAL / "nvidia-smi-q_l4_550.90.07.txt").read_text()).gpus
    assert (l4.name, l4.product_architecture, l4.memory_total_mib) == (
        "NVIDIA L4", "Ada Lovelace", 23034)
    assert (l4.pcie_gen_current, l4.pcie_width_current, l4.ecc_mode_current) == (1, 8, "Enabled")


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
