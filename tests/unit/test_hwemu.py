"""Tests for the lab hardware emulator (src/racklift/lab/hwemu/).

Formats are checked against real captures in tests/fixtures/real (see SOURCES.md there).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from racklift.facts.observed import IbLink
from racklift.facts.parsers.dcgmi import parse_dcgmi_diag
from racklift.facts.parsers.ibnetdiscover import parse_ibnetdiscover
from racklift.facts.parsers.nccl_tests import parse_nccl_tests
from racklift.facts.parsers.nvlink_errors import parse_nvidia_smi_nvlink_errors
from racklift.facts.parsers.perftest import parse_perftest_bw
from racklift.facts.parsers.topology import parse_nvidia_smi_nvlink, parse_nvidia_smi_topo
from racklift.lab import hwemu
from racklift.lab.hwemu import cli as hwemu_cli
from racklift.lab.hwemu import nvidia_smi
from racklift.paths import REPO_ROOT

PACKAGE = Path(hwemu.__file__).resolve().parent
REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
SYSTEM_PYTHON = Path("/usr/bin/python3")

A100_XML = REAL / "nvidia-smi-q-x_a100-sxm4-80gb_535.54.03_mig.xml"
H200_Q = REAL / "nvidia-smi-q_h200_550.90.12.txt"
H100_Q = REAL / "nvidia-smi-q_h100-80gb-hbm3_565.57.01_gpu0.txt"
H100_TABLE = REAL / "nvidia-smi_h100-80gb-hbm3-x8_565.57.01.txt"
IBSTAT = REAL / "ibstat_h100-node_cx7-ib_cx6-eth-down.txt"
IBV_DEVINFO = REAL / "ibv_devinfo_connectx3-mlx4_mlnx-ofed.txt"
DMESG_XID = REAL / "dmesg_xid79_hgx.txt"
DMIDECODE = REAL / "dmidecode_supermicro-sys-7049gp-trt_3.1.txt"

UUID_RE = r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


# HCA i to rail leaf i, port 3: as the lab plans a rack's third host.
CABLES = {f"mlx5_{i}": [f"ib-leaf-x-1-{i}", 3] for i in range(8)}


@pytest.fixture
def profile() -> hwemu.Profile:
    return hwemu.cabled(hwemu.generate_profile("gpu-a01", "S421GE0001X0001", 7), CABLES)


# --------------------------------------------------------------------------- helpers


def _tag_paths(el: ET.Element, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for child in el:
        path = f"{prefix}/{child.tag}" if prefix else child.tag
        out.add(path)
        out |= _tag_paths(child, path)
    return out


def _parse_q(text: str) -> dict[str, str]:
    """`nvidia-smi -q` text -> {"Section/Sub/Label": value} for the first GPU."""
    values: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("="):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if " : " in line or line.rstrip().endswith(":"):
            label, _, value = line.partition(" : ")
            key = label.strip()
        else:
            key, value = line.strip(), None
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([s for _, s in stack] + [key])
        if value is None:
            stack.append((indent, key))
        else:
            values.setdefault(path.split("/", 1)[-1] if path.startswith("GPU ") else path, value)
    return values


def _q_shape(line: str) -> str:
    """A -q line without its value: indentation, label and the column of the colon."""
    if " : " in line:
        return f"{line.split(' : ')[0]}|{line.index(' : ')}"
    return line


def _ibstat_blocks(text: str) -> dict[str, list[str]]:
    blocks: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("CA '"):
            current = blocks.setdefault(line[4:-1], [])
            continue
        current.append(line.split(":")[0] + ":")  # indentation + key
    return blocks


def _ibv_blocks(text: str) -> dict[str, dict[str, list[str]]]:
    """hca_id -> {"hca": [keys], "port N": [keys]} with indentation kept."""
    out: dict[str, dict[str, list[str]]] = {}
    hca: dict[str, list[str]] = {}
    section: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        key = line.split(":")[0]
        if line.startswith("hca_id:"):
            hca = out.setdefault(line.split("\t")[-1], {})
            section = hca.setdefault("hca", [])
        elif key.strip() == "port":
            section = hca.setdefault("port " + line.split("\t")[-1], [])
        else:
            section.append(key)
    return out


# --------------------------------------------------------------------------- nvidia-smi -q -x

# Tag paths in the real A100 capture that the emulated H100 deliberately lacks.
REAL_ONLY_ALLOWED = {
    "mig_devices/mig_device": "the capture has MIG enabled; our H100 hosts run with MIG "
                              "disabled, where nvidia-smi prints <mig_devices>None</mig_devices>",
    "ecc_errors/volatile/sram_uncorrectable": "535.54 layout; R550 on Hopper splits it into "
                                              "sram_uncorrectable_parity/_secded (H200 550.90 -q)",
    "ecc_errors/aggregate/sram_uncorrectable": "same split as the volatile counter",
    "temperature/gpu_temp_max_threshold": "Hopper on R550 reports T.Limit-relative thresholds "
                                          "(gpu_temp_max_tlimit_threshold; 'GPU Shutdown T.Limit "
                                          "Temp' in the real H100/H200 -q)",
    "temperature/gpu_temp_slow_threshold": "-> gpu_temp_slow_tlimit_threshold (T.Limit)",
    "temperature/gpu_temp_max_gpu_threshold": "-> gpu_temp_max_gpu_tlimit_threshold (T.Limit)",
    "temperature/gpu_temp_max_mem_threshold": "-> gpu_temp_max_mem_tlimit_threshold (T.Limit)",
}

# Tag paths the emulated R550/Hopper document has and the 535.54 A100 capture lacks.
EMU_ONLY_ALLOWED = {
    "pci/pci_base_class": "added in R545/R550 ('Base Classcode' in the real H200 550.90 -q)",
    "pci/pci_sub_class": "added in R545/R550 ('Sub Classcode')",
    "inforom_bbx_flush": "R550 ('Inforom BBX Object Flush')",
    "c2c_mode": "R550 ('GPU C2C Mode')",
    "gpu_virtualization_mode/vgpu_heterogeneous_mode": "R550 ('vGPU Heterogeneous Mode')",
    "sparse_operation_mode": "R550 ('Sparse Operation Mode')",
    "gpu_memory_power_readings": "R550 ('GPU Memory Power Readings')",
    "fabric/cliqueId": "R550 fabric info ('CliqueId')",
    "fabric/clusterUuid": "R550 fabric info ('ClusterUUID')",
    "fabric/health": "R550 fabric info ('Health/Bandwidth')",
    "ecc_errors/volatile/sram_uncorrectable_parity": "Hopper ECC split (see above)",
    "ecc_errors/volatile/sram_uncorrectable_secded": "Hopper ECC split",
    "ecc_errors/aggregate/sram_uncorrectable_parity": "Hopper ECC split",
    "ecc_errors/aggregate/sram_uncorrectable_secded": "Hopper ECC split",
    "ecc_errors/aggregate/sram_threshold_exceeded": "'SRAM Threshold Exceeded' (H200 -q)",
    "ecc_errors/aggregate_uncorrectable_sram_sources": "'Aggregate Uncorrectable SRAM Sources'",
    "remapped_rows/remapped_row_corr": "the A100 capture is in MIG mode, where remapped_rows "
                                       "reads N/A; H100 with MIG off reports the counters",
    "remapped_rows/remapped_row_unc": "see remapped_row_corr",
    "remapped_rows/remapped_row_pending": "see remapped_row_corr",
    "remapped_rows/remapped_row_failure": "see remapped_row_corr",
    "remapped_rows/row_remapper_histogram": "'Bank Remap Availability Histogram'",
    "temperature/gpu_temp_max_tlimit_threshold": "T.Limit rename (see REAL_ONLY_ALLOWED)",
    "temperature/gpu_temp_slow_tlimit_threshold": "T.Limit rename",
    "temperature/gpu_temp_max_gpu_tlimit_threshold": "T.Limit rename",
    "temperature/gpu_temp_max_mem_tlimit_threshold": "T.Limit rename",
}


def _covered(path: str, allowed: dict[str, str]) -> bool:
    return any(path == key or path.startswith(key + "/") for key in allowed)


def test_xml_parses_and_has_real_header(profile: hwemu.Profile) -> None:
    text = hwemu.nvidia_smi_xml(profile)
    lines = text.splitlines()
    assert lines[0] == '<?xml version="1.0" ?>'
    assert lines[1] == '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">'
    assert lines[2] == "<nvidia_smi_log>"
    assert re.fullmatch(r"\t<timestamp>\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}</timestamp>",
                        lines[3])
    assert lines[-1] == "</nvidia_smi_log>"
    # Tab indentation only, as real nvidia-smi prints it.
    assert all(re.match(r"^\t*[^\t ]", line) for line in lines if line)
    root = ET.fromstring(text)
    assert root.findtext("driver_version") == "550.127.08"
    assert root.findtext("cuda_version") == "12.4"
    assert root.findtext("attached_gpus") == "8"
    gpus = root.findall("gpu")
    assert [g.get("id") for g in gpus] == [
        f"00000000:{b:02X}:00.0" for b in (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
    ]
    assert gpus[0].findtext("mig_devices").strip() == "None"


def test_xml_tag_paths_match_real_capture(profile: hwemu.Profile) -> None:
    mine = _tag_paths(ET.fromstring(hwemu.nvidia_smi_xml(profile)).find("gpu"))
    real = _tag_paths(ET.parse(A100_XML).getroot().find("gpu"))
    missing = {p for p in real - mine if not _covered(p, REAL_ONLY_ALLOWED)}
    extra = {p for p in mine - real if not _covered(p, EMU_ONLY_ALLOWED)}
    assert not missing, f"real elements missing from the emulation: {sorted(missing)}"
    assert not extra, f"emulated elements not in the real capture: {sorted(extra)}"
    # Every allowance is still needed (keeps the lists honest).
    assert all(any(_covered(p, {k: ""}) for p in real - mine) for k in REAL_ONLY_ALLOWED)
    assert all(any(_covered(p, {k: ""}) for p in mine - real) for k in EMU_ONLY_ALLOWED)


# R550 prints gsp_firmware_version after gpu_reset_status (real 550.54.14 XML, and the
# "GSP Firmware Version" line of the real H200 550.90.12 -q); 535.54 printed it before
# gpu_virtualization_mode.
MOVED_IN_R550 = {"gsp_firmware_version"}


def test_xml_element_order_matches_real_capture(profile: hwemu.Profile) -> None:
    mine = [c.tag for c in ET.fromstring(hwemu.nvidia_smi_xml(profile)).find("gpu")]
    real = [c.tag for c in ET.parse(A100_XML).getroot().find("gpu")]
    common = [t for t in real if t in mine and t not in MOVED_IN_R550]
    assert [t for t in mine if t in common] == common
    assert mine.index("gsp_firmware_version") == mine.index("gpu_reset_status") + 1


def test_xml_value_formats(profile: hwemu.Profile) -> None:
    gpu = ET.fromstring(hwemu.nvidia_smi_xml(profile)).find("gpu")
    real = ET.parse(A100_XML).getroot().find("gpu")

    def v(el: ET.Element, path: str) -> str:
        text = el.findtext(path)
        assert text is not None, path
        return text

    assert v(gpu, "product_name") == "NVIDIA H100 80GB HBM3"
    assert v(gpu, "product_architecture") == "Hopper"
    assert re.fullmatch(r"\d{13}", v(gpu, "serial"))
    assert re.fullmatch(UUID_RE, v(gpu, "uuid"))
    assert v(gpu, "vbios_version") == "96.00.89.00.01"
    assert v(gpu, "persistence_mode") == "Enabled"
    assert v(gpu, "fb_memory_usage/total") == "81559 MiB"
    assert v(gpu, "pci/pci_bus_id") == "00000000:18:00.0"
    assert v(gpu, "pci/pci_device_id") == "233010DE"
    assert v(gpu, "ecc_mode/current_ecc") == v(gpu, "ecc_mode/pending_ecc") == "Enabled"
    for scope in ("volatile", "aggregate"):
        for counter in ("sram_correctable", "sram_uncorrectable_parity",
                        "sram_uncorrectable_secded", "dram_correctable", "dram_uncorrectable"):
            assert v(gpu, f"ecc_errors/{scope}/{counter}") == "0"
    assert v(gpu, "remapped_rows/remapped_row_pending") == "No"
    assert v(gpu, "remapped_rows/remapped_row_failure") == "No"
    assert v(gpu, "remapped_rows/row_remapper_histogram/row_remapper_histogram_max") == (
        "2560 bank(s)")
    assert v(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen") == "5"
    assert v(gpu, "pci/pci_gpu_link_info/pcie_gen/max_link_gen") == "5"
    assert v(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width") == "16x"
    assert v(gpu, "pci/pci_gpu_link_info/link_widths/max_link_width") == "16x"
    assert re.fullmatch(r"\d+\.\d\d W", v(gpu, "gpu_power_readings/power_draw"))
    assert v(gpu, "gpu_power_readings/current_power_limit") == "700.00 W"
    assert re.fullmatch(r"\d+ C", v(gpu, "temperature/gpu_temp"))
    assert re.fullmatch(r"\d+ MHz", v(gpu, "clocks/sm_clock"))
    assert v(gpu, "voltage/graphics_volt") == "685.000 mV"
    # Same unit/N-A conventions as the real capture, element by element.
    for path in ("fb_memory_usage/total", "gpu_power_readings/power_draw", "temperature/gpu_temp",
                 "clocks/sm_clock", "pci/tx_util", "voltage/graphics_volt",
                 "pci/pci_gpu_link_info/link_widths/max_link_width"):
        unit = re.sub(r"^[-\d.]+", "", v(real, path))
        assert v(gpu, path).endswith(unit), path
    for path in ("retired_pages/multiple_single_bit_retirement/retired_count",
                 "retired_pages/double_bit_retirement/retired_count",
                 "retired_pages/pending_retirement", "fan_speed"):
        assert v(gpu, path) == v(real, path) == "N/A", path


# --------------------------------------------------------------------------- nvidia-smi -q


def test_q_text_layout_matches_real_r550_hopper(profile: hwemu.Profile) -> None:
    mine = hwemu.nvidia_smi_q(profile, profile.gpus[:1]).rstrip("\n").split("\n")
    real = H200_Q.read_text().rstrip("\n").split("\n")
    bus = lambda ls: [("GPU <bus>" if ln.startswith("GPU 0000") else ln) for ln in ls]  # noqa: E731
    assert [_q_shape(ln) for ln in bus(mine)] == [_q_shape(ln) for ln in bus(real)]


def test_q_values_match_real_h100(profile: hwemu.Profile) -> None:
    mine = _parse_q(hwemu.nvidia_smi_q(profile, profile.gpus[:1]))
    real = _parse_q(H100_Q.read_text())
    same = [
        "Product Name", "Product Brand", "Product Architecture", "Persistence Mode",
        "MIG Mode/Current", "Minor Number", "Board ID", "Board Part Number", "GPU Part Number",
        "Inforom Version/Image Version", "Inforom Version/ECC Object", "PCI/Bus", "PCI/Device",
        "PCI/Domain", "PCI/Device Id", "PCI/Bus Id", "PCI/Sub System Id",
        "PCI/GPU Link Info/PCIe Generation/Max", "PCI/GPU Link Info/PCIe Generation/Current",
        "PCI/GPU Link Info/PCIe Generation/Host Max", "PCI/GPU Link Info/Link Width/Max",
        "PCI/GPU Link Info/Link Width/Current", "Fan Speed", "FB Memory Usage/Total",
        "FB Memory Usage/Reserved", "BAR1 Memory Usage/Total", "ECC Mode/Current",
        "ECC Errors/Volatile/DRAM Uncorrectable", "ECC Errors/Aggregate/SRAM Threshold Exceeded",
        "Retired Pages/Single Bit ECC", "Retired Pages/Double Bit ECC",
        "Retired Pages/Pending Page Blacklist", "Remapped Rows/Pending",
        "Remapped Rows/Bank Remap Availability Histogram/Max",
        "Temperature/GPU Shutdown T.Limit Temp", "GPU Power Readings/Current Power Limit",
        "GPU Power Readings/Min Power Limit", "Max Clocks/Graphics", "Max Clocks/Memory",
        "Max Clocks/Video", "Applications Clocks/Graphics", "Voltage/Graphics", "Processes",
    ]
    for key in same:
        assert mine[key] == real[key], key
    shapes = {
        "Serial Number": r"\d{13}", "GPU UUID": UUID_RE, "VBIOS Version": r"96\.00\.\w\w\.00\.01",
        "Temperature/GPU Current Temp": r"\d+ C", "GPU Power Readings/Power Draw": r"\d+\.\d\d W",
        "GPU Memory Power Readings/Power Draw": r"\d+\.\d\d W", "PCI/Tx Throughput": r"\d+ KB/s",
        "FB Memory Usage/Free": r"\d+ MiB", "Module ID": r"[1-8]",
    }
    for key, pattern in shapes.items():
        assert re.fullmatch(pattern, real[key.replace("Module ID", "Platform Info/Module Id")])
        assert re.fullmatch(pattern, mine[key]), key


# --------------------------------------------------------------------------- summary / -L / csv


def test_summary_table_layout_matches_real(profile: hwemu.Profile) -> None:
    mine = hwemu.nvidia_smi_summary(profile).rstrip("\n").split("\n")
    real = H100_TABLE.read_text().rstrip("\n").split("\n")
    assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4} {7}", mine[0])
    mine = mine[1:]  # the published capture dropped the timestamp line
    assert len(mine) == len(real)
    skeleton = lambda s: [i for i, c in enumerate(s) if c in "|+"]  # noqa: E731
    for m, r in zip(mine, real, strict=True):
        assert len(m) == len(r) and skeleton(m) == skeleton(r), (m, r)
        # Same tokens per cell (values differ, so only their count and kind is compared).
        tokens = lambda s: re.sub(r"\s+", " ", re.sub(r"[\w.:%/-]+", "x", s))  # noqa: E731
        assert tokens(m) == tokens(r), (m, r)


def test_list_gpus(profile: hwemu.Profile) -> None:
    lines = hwemu.nvidia_smi_list(profile).splitlines()
    assert len(lines) == 8
    for i, line in enumerate(lines):
        assert re.fullmatch(rf"GPU {i}: NVIDIA H100 80GB HBM3 \(UUID: {UUID_RE}\)", line)


REQUIRED_QUERY_FIELDS = {
    "index": "index", "name": "name", "serial": "serial", "uuid": "uuid",
    "pci.bus_id": "pci.bus_id", "vbios_version": "vbios_version",
    "driver_version": "driver_version", "persistence_mode": "persistence_mode",
    "ecc.mode.current": "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total": "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total": "ecc.errors.uncorrected.aggregate.total",
    "pcie.link.gen.current": "pcie.link.gen.current", "pcie.link.gen.max": "pcie.link.gen.max",
    "pcie.link.width.current": "pcie.link.width.current",
    "pcie.link.width.max": "pcie.link.width.max", "memory.total": "memory.total [MiB]",
    "temperature.gpu": "temperature.gpu", "power.draw": "power.draw [W]",
    "clocks.sm": "clocks.current.sm [MHz]", "retired_pages.pending": "retired_pages.pending",
    "remapped_rows.pending": "remapped_rows.pending",
    "remapped_rows.failure": "remapped_rows.failure",
}


def test_query_gpu_header_and_values(profile: hwemu.Profile) -> None:
    fields = list(REQUIRED_QUERY_FIELDS)
    out = hwemu.nvidia_smi_query(profile, fields).splitlines()
    assert out[0] == ", ".join(REQUIRED_QUERY_FIELDS.values())
    assert len(out) == 9
    row = dict(zip(fields, out[1].split(", "), strict=True))
    g = profile.gpus[0]
    assert row["index"] == "0" and row["name"] == "NVIDIA H100 80GB HBM3"
    assert row["serial"] == g.serial and row["uuid"] == g.uuid
    assert row["pci.bus_id"] == "00000000:18:00.0"
    assert row["driver_version"] == "550.127.08" and row["vbios_version"] == "96.00.89.00.01"
    assert row["persistence_mode"] == "Enabled" and row["ecc.mode.current"] == "Enabled"
    assert row["ecc.errors.uncorrected.volatile.total"] == "0"
    assert row["pcie.link.gen.current"] == "5" and row["pcie.link.width.max"] == "16"
    assert row["memory.total"] == "81559 MiB"
    assert re.fullmatch(r"\d+", row["temperature.gpu"])
    assert re.fullmatch(r"\d+\.\d\d W", row["power.draw"])
    assert row["clocks.sm"] == "345 MHz"
    assert row["retired_pages.pending"] == "[N/A]"
    assert row["remapped_rows.pending"] == row["remapped_rows.failure"] == "No"


def test_query_gpu_noheader_nounits(profile: hwemu.Profile) -> None:
    out = hwemu.nvidia_smi_query(profile, ["memory.total", "power.draw", "clocks.sm",
                                           "retired_pages.pending"], noheader=True, nounits=True)
    lines = out.splitlines()
    assert len(lines) == 8
    total, power, sm, retired = lines[0].split(", ")
    assert total == "81559" and re.fullmatch(r"\d+\.\d\d", power) and sm == "345"
    assert retired == "[N/A]"
    with_units_header = hwemu.nvidia_smi_query(profile, ["memory.total"], nounits=True)
    assert with_units_header.splitlines()[:2] == ["memory.total [MiB]", "81559"]


def test_query_gpu_unknown_field(profile: hwemu.Profile) -> None:
    with pytest.raises(hwemu.InvalidQueryField) as err:
        hwemu.nvidia_smi_query(profile, ["index", "cuda_version"])
    assert str(err.value) == 'Field "cuda_version" is not a valid field to query.'


def test_cli_nvidia_smi_in_process(
    profile: hwemu.Profile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "hw.json"
    hwemu.save_profile(profile, str(path))
    monkeypatch.setenv(hwemu.PROFILE_ENV, str(path))
    assert hwemu.main(["/usr/bin/nvidia-smi", "--query-gpu=foo", "--format=csv"]) == 2
    assert capsys.readouterr().out == 'Field "foo" is not a valid field to query.\n\n'
    assert hwemu.main(["nvidia-smi", "--query-gpu", "index,uuid", "--format",
                       "csv,noheader"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"0, {profile.gpus[0].uuid}"
    assert hwemu.main(["nvidia-smi", "-q", "-x", "-i", "3"]) == 0
    root = ET.fromstring(capsys.readouterr().out)
    assert [g.get("id") for g in root.findall("gpu")] == ["00000000:5D:00.0"]
    assert hwemu.main(["nvidia-smi", "--bogus"]) == 2
    assert "Invalid combination of input arguments" in capsys.readouterr().out
    assert hwemu.main(["nvidia-smi", "-x"]) == 2


# --------------------------------------------------------------------------- InfiniBand


def test_ibstat_structure_matches_real(profile: hwemu.Profile) -> None:
    real = _ibstat_blocks(IBSTAT.read_text())
    reference = real["mlx5_0"]  # a ConnectX-7 NDR InfiniBand port
    assert all(keys == reference for keys in real.values())
    mine_text = hwemu.ibstat(profile)
    mine = _ibstat_blocks(mine_text)
    assert list(mine) == [f"mlx5_{i}" for i in range(8)]
    assert all(keys == reference for keys in mine.values())
    real_ib = IBSTAT.read_text().split("CA 'mlx5_1'")[0]
    for text in (real_ib, mine_text):
        assert re.search(r"\tCA type: MT4129\n", text)
        assert re.search(r"\tNode GUID: 0x[0-9a-f]{16}\n", text)
        assert re.search(r"\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n", text)
        assert re.search(r"\t\tCapability mask: 0x[0-9a-f]{8}\n", text)
        assert re.search(r"\t\tLink layer: InfiniBand\n", text)
    single = hwemu.ibstat(profile, "mlx5_0")
    assert single == mine_text.split("CA 'mlx5_1'")[0]
    port_only = hwemu.ibstat(profile, "mlx5_0", 1).splitlines()
    assert port_only[0] == "Port 1:" and port_only[1] == "State: Active"
    with pytest.raises(LookupError):
        hwemu.ibstat(profile, "mlx5_9")


# "Device ports:" is printed by the MLNX_OFED ibv_devinfo of the capture; rdma-core's
# ibv_devinfo (Debian 12, current DOCA) does not print it - see SOURCES.md.
IBV_ONLY_IN_CAPTURE = {"\tDevice ports"}


def test_ibv_devinfo_structure_matches_real(profile: hwemu.Profile) -> None:
    real = _ibv_blocks(IBV_DEVINFO.read_text())
    ref_hca = [k for k in real["mlx4_1"]["hca"] if k not in IBV_ONLY_IN_CAPTURE]
    ref_port = real["mlx4_1"]["port 1"]
    assert real["mlx4_1"]["port 2"] == ref_port
    mine_text = hwemu.ibv_devinfo(profile)
    mine = _ibv_blocks(mine_text)
    assert list(mine) == [f"mlx5_{i}" for i in range(8)]
    for blocks in mine.values():
        assert blocks["hca"] == ref_hca
        assert blocks["port 1"] == ref_port
    assert re.search(r"\tnode_guid:\t\t\t946d:ae03:00[0-9a-f]{2}:[0-9a-f]{4}\n", mine_text)
    assert "\tvendor_part_id:\t\t\t4129\n" in mine_text
    assert "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tmax_mtu:\t\t4096 (5)\n" in mine_text
    assert "\t\t\tport_lmc:\t\t0x00\n\t\t\tlink_layer:\t\tInfiniBand\n\n" in mine_text


def test_sysfs_tree_values(profile: hwemu.Profile) -> None:
    tree = hwemu.sysfs_tree(profile)
    port = "class/infiniband/mlx5_0/ports/1"
    assert tree[f"{port}/state"] == "4: ACTIVE\n"
    assert tree[f"{port}/phys_state"] == "5: LinkUp\n"
    assert tree[f"{port}/rate"] == "400 Gb/sec (4X NDR)\n"
    assert tree[f"{port}/link_layer"] == "InfiniBand\n"
    assert re.fullmatch(r"fe80(:0000){3}(:[0-9a-f]{4}){4}\n", tree[f"{port}/gids/0"])
    assert tree["class/infiniband/mlx5_0/fw_ver"] == "28.39.1002\n"
    assert tree["class/infiniband/mlx5_0/hca_type"] == "MT4129\n"
    guid = tree["class/infiniband/mlx5_0/node_guid"]
    assert re.fullmatch(r"([0-9a-f]{4}:){3}[0-9a-f]{4}\n", guid)
    assert tree["class/infiniband/mlx5_0/board_id"] == "MT_0000000838\n"
    dmi = "devices/virtual/dmi/id"
    assert tree[f"{dmi}/sys_vendor"] == "Supermicro\n"
    assert tree[f"{dmi}/product_name"] == "SYS-421GE-TNHR2-LCC\n"
    assert tree[f"{dmi}/product_serial"] == "S421GE0001X0001\n"
    assert re.fullmatch(r"[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}\n", tree[f"{dmi}/product_uuid"])
    for key in ("bios_version", "bios_vendor"):
        assert tree[f"{dmi}/{key}"].strip()


def test_write_sysfs_removes_stale_files(profile: hwemu.Profile, tmp_path: Path) -> None:
    stale = tmp_path / "class/infiniband/mlx5_9/ports/1/state"
    stale.parent.mkdir(parents=True)
    stale.write_text("4: ACTIVE\n")
    keep = tmp_path / "class/net/eth0/address"
    keep.parent.mkdir(parents=True)
    keep.write_text("aa:bb\n")
    hwemu.write_sysfs(profile, str(tmp_path))
    assert not stale.exists() and keep.exists()
    for rel, content in hwemu.sysfs_tree(profile).items():
        assert (tmp_path / rel).read_text() == content


# --------------------------------------------------------------------------- DMI / dmesg


def test_dmidecode_system_matches_real_layout(profile: hwemu.Profile) -> None:
    out = hwemu.dmidecode(profile, "system")
    lines = out.splitlines()
    assert lines[:3] == ["# dmidecode 3.4", "Getting SMBIOS data from sysfs.",
                         "SMBIOS 3.3.0 present."]
    real = DMIDECODE.read_text().split("System Information\n")[1].split("\n\n")[0]
    real_keys = [ln.split(":")[0].strip() for ln in real.splitlines()]
    block = out.split("System Information\n")[1].split("\n\n")[0].splitlines()
    assert [ln.split(":")[0].strip() for ln in block] == real_keys
    assert all(ln.startswith("\t") for ln in block)
    assert "Handle 0x0001, DMI type 1, 27 bytes\nSystem Information\n" in out
    assert "\tManufacturer: Supermicro\n\tProduct Name: SYS-421GE-TNHR2-LCC\n" in out
    assert "\tSerial Number: S421GE0001X0001\n" in out
    assert re.search(r"\tUUID: [0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}\n", out)
    assert "System Boot Information\n\tStatus: No errors detected\n" in out
    assert out.endswith("\n\n")
    assert "BIOS Information" not in out
    assert "BIOS Information\n\tVendor: American Megatrends" in hwemu.dmidecode(profile, "bios")


def test_dmidecode_strings(profile: hwemu.Profile) -> None:
    assert hwemu.dmidecode_string(profile, "system-serial-number") == "S421GE0001X0001\n"
    assert hwemu.dmidecode_string(profile, "system-manufacturer") == "Supermicro\n"
    assert hwemu.dmidecode_string(profile, "system-product-name") == "SYS-421GE-TNHR2-LCC\n"
    assert hwemu.dmidecode_string(profile, "bios-version") == "2.1\n"
    with pytest.raises(ValueError):
        hwemu.dmidecode_string(profile, "system-serial")
    with pytest.raises(ValueError):
        hwemu.dmidecode(profile, "gpu")


def test_dmesg_format(profile: hwemu.Profile) -> None:
    lines = hwemu.dmesg(profile).splitlines()
    assert lines and all(re.match(r"\[ *\d+\.\d{6}\] \S", ln) for ln in lines)
    for line in DMESG_XID.read_text().splitlines():
        assert re.match(r"\[ *\d+\.\d{6}\] \S", line)  # the real format the regex encodes
    assert any(
        re.fullmatch(r"\[ *\d+\.\d{6}\] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  "
                     r"550\.127\.08  \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d UTC \d{4}", ln)
        for ln in lines
    )
    assert not any("Xid" in ln for ln in lines)


def test_xid_79_lines_follow_real_driver_output(profile: hwemu.Profile) -> None:
    p = hwemu.inject(profile, "xid-79")
    new = hwemu.dmesg(p).splitlines()[len(profile.kernel_log):]
    g = next(g for g in p.gpus if g.pci_bus_id == "00000000:9A:00.0")
    real = DMESG_XID.read_text().splitlines()[:5]
    real_uuid = re.search(UUID_RE, real[0]).group(0)
    expected = [
        re.sub(r"^\[[^]]*\] ", "", ln).replace("0000:91:00", "0000:9a:00")
        .replace("1653723052734", g.serial).replace(real_uuid, g.uuid)
        for ln in real
    ]
    assert [re.sub(r"^\[[^]]*\] ", "", ln) for ln in new] == expected
    assert re.fullmatch(r"\[ *\d+\.\d{6}\] NVRM: Xid \(PCI:0000:9a:00\): 79, pid=.*, "
                        r"GPU has fallen off the bus\.", new[2])


# --------------------------------------------------------------------------- faults


def _xml(p: hwemu.Profile) -> ET.Element:
    return ET.fromstring(hwemu.nvidia_smi_xml(p))


def _gpu_el(p: hwemu.Profile, index: int) -> ET.Element:
    return _xml(p).findall("gpu")[index]


def _check_gpu_missing(p: hwemu.Profile) -> bool:
    text = hwemu.nvidia_smi_xml(p)
    return (text.count("<gpu id=") == 7 and "<attached_gpus>7</attached_gpus>" in text
            and "00000000:DB:00.0" not in text and len(hwemu.nvidia_smi_list(p).splitlines()) == 7)


def _check_serial(p: hwemu.Profile, healthy: hwemu.Profile) -> bool:
    serial = _gpu_el(p, 3).findtext("serial")
    csv = hwemu.nvidia_smi_query(p, ["serial"], noheader=True).splitlines()
    return serial != healthy.gpus[3].serial and csv[3] == serial and bool(
        re.fullmatch(r"\d{13}", serial or ""))


def _check_ecc(p: hwemu.Profile) -> bool:
    g = _gpu_el(p, 2)
    csv = hwemu.nvidia_smi_query(p, ["ecc.errors.uncorrected.volatile.total",
                                     "ecc.errors.uncorrected.aggregate.total",
                                     "remapped_rows.pending"], noheader=True).splitlines()[2]
    vol, agg, pending = csv.split(", ")
    return (int(g.findtext("ecc_errors/volatile/dram_uncorrectable")) > 0
            and int(g.findtext("ecc_errors/aggregate/dram_uncorrectable")) > 0
            and g.findtext("remapped_rows/remapped_row_pending") == "Yes"
            and int(vol) > 0 and int(agg) > 0 and pending == "Yes")


def _check_xid(p: hwemu.Profile) -> bool:
    return bool(re.search(r"NVRM: Xid \(PCI:0000:9a:00\): 79, pid=.*, GPU has fallen off the bus\.",
                          hwemu.dmesg(p)))


def _check_ibstat_panic(p: hwemu.Profile) -> bool:
    try:
        hwemu.TOOLS["ibstat"](p, [])
    except hwemu.ToolExit as exc:
        return exc.code == 255 and "stat of IB device 'mlx5_8' failed" in exc.stderr
    return False


def _check_pcie(p: hwemu.Profile) -> bool:
    g = _gpu_el(p, 1)
    csv = hwemu.nvidia_smi_query(p, ["pcie.link.width.current", "pcie.link.width.max"],
                                 noheader=True).splitlines()[1]
    return (g.findtext("pci/pci_gpu_link_info/link_widths/current_link_width") == "8x"
            and g.findtext("pci/pci_gpu_link_info/link_widths/max_link_width") == "16x"
            and csv == "8, 16")


def _check_ib_down(p: hwemu.Profile) -> bool:
    text = hwemu.ibstat(p, "mlx5_3")
    tree = hwemu.sysfs_tree(p)
    return ("\t\tState: Down\n\t\tPhysical state: Disabled\n\t\tRate: 10\n" in text
            and tree["class/infiniband/mlx5_3/ports/1/state"] == "1: DOWN\n"
            and tree["class/infiniband/mlx5_3/ports/1/phys_state"] == "3: Disabled\n"
            and "PORT_DOWN (1)" in hwemu.ibv_devinfo(p, "mlx5_3"))


def _check_ib_rate(p: hwemu.Profile, ca: str = "mlx5_5") -> bool:
    return ("\t\tRate: 200\n" in hwemu.ibstat(p, ca)
            and hwemu.sysfs_tree(p)[f"class/infiniband/{ca}/ports/1/rate"]
            == "200 Gb/sec (4X HDR)\n")


def _check_system_serial(p: hwemu.Profile, healthy: hwemu.Profile) -> bool:
    serial = hwemu.dmidecode_string(p, "system-serial-number").strip()
    return (serial != healthy.system.serial
            and hwemu.sysfs_tree(p)["devices/virtual/dmi/id/product_serial"] == serial + "\n"
            and f"\tSerial Number: {serial}\n" in hwemu.dmidecode(p, "system"))


def _check_driver(p: hwemu.Profile) -> bool:
    root = _xml(p)
    return (root.findtext("driver_version") == "535.183.01"
            and root.findtext("cuda_version") == "12.2"
            and "Kernel Module  535.183.01  " in hwemu.dmesg(p)
            and "550.127.08" not in hwemu.dmesg(p)
            and "| NVIDIA-SMI 535.183.01 " in hwemu.nvidia_smi_summary(p))


def _nvlinks(p: hwemu.Profile):
    return parse_nvidia_smi_nvlink(hwemu.nvidia_smi_nvlink(p))


def _topology(p: hwemu.Profile):
    return parse_nvidia_smi_topo(hwemu.nvidia_smi_topo(p))


def _rising(p: hwemu.Profile) -> set[tuple[int, int, str]]:
    """The NVLink counters that grow between two runs of nvlink -e, 10 s apart."""
    first, later = (parse_nvidia_smi_nvlink_errors(hwemu.nvidia_smi_nvlink_errors(p, now=t))
                    for t in (1.8e9, 1.8e9 + 10))
    return {(b.gpu, link, name) for a, b in zip(first, later, strict=True)
            for (link, name), value in b.by_counter().items()
            if value > a.by_counter()[(link, name)]}


def _fabric(p: hwemu.Profile) -> dict[str, IbLink]:
    """Each CA's link in the emulated fabric map, found by node GUID as the gate finds it."""
    guids = {h.node_guid: h.ca for h in p.hcas}
    return {guids[link.node_guid]: link for link in parse_ibnetdiscover(hwemu.ibnetdiscover(p))
            if link.node_type == "ca"}


