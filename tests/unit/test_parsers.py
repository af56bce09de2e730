"""Tests for racklift.facts.parsers: real captures first, then the lab emulator's output.

Every file under tests/fixtures/real was captured on real hardware and published; where each
one comes from is in tests/fixtures/real/SOURCES.md and in the test names/comments below.
Inline samples that are *not* captures are marked "synthetic" and say what they stand for.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from racklift.facts import xid
from racklift.facts.observed import GPUFacts, HCAPortFacts, KernelEvent, SystemFacts
from racklift.facts.parsers import (
    ParseError,
    normalize_guid,
    normalize_pci_address,
    nvidia_gpus_on_pci,
    parse_dmesg,
    parse_dmidecode,
    parse_dmidecode_string,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_lspci,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_xml,
    parse_os_release,
    parse_sysfs_infiniband,
)
from racklift.lab import hwemu

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def real(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8")


A100_MIG_XML = "nvidia-smi-q-x_a100-sxm4-80gb_535.54.03_mig.xml"  # influxdata/telegraf
T4_XML = "nvidia-smi-q-x_tesla-t4_515.105.01_v11.xml"  # influxdata/telegraf
P4_XML = "nvidia-smi-q-x_grid-p4-1q-vgpu_513.46_v11-single-double-bit.xml"  # telegraf
BLACKWELL_XML = "nvidia-smi-q-x_rtx-pro-6000-blackwell_590.44.01_v13.xml"  # telegraf
H100_CSV = "nvidia-smi-query-gpu-csv_h100-80gb-hbm3_590.48.01.csv"  # nvidia_gpu_exporter
IBSTAT_IB_ETH = "ibstat_h100-node_cx7-ib_cx6-eth-down.txt"  # leptonai/gpud
IBSTAT_ROCE = "ibstat_h100-node_roce-cx7_polling-and-disabled.txt"  # leptonai/gpud
IBV_DEVINFO = "ibv_devinfo_connectx3-mlx4_mlnx-ofed.txt"  # Heioy/Books
DMIDECODE = "dmidecode_supermicro-sys-7049gp-trt_3.1.txt"  # FDio/csit
LSPCI_PLAIN = "lspci_supermicro-amd-genoa_2x-h100l.txt"  # clu6/supermicro
LSPCI_VVV = "lspci-vvv_dell-h100-cx7_3-devices.txt"  # leptonai/gpud
DMESG_XID79 = "dmesg_xid79_hgx.txt"  # leptonai/gpud
DMESG_XID119 = "dmesg-T_xid119_gsp-timeout_dell-xe9680.txt"  # leptonai/gpud
DMESG_AER_FATAL = "dmesg_aer_fatal_linux-pci-2020-12_bd-cpu18.txt"  # linux-pci list
DMESG_AER_CORRECTED = "dmesg_aer_corrected_linux-pci-2021-01_latitude-5410.txt"  # linux-pci


@pytest.fixture
def profile() -> hwemu.Profile:
    return hwemu.generate_profile("gpu-a01", "S421GE0001X0001", 7)


# --------------------------------------------------------------------------- helpers


def test_normalize_pci_address_and_guid() -> None:
    assert normalize_pci_address("00000000:9A:00.0") == "0000:9a:00.0"
    assert normalize_pci_address("18:00.0") == "0000:18:00.0"
    assert normalize_pci_address("0001:00:00.0") == "0001:00:00.0"
    assert normalize_pci_address("N/A") is None
    assert normalize_guid("7cfe:9003:00a5:95c0") == "0x7cfe900300a595c0"
    assert normalize_guid("0x946DAE0300CDE72C") == "0x946dae0300cde72c"


def test_facts_are_frozen_and_serialise() -> None:
    facts = parse_dmidecode(real(DMIDECODE))
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.serial = "x"  # type: ignore[misc]
    assert facts.to_dict()["serial"] == "S291427X8332242"
    smi = parse_nvidia_smi_xml(real(A100_MIG_XML))
    assert smi.to_dict()["gpus"][0]["mig_devices"] == 4


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


# --------------------------------------------------------------------------- ibstat


def test_ibstat_real_h100_node_ib_and_ethernet_leptonai_gpud() -> None:
    """8x ConnectX-7 NDR IB + 4 ConnectX-6 Dx Ethernet ports, 3 of them down
    (leptonai/gpud ibstat.47.0.h100.some.down.0)."""
    ports = parse_ibstat(real(IBSTAT_IB_ETH))
    assert len(ports) == 12
    by_ca = {p.ca: p for p in ports}
    assert {p.ca for p in ports if p.state == "Down"} == {"mlx5_2", "mlx5_7", "mlx5_8"}
    assert {p.phys_state for p in ports if p.state == "Down"} == {"Disabled"}
    assert {p.ca for p in ports if p.link_layer == "Ethernet"} == {
        "mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"}
    infiniband = [p for p in ports if p.link_layer == "InfiniBand"]
    assert len(infiniband) == 8
    assert {(p.state, p.rate_gbps, p.ca_type) for p in infiniband} == {
        ("Active", 400, "MT4129")}
    assert by_ca["mlx5_0"] == HCAPortFacts(
        ca="mlx5_0", ca_type="MT4129", firmware="28.39.1002", node_guid="0x946dae0300cde72c",
        port=1, state="Active", phys_state="LinkUp", rate_gbps=400, link_layer="InfiniBand",
        port_guid="0x946dae0300cde72c", base_lid=75, is_vf=False)
    assert by_ca["mlx5_2"].rate_gbps == 40
    assert not any(p.is_vf for p in ports)


def test_ibstat_real_roce_node_polling_leptonai_gpud() -> None:
    """An H100 node whose ConnectX-7s run Ethernet (RoCE), one port Polling, one Disabled
    (leptonai/gpud ibstat.47.0.h100.some.down.with.polling.1; no trailing newline)."""
    ports = parse_ibstat(real(IBSTAT_ROCE))
    assert len(ports) == 12
    assert {p.link_layer for p in ports} == {"Ethernet"}
    down = {p.ca: p.phys_state for p in ports if p.state == "Down"}
    assert down == {"mlx5_11": "Polling", "mlx5_5": "Disabled"}
    assert next(p for p in ports if p.ca == "mlx5_9").port_guid == "0xa288c2fffeadeb60"


@pytest.mark.parametrize("ca_type", ["MT4126", "MT4124", "MT4120",
                                     "ConnectX Virtual Function"])
def test_ibstat_virtual_function(ca_type: str) -> None:
    """Derived from the real gpud capture: mlx5_1's CA type replaced by a VF's (mlx5 driver
    PCI table: 0x101e mlx5Gen VF = MT4126, 0x101c CX-6 VF = MT4124, 0x1018 CX-5 VF)."""
    text = real(IBSTAT_IB_ETH).replace("CA 'mlx5_1'\n\tCA type: MT4125",
                                       f"CA 'mlx5_1'\n\tCA type: {ca_type}")
    ports = {p.ca: p for p in parse_ibstat(text)}
    assert ports["mlx5_1"].is_vf
    assert not ports["mlx5_0"].is_vf and not ports["mlx5_2"].is_vf


def test_ibstat_rate_with_name_and_multi_port_ca() -> None:
    """Synthetic: a two-port CA with the "Rate: 400 (NDR)" form some versions print."""
    text = ("CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 2\n\tFirmware version: 28.39.1002\n"
            "\tNode GUID: 0x946dae0300cde72c\n\tPort 1:\n\t\tState: Active\n"
            "\t\tPhysical state: LinkUp\n\t\tRate: 400 (NDR)\n\t\tBase lid: 7\n"
            "\t\tLink layer: InfiniBand\n\tPort 2:\n\t\tState: Initializing\n"
            "\t\tPhysical state: LinkUp\n\t\tRate: 200 (HDR)\n\t\tBase lid: 65535\n"
            "\t\tLink layer: InfiniBand\n")
    p1, p2 = parse_ibstat(text)
    assert (p1.port, p1.rate_gbps, p2.port, p2.rate_gbps) == (1, 400, 2, 200)
    assert (p2.state, p2.base_lid, p2.node_guid) == ("Initializing", 65535, "0x946dae0300cde72c")


def test_ibstat_single_port_form(profile: hwemu.Profile) -> None:
    (port,) = parse_ibstat(hwemu.ibstat(profile, "mlx5_3", 1), ca="mlx5_3")
    assert (port.ca, port.port, port.state, port.rate_gbps) == ("mlx5_3", 1, "Active", 400)


@pytest.mark.parametrize("fault", [None, *hwemu.FAULTS])
def test_ibstat_emulator_every_fault(fault: str | None, profile: hwemu.Profile) -> None:
    p = profile if fault is None else hwemu.inject(profile, fault)
    ports = {x.ca: x for x in parse_ibstat(hwemu.ibstat(p))}
    assert set(ports) == {h.ca for h in p.hcas}
    for h in p.hcas:
        assert (ports[h.ca].state, ports[h.ca].phys_state, ports[h.ca].rate_gbps) == (
            h.state, h.phys_state, h.rate)
        assert ports[h.ca].node_guid == h.node_guid
        assert ports[h.ca].base_lid == h.base_lid


def test_ibstat_emulator_ib_port_down_and_rate_wrong(profile: hwemu.Profile) -> None:
    down = {p.ca: p for p in parse_ibstat(hwemu.ibstat(hwemu.inject(profile, "ib-port-down")))}
    assert (down["mlx5_3"].state, down["mlx5_3"].phys_state) == ("Down", "Disabled")
    assert down["mlx5_3"].base_lid == 65535
    assert {p.state for ca, p in down.items() if ca != "mlx5_3"} == {"Active"}
    slow = {p.ca: p for p in parse_ibstat(hwemu.ibstat(hwemu.inject(profile, "ib-rate-wrong")))}
    assert slow["mlx5_5"].rate_gbps == 200


@pytest.mark.parametrize("text", [
    "ibpanic: [12345] main: stat of IB device 'mlx5_9' failed: No such file or directory\n",
    "garbage\n",
    "",
])
def test_ibstat_not_ibstat_output(text: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_ibstat(text)
    assert err.value.kind == "ibstat"


# --------------------------------------------------------------------------- ibv_devinfo


def test_ibv_devinfo_real_connectx3_port_down_heioy_books() -> None:
    """2x ConnectX-3 (mlx4), MLNX_OFED, one PORT_DOWN port each (Heioy/Books)."""
    ports = parse_ibv_devinfo(real(IBV_DEVINFO))
    assert [(p.ca, p.port, p.state) for p in ports] == [
        ("mlx4_1", 1, "Active"), ("mlx4_1", 2, "Down"),
        ("mlx4_0", 1, "Active"), ("mlx4_0", 2, "Down")]
    first = ports[0]
    assert (first.firmware, first.node_guid, first.ca_type) == (
        "2.42.5000", "0x7cfe900300a595c0", "MT4099")
    assert (first.base_lid, first.link_layer, first.rate_gbps) == (22, "InfiniBand", None)
    assert ports[2].base_lid == 32


@pytest.mark.parametrize("fault", [None, "ib-port-down", "ib-rate-wrong"])
def test_ibv_devinfo_emulator(fault: str | None, profile: hwemu.Profile) -> None:
    p = profile if fault is None else hwemu.inject(profile, fault)
    ports = {x.ca: x for x in parse_ibv_devinfo(hwemu.ibv_devinfo(p))}
    for h in p.hcas:
        assert (ports[h.ca].state, ports[h.ca].base_lid, ports[h.ca].link_layer) == (
            h.state, h.base_lid, h.link_layer)
        assert ports[h.ca].node_guid == h.node_guid
        assert ports[h.ca].ca_type == "MT4129"
        assert ports[h.ca].rate_gbps is None  # plain ibv_devinfo prints no rate
    if fault == "ib-port-down":
        assert ports["mlx5_3"].state == "Down"


def test_ibv_devinfo_verbose_gives_phys_state_and_rate() -> None:
    """Synthetic ``ibv_devinfo -v`` excerpt (rdma-core names: LINK_UP (5), 4X, 100.0 Gbps)."""
    text = ("hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t28.39.1002\n"
            "\tvendor_part_id:\t\t\t4126\n\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n"
            "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tactive_width:\t\t4X (2)\n"
            "\t\t\tactive_speed:\t\t100.0 Gbps (128)\n\t\t\tphys_state:\t\tLINK_UP (5)\n"
            "\t\t\tlink_layer:\t\tInfiniBand\n\t\t\tGID[  0]:\t\tfe80:0000:0000:0000\n")
    (port,) = parse_ibv_devinfo(text)
    assert (port.state, port.phys_state, port.rate_gbps, port.is_vf) == (
        "Active", "LinkUp", 400, True)


def test_ibv_devinfo_no_devices_and_garbage() -> None:
    assert parse_ibv_devinfo("No IB devices found\n") == []
    with pytest.raises(ParseError) as err:
        parse_ibv_devinfo("bash: ibv_devinfo: command not found\n")
    assert err.value.kind == "ibv_devinfo"


# --------------------------------------------------------------------------- sysfs


@pytest.mark.parametrize("fault", [None, *hwemu.FAULTS])
def test_sysfs_infiniband_emulator_every_fault(fault: str | None, profile: hwemu.Profile) -> None:
    p = profile if fault is None else hwemu.inject(profile, fault)
    ports = {x.ca: x for x in parse_sysfs_infiniband(hwemu.sysfs_tree(p))}
    assert set(ports) == {h.ca for h in p.hcas}
    for h in p.hcas:
        got = ports[h.ca]
        assert (got.state, got.phys_state, got.rate_gbps, got.link_layer) == (
            h.state, h.phys_state, h.rate, h.link_layer)
        assert (got.base_lid, got.node_guid, got.port_guid) == (
            h.base_lid, h.node_guid, h.port_guid)
        assert (got.ca_type, got.firmware) == (h.ca_type, h.fw_ver)


def test_sysfs_infiniband_values_and_prefixes(profile: hwemu.Profile) -> None:
    tree = {"/sys/" + k: v for k, v in
            hwemu.sysfs_tree(hwemu.inject(profile, "ib-port-down")).items()}
    ports = {x.ca: x for x in parse_sysfs_infiniband(tree)}
    assert tree["/sys/class/infiniband/mlx5_0/ports/1/rate"] == "400 Gb/sec (4X NDR)\n"
    assert ports["mlx5_0"].rate_gbps == 400
    assert (ports["mlx5_3"].state, ports["mlx5_3"].rate_gbps) == ("Down", 10)
    assert parse_sysfs_infiniband({"class/net/eno1/speed": "1000\n"}) == []


# --------------------------------------------------------------------------- dmidecode


def test_dmidecode_real_supermicro_fdio_csit() -> None:
    """Supermicro SYS-7049GP-TRT, dmidecode 3.1 full dump (FDio/csit testbed docs)."""
    assert parse_dmidecode(real(DMIDECODE)) == SystemFacts(
        vendor="Supermicro", product="SYS-7049GP-TRT", serial="S291427X8332242",
        bios_vendor="American Megatrends Inc.", bios_version="2.0",
        uuid="00000000-0000-0000-0000-ac1f6b8a8db6",
        version=None,  # "0123456789": Supermicro's placeholder
        sku=None, family=None,  # "To be filled by O.E.M."
        bios_date="11/29/2017", board_vendor="Supermicro", board_product="X11DPG-QT",
        board_serial="VM183S014930")


@pytest.mark.parametrize("type_", [None, "system", "bios,system", "1"])
def test_dmidecode_emulator(type_: str | None, profile: hwemu.Profile) -> None:
    facts = parse_dmidecode(hwemu.dmidecode(profile, type_))
    s = profile.system
    assert (facts.vendor, facts.product, facts.serial, facts.uuid) == (
        s.vendor, s.product, s.serial, s.uuid)
    assert facts.sku is None and facts.version is None
    if type_ in (None, "bios,system"):
        assert (facts.bios_vendor, facts.bios_version) == (s.bios_vendor, s.bios_version)
    else:
        assert facts.bios_vendor is None


def test_dmidecode_emulator_wrong_system_serial(profile: hwemu.Profile) -> None:
    faulted = hwemu.inject(profile, "wrong-system-serial")
    facts = parse_dmidecode(hwemu.dmidecode(faulted, "system"))
    assert facts.serial == faulted.system.serial != profile.system.serial
    assert parse_dmidecode_string(hwemu.dmidecode_string(faulted, "system-serial-number")) == (
        faulted.system.serial)


@pytest.mark.parametrize("value", ["To Be Filled By O.E.M.", "To be filled by O.E.M.",
                                   "Not Specified", "Default string", "0123456789", ""])
def test_dmidecode_placeholders_are_none(value: str) -> None:
    text = real(DMIDECODE).replace("Serial Number: S291427X8332242", f"Serial Number: {value}")
    assert parse_dmidecode(text).serial is None
    assert parse_dmidecode_string(value + "\n") is None


def test_dmidecode_string_and_errors(profile: hwemu.Profile) -> None:
    assert parse_dmidecode_string(hwemu.dmidecode_string(profile, "system-uuid")) == (
        profile.system.uuid)
    assert parse_dmidecode_string("# SMBIOS implementations newer than version 3.2.0 are not\n"
                                  "S421GE0001X0001\n") == "S421GE0001X0001"
    with pytest.raises(ParseError) as err:
        parse_dmidecode_string("Invalid string keyword: system-serial\n")
    assert err.value.kind == "dmidecode-string"
    with pytest.raises(ParseError) as err:
        parse_dmidecode("garbage\nmore garbage\n")
    assert err.value.kind == "dmidecode"
    # dmidecode's own answer when there is no table: facts, all None.
    empty = parse_dmidecode("# dmidecode 3.4\n# No SMBIOS nor DMI entry point found, sorry.\n")
    assert empty == SystemFacts(None, None, None, None, None, None)


# --------------------------------------------------------------------------- lspci


def test_lspci_real_plain_supermicro_two_h100l_clu6() -> None:
    """Plain ``lspci`` of a Supermicro AMD Genoa server with 2x H100L (clu6/supermicro)."""
    devices = parse_lspci(real(LSPCI_PLAIN))
    assert len(devices) == 149
    gpus = nvidia_gpus_on_pci(devices)
    assert [g.address for g in gpus] == ["0000:c1:00.0", "0000:e1:00.0"]
    assert gpus[0].description == "NVIDIA Corporation GH100 [H100L 94GB]"
    assert (gpus[0].class_name, gpus[0].vendor_id, gpus[0].revision) == (
        "3D controller", "", "a1")
    aspeed = next(d for d in devices if d.address == "0000:62:00.0")
    assert aspeed.class_name == "VGA compatible controller" and aspeed not in gpus
    peripheral = next(d for d in devices if d.address == "0000:00:00.3")
    assert (peripheral.class_name, peripheral.class_id) == ("Generic system peripheral", "0807")


def test_lspci_real_vvv_dell_h100_cx7_leptonai_gpud() -> None:
    """``lspci -vvv`` of a Dell H100 server: a root port at a downgraded 5 of 8 GT/s, an
    H100 and a ConnectX-7 at Gen5 x16 (leptonai/gpud pkg/pci/testdata/lspci-vvv)."""
    port, gpu, cx7 = parse_lspci(real(LSPCI_VVV))
    assert (port.address, port.link_speed_gts, port.link_speed_max_gts) == (
        "0000:00:0c.0", 5.0, 8.0)
    assert (port.link_width, port.link_width_max) == (1, 1)
    assert gpu.address == "0000:4c:00.0"
    assert gpu.description == "NVIDIA Corporation Device 2330"
    assert (gpu.link_speed_gts, gpu.link_width, gpu.link_speed_max_gts, gpu.link_width_max) == (
        32.0, 16, 32.0, 16)
    assert gpu.driver == "nvidia"
    assert (cx7.class_name, cx7.driver) == ("Ethernet controller", "mlx5_core")
    assert nvidia_gpus_on_pci([port, gpu, cx7]) == [gpu]


# Synthetic, in the -D -nn layout lspci prints (the line is the one racklift's design notes
# use as the reference): 2 GPUs, an NVSwitch, a GPU's audio function and a ConnectX-7.
_H100_NN = "3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)"
LSPCI_DNN = "\n".join([
    f"0000:18:00.0 {_H100_NN}",
    "0000:1a:00.0 Infiniband controller [0207]: Mellanox Technologies MT2910 Family "
    "[ConnectX-7] [15b3:1021]",
    f"0000:2a:00.0 {_H100_NN}",
    "\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported",
    "\tLnkSta:\tSpeed 16GT/s (downgraded), Width x8 (downgraded)",
    "0000:05:00.0 Bridge [0680]: NVIDIA Corporation GH100 [H100 NVSwitch] [10de:22a3] (rev a1)",
    "0000:65:00.1 Audio device [0403]: NVIDIA Corporation Device [10de:22ba] (rev a1)",
]) + "\n"


def test_lspci_d_nn_and_downgraded_link() -> None:
    devices = {d.address: d for d in parse_lspci(LSPCI_DNN)}
    gpu = devices["0000:18:00.0"]
    assert (gpu.class_name, gpu.class_id, gpu.vendor_id, gpu.device_id) == (
        "3D controller", "0302", "10de", "2330")
    assert gpu.description == "NVIDIA Corporation GH100 [H100 SXM5 80GB]"
    assert gpu.link_width is None  # no -vv block for this one
    degraded = devices["0000:2a:00.0"]
    assert (degraded.link_speed_gts, degraded.link_width) == (16.0, 8)
    assert (degraded.link_speed_max_gts, degraded.link_width_max) == (32.0, 16)
    assert devices["0000:1a:00.0"].device_id == "1021"
    assert [g.address for g in nvidia_gpus_on_pci(devices.values())] == [
        "0000:18:00.0", "0000:2a:00.0"]


def test_lspci_garbage_and_empty() -> None:
    assert parse_lspci("") == []
    with pytest.raises(ParseError) as err:
        parse_lspci("bash: lspci: command not found\n")
    assert err.value.kind == "lspci"


# --------------------------------------------------------------------------- kernel log


def test_dmesg_real_xid79_and_sxid_hgx_leptonai_gpud() -> None:
    """HGX node: GPU 0000:91:00 falls off the bus, then NVSwitch SXid 20034 (leptonai/gpud)."""
    events = parse_dmesg(real(DMESG_XID79))
    assert [(e.kind, e.code) for e in events] == [("xid", 79), ("sxid", 20034), ("sxid", 20034)]
    fell = events[0]
    assert (fell.device, fell.severity) == ("0000:91:00", "critical")
    assert fell.timestamp == 6781741.548779
    assert fell.message == "GPU has fallen off the bus."
    assert fell.name == "GPU has fallen off the bus"
    assert fell.line.startswith("[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>'")
    switch = events[2]
    assert (switch.device, switch.severity, switch.notes) == (
        "0000:05:00.0", "critical", ("nvidia-nvswitch0",))
    assert switch.message == "Fatal, Link 63 LTSSM Fault Up"


def test_dmesg_real_human_timestamps_xid119_dell_xe9680() -> None:
    """``dmesg -T`` of a Dell XE9680: GSP RPC timeouts, Xid 119 (leptonai/gpud testdata)."""
    events = parse_dmesg(real(DMESG_XID119))
    assert [e.code for e in events] == [119] * 5
    first = events[0]
    assert (first.kind, first.device, first.severity) == ("xid", "0000:9b:00", "critical")
    assert (first.timestamp, first.wallclock) == (None, "Sun Feb 23 16:24:18 2025")
    assert first.message.startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    assert "pid=" not in first.message


def test_dmesg_real_aer_fatal_linux_pci_list() -> None:
    """CentOS 7 / 5.9 syslog lines: a real and an injected Uncorrected (Fatal) completion
    timeout at a root port (linux-pci list, Dec 2020)."""
    events = parse_dmesg(real(DMESG_AER_FATAL))
    assert [(e.kind, e.severity, e.device) for e in events] == [
        ("aer", "critical", "0000:00:01.0"), ("aer", "critical", "0000:00:01.0")]
    old, injected = events
    assert old.wallclock == "Dec 1 02:16:37" and old.timestamp is None
    assert old.notes[0] == "source id=0008"  # old kernels name a requester id
    assert "[14] Completion Timeout     (First)" in old.notes
    assert injected.notes[-1] == "[14] CmpltTO"
    assert injected.message == "Uncorrected (Fatal) error"


def test_dmesg_real_aer_corrected_linux_pci_list() -> None:
    """Syslog + uptime prefix, a Corrected RxErr at an NVMe drive (linux-pci list, 2021)."""
    (event,) = parse_dmesg(real(DMESG_AER_CORRECTED))
    assert (event.kind, event.severity, event.device) == ("aer", "warning", "0000:02:00.0")
    assert (event.timestamp, event.wallclock) == (46.675818, "Jan 1 23:30:53")
    assert event.notes == (
        "PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
        "device [15b7:5006] error status/mask=00000001/0000e000", "[ 0] RxErr")


@pytest.mark.parametrize(("line", "code", "device", "severity", "message"), [
    # Older driver form without "PCI:" (as in public logs of pre-R400 drivers).
    ("[  269.517039] NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff",
     3, "0000:01:00", "warning", "C 00000005 SC 00000007 M 00001ffc Data ffffffff"),
    # Without pid/name, journal prefix.
    ("May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
     79, "0000:2b:00", "critical", "GPU has fallen off the bus."),
    # pid without name.
    ("[ 12.000000] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for "
     "remapping, reset gpu to activate.", 63, "0000:10:1c", "warning",
     "Row Remapper: New row marked for remapping, reset gpu to activate."),
    ("NVRM: Xid (PCI:0000:9a:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double "
     "bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
     48, "0000:9a:00", "critical", "An uncorrectable double bit error (DBE) has been detected "
     "on GPU in the framebuffer at partition 6, subpartition 0."),
    ("[1.0] NVRM: Xid (PCI:0000:9a:00): 999, pid=1, name=x, something new", 999, "0000:9a:00",
     "warning", "something new"),
])
def test_dmesg_xid_variants(line: str, code: int, device: str, severity: str,
                            message: str) -> None:
    (event,) = parse_dmesg(line + "\n")
    assert (event.kind, event.code, event.device, event.severity, event.message) == (
        "xid", code, device, severity, message)


def test_dmesg_aer_newer_kernel_wording() -> None:
    """Kernels since 2024 say "error message received from" (lines quoted in a linux-pci
    patch, Kai-Heng Feng, Jul 2024, HP Thunderbolt Dock G4)."""
    text = ("pcieport 0000:00:1d.0: AER: Correctable error message received from 0000:09:04.0\n"
            "pcieport 0000:09:04.0: PCIe Bus Error: severity=Correctable, type=Data Link Layer, "
            "(Receiver ID)\n"
            "pcieport 0000:09:04.0:   device [8086:0b26] error status/mask=00000080/00002000\n"
            "pcieport 0000:09:04.0:    [ 7] BadDLLP\n")
    (event,) = parse_dmesg(text)
    assert (event.severity, event.device, event.message) == (
        "warning", "0000:09:04.0", "Corrected error")
    assert event.notes[-1] == "[ 7] BadDLLP"


@pytest.mark.parametrize(("line", "severity"), [
    ("pcieport 0000:00:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:01:00.0",
     "critical"),
    ("pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0", "critical"),
    ("pcieport 0000:00:1c.5: AER: Multiple Corrected error received: 0000:00:1c.5", "warning"),
    ("pcieport 0000:00:01.0: AER: Uncorrectable (Non-Fatal) error message received from "
     "0000:01:00.0", "critical"),
    ("nvidia-nvswitch3: SXid (PCI:0000:c5:00.0): 19084, Non-fatal, Link 10 AN1 Heartbeat "
     "Timeout Error (First)", "warning"),
    ("nvidia-nvswitch2: SXid (PCI:0000:c4:00.0): 10002, Severity 5 Engine instance 00 "
     "Sub-engine instance 00", "critical"),
])
def test_dmesg_aer_and_sxid_severity(line: str, severity: str) -> None:
    (event,) = parse_dmesg(line)
    assert event.severity == severity
    if event.kind == "aer":
        assert event.device in ("0000:01:00.0", "0000:00:1c.5")


@pytest.mark.parametrize("fault", [None, *hwemu.FAULTS])
def test_dmesg_emulator_every_fault(fault: str | None, profile: hwemu.Profile) -> None:
    p = profile if fault is None else hwemu.inject(profile, fault)
    events = parse_dmesg(hwemu.dmesg(p))
    if fault == "xid-79":
        (event,) = events
        assert (event.kind, event.code, event.severity) == ("xid", 79, "critical")
        assert event.device == "0000:9a:00"  # GPU 4 of the HGX board
        assert event.timestamp is not None and event.timestamp > 86400
    elif fault in KERNEL_FORMS:  # test_hwemu_real_forms reads them in detail
        assert {e.kind for e in events} == {KERNEL_FORMS[fault]}
    else:
        assert events == []


# The lab's real-world kernel-log faults and the kind of event each is.
KERNEL_FORMS = {"aer-gpu-endpoint": "aer", "xid-nvlink5-nonfatal": "xid",
                "gpu-off-bus-open-module": "nvrm"}


def test_dmesg_unrelated_text_has_no_events() -> None:
    assert parse_dmesg("") == []
    assert parse_dmesg(real(IBSTAT_IB_ETH)) == []


def test_kernel_event_is_frozen() -> None:
    (event,) = parse_dmesg(real(DMESG_AER_CORRECTED))
    assert isinstance(event, KernelEvent)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.severity = "info"  # type: ignore[misc]


# --------------------------------------------------------------------------- os-release


def test_os_release() -> None:
    """Synthetic, in the layout Debian 12 ships in /etc/os-release."""
    text = ('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'
            'VERSION_ID="12"\nVERSION="12 (bookworm)"\nVERSION_CODENAME=bookworm\nID=debian\n'
            "# comment\n\nHOME_URL='https://www.debian.org/'\n"
            'QUOTED="say \\"hi\\""\n')
    release = parse_os_release(text)
    assert release["ID"] == "debian"
    assert release["VERSION_ID"] == "12"
    assert release["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)"
    assert release["HOME_URL"] == "https://www.debian.org/"
    assert release["QUOTED"] == 'say "hi"'
    with pytest.raises(ParseError) as err:
        parse_os_release("not an os-release file\n")
    assert err.value.kind == "os-release"


# --------------------------------------------------------------------------- xid table


REQUIRED_XIDS = [8, 13, 31, 32, 43, 45, 46, 48, 54, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95,
                 109, 119, 120, 121, 136, 137, 140, 143, *range(144, 151), *range(154, 159)]


@pytest.mark.parametrize("code", REQUIRED_XIDS)
def test_xid_table_has_published_codes(code: int) -> None:
    info = xid.classify_xid(code)
    assert info.known and info.code == code
    assert info.severity in xid.SEVERITIES
    assert info.name and info.action and info.mnemonic and info.bucket


def test_xid_severities_follow_the_catalog() -> None:
    assert xid.classify_xid(79).severity == "critical"  # RESTART_BM
    assert xid.classify_xid(48).severity == "critical"
    assert xid.classify_xid(95).severity == "critical"  # RESET_GPU
    assert xid.classify_xid(13).severity == "warning"  # RESTART_APP
    assert xid.classify_xid(94).severity == "warning"
    assert xid.classify_xid(43).severity == "info"  # IGNORE
    assert xid.classify_xid(79).mnemonic == "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
    assert xid.CATALOG_URL.startswith("https://docs.nvidia.com/deploy/xid-errors/")


def test_unknown_xid_and_sxid() -> None:
    unknown = xid.classify_xid(4242)
    assert (unknown.severity, unknown.known) == ("warning", False)
    assert "unknown" in unknown.name and "4242" in unknown.action
    assert xid.classify_sxid(20034, "Fatal, Link 48 LTSSM Fault Up").severity == "critical"
    assert xid.classify_sxid(19084, "Non-fatal, Link 29").severity == "warning"
    assert xid.classify_sxid(1, "").severity == "critical"


def test_an_unknown_xid_keeps_its_code_and_a_missing_one_is_minus_one() -> None:
    assert xid.classify_xid(4242).code == 4242
    assert xid.classify_xid(None).code == -1 and not xid.classify_xid(None).known


@pytest.mark.parametrize(("message", "severity", "note"), [
    ("Fatal, Link 48 LTSSM Fault Up", "critical", "fatal per the driver"),
    ("Non-fatal, Link 29", "warning", "non-fatal per the driver"),
    ("Nonfatal, Link 29, a b", "warning", "non-fatal per the driver"),
    ("Link 29 LTSSM Fault Up", "critical", "no class in the message"),
])
def test_an_sxid_is_classed_by_the_drivers_word_and_named_with_it(message, severity,
                                                                  note) -> None:
    info = xid.classify_sxid(20034, message)
    assert (info.code, info.severity, info.known) == (20034, severity, False)
    assert info.name.startswith(f"NVSwitch SXid 20034 ({note}")
    assert xid.classify_sxid(None, message).code == -1
