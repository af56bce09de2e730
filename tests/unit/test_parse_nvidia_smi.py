"""nvidia-smi's XML and CSV (src/racklift/facts/parsers/nvidia_smi.py): real `-q -x` captures of
several DTD versions and drivers, `--query-gpu` CSV of a real H100, N/A and masked forms, output
that is not nvidia-smi's, and the lab emulator's output under every fault read back as the
profile says. One of the parsers' test files, one per module of src/racklift/facts/parsers (and
facts/xid.py), named test_parse_<module>.py. Inline samples that are not captures are marked
"synthetic"."""

from __future__ import annotations

import re

import parse_support
import pytest
from parse_support import A100_MIG_XML, BLACKWELL_XML, H100_CSV, P4_XML, T4_XML, real

from racklift.facts.observed import GPUFacts
from racklift.facts.parsers import ParseError, parse_nvidia_smi_csv, parse_nvidia_smi_xml
from racklift.lab import hwemu

profile = parse_support.profile


# --------------------------------------------------------------------------- nvidia-smi -q -x


def test_xml_real_a100_mig_535_telegraf() -> None:
    """A100-SXM4-80GB, driver 535.54.03, MIG on (influxdata/telegraf a100-sxm4-v12.xml).

    The upstream file kept only the first of 4 GPUs: attached_gpus says 4, one is listed -
    exactly the shape of a host where NVML cannot reach some GPUs.
    """
    smi = parse_nvidia_smi_xml(real(A100_MIG_XML))
    assert (smi.driver_version, smi.cuda_version) == ("535.54.03", "12.2")
    assert smi.schema == "nvsmi_device_v12.dtd"
    assert smi.attached_gpus == 4
    assert len(smi.gpus) == 1
    assert smi.errors == ()
    gpu = smi.gpus[0]
    assert gpu == GPUFacts(
        index=0, name="NVIDIA A100-SXM4-80GB", serial="1650522003820",
        uuid="GPU-513536b6-7d19-9063-b049-1e69664bb298", pci_bus_id="0000:01:00.0",
        vbios_version="92.00.36.00.02", board_part_number="692-2G506-0212-002",
        ecc_mode_current="Enabled", ecc_mode_pending="Enabled",
        ecc_volatile_uncorrected=0, ecc_aggregate_uncorrected=0, ecc_volatile_corrected=0,
        retired_pages_pending=None, retired_pages_count=None,  # all N/A in this capture
        remapped_rows_pending=None, remapped_rows_failure=None,  # <remapped_rows>N/A
        remapped_rows_uncorrectable=None,
        pcie_gen_current=4, pcie_gen_max=4, pcie_width_current=16, pcie_width_max=16,
        persistence_mode="Disabled", mig_mode_current="Enabled", mig_devices=4,
        memory_total_mib=81920, temperature_c=27, power_draw_w=67.03,
        ecc_aggregate_corrected=0, product_architecture="Ampere",
        gpu_part_number="20B2-895-A1", module_id=4, pci_device_id="20B210DE",
        fabric_state=None, fabric_status=None,
    )
    assert smi.gpu_by_bus_id("0000:01:00.0") is gpu


def test_xml_real_tesla_t4_v11_retired_pages_and_degraded_link() -> None:
    """Tesla T4, driver 515.105.01, DTD v11 (telegraf tesla-t4.xml): page retirement, no row
    remapper, an all-zero (masked) serial and a real x8-of-x16 PCIe link."""
    smi = parse_nvidia_smi_xml(real(T4_XML))
    gpu = smi.gpus[0]
    assert smi.schema == "nvsmi_device_v11.dtd"
    assert gpu.serial is None  # "0000000000000"
    assert gpu.pci_bus_id == "0000:00:1e.0"
    assert (gpu.retired_pages_count, gpu.retired_pages_pending) == (0, False)
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_uncorrectable) == (None, None)
    assert (gpu.pcie_width_current, gpu.pcie_width_max) == (8, 16)
    assert gpu.power_draw_w == 26.78  # pre-R530 <power_readings>
    assert gpu.ecc_volatile_uncorrected == 0


def test_xml_real_grid_p4_old_single_double_bit_schema_all_na() -> None:
    """GRID P4-1Q vGPU, driver 513.46 (telegraf tesla_p4.xml): the old ECC layout
    (single_bit/double_bit with totals) and N/A almost everywhere."""
    gpu = parse_nvidia_smi_xml(real(P4_XML)).gpus[0]
    assert gpu.serial is None  # N/A
    assert gpu.ecc_mode_current is None
    assert gpu.ecc_volatile_uncorrected is None
    assert gpu.ecc_volatile_corrected is None
    assert gpu.pcie_gen_current is None and gpu.pcie_width_max is None
    assert gpu.persistence_mode is None
    assert gpu.power_draw_w is None
    assert gpu.mig_devices == 0
    assert gpu.memory_total_mib == 1024