def _dcgm_failed(p: hwemu.Profile, level: int) -> set[tuple[str, int]]:
    """The tests dcgmi diag fails at `level`, with the GPUs they fail on."""
    return {(t.name, gpu) for t in parse_dcgmi_diag(hwemu.dcgmi_diag(p, level)).failed
            for gpu, result in t.gpus if result == "Fail"}


def _busbw(p: hwemu.Profile) -> float:
    run = hwemu.parse_all_reduce_perf(["-b", "128M", "-e", "4G", "-f", "2", "-g", "8"])
    return parse_nccl_tests(hwemu.all_reduce_perf_output(p, run, 1)).avg_busbw


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ib_write_bw_pair(server: hwemu.Profile, client: hwemu.Profile,
                     *args: str) -> tuple[str, str]:
    """Both ends' output of one ib_write_bw run over TCP on 127.0.0.1, in this process."""
    tool, port, out = hwemu.TOOLS["ib_write_bw"], str(free_port()), {}
    serving = threading.Thread(target=lambda: out.update(
        server=tool(server, [*args, "-p", port])))
    serving.start()
    try:
        measured = tool(client, [*args, "-p", port, "127.0.0.1"])
    finally:
        serving.join(timeout=30)
    return measured, out["server"]


def _rdma_gbps(p: hwemu.Profile, device: str) -> float:
    """A loopback pair on one port: as ib_write_bw's client prints it."""
    client, _ = ib_write_bw_pair(p, p, "-d", device, "--report_gbits")
    return parse_perftest_bw(client).rows[0].average_gbps


