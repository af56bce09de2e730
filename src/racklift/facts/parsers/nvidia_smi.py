"""nvidia-smi: ``-q -x`` (XML, without DTD or entities) and ``--query-gpu`` CSV."""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as xml_without_dtd

from racklift.facts.observed import GPUFacts, NvidiaSmiFacts
from racklift.facts.parsers.common import (
    ParseError,
    masked,
    na,
    normalize_pci_address,
    text_lines,
    to_float,
    to_int,
    yes_no,
)

_XML_START = re.compile(r"<\?xml\b|<!DOCTYPE\s+nvidia_smi_log|<nvidia_smi_log\b")
_XML_END = "</nvidia_smi_log>"
_KIND_XML = "nvidia-smi-xml"
# The one DTD nvidia-smi writes: a name, no internal subset. It is taken out before parsing
# (its name kept as the schema), and the parser refuses any other: entities and external
# references are a hostile host's way to blow up or reach out from the controller.
_DTD = re.compile(r'<!DOCTYPE\s+nvidia_smi_log\s+SYSTEM\s+"([^"<>]+)"\s*>')


def _xml_text(el: ET.Element | None, path: str) -> str | None:
    if el is None:
        return None
    found = el.find(path)
    if found is None or found.text is None:
        return None
    return na(found.text)


def _xml_int(el: ET.Element | None, path: str) -> int | None:
    return to_int(_xml_text(el, path), _KIND_XML, path)


def _split_xml(text: str) -> tuple[str, list[str]]:
    """The XML document, and the lines printed before and after it (warnings, errors)."""
    start = _XML_START.search(text)
    end = text.rfind(_XML_END)
    if start is None or end < start.start():
        first = next((ln.strip() for ln in text_lines(text) if ln.strip()), "empty output")
        raise ParseError(_KIND_XML, f"no <nvidia_smi_log> document: {first[:200]}")
    stop = end + len(_XML_END)
    around = text_lines(text[: start.start()]) + text_lines(text[stop:])
    return text[start.start() : stop], [ln.strip() for ln in around if ln.strip()]


def _sum(values: Iterable[int | None]) -> int | None:
    """Sum of the counters that are present; None when none is (all N/A)."""
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _ecc_counts(gpu: ET.Element, which: str) -> tuple[int | None, int | None]:
    """(uncorrected, corrected) ECC totals of ``volatile`` or ``aggregate``.

    R450+ (A100, Hopper) report per memory kind: ``sram_uncorrectable`` (Ampere) or
    ``sram_uncorrectable_parity`` + ``_secded`` (Hopper), plus ``dram_uncorrectable``.
    Older schemas (v10/v11 on V100/P100) have ``single_bit``/``double_bit`` with a ``total``.
    """
    block = gpu.find(f"ecc_errors/{which}")
    if block is None:
        return None, None
    if block.find("double_bit") is not None or block.find("single_bit") is not None:
        return _xml_int(block, "double_bit/total"), _xml_int(block, "single_bit/total")
    uncorrected = _sum(_xml_int(block, tag) for tag in (
        "sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded",
        "dram_uncorrectable"))
    corrected = _sum(_xml_int(block, tag) for tag in ("sram_correctable", "dram_correctable"))
    return uncorrected, corrected


def _retired_pages(gpu: ET.Element) -> tuple[bool | None, int | None]:
    pages = gpu.find("retired_pages")
    if pages is None:
        return None, None
    count = _sum(_xml_int(pages, f"{kind}/retired_count")
                 for kind in ("multiple_single_bit_retirement", "double_bit_retirement"))
    pending = yes_no(_xml_text(pages, "pending_retirement"))
    if pending is None:  # older drivers only have the "blacklist" spelling
        pending = yes_no(_xml_text(pages, "pending_blacklist"))
    return pending, count


def _power_draw(gpu: ET.Element) -> float | None:
    # R530 renamed power_readings to gpu_power_readings; R565+ replaced power_draw by
    # instant_power_draw / average_power_draw.
    for block in ("gpu_power_readings", "power_readings"):
        for tag in ("power_draw", "instant_power_draw", "average_power_draw"):
            value = to_float(_xml_text(gpu, f"{block}/{tag}"), _KIND_XML, f"{block}/{tag}")
            if value is not None:
                return value
    return None