def test_xml_old_schema_counts_are_read_from_totals() -> None:
    """Derived from the real P4 capture: its N/A totals replaced by counts, as a V100 on an
    old driver prints them."""
    text = real(P4_XML)
    text = re.sub(r"(<volatile>\s*<single_bit>.*?<total>)N/A", r"\g<1>5", text, flags=re.S)
    text = re.sub(r"(<volatile>.*?<double_bit>.*?<total>)N/A", r"\g<1>3", text, flags=re.S)
    text = re.sub(r"(<aggregate>.*?<double_bit>.*?<total>)N/A", r"\g<1>7", text, flags=re.S)
    gpu = parse_nvidia_smi_xml(text).gpus[0]
    assert (gpu.ecc_volatile_uncorrected, gpu.ecc_volatile_corrected) == (3, 5)
    assert gpu.ecc_aggregate_uncorrected == 7


def test_xml_real_blackwell_v13_driver_590() -> None:
    """RTX PRO 6000 Blackwell, driver 590.44.01, DTD v13 (telegraf
    pro-6000-maxq-blackwell-v13.xml): power readings renamed to instant/average_power_draw."""
    smi = parse_nvidia_smi_xml(real(BLACKWELL_XML))
    gpu = smi.gpus[0]
    assert (smi.driver_version, smi.cuda_version, smi.schema) == (
        "590.44.01", "13.1", "nvsmi_device_v13.dtd")
    assert gpu.power_draw_w == 3.99
    assert gpu.ecc_mode_current == "Disabled"
    assert gpu.ecc_volatile_uncorrected is None  # counters N/A with ECC off
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (False, False)
    assert gpu.remapped_rows_uncorrectable == 0
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max) == (1, 4)
    assert gpu.mig_mode_current is None
    assert gpu.module_id == 1  # only under <platformInfo> in v13


def test_xml_trailing_error_lines_and_unlisted_gpus() -> None:
    text = real(A100_MIG_XML) + (
        "\nUnable to determine the device handle for GPU0000:9A:00.0: Unknown Error\n")
    smi = parse_nvidia_smi_xml(text)
    assert smi.errors == (
        "Unable to determine the device handle for GPU0000:9A:00.0: Unknown Error",)
    assert (smi.attached_gpus, len(smi.gpus)) == (4, 1)


def test_xml_leading_garbage_line() -> None:
    text = "WARNING: infoROM is corrupted at gpu 0000:01:00.0\n" + real(A100_MIG_XML)
    smi = parse_nvidia_smi_xml(text)
    assert smi.errors == ("WARNING: infoROM is corrupted at gpu 0000:01:00.0",)
    assert smi.gpus[0].serial == "1650522003820"


@pytest.mark.parametrize("na", ["N/A", "[N/A]", "Not Supported", "[Not Supported]", ""])
def test_xml_na_spellings_are_none(na: str) -> None:
    text = real(A100_MIG_XML)
    text = text.replace("<current_ecc>Enabled</current_ecc>", f"<current_ecc>{na}</current_ecc>")
    text = text.replace("<gpu_temp>27 C</gpu_temp>", f"<gpu_temp>{na}</gpu_temp>")
    text = text.replace("<serial>1650522003820</serial>", f"<serial>{na}</serial>")
    gpu = parse_nvidia_smi_xml(text).gpus[0]
    assert (gpu.ecc_mode_current, gpu.temperature_c, gpu.serial) == (None, None, None)


@pytest.mark.parametrize("masked", ["0", "0000000000000", "[N/A]"])
def test_xml_masked_serial_is_none(masked: str) -> None:
    text = real(A100_MIG_XML).replace("<serial>1650522003820</serial>",
                                      f"<serial>{masked}</serial>")
    assert parse_nvidia_smi_xml(text).gpus[0].serial is None