FAULT_CHECKS: dict[str, Callable[[hwemu.Profile, hwemu.Profile], bool]] = {
    "gpu-missing": lambda p, _h: _check_gpu_missing(p),
    "gpu-lost": lambda p, _h: "Unable to determine the device handle for GPU 0000:AB:00.0: "
                              "Unknown Error\n" in hwemu.nvidia_smi_xml(p),
    "gpu-serial-changed": _check_serial,
    "ecc-uncorrected": lambda p, _h: _check_ecc(p),
    "xid-79": lambda p, _h: _check_xid(p),
    # The real-world forms: test_hwemu_real_forms has the details.
    "aer-gpu-endpoint": lambda p, _h: "nvidia 0000:18:00.0: AER: can't recover" in hwemu.dmesg(p),
    "xid-nvlink5-nonfatal": lambda p, _h: len(re.findall(
        r"NVRM: Xid \(PCI:0000:2a:00\): 14[45], \w+ Nonfatal ", hwemu.dmesg(p))) == 2,
    "gpu-off-bus-open-module": lambda p, _h: (_check_gpu_missing(p) and "NVRM: fallen off the "
                                               "bus" in hwemu.dmesg(p)),
    "ibstat-panic": lambda p, _h: _check_ibstat_panic(p),
    "dmi-chassis-only": lambda p, h: (
        hwemu.dmidecode_string(p, "system-serial-number") == "To be filled by O.E.M.\n"
        and hwemu.dmidecode_string(p, "chassis-serial-number") == h.system.serial + "\n"),
    "pcie-degraded": lambda p, _h: _check_pcie(p),
    "ib-port-down": lambda p, _h: _check_ib_down(p),
    "ib-rate-wrong": lambda p, _h: _check_ib_rate(p),
    "mac-swapped": lambda p, _h: p.mac_swapped,
    "wrong-system-serial": _check_system_serial,
    "driver-version-wrong": lambda p, _h: _check_driver(p),
    "nvlink-down": lambda p, _h: _nvlinks(p)[3].inactive == (7,),
    "nvlink-errors-rising": lambda p, _h: _rising(p) == {(2, 5, "Replay Errors"),
                                                         (2, 5, "CRC Errors")},
    "numa-misplaced": lambda p, _h: _topology(p).link("GPU6", "NIC6") == "SYS",
    "cable-swapped": lambda p, _h: (
        "ib-leaf-x-1-1:" in _fabric(p)["mlx5_0"].peer_desc
        and "ib-leaf-x-1-0:" in _fabric(p)["mlx5_1"].peer_desc),
    "cable-wrong-leaf": lambda p, _h: (_fabric(p)["mlx5_2"].peer_desc,
                                       _fabric(p)["mlx5_2"].peer_port) == (
        "MF0;ib-leaf-x-1-3:MQM9700/U1", 35),
    "ib-link-degraded": lambda p, _h: (_fabric(p)["mlx5_4"].speed == "HDR"
                                         and _check_ib_rate(p, "mlx5_4")),
    "link-no-neighbor": lambda p, _h: not _fabric(p)["mlx5_7"].linked,
    # The in-band cable is real (racklift.lab.leaf moves it; test_lab sees it in lldpd): the
    # profile only records the fault, so that heal puts the cable back.
    **{kind: lambda p, _h, kind=kind: kind in p.faults for kind in hwemu.ETHERNET_FAULTS},
    # Load-only: acceptance's tools show them (test_hwemu_acceptance has the details).
    "hbm-fail": lambda p, _h: _dcgm_failed(p, 2) == {("GPU Memory", 4)},
    "nvlink-slow": lambda p, _h: _busbw(p) < 350,
    "rail-slow": lambda p, _h: _rdma_gbps(p, "mlx5_3") < 150,
    "dcgm-skip-required": lambda p, _h: {t.result for t in parse_dcgmi_diag(
        hwemu.dcgmi_diag(p, 2)).tests if t.category != "Deployment"} == {"Skip"},
}


