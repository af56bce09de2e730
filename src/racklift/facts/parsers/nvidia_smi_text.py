"""``nvidia-smi -q`` (plain text, as operators paste it into tickets): read into the tree that
``-q -x`` prints, element names and all, so one reading (nvidia_smi.gpu_facts) serves both.
The names are those of the fields the facts use; other labels get names of their own that
nothing reads. Format: the R550/R565 captures in tests/fixtures/real (H200, H100 HGX)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from racklift.facts.observed import NvidiaSmiFacts
from racklift.facts.parsers.common import ParseError, shown, text_lines, to_int
from racklift.facts.parsers.nvidia_smi import gpu_facts, lost_gpus

KIND = "nvidia-smi-q"
MAX_LINES = 100_000  # 8 GPUs print about 2,000
_LABEL = 128
_VALUE = 1024
_INDENT = 4

# (the section's element path, the label) -> the element path -q -x prints for it.
_NAMES: dict[tuple[str, str], str] = {
    ("", "Driver Version"): "driver_version",
    ("", "CUDA Version"): "cuda_version",
    ("", "Attached GPUs"): "attached_gpus",
    **{("gpu", label): name for label, name in (
        ("Product Name", "product_name"), ("Product Architecture", "product_architecture"),
        ("Persistence Mode", "persistence_mode"), ("MIG Mode", "mig_mode"),
        ("Serial Number", "serial"), ("GPU UUID", "uuid"), ("VBIOS Version", "vbios_version"),
        ("Board Part Number", "board_part_number"), ("GPU Part Number", "gpu_part_number"),
        ("Module ID", "gpu_module_id"), ("PCI", "pci"), ("FB Memory Usage", "fb_memory_usage"),
        ("ECC Mode", "ecc_mode"), ("Ecc Mode", "ecc_mode"),  # the second before driver 530
        ("ECC Errors", "ecc_errors"),
        ("Retired Pages", "retired_pages"), ("Remapped Rows", "remapped_rows"),
        ("Temperature", "temperature"), ("GPU Power Readings", "gpu_power_readings"),
        ("Power Readings", "power_readings"), ("Fabric", "fabric"),
        ("Platform Info", "platformInfo"))},
    ("gpu/platformInfo", "Module Id"): "module_id",
    ("gpu/mig_mode", "Current"): "current_mig",
    ("gpu/mig_mode", "Pending"): "pending_mig",
    ("gpu/pci", "Bus Id"): "pci_bus_id",
    ("gpu/pci", "Device Id"): "pci_device_id",
    ("gpu/pci", "GPU Link Info"): "pci_gpu_link_info",
    ("gpu/pci/pci_gpu_link_info", "PCIe Generation"): "pcie_gen",
    ("gpu/pci/pci_gpu_link_info", "Link Width"): "link_widths",
    ("gpu/pci/pci_gpu_link_info/pcie_gen", "Max"): "max_link_gen",
    ("gpu/pci/pci_gpu_link_info/pcie_gen", "Current"): "current_link_gen",
    ("gpu/pci/pci_gpu_link_info/link_widths", "Max"): "max_link_width",
    ("gpu/pci/pci_gpu_link_info/link_widths", "Current"): "current_link_width",
    ("gpu/fb_memory_usage", "Total"): "total",
    ("gpu/ecc_mode", "Current"): "current_ecc",
    ("gpu/ecc_mode", "Pending"): "pending_ecc",
    ("gpu/ecc_errors", "Volatile"): "volatile",
    ("gpu/ecc_errors", "Aggregate"): "aggregate",
    **{(f"gpu/ecc_errors/{which}", label): name for which in ("volatile", "aggregate")
       for label, name in (
        ("SRAM Correctable", "sram_correctable"), ("SRAM Uncorrectable", "sram_uncorrectable"),
        ("SRAM Uncorrectable Parity", "sram_uncorrectable_parity"),
        ("SRAM Uncorrectable SEC-DED", "sram_uncorrectable_secded"),
        ("DRAM Correctable", "dram_correctable"), ("DRAM Uncorrectable", "dram_uncorrectable"),
        ("Single Bit", "single_bit"), ("Double Bit", "double_bit"))},
    **{(f"gpu/ecc_errors/{which}/{bits}", "Total"): "total"
       for which in ("volatile", "aggregate") for bits in ("single_bit", "double_bit")},
    ("gpu/retired_pages", "Single Bit ECC"): "multiple_single_bit_retirement/retired_count",
    ("gpu/retired_pages", "Double Bit ECC"): "double_bit_retirement/retired_count",
    ("gpu/retired_pages", "Pending Page Blacklist"): "pending_blacklist",
    ("gpu/retired_pages", "Pending Page Retirement"): "pending_retirement",
    ("gpu/remapped_rows", "Correctable Error"): "remapped_row_corr",
    ("gpu/remapped_rows", "Uncorrectable Error"): "remapped_row_unc",
    ("gpu/remapped_rows", "Pending"): "remapped_row_pending",
    ("gpu/remapped_rows", "Remapping Failure Occurred"): "remapped_row_failure",
    ("gpu/temperature", "GPU Current Temp"): "gpu_temp",
    **{(f"gpu/{block}", label): name for block in ("gpu_power_readings", "power_readings")
       for label, name in (("Power Draw", "power_draw"),
                           ("Instantaneous Power Draw", "instant_power_draw"),
                           ("Average Power Draw", "average_power_draw"))},
    ("gpu/fabric", "State"): "state",
    ("gpu/fabric", "Status"): "status",
}
_GPU = re.compile(r"GPU ([0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")


def _name(path: str, label: str) -> str:
    """The element path for `label` in section `path`; a label the facts never read gets a
    name of its own ("Bar1 Memory Usage" -> "label.bar1_memory_usage"), never one they do."""
    return _NAMES.get((path, label)) or "label." + re.sub(r"\W+", "_", label.lower())


def _element(parent: ET.Element, path: str) -> ET.Element:
    for tag in path.split("/"):
        parent = ET.SubElement(parent, tag)
    return parent


def parse_nvidia_smi_q(text: str) -> NvidiaSmiFacts:
    lines = text_lines(text)
    if len(lines) > MAX_LINES:
        raise ParseError(KIND, f"more than {MAX_LINES} lines")
    root = ET.Element("nvidia_smi_log")
    # The open sections: (indent, element, the element's path).
    stack: list[tuple[int, ET.Element, str]] = [(-1, root, "")]
    started = False
    around = []
    for line in lines:
        if not line.strip() or line.strip() == "==============NVSMI LOG==============":
            started = started or bool(line.strip())
            continue
        indent = len(line) - len(line.lstrip(" "))
        label, sep, value = line.strip().partition(" : ")
        label = label.strip()
        if indent == 0 and (gpu := _GPU.fullmatch(label)):
            stack = [stack[0], (0, ET.SubElement(root, "gpu", id=gpu[1]), "gpu")]
            continue
        if not started:
            around.append(line.strip())  # what nvidia-smi printed before the log
            continue
        if len(label) > _LABEL or len(value) > _VALUE or indent % _INDENT:
            raise ParseError(KIND, f"a line that is no nvidia-smi -q field: {shown(line)}")
        while stack[-1][0] >= indent:
            stack.pop()
        if not stack or (indent > 0 and len(stack) == 1):
            raise ParseError(KIND, f"{shown(label)} belongs to no section")
        _, parent, path = stack[-1]
        element = _element(parent, _name(path, label))
        if sep:
            # -q -x prints the device id without its 0x ("233010DE"), -q with it.
            element.text = value.strip().removeprefix("0x") if element.tag == "pci_device_id" \
                else value.strip()
        else:
            stack.append((indent, element, f"{path}/{element.tag}" if path else element.tag))
    if not started:
        raise ParseError(KIND, "no NVSMI LOG (not nvidia-smi -q)")
    gpus = tuple(gpu_facts(i, gpu) for i, gpu in enumerate(root.findall("gpu")))
    attached = to_int(root.findtext("attached_gpus"), KIND, "Attached GPUs")
    return NvidiaSmiFacts(
        driver_version=root.findtext("driver_version"), cuda_version=root.findtext("cuda_version"),
        attached_gpus=attached if attached is not None else len(gpus), gpus=gpus,
        errors=tuple(around), lost_gpus=lost_gpus(around))