def _gpu_bus_id(gpu: ET.Element) -> str | None:
    return normalize_pci_address(_xml_text(gpu, "pci/pci_bus_id") or gpu.get("id"))


def gpu_facts(index: int, gpu: ET.Element) -> GPUFacts:
    """One `<gpu>` element (of `-q -x`, or of `-q` read into the same tree) as GPUFacts."""
    vol_unc, vol_corr = _ecc_counts(gpu, "volatile")
    agg_unc, agg_corr = _ecc_counts(gpu, "aggregate")
    pages_pending, pages_count = _retired_pages(gpu)
    link = "pci/pci_gpu_link_info"
    return GPUFacts(
        index=index,
        name=_xml_text(gpu, "product_name"),
        serial=masked(_xml_text(gpu, "serial")),
        uuid=masked(_xml_text(gpu, "uuid")),
        pci_bus_id=_gpu_bus_id(gpu),
        vbios_version=_xml_text(gpu, "vbios_version"),
        board_part_number=_xml_text(gpu, "board_part_number"),
        ecc_mode_current=_xml_text(gpu, "ecc_mode/current_ecc"),
        ecc_mode_pending=_xml_text(gpu, "ecc_mode/pending_ecc"),
        ecc_volatile_uncorrected=vol_unc,
        ecc_aggregate_uncorrected=agg_unc,
        ecc_volatile_corrected=vol_corr,
        retired_pages_pending=pages_pending,
        retired_pages_count=pages_count,
        # <remapped_rows>N/A</remapped_rows> before Ampere: every lookup below gives None.
        remapped_rows_pending=yes_no(_xml_text(gpu, "remapped_rows/remapped_row_pending")),
        remapped_rows_failure=yes_no(_xml_text(gpu, "remapped_rows/remapped_row_failure")),
        remapped_rows_uncorrectable=_xml_int(gpu, "remapped_rows/remapped_row_unc"),
        pcie_gen_current=_xml_int(gpu, f"{link}/pcie_gen/current_link_gen"),
        pcie_gen_max=_xml_int(gpu, f"{link}/pcie_gen/max_link_gen"),
        pcie_width_current=_xml_int(gpu, f"{link}/link_widths/current_link_width"),
        pcie_width_max=_xml_int(gpu, f"{link}/link_widths/max_link_width"),
        persistence_mode=_xml_text(gpu, "persistence_mode"),
        mig_mode_current=_xml_text(gpu, "mig_mode/current_mig"),
        mig_devices=len(gpu.findall("mig_devices/mig_device")),
        memory_total_mib=_xml_int(gpu, "fb_memory_usage/total"),
        temperature_c=_xml_int(gpu, "temperature/gpu_temp"),
        power_draw_w=_power_draw(gpu),
        ecc_aggregate_corrected=agg_corr,
        product_architecture=_xml_text(gpu, "product_architecture"),
        gpu_part_number=_xml_text(gpu, "gpu_part_number"),
        module_id=to_int(_xml_text(gpu, "gpu_module_id")
                         or _xml_text(gpu, "platformInfo/module_id"), _KIND_XML, "module_id"),
        pci_device_id=_xml_text(gpu, "pci/pci_device_id"),
        fabric_state=_xml_text(gpu, "fabric/state"),
        fabric_status=_xml_text(gpu, "fabric/status"),
    )


# What nvidia-smi prints for a GPU NVML cannot open (one fallen off the bus, say), next to the
# GPUs that answered: "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown
# Error" (some versions leave out the space before the address).
_LOST = re.compile(r"Unable to determine the device handle for GPU ?"
                   r"(?P<bus>[0-9a-fA-F]{1,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\b")


def lost_gpus(lines: Iterable[str]) -> tuple[str, ...]:
    """The bus ids, normalized, of the GPUs nvidia-smi says it cannot reach."""
    found = (normalize_pci_address(m.group("bus")) for line in lines if (m := _LOST.search(line)))
    return tuple(dict.fromkeys(bus for bus in found if bus))