def test_fault_names_are_exactly_the_documented_set() -> None:
    assert set(hwemu.FAULTS) == set(FAULT_CHECKS)


@pytest.mark.parametrize("kind", sorted(FAULT_CHECKS))
def test_fault_visible_and_healed(kind: str, profile: hwemu.Profile) -> None:
    assert not FAULT_CHECKS[kind](profile, profile)
    faulty = hwemu.inject(profile, kind)
    assert faulty.faults == [kind]
    assert FAULT_CHECKS[kind](faulty, profile)
    assert profile.faults == [] and not FAULT_CHECKS[kind](profile, profile)  # input untouched
    # The fault survives the JSON round trip the lab uses.
    assert FAULT_CHECKS[kind](hwemu.Profile.from_json(faulty.to_json()), profile)
    healed = hwemu.heal(faulty)
    assert healed.faults == [] and not FAULT_CHECKS[kind](healed, profile)
    assert healed.to_dict() == profile.to_dict()


def test_mac_swapped_changes_no_tool_output(profile: hwemu.Profile) -> None:
    p = hwemu.inject(profile, "mac-swapped")
    assert hwemu.ibstat(p) == hwemu.ibstat(profile)
    assert hwemu.dmesg(p) == hwemu.dmesg(profile)
    assert hwemu.sysfs_tree(p) == hwemu.sysfs_tree(profile)


