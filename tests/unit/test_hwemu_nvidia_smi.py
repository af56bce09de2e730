"""nvidia-smi as the lab emulates it (src/racklift/lab/hwemu/nvidia_smi.py and its command line,
nvidia_smi_cli.py): `-q -x` against the real A100 XML's elements, order and value formats, `-q`
against the real R550 H200 and H100 text, the summary table and `-L` against the real H100
captures, and the tool's arguments run in process. One of the emulator's test files, one per
module of src/racklift/lab/hwemu, named test_hwemu_<module>.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import hwemu_support
import pytest
from hwemu_support import REAL, UUID_RE, _parse_q

from racklift.lab import hwemu

profile = hwemu_support.profile


A100_XML = REAL / "nvidia-smi-q-x_a100-sxm4-80gb_535.54.03_mig.xml"
H200_Q = REAL / "nvidia-smi-q_h200_550.90.12.txt"
H100_Q = REAL / "nvidia-smi-q_h100-80gb-hbm3_565.57.01_gpu0.txt"
H100_TABLE = REAL / "nvidia-smi_h100-80gb-hbm3-x8_565.57.01.txt"


def _tag_paths(el: ET.Element, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for child in el:
        path = f"{prefix}/{child.tag}" if prefix else child.tag
        out.add(path)
        out |= _tag_paths(child, path)
    return out


def _q_shape(line: str) -> str:
    """A -q line without its value: indentation, label and the column of the colon."""
    if " : " in line:
        return f"{line.split(' : ')[0]}|{line.index(' : ')}"
    return line


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


# --------------------------------------------------------------------------- summary / -L


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


# --------------------------------------------------------------------------- command line


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