@pytest.mark.parametrize("text", [
    "",
    "garbage\n",
    hwemu.NVIDIA_SMI_NO_DRIVER + "\n",
    "<nvidia_smi_log><driver_version>5",  # truncated
    "<?xml version='1.0'?>\n<nvidia_smi_log><gpu></nvidia_smi_log>",  # malformed
])
def test_xml_not_nvidia_smi_output(text: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_nvidia_smi_xml(text)
    assert err.value.kind == "nvidia-smi-xml"
    assert isinstance(err.value, ValueError)


def test_xml_driver_missing_message_is_in_the_error() -> None:
    with pytest.raises(ParseError, match="couldn't communicate with the NVIDIA driver"):
        parse_nvidia_smi_xml(hwemu.NVIDIA_SMI_NO_DRIVER)


# --------------------------------------------------------------------------- emulator: all faults


def _check_xml_against_profile(smi, p: hwemu.Profile) -> None:
    """The parse says exactly what the profile the output was rendered from says: a lost GPU
    counted, named by bus id and not listed."""
    listed = [g for g in p.gpus if not g.lost]
    lost = tuple(g.pci_bus_id[4:].lower() for g in p.gpus if g.lost)
    assert smi.driver_version == p.driver_version
    assert smi.cuda_version == p.cuda_version
    assert smi.attached_gpus == len(p.gpus) and len(smi.gpus) == len(listed)
    assert smi.lost_gpus == lost and len(smi.errors) == len(lost)
    for facts, gpu in zip(smi.gpus, listed, strict=True):
        assert facts.serial == gpu.serial
        assert facts.uuid == gpu.uuid
        assert facts.pci_bus_id == gpu.pci_bus_id[4:].lower()
        assert facts.name == gpu.product_name
        assert facts.pcie_width_current == gpu.pcie_link_width_current
        assert facts.pcie_gen_current == gpu.pcie_gen_current
        assert facts.ecc_volatile_uncorrected == (
            gpu.ecc_volatile_dram_uncorrectable + gpu.ecc_volatile_sram_uncorrectable_parity
            + gpu.ecc_volatile_sram_uncorrectable_secded)
        assert facts.remapped_rows_pending == gpu.remapped_rows_pending
        assert facts.remapped_rows_uncorrectable == gpu.remapped_rows_uncorrectable
        assert facts.retired_pages_pending is None  # Hopper: N/A
        assert facts.memory_total_mib == gpu.fb_memory_total_mib
        assert facts.power_draw_w == gpu.power_draw_w
        assert facts.mig_devices == 0


@pytest.mark.parametrize("fault", [None, *hwemu.FAULTS])
def test_xml_emulator_every_fault(fault: str | None, profile: hwemu.Profile) -> None:
    p = profile if fault is None else hwemu.inject(profile, fault)
    _check_xml_against_profile(parse_nvidia_smi_xml(hwemu.nvidia_smi_xml(p)), p)


def test_xml_emulator_healthy(profile: hwemu.Profile) -> None:
    smi = parse_nvidia_smi_xml(hwemu.nvidia_smi_xml(profile))
    assert smi.driver_version == "550.127.08"
    assert [g.pci_bus_id for g in smi.gpus] == [
        "0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
        "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"]
    assert {g.ecc_volatile_uncorrected for g in smi.gpus} == {0}
    assert {g.pcie_width_current for g in smi.gpus} == {16}


def test_xml_emulator_gpu_missing(profile: hwemu.Profile) -> None:
    smi = parse_nvidia_smi_xml(hwemu.nvidia_smi_xml(hwemu.inject(profile, "gpu-missing")))
    # hwemu drops GPU 7 from the profile, so the header says 7 too: report what it says.
    assert (smi.attached_gpus, len(smi.gpus)) == (7, 7)
    assert smi.gpu_by_bus_id("0000:db:00.0") is None


def test_xml_emulator_gpu_serial_changed(profile: hwemu.Profile) -> None:
    faulted = hwemu.inject(profile, "gpu-serial-changed")
    smi = parse_nvidia_smi_xml(hwemu.nvidia_smi_xml(faulted))
    assert smi.gpus[3].serial == faulted.gpus[3].serial != profile.gpus[3].serial


def test_xml_emulator_ecc_uncorrected(profile: hwemu.Profile) -> None:
    smi = parse_nvidia_smi_xml(hwemu.nvidia_smi_xml(hwemu.inject(profile, "ecc-uncorrected")))
    gpu = smi.gpus[2]
    assert gpu.ecc_volatile_uncorrected == 2
    assert gpu.ecc_aggregate_uncorrected >= 2
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_uncorrectable) == (True, 1)
    assert all(g.ecc_volatile_uncorrected == 0 for i, g in enumerate(smi.gpus) if i != 2)


def test_xml_emulator_pcie_degraded(profile: hwemu.Profile) -> None:
    smi = parse_nvidia_smi_xml(hwemu.nvidia_smi_xml(hwemu.inject(profile, "pcie-degraded")))
    assert (smi.gpus[1].pcie_width_current, smi.gpus[1].pcie_width_max) == (8, 16)