def test_inject_unknown_kind_lists_valid_kinds(profile: hwemu.Profile) -> None:
    with pytest.raises(ValueError) as err:
        hwemu.inject(profile, "gpu-on-fire")
    assert all(kind in str(err.value) for kind in hwemu.FAULTS)


def test_faults_combine(profile: hwemu.Profile) -> None:
    p = hwemu.inject(hwemu.inject(profile, "ib-port-down"), "ecc-uncorrected")
    assert p.faults == ["ib-port-down", "ecc-uncorrected"]
    assert _check_ib_down(p) and _check_ecc(p)


# --------------------------------------------------------------------------- profile


def test_generate_profile_is_deterministic(profile: hwemu.Profile) -> None:
    again = hwemu.cabled(hwemu.generate_profile("gpu-a01", "S421GE0001X0001", 7), CABLES)
    assert again.to_dict() == profile.to_dict()
    assert hwemu.nvidia_smi_query(again, ["uuid", "serial"]) == hwemu.nvidia_smi_query(
        profile, ["uuid", "serial"])


def test_generate_profile_distinct_identities(profile: hwemu.Profile) -> None:
    other = hwemu.generate_profile("gpu-a02", "S421GE0001X0002", 8)

    def ids(p: hwemu.Profile) -> set[str]:
        return ({g.serial for g in p.gpus} | {g.uuid for g in p.gpus}
                | {h.node_guid for h in p.hcas} | {p.system.uuid})

    assert len(ids(profile)) == 8 + 8 + 8 + 1
    assert not ids(profile) & ids(other)
    assert len({h.base_lid for h in profile.hcas}) == 8