def parse_nvidia_smi_xml(text: str) -> NvidiaSmiFacts:
    """``nvidia-smi -q -x``: driver, CUDA and one :class:`GPUFacts` per ``<gpu>`` listed.

    ``attached_gpus`` is what the header says; a GPU that NVML cannot reach is counted there
    but not listed, and nvidia-smi then prints why around the document (``errors``); the ones
    it names by bus id are ``lost_gpus``. No document, nothing but such lines: every GPU is
    lost.
    """
    lines = [ln.strip() for ln in text_lines(text) if ln.strip()]
    lost = lost_gpus(lines)
    if not _XML_START.search(text) and lost and len(lost) == len(lines):
        return NvidiaSmiFacts(driver_version=None, cuda_version=None, attached_gpus=len(lost),
                              gpus=(), errors=tuple(lines), lost_gpus=lost)
    document, around = _split_xml(text)
    dtd = _DTD.search(document)
    try:
        root = xml_without_dtd(_DTD.sub("", document, count=1), forbid_dtd=True)
    except DefusedXmlException as exc:
        raise ParseError(_KIND_XML, f"refused: {exc} (nvidia-smi writes no such XML)") from None
    except ET.ParseError as exc:
        raise ParseError(_KIND_XML, f"malformed XML: {exc}") from None
    except UnicodeEncodeError:  # a lone surrogate, from a JSON "\ud800" the host sent
        raise ParseError(_KIND_XML, "not UTF-8 text") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(_KIND_XML, f"root element is <{root.tag[:40]}>")
    gpus = tuple(gpu_facts(i, gpu) for i, gpu in enumerate(root.findall("gpu")))
    attached = _xml_int(root, "attached_gpus")
    return NvidiaSmiFacts(
        driver_version=_xml_text(root, "driver_version"),
        cuda_version=_xml_text(root, "cuda_version"),
        attached_gpus=attached if attached is not None else len(gpus),
        gpus=gpus,
        errors=tuple(around),
        schema=dtd.group(1) if dtd else None,
        lost_gpus=lost_gpus(around),
    )


# --------------------------------------------------------------------------- --query-gpu csv

_CSV_FAILURES = ("is not a valid field to query", "NVIDIA-SMI has failed", "No devices were found",
                 "Invalid combination of input arguments")


def _csv_rows(text: str) -> list[list[str]]:
    # A lost GPU's "Unable to determine the device handle ..." line is no row.
    rows = [ln for ln in text_lines(text) if ln.strip() and not _LOST.search(ln)]
    # nvidia-smi separates with ", " and never quotes; csv also copes with a stray quote, and
    # refuses a cell over its field size limit (csv.Error, which is no ValueError).
    try:
        return [[cell.strip() for cell in row] for row in csv.reader(rows, skipinitialspace=True)]
    except csv.Error as exc:
        raise ParseError("nvidia-smi-csv", f"not CSV: {exc}") from None


def _field_name(header: str) -> str:
    """"memory.total [MiB]" -> "memory.total". Not a regex: one over a hostile "[[[[..." header
    backtracks in quadratic time."""
    if header.endswith("]") and "[" in header:
        return header[: header.rindex("[")].rstrip()
    return header


def parse_nvidia_smi_csv(
    text: str, fields: list[str] | None = None
) -> list[dict[str, str | None]]:
    """``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``: one dict per GPU.

    With a header the keys are its names less the " [unit]" suffix; with ``noheader`` pass
    the queried ``fields``. Values are stripped strings (units kept unless ``nounits``);
    "[N/A]", "N/A", "[Not Supported]" and empty cells are None.
    """
    for line in text_lines(text):
        if any(marker in line for marker in _CSV_FAILURES):
            raise ParseError("nvidia-smi-csv", line.strip())
    rows = _csv_rows(text)
    if fields is None:
        if not rows:
            raise ParseError("nvidia-smi-csv", "empty output and no field names given")
        keys = [_field_name(cell) for cell in rows[0]]
        rows = rows[1:]
    else:
        keys = [f.strip() for f in fields]
        # A header despite noheader: skip it rather than read it as a GPU.
        if rows and [_field_name(c) for c in rows[0]] == keys:
            rows = rows[1:]
    result = []
    for row in rows:
        cells = row + [""] * (len(keys) - len(row))  # short rows: missing cells are None
        result.append({key: na(cells[i]) for i, key in enumerate(keys)})
    return result