def test_xml_emulator_driver_version_wrong(profile: hwemu.Profile) -> None:
    p = hwemu.inject(profile, "driver-version-wrong")
    smi = parse_nvidia_smi_xml(hwemu.nvidia_smi_xml(p))
    assert (smi.driver_version, smi.cuda_version) == ("535.183.01", "12.2")


# --------------------------------------------------------------------------- --query-gpu csv


def test_csv_real_h100_590_every_field() -> None:
    """Real H100 80GB HBM3, driver 590.48.01, 212 fields (utkuozdemir/nvidia_gpu_exporter
    capture; the capture tool masked serial and UUID to zeros)."""
    (row,) = parse_nvidia_smi_csv(real(H100_CSV))
    assert len(row) == 212
    assert row["name"] == "NVIDIA H100 80GB HBM3"
    assert row["driver_version"] == "590.48.01"
    assert row["pci.bus_id"] == "00000000:00:09.0"
    assert row["memory.total"] == "81559 MiB"  # key without " [MiB]", value as printed
    assert row["power.draw"] == "69.85 W"
    assert row["pcie.link.width.current"] == "16"
    assert row["retired_pages.pending"] is None  # [N/A] on Hopper
    assert row["remapped_rows.pending"] == "No"
    assert row["fabric.health.summary"] is None  # bare N/A
    assert row["display_mode"] is None  # [Requested functionality has been deprecated]
    assert row["platform.chassis_serial_number"] is None  # empty cell
    assert row["platform.peer_type"] == "Direct Connected"
    assert row["serial"] == "0000000000000"  # CSV values are reported, not interpreted


def test_csv_emulator_with_header(profile: hwemu.Profile) -> None:
    fields = ["index", "gpu_serial", "pci.bus_id", "memory.total", "power.draw",
              "retired_pages.pending", "ecc.errors.uncorrected.volatile.total"]
    rows = parse_nvidia_smi_csv(hwemu.nvidia_smi_query(profile, fields))
    assert list(rows[0]) == ["index", "serial", "pci.bus_id", "memory.total", "power.draw",
                             "retired_pages.pending", "ecc.errors.uncorrected.volatile.total"]
    assert [r["serial"] for r in rows] == [g.serial for g in profile.gpus]
    assert rows[0]["memory.total"] == "81559 MiB"
    assert rows[0]["retired_pages.pending"] is None


@pytest.mark.parametrize("fault", [None, *hwemu.FAULTS])
def test_csv_emulator_noheader_nounits_every_fault(
    fault: str | None, profile: hwemu.Profile
) -> None:
    p = profile if fault is None else hwemu.inject(profile, fault)
    fields = ["index", "serial", "pcie.link.width.current", "driver_version",
              "ecc.errors.uncorrected.volatile.total", "memory.total"]
    text = hwemu.nvidia_smi_query(p, fields, noheader=True, nounits=True)
    rows = parse_nvidia_smi_csv(text, fields=fields)
    listed = [g for g in p.gpus if not g.lost]  # a lost GPU's line is no row
    assert len(rows) == len(listed)
    for row, gpu in zip(rows, listed, strict=True):
        assert row == {
            "index": str(gpu.index), "serial": gpu.serial,
            "pcie.link.width.current": str(gpu.pcie_link_width_current),
            "driver_version": p.driver_version,
            "ecc.errors.uncorrected.volatile.total": str(gpu.ecc_volatile_dram_uncorrectable),
            "memory.total": str(gpu.fb_memory_total_mib),
        }


def test_csv_noheader_fields_given_but_header_present_is_skipped(
    profile: hwemu.Profile,
) -> None:
    text = hwemu.nvidia_smi_query(profile, ["index", "memory.total"])
    rows = parse_nvidia_smi_csv(text, fields=["index", "memory.total"])
    assert len(rows) == 8 and rows[0]["index"] == "0"


def test_csv_short_row_and_na_forms() -> None:
    text = "index, serial, fan.speed [%], ecc.mode.current\n0, [N/A], [Not Supported]\n"
    assert parse_nvidia_smi_csv(text) == [
        {"index": "0", "serial": None, "fan.speed": None, "ecc.mode.current": None}]


@pytest.mark.parametrize("text", [
    'Field "cuda_version" is not a valid field to query.\n\n',  # real nvidia-smi message
    hwemu.NVIDIA_SMI_NO_DRIVER + "\n",
    "No devices were found\n",
    "",
])
def test_csv_not_query_output(text: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_nvidia_smi_csv(text)
    assert err.value.kind == "nvidia-smi-csv"