def test_healthy_profile(profile: hwemu.Profile) -> None:
    assert len(profile.gpus) == 8 and len(profile.hcas) == 8
    assert profile.faults == [] and not profile.mac_swapped and not profile.nvswitch
    assert profile.seed == 7 and profile.original_serial == "S421GE0001X0001"
    assert all(h.state == "Active" and h.rate == 400 for h in profile.hcas)
    assert all(g.ecc_mode_current == "Enabled" and _aggregate(g) == 0 for g in profile.gpus)


def _aggregate(g: hwemu.GPU) -> int:
    return nvidia_smi._aggregate_uncorrected(g) + nvidia_smi._volatile_uncorrected(g)


def test_profile_json_round_trip(profile: hwemu.Profile) -> None:
    text = profile.to_json()
    back = hwemu.Profile.from_json(text)
    assert back == profile
    assert json.loads(text)["system"]["product"] == "SYS-421GE-TNHR2-LCC"
    assert hwemu.GPU.from_dict(profile.gpus[0].to_dict()) == profile.gpus[0]
    assert hwemu.HCAPort.from_dict(profile.hcas[0].to_dict()) == profile.hcas[0]
    assert hwemu.System.from_dict(profile.system.to_dict()) == profile.system


# --------------------------------------------------------------------------- installed driver

# What dpkg-query -W prints on a lab host after the nvidia_driver role (it holds its packages).
DPKG = ("base-files\t12.4+deb12u8\tii \n"
        "nvidia-fabricmanager-550\t550.127.05-1\thi \n"
        "nvidia-open-550\t550.127.05-1\thi \n")


@pytest.mark.parametrize(("packages", "version"), [
    (DPKG, "550.127.05"),
    ("nvidia-driver-570-open\t570.124.06-0ubuntu0.24.04.1\tii \n", "570.124.06"),  # Ubuntu
    ("nvidia-driver\t535.183.01-1~deb12u1\tii \n", "535.183.01"),  # Debian's own
    ("cuda-drivers\t565.57.01-1\tii \nnvidia-kernel-open-dkms\t565.57.01-1\tii \n",
     "565.57.01"),
    # Mid-upgrade the newest, compared as numbers (a string compare would pick 550.54.15).
    ("nvidia-utils-550\t550.54.15-0ubuntu1\tii \nnvidia-open-550\t550.127.08-1\tii \n",
     "550.127.08"),
    ("nvidia-open-550\t550.127.08-1\trc \n", None),  # removed, its configuration left
    ("nvidia-fabricmanager-550\t550.127.08-1\tii \n"
     "nvidia-driver-assistant\t0.20.124.06-1\tii \n", None),  # not the driver
    ("", None),
])
def test_installed_driver_from_dpkg_query(packages: str, version: str | None) -> None:
    assert hwemu.installed_driver(packages) == version


def _every_output(p: hwemu.Profile) -> dict[str, str]:
    return {"xml": hwemu.nvidia_smi_xml(p), "q": hwemu.nvidia_smi_q(p),
            "table": hwemu.nvidia_smi_summary(p), "version": hwemu.nvidia_smi_version(p),
            "csv": hwemu.nvidia_smi_query(p, ["driver_version"], True, True),
            "dmesg": hwemu.dmesg(p)}


def test_installed_driver_shows_in_every_format(profile: hwemu.Profile) -> None:
    p = hwemu.with_installed_driver(profile, "550.127.05")
    out = _every_output(p)
    assert not [name for name, text in out.items() if "550.127.08" in text]
    root = ET.fromstring(out["xml"])
    assert (root.findtext("driver_version"), root.findtext("cuda_version")) == (
        "550.127.05", "12.4")
    assert root.find("gpu").findtext("gsp_firmware_version") == "550.127.05"
    q = _parse_q(out["q"])
    assert (q["Driver Version"], q["CUDA Version"]) == ("550.127.05", "12.4")
    assert "| NVIDIA-SMI 550.127.05             Driver Version: 550.127.05     " \
           "CUDA Version: 12.4     |" in out["table"]
    assert "NVML version        : 550.127\nDRIVER version      : 550.127.05\n" in out["version"]
    assert out["csv"] == "550.127.05\n" * 8
    assert "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.127.05  " in out["dmesg"]
    assert profile.driver_version == "550.127.08"  # input untouched
    # Another branch brings its CUDA version.
    other = ET.fromstring(hwemu.nvidia_smi_xml(hwemu.with_installed_driver(profile, "570.124.06")))
    assert (other.findtext("driver_version"), other.findtext("cuda_version")) == (
        "570.124.06", "12.8")


def test_no_driver_package_means_no_driver(profile: hwemu.Profile) -> None:
    p = hwemu.with_installed_driver(profile, None)
    assert (p.driver_version, p.cuda_version) == (None, None)
    log = hwemu.dmesg(p)
    assert "mlx5_core" in log and not re.search(r"nvidia|NVRM", log)


def test_wrong_driver_fault_is_not_the_installed_one(profile: hwemu.Profile) -> None:
    faulty = hwemu.inject(profile, "driver-version-wrong")
    assert _check_driver(hwemu.with_installed_driver(faulty, "550.127.08"))
    assert hwemu.with_installed_driver(faulty, None).driver_version is None


def test_heal_keeps_the_driver_source(profile: hwemu.Profile) -> None:
    profile.driver_from_packages = True
    assert hwemu.heal(hwemu.inject(profile, "xid-79")).driver_from_packages


def test_cli_on_a_lab_host_asks_dpkg(profile: hwemu.Profile, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    profile.driver_from_packages = True
    path = tmp_path / "hw.json"
    hwemu.save_profile(profile, str(path))
    monkeypatch.setenv(hwemu.PROFILE_ENV, str(path))
    status = tmp_path / "status"  # stands in for dpkg's database: what the answer is keyed by
    monkeypatch.setattr(hwemu_cli, "DPKG_STATUS", str(status))
    monkeypatch.setattr(hwemu_cli, "DRIVER_CACHE", str(tmp_path / "run" / "installed-driver"))
    listing = tmp_path / "packages"
    fake = tmp_path / "dpkg-query"  # answers only the collector's query
    answer = (f"#!/bin/sh\n[ \"$*\" = '-W -f ${{Package}}\t${{Version}}"
              f"\t${{db:Status-Abbrev}}\n' ] && exec /bin/cat {listing}\nexit 2\n")
    fake.write_text(answer)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))

    def install(packages: str) -> None:  # as dpkg does: the database changes with them
        listing.write_text(packages)
        status.write_text(packages)

    install(DPKG)
    assert hwemu.main(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]) == 0
    assert capsys.readouterr().out == "550.127.05\n" * 8
    fake.unlink()  # the database unchanged: the driver read last time, dpkg-query not asked
    assert hwemu.main(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]) == 0
    assert capsys.readouterr().out == "550.127.05\n" * 8
    fake.write_text(answer)
    fake.chmod(0o755)
    install("base-files\t12.4+deb12u8\tii \n")
    assert hwemu.main(["nvidia-smi"]) == 9
    assert capsys.readouterr().out == hwemu.NVIDIA_SMI_NO_DRIVER + "\n\n"
    fake.unlink()  # no dpkg at all: say so, rather than guess
    install(DPKG)
    assert hwemu.main(["ibstat"]) == 1
    assert "cannot read the hardware profile or packages" in capsys.readouterr().err


# --------------------------------------------------------------------------- lab-host CLI


def _system_python() -> Path:
    if not SYSTEM_PYTHON.exists():
        pytest.skip("no /usr/bin/python3 on this machine")
    version = subprocess.run([SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    if version != "(3, 11)":
        pytest.skip(f"/usr/bin/python3 is {version}, not the lab hosts' 3.11")
    return SYSTEM_PYTHON


@pytest.fixture
def lab_host(tmp_path: Path, profile: hwemu.Profile) -> dict[str, object]:
    """The emulator as the lab_hardware role installs it (outside the racklift tree): the
    package's modules and the launcher, with tool-named symlinks to the launcher."""
    python = _system_python()
    libdir = tmp_path / "lib"
    (libdir / "hwemu").mkdir(parents=True)
    for module in PACKAGE.glob("*.py"):
        shutil.copy2(module, libdir / "hwemu" / module.name)
    script = libdir / "hwemu-tool"
    shutil.copy2(REPO_ROOT / "roles/lab_hardware/files/hwemu-tool", script)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in hwemu.TOOLS:
        (bindir / tool).symlink_to(script)
    profile_path = tmp_path / "hardware.json"
    hwemu.save_profile(profile, str(profile_path))
    env = {"PATH": "/usr/bin:/bin", "RACKLIFT_HW_PROFILE": str(profile_path), "LC_ALL": "C"}

    def run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        target = bindir / tool if tool in hwemu.TOOLS else script
        argv = [str(python), "-I", str(target), *args] if tool in hwemu.TOOLS else [
            str(python), "-I", str(script), tool, *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60,
                              check=False)

    return {"run": run, "bin": bindir, "profile": profile_path, "env": env, "script": script}


def test_lab_cli_through_symlinks(lab_host: dict, profile: hwemu.Profile) -> None:
    run = lab_host["run"]
    xml = run("nvidia-smi", "-q", "-x")
    assert xml.returncode == 0, xml.stderr
    assert len(ET.fromstring(xml.stdout).findall("gpu")) == 8
    listing = run("nvidia-smi", "-L")
    assert listing.stdout == hwemu.nvidia_smi_list(profile)
    csv = run("nvidia-smi", "--query-gpu=index,serial,pcie.link.width.current,memory.total",
              "--format=csv,noheader,nounits")
    assert csv.returncode == 0
    assert csv.stdout.splitlines()[0] == f"0, {profile.gpus[0].serial}, 16, 81559"
    bad = run("nvidia-smi", "--query-gpu=index,nope", "--format=csv")
    assert bad.returncode == 2
    assert bad.stdout == 'Field "nope" is not a valid field to query.\n\n'
    assert run("ibstat").stdout == hwemu.ibstat(profile)
    assert run("ibstat", "mlx5_0").stdout == hwemu.ibstat(profile, "mlx5_0")
    missing = run("ibstat", "mlx5_42")
    assert missing.returncode == 255 and "stat of IB device 'mlx5_42' failed" in missing.stderr
    assert run("ibv_devinfo").stdout == hwemu.ibv_devinfo(profile)
    assert run("dmidecode", "-t", "system").stdout == hwemu.dmidecode(profile, "system")
    assert run("dmidecode", "-s", "system-serial-number").stdout == "S421GE0001X0001\n"
    assert run("dmesg").stdout == hwemu.dmesg(profile)
    assert run("nvidia-smi").stdout.splitlines()[2].startswith("| NVIDIA-SMI 550.127.08 ")


def test_lab_cli_direct_exec_and_subcommands(lab_host: dict, tmp_path: Path,
                                             profile: hwemu.Profile) -> None:
    env = lab_host["env"]
    direct = subprocess.run([str(lab_host["bin"] / "nvidia-smi"), "-L"], capture_output=True,
                            text=True, env=env, timeout=60, check=False)
    assert direct.returncode == 0 and direct.stdout == hwemu.nvidia_smi_list(profile)
    run = lab_host["run"]
    shown = run("profile")
    assert shown.returncode == 0 and hwemu.Profile.from_json(shown.stdout) == profile
    root = tmp_path / "sysroot"
    assert run("write-sysfs", str(root)).returncode == 0
    assert (root / "class/infiniband/mlx5_0/ports/1/state").read_text() == "4: ACTIVE\n"
    assert run("inject", "ib-rate-wrong").returncode == 0
    assert "\t\tRate: 200\n" in run("ibstat", "mlx5_5").stdout
    assert run("heal").returncode == 0
    assert hwemu.load_profile(str(lab_host["profile"])) == profile
    assert run("inject", "no-such-fault").returncode == 1
    assert run("nvidia-smi", "-L").stdout == hwemu.nvidia_smi_list(profile)


def test_lab_cli_without_driver_exits_9(lab_host: dict, profile: hwemu.Profile) -> None:
    profile.driver_version = None
    profile.cuda_version = None
    hwemu.save_profile(profile, str(lab_host["profile"]))
    for args in (["-q", "-x"], ["-L"], []):
        res = lab_host["run"]("nvidia-smi", *args)
        assert res.returncode == 9
        assert res.stdout.splitlines()[0] == (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.")


def test_lab_cli_with_a_lost_gpu_names_it_and_exits_15(lab_host: dict,
                                                       profile: hwemu.Profile) -> None:
    hwemu.save_profile(hwemu.inject(profile, "gpu-lost"), str(lab_host["profile"]))
    line = "Unable to determine the device handle for GPU 0000:AB:00.0: Unknown Error"
    xml = lab_host["run"]("nvidia-smi", "-q", "-x")
    assert xml.returncode == 15 and xml.stdout.startswith(line + "\n<?xml")
    assert len(ET.fromstring(xml.stdout.split("\n", 1)[1]).findall("gpu")) == 7
    summary = lab_host["run"]("nvidia-smi")
    assert (summary.returncode, summary.stdout) == (15, line + "\n")
    listing = lab_host["run"]("nvidia-smi", "-L").stdout.splitlines()
    assert listing[5] == line and len(listing) == 8


def test_lab_cli_acceptance_tools(lab_host: dict, profile: hwemu.Profile) -> None:
    """dcgmi, all_reduce_perf and an ib_write_bw pair on the lab hosts' Python, through their
    links: the server in the background, its client over TCP."""
    run = lab_host["run"]
    diag = run("dcgmi", "diag", "-r", "1")
    assert (diag.returncode, diag.stdout) == (0, hwemu.dcgmi_diag(profile, 1))
    nccl = run("all_reduce_perf", "-b", "8", "-e", "128M", "-f", "2", "-g", "8")
    assert nccl.returncode == 0 and parse_nccl_tests(nccl.stdout).ranks == 8
    port = str(free_port())
    server = subprocess.Popen([str(_system_python()), "-I", str(lab_host["bin"] / "ib_write_bw"),
                               "-d", "mlx5_0", "-p", port], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=lab_host["env"])
    client = run("ib_write_bw", "-d", "mlx5_0", "-p", port, "127.0.0.1")
    served, _ = server.communicate(timeout=60)
    assert (client.returncode, server.returncode) == (0, 0), client.stderr
    assert parse_perftest_bw(client.stdout).rows == parse_perftest_bw(served).rows


def test_hwemu_imports_only_stdlib_and_itself() -> None:
    """On a lab host the package is a top-level `hwemu`: stdlib and relative imports only."""
    for path in [*PACKAGE.glob("*.py"), REPO_ROOT / "roles/lab_hardware/files/hwemu-tool"]:
        tree = ast.parse(path.read_text())
        modules = {alias.name.split(".")[0] for node in ast.walk(tree)
                   if isinstance(node, ast.Import) for alias in node.names}
        modules |= {node.module.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module and not node.level}
        allowed = {"hwemu"} if path.name == "hwemu-tool" else set()
        assert modules <= set(sys.stdlib_module_names) | {"__future__"} | allowed, (path, modules)


def test_the_fabric_map_shows_each_link_from_both_ends(profile: hwemu.Profile) -> None:
    links = parse_ibnetdiscover(hwemu.ibnetdiscover(profile))
    ca_side = {(link.node_guid, link.peer_desc, link.peer_port) for link in links
               if link.node_type == "ca"}
    switch_side = {(link.peer_guid, link.node_desc, link.port) for link in links
                   if link.node_type == "switch"}
    assert ca_side == switch_side
    assert len(ca_side) == 8 and {link.width + link.speed for link in links} == {"4xNDR"}
    assert {link.peer_desc for link in links if link.node_type == "switch"} == {
        f"gpu-a01 mlx5_{i}" for i in range(8)}
