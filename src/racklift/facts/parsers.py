"""Parsers for what racklift collects from GPU hosts: pure functions, text in, facts out.

They run on the controller (never on hosts) and on support bundles offline. Each one raises
:class:`ParseError` only when its input is not that tool's output at all (an error message
instead of a report, an empty answer, garbage); output that is merely partial or odd gives
``None`` fields. Formats follow real captures, see ``tests/fixtures/real/SOURCES.md``.

Every input is a host's word, and a pool host may be compromised: whatever the text, a parser
returns facts or raises ParseError, nothing else. So numbers are ASCII digits within 64 bits
(``to_int``), XML comes without DTD or entities, JSON nesting and regex backtracking are
bounded.
"""

from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as xml_without_dtd

from racklift.facts.model import (
    CPUFacts,
    GPUFacts,
    HCAPortFacts,
    KernelEvent,
    NvidiaSmiFacts,
    PCIDeviceFacts,
    SystemFacts,
)
from racklift.facts.xid import CRITICAL, WARNING, classify_sxid, classify_xid

__all__ = [
    "ParseError",
    "load_json",
    "normalize_guid",
    "normalize_pci_address",
    "nvidia_gpus_on_pci",
    "parse_dmesg",
    "parse_dmidecode",
    "parse_dmidecode_string",
    "parse_ibstat",
    "parse_ibv_devinfo",
    "parse_lscpu_json",
    "parse_lspci",
    "parse_meminfo",
    "parse_nvidia_smi_csv",
    "parse_nvidia_smi_xml",
    "parse_os_release",
    "parse_sysfs_infiniband",
    "to_int",
]


class ParseError(ValueError):
    """The input is not the output of the tool ``kind`` at all."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


# --------------------------------------------------------------------------- shared helpers

# What nvidia-smi prints instead of a value it does not have; nvidia-smi -q -x prints them
# bare, --query-gpu in brackets ("[N/A]").
_NA_TOKENS = frozenset({
    "", "n/a", "na", "not supported", "not available", "unknown", "unknown error",
    "requested functionality has been deprecated", "insufficient permissions",
    "gpu is lost", "gpu requires reset", "no data",
})

# ASCII digits only: \d and str.isdigit() also take "٣" and "²", which int() reads or refuses.
_NUMBER = re.compile(r"[-+]?[0-9]+(?:\.[0-9]+)?")
# Every count, size, rate, id and timestamp these tools print fits a signed 64-bit integer: a
# larger number is no tool's output. Refusing it keeps int() off CPython's 4300-digit limit
# (ValueError), float() off infinity (OverflowError in int() and round()) and facts in JSON.
_LIMIT = 2**63 - 1
_LONGEST = 24  # characters of the longest number taken, sign and fraction included


def _na(value: str | None) -> str | None:
    """``value`` stripped, or None when it is empty or one of the tools' N/A spellings."""
    if value is None:
        return None
    text = value.strip()
    bare = text[1:-1].strip() if text.startswith("[") and text.endswith("]") else text
    return None if bare.lower() in _NA_TOKENS else text


def _shown(text: str) -> str:
    """A host's text in a message: quoted, and short."""
    return repr(text[:40] + "..." if len(text) > 40 else text)


def _decimal(digits: str, kind: str, field: str) -> int | float:
    """A match of _NUMBER as a number; ParseError (naming kind and field) when out of range."""
    if len(digits) > _LONGEST:
        value: int | float = float("inf")
    else:
        value = float(digits) if "." in digits else int(digits)
    if not -_LIMIT <= value <= _LIMIT:
        raise ParseError(kind, f"{field}: {_shown(digits)} is out of range for any {kind} value")
    return value


def to_int(value: str | None, kind: str, field: str) -> int | None:
    """The leading integer of "81920 MiB", "16x", "27 C", "400 (NDR)", "-1"; None if there is
    none (N/A, no digits). A number beyond 64 bits raises ParseError naming ``kind`` (the
    tool) and ``field``: the one conversion every parser uses for a host's numbers."""
    text = _na(value)
    match = _NUMBER.search(text) if text else None
    return int(_decimal(match.group(), kind, field)) if match else None


def _float(value: str | None, kind: str, field: str) -> float | None:
    text = _na(value)
    match = _NUMBER.search(text) if text else None
    return _decimal(match.group(), kind, field) if match else None


def load_json(text: str, kind: str) -> Any:
    """``text`` decoded as JSON, or ParseError: also for nesting deeper than the decoder's
    recursion (a RecursionError, which is no ValueError) and for numbers past its digit limit."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(kind, f"not JSON ({str(exc)[:100]})") from None


def _yes_no(value: str | None) -> bool | None:
    text = _na(value)
    if text is None:
        return None
    return {"yes": True, "no": False, "true": True, "false": False}.get(text.lower())


def _masked(value: str | None) -> str | None:
    """Serials and UUIDs that nvidia-smi or a capture tool masked ("0", "000...0") -> None."""
    text = _na(value)
    if text is None:
        return None
    significant = text.removeprefix("GPU-").replace("-", "")
    return None if not significant or set(significant) == {"0"} else text


def normalize_pci_address(address: str | None) -> str | None:
    """"00000000:18:00.0" / "18:00.0" / "0000:9A:00.0" -> "0000:18:00.0" (lower case).

    nvidia-smi prints an 8-digit domain, lspci a 4-digit one or none; the kernel uses 4.
    """
    text = _na(address)
    if text is None:
        return None
    match = re.fullmatch(
        r"(?:(?P<dom>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})"
        r"(?:\.(?P<fn>[0-7]))?",
        text,
    )
    if match is None:
        return text.lower()
    domain = int(match["dom"] or "0", 16)
    return (f"{domain:04x}:{int(match['bus'], 16):02x}:{int(match['dev'], 16):02x}."
            f"{match['fn'] or '0'}")


def normalize_guid(guid: str | None) -> str | None:
    """"0x946dae0300cde72c" / "946d:ae03:00cd:e72c" -> "0x946dae0300cde72c"."""
    text = _na(guid)
    if text is None:
        return None
    digits = text.lower().removeprefix("0x").replace(":", "")
    if not re.fullmatch(r"[0-9a-f]{1,16}", digits):
        return text
    return "0x" + digits.zfill(16)


def _lines(text: str) -> list[str]:
    # Captures copied from Windows or web pages carry CRs and non-breaking spaces.
    return text.replace("\r", "").replace("\u00a0", " ").split("\n")


# --------------------------------------------------------------------------- nvidia-smi -q -x

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
    return _na(found.text)


def _xml_int(el: ET.Element | None, path: str) -> int | None:
    return to_int(_xml_text(el, path), _KIND_XML, path)


def _split_xml(text: str) -> tuple[str, list[str]]:
    """The XML document, and the lines printed before and after it (warnings, errors)."""
    start = _XML_START.search(text)
    end = text.rfind(_XML_END)
    if start is None or end < start.start():
        first = next((ln.strip() for ln in _lines(text) if ln.strip()), "empty output")
        raise ParseError(_KIND_XML, f"no <nvidia_smi_log> document: {first[:200]}")
    stop = end + len(_XML_END)
    around = _lines(text[: start.start()]) + _lines(text[stop:])
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
    pending = _yes_no(_xml_text(pages, "pending_retirement"))
    if pending is None:  # older drivers only have the "blacklist" spelling
        pending = _yes_no(_xml_text(pages, "pending_blacklist"))
    return pending, count


def _power_draw(gpu: ET.Element) -> float | None:
    # R530 renamed power_readings to gpu_power_readings; R565+ replaced power_draw by
    # instant_power_draw / average_power_draw.
    for block in ("gpu_power_readings", "power_readings"):
        for tag in ("power_draw", "instant_power_draw", "average_power_draw"):
            value = _float(_xml_text(gpu, f"{block}/{tag}"), _KIND_XML, f"{block}/{tag}")
            if value is not None:
                return value
    return None


def _gpu_bus_id(gpu: ET.Element) -> str | None:
    return normalize_pci_address(_xml_text(gpu, "pci/pci_bus_id") or gpu.get("id"))


def _gpu_facts(index: int, gpu: ET.Element) -> GPUFacts:
    vol_unc, vol_corr = _ecc_counts(gpu, "volatile")
    agg_unc, agg_corr = _ecc_counts(gpu, "aggregate")
    pages_pending, pages_count = _retired_pages(gpu)
    link = "pci/pci_gpu_link_info"
    return GPUFacts(
        index=index,
        name=_xml_text(gpu, "product_name"),
        serial=_masked(_xml_text(gpu, "serial")),
        uuid=_masked(_xml_text(gpu, "uuid")),
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
        remapped_rows_pending=_yes_no(_xml_text(gpu, "remapped_rows/remapped_row_pending")),
        remapped_rows_failure=_yes_no(_xml_text(gpu, "remapped_rows/remapped_row_failure")),
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


def parse_nvidia_smi_xml(text: str) -> NvidiaSmiFacts:
    """``nvidia-smi -q -x``: driver, CUDA and one :class:`GPUFacts` per ``<gpu>`` listed.

    ``attached_gpus`` is what the header says; a GPU that NVML cannot reach is counted there
    but not listed, and nvidia-smi then prints why after the document (``errors``).
    """
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
    gpus = tuple(_gpu_facts(i, gpu) for i, gpu in enumerate(root.findall("gpu")))
    attached = _xml_int(root, "attached_gpus")
    return NvidiaSmiFacts(
        driver_version=_xml_text(root, "driver_version"),
        cuda_version=_xml_text(root, "cuda_version"),
        attached_gpus=attached if attached is not None else len(gpus),
        gpus=gpus,
        errors=tuple(around),
        schema=dtd.group(1) if dtd else None,
    )


# --------------------------------------------------------------------------- --query-gpu csv

_CSV_FAILURES = ("is not a valid field to query", "NVIDIA-SMI has failed", "No devices were found",
                 "Invalid combination of input arguments")


def _csv_rows(text: str) -> list[list[str]]:
    rows = [ln for ln in _lines(text) if ln.strip()]
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
    for line in _lines(text):
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
        result.append({key: _na(cells[i]) for i, key in enumerate(keys)})
    return result


# --------------------------------------------------------------------------- InfiniBand

# Device ids of ConnectX virtual functions (SR-IOV), from the mlx5 driver's PCI table
# (drivers/net/ethernet/mellanox/mlx5/core/main.c, entries flagged MLX5_PCI_DEV_IS_VF).
# ibstat's "CA type" and ibv_devinfo's vendor_part_id are this id in decimal ("MT4126").
MLX_VF_DEVICE_IDS = {
    0x1012: "Connect-IB VF",
    0x1014: "ConnectX-4 VF",
    0x1016: "ConnectX-4 Lx VF",
    0x1018: "ConnectX-5 VF",
    0x101A: "ConnectX-5 Ex VF",
    0x101C: "ConnectX-6 VF",
    0x101E: "ConnectX family mlx5Gen VF (ConnectX-6 Dx/Lx, ConnectX-7, BlueField-2/3)",
    0xA2D3: "BlueField ConnectX-5 VF",
}

# IB PortInfo PortState / PortPhysicalState numbers, as ibstat names them.
_PORT_STATES = {1: "Down", 2: "Initializing", 3: "Armed", 4: "Active", 5: "ActiveDefer"}
_PHYS_STATES = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining",
                5: "LinkUp", 6: "LinkErrorRecovery", 7: "PhyTest"}


def _is_vf(ca_type: str | None) -> bool:
    if not ca_type:
        return False
    if "virtual function" in ca_type.lower():
        return True
    # A bounded number of ASCII digits: int() takes it as it is, and no longer one is a VF id.
    match = re.fullmatch(r"MT([0-9]{1,6})", ca_type.strip())
    return bool(match) and int(match.group(1)) in MLX_VF_DEVICE_IDS


def _state_name(value: str | None, names: dict[int, str]) -> str | None:
    """"4: ACTIVE" / "PORT_ACTIVE (4)" / "LINK_UP (5)" / "Active" -> the ibstat name."""
    text = _na(value)
    if text is None:
        return None
    number = re.search(r"(?:^|\()([0-9]{1,3})(?:\)|:)", text)  # as in _is_vf
    if number and int(number.group(1)) in names:
        return names[int(number.group(1))]
    return text


class _PortBuilder:
    """Fields of one port as they are met; turned into HCAPortFacts at the end."""

    def __init__(self, ca: dict[str, Any], port: int) -> None:
        self.ca, self.port = ca, port
        self.fields: dict[str, Any] = {}

    def build(self) -> HCAPortFacts:
        f, ca = self.fields, self.ca
        return HCAPortFacts(
            ca=ca.get("name") or "",
            ca_type=ca.get("ca_type"),
            firmware=ca.get("firmware"),
            node_guid=normalize_guid(ca.get("node_guid")),
            port=self.port,
            state=_state_name(f.get("state"), _PORT_STATES),
            phys_state=_state_name(f.get("phys_state"), _PHYS_STATES),
            rate_gbps=f.get("rate"),
            link_layer=_na(f.get("link_layer")),
            port_guid=normalize_guid(f.get("port_guid")),
            base_lid=f.get("base_lid"),
            is_vf=_is_vf(ca.get("ca_type")),
        )


_IBSTAT_CA = re.compile(r"^CA '([^']+)'\s*$")
_IBSTAT_PORT = re.compile(r"^Port ([0-9]+):\s*$")
_IBSTAT_CA_KEYS = {"CA type": "ca_type", "Firmware version": "firmware",
                   "Node GUID": "node_guid"}
_IBSTAT_PORT_KEYS = {"State": "state", "Physical state": "phys_state",
                     "Link layer": "link_layer", "Port GUID": "port_guid"}


def parse_ibstat(text: str, ca: str | None = None) -> list[HCAPortFacts]:
    """``ibstat`` (all CAs), ``ibstat CA`` or ``ibstat CA PORT`` (pass ``ca`` for the last).

    One :class:`HCAPortFacts` per port, Ethernet (RoCE) ports included; "Rate: 400" and
    "Rate: 400 (NDR)" both give 400.
    """
    current_ca: dict[str, Any] = {"name": ca}
    ports: list[_PortBuilder] = []
    port: _PortBuilder | None = None
    for raw in _lines(text):
        line = raw.strip()
        if line.startswith("ibpanic:"):  # ibstat's fatal error ("stat of IB device failed")
            raise ParseError("ibstat", line)
        if m := _IBSTAT_CA.match(line):
            current_ca, port = {"name": m.group(1)}, None
            continue
        if m := _IBSTAT_PORT.match(line):
            port = _PortBuilder(current_ca, to_int(m.group(1), "ibstat", "port") or 0)
            ports.append(port)
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if port is None and key in _IBSTAT_CA_KEYS:
            current_ca[_IBSTAT_CA_KEYS[key]] = value
        elif port is not None and key in _IBSTAT_PORT_KEYS:
            port.fields[_IBSTAT_PORT_KEYS[key]] = value
        elif port is not None and key == "Rate":
            port.fields["rate"] = to_int(value, "ibstat", key)
        elif port is not None and key == "Base lid":
            port.fields["base_lid"] = to_int(value, "ibstat", key)
    if not ports and not any(_IBSTAT_CA.match(ln.strip()) for ln in _lines(text)):
        raise ParseError("ibstat", "no \"CA '...'\" or \"Port N:\" lines")
    return [p.build() for p in ports]


_WIDTHS = {"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}
_KIND_IBV = "ibv_devinfo"


def _ibv_rate(fields: dict[str, str]) -> int | None:
    """``ibv_devinfo -v`` gives lanes and per-lane speed; plain ``ibv_devinfo`` gives neither."""
    width = re.match(r"\s*([0-9]+X)", fields.get("active_width", ""))
    speed = _float(fields.get("active_speed"), _KIND_IBV, "active_speed")
    if width is None or speed is None or width.group(1) not in _WIDTHS:
        return None
    return round(_WIDTHS[width.group(1)] * speed)


def parse_ibv_devinfo(text: str) -> list[HCAPortFacts]:
    """``ibv_devinfo`` (or ``-v``): one :class:`HCAPortFacts` per port.

    "PORT_ACTIVE (4)" becomes "Active" as ibstat says it. Plain ibv_devinfo prints no rate
    and no port GUID (None); ``-v`` adds active_width/active_speed, and so a rate.
    """
    stripped = [ln.strip() for ln in _lines(text)]
    if any(ln == "No IB devices found" for ln in stripped):
        return []
    cas: list[dict[str, Any]] = []
    ports: list[tuple[dict[str, Any], int, dict[str, str]]] = []
    for line in stripped:
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            cas.append({"name": value})
        elif not cas:
            continue
        elif key == "port":
            ports.append((cas[-1], to_int(value, _KIND_IBV, "port") or 0, {}))
        elif ports and ports[-1][0] is cas[-1]:
            ports[-1][2][key] = value
        elif key == "fw_ver":
            cas[-1]["firmware"] = value
        elif key == "node_guid":
            cas[-1]["node_guid"] = value
        elif key == "vendor_part_id" and re.fullmatch(r"[0-9]+", value):
            cas[-1]["ca_type"] = f"MT{value}"  # what ibstat calls "CA type"
    if not cas:
        raise ParseError(_KIND_IBV, "no \"hca_id:\" lines")
    result = []
    for ca, number, fields in ports:
        builder = _PortBuilder(ca, number)
        builder.fields = {
            "state": fields.get("state"),
            "phys_state": fields.get("phys_state"),
            "link_layer": fields.get("link_layer"),
            "rate": _ibv_rate(fields),
            "base_lid": to_int(fields.get("port_lid"), _KIND_IBV, "port_lid"),
        }
        result.append(builder.build())
    return result


_KIND_SYSFS = "sysfs-infiniband"


def _sysfs_rate(value: str | None) -> int | None:
    """"400 Gb/sec (4X NDR)" -> 400; "2.5 Gb/sec (1X SDR)" -> 2."""
    return to_int(value, _KIND_SYSFS, "rate")


def _sysfs_lid(value: str | None) -> int | None:
    """"0x1a" as sysfs prints it (a decimal also reads); a LID has 16 bits."""
    text = _na(value)
    if text is None or not text.startswith("0x"):
        return to_int(text, _KIND_SYSFS, "lid")
    if not re.fullmatch(r"0x[0-9a-fA-F]{1,4}", text):
        raise ParseError(_KIND_SYSFS, f"lid: {_shown(text)} is not a 16-bit LID")
    return int(text, 16)


def _gid_to_guid(gid: str | None) -> str | None:
    """The port GUID is the low 64 bits of GID 0 ("fe80:0000:0000:0000:946d:ae03:00cd:e72c")."""
    text = _na(gid)
    if text is None:
        return None
    groups = text.split(":")
    return normalize_guid(":".join(groups[-4:])) if len(groups) == 8 else None


def parse_sysfs_infiniband(files: Mapping[str, str]) -> list[HCAPortFacts]:
    """Files under a sysfs root ("class/infiniband/mlx5_0/ports/1/state" -> "4: ACTIVE").

    Paths may carry any prefix before ``class/infiniband/`` ("/sys/...", a bundle dir).
    """
    cas: dict[str, dict[str, str]] = {}
    ports: dict[tuple[str, int], dict[str, str]] = {}
    for path, content in files.items():
        _, found, rel = path.replace("\\", "/").partition("class/infiniband/")
        if not found:
            continue
        parts, value = rel.strip("/").split("/"), content.strip()
        if len(parts) == 2:
            cas.setdefault(parts[0], {})[parts[1]] = value
        elif len(parts) >= 4 and parts[1] == "ports" and re.fullmatch(r"[0-9]+", parts[2]):
            attr = "/".join(parts[3:])
            number = to_int(parts[2], _KIND_SYSFS, f"{parts[0]} port") or 0
            ports.setdefault((parts[0], number), {})[attr] = value
    result = []
    for (name, number), attrs in sorted(ports.items()):
        ca_attrs = cas.get(name, {})
        ca = {"name": name, "ca_type": _na(ca_attrs.get("hca_type")),
              "firmware": _na(ca_attrs.get("fw_ver")), "node_guid": ca_attrs.get("node_guid")}
        builder = _PortBuilder(ca, number)
        builder.fields = {
            "state": attrs.get("state"),
            # "5: LinkUp": the name after the number is already ibstat's.
            "phys_state": (attrs.get("phys_state") or "").partition(":")[2].strip() or None,
            "link_layer": attrs.get("link_layer"),
            "rate": _sysfs_rate(attrs.get("rate")),
            "base_lid": _sysfs_lid(attrs.get("lid")),
            "port_guid": _gid_to_guid(attrs.get("gids/0")),
        }
        result.append(builder.build())
    return result


# --------------------------------------------------------------------------- dmidecode

# What OEMs leave in DMI strings they did not fill in; none of them identifies a machine.
_DMI_PLACEHOLDERS = frozenset(s.lower() for s in (
    "To Be Filled By O.E.M.", "To be filled by O.E.M.", "Not Specified", "Not Available",
    "Not Applicable", "Not Present", "Not Settable", "Default string", "Default String",
    "0123456789", "1234567890", "123456789", "System Serial Number", "System Product Name",
    "System manufacturer", "System Version", "Type1ProductConfigId", "OEM", "O.E.M.",
    "None", "N/A", "NA", "Unknown", "Invalid", "XXXXXXXXXX", "0", "00000000",
    "00000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
))

_DMI_HANDLE = re.compile(r"^Handle 0x[0-9A-Fa-f]+, DMI type ([0-9]+),")
_DMI_TITLES = {"BIOS Information": 0, "System Information": 1, "Base Board Information": 2}


def _dmi_value(value: str | None) -> str | None:
    text = _na(value)
    if text is None or text.lower() in _DMI_PLACEHOLDERS:
        return None
    return text


def _dmi_records(text: str) -> list[tuple[int | None, str, dict[str, str]]]:
    """(type, title, top-level "Key: value" pairs) per record; nested lists are skipped."""
    records: list[tuple[int | None, str, dict[str, str]]] = []
    pending_type: int | None = None
    current: dict[str, str] | None = None
    key_indent: int | None = None
    for line in _lines(text):
        if not line.strip():
            current, pending_type = None, None
            continue
        if m := _DMI_HANDLE.match(line):
            pending_type, current = to_int(m.group(1), "dmidecode", "DMI type"), None
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            title = line.strip()
            if title.startswith("#") or current is not None:
                continue
            if pending_type is not None or title in _DMI_TITLES:
                current, key_indent = {}, None
                records.append((pending_type if pending_type is not None
                                else _DMI_TITLES[title], title, current))
            continue
        if current is None:
            continue
        if key_indent is None:
            key_indent = indent
        if indent != key_indent:
            continue  # items of a list such as "Characteristics:"
        key, sep, value = line.strip().partition(":")
        if sep:
            current[key.strip()] = value.strip()
    return records


def parse_dmidecode(text: str) -> SystemFacts:
    """``dmidecode`` / ``dmidecode -t system`` / ``-t bios,system``: DMI types 0, 1 and 2.

    OEM placeholders ("To Be Filled By O.E.M.", "Default string", "0123456789", ...) are
    None. The UUID is lower-cased, as the kernel shows it in sysfs.
    """
    records = _dmi_records(text)
    if not records:
        if any(ln.startswith("# dmidecode") for ln in _lines(text)):
            # dmidecode ran but found no table, or was asked for other types.
            return SystemFacts(None, None, None, None, None, None)
        first = next((ln.strip() for ln in _lines(text) if ln.strip()), "empty output")
        raise ParseError("dmidecode", f"no DMI records: {first[:200]}")
    by_type: dict[int, dict[str, str]] = {}
    for dmi_type, _title, fields in records:
        if dmi_type is not None:
            by_type.setdefault(dmi_type, fields)  # the first record of each type
    system, bios, board = by_type.get(1, {}), by_type.get(0, {}), by_type.get(2, {})
    uuid = _dmi_value(system.get("UUID"))
    return SystemFacts(
        vendor=_dmi_value(system.get("Manufacturer")),
        product=_dmi_value(system.get("Product Name")),
        serial=_dmi_value(system.get("Serial Number")),
        bios_vendor=_dmi_value(bios.get("Vendor")),
        bios_version=_dmi_value(bios.get("Version")),
        uuid=uuid.lower() if uuid else None,
        version=_dmi_value(system.get("Version")),
        sku=_dmi_value(system.get("SKU Number")),
        family=_dmi_value(system.get("Family")),
        bios_date=_dmi_value(bios.get("Release Date")),
        board_vendor=_dmi_value(board.get("Manufacturer")),
        board_product=_dmi_value(board.get("Product Name")),
        board_serial=_dmi_value(board.get("Serial Number")),
    )


def parse_dmidecode_string(text: str) -> str | None:
    """``dmidecode -s KEYWORD``: the one value, or None for an OEM placeholder."""
    for line in _lines(text):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue  # dmidecode may print "# SMBIOS implementations newer than ..." first
        if stripped.startswith(("Invalid string keyword", "dmidecode:", "Valid string keywords")):
            raise ParseError("dmidecode-string", stripped)
        return _dmi_value(stripped)
    return None


# --------------------------------------------------------------------------- lspci

# No lazy or leading \s* next to a run of text these patterns may backtrack over: on a line
# of a hostile host's spaces such a pattern takes quadratic time. The class name and the text
# before each suffix are stripped instead.
_LSPCI_DEVICE = re.compile(
    r"^(?P<addr>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
    r"(?P<cls>[^:\[\]]+)(?:\[(?P<clsid>[0-9a-fA-F]{4})\])?:\s+(?P<rest>.*)$"
)
_PROG_IF = re.compile(r"\(prog-if [0-9a-fA-F]{2}(?: \[[^\]\[()]*\])?\)$")
_REV = re.compile(r"\(rev ([0-9a-fA-F]{2})\)$")
_IDS = re.compile(r"\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]$")
_LINK = re.compile(r"Speed (?P<speed>[0-9]+(?:\.[0-9]+)?)GT/s|Width x(?P<width>[0-9]+)")


def _link(value: str) -> tuple[float | None, int | None]:
    """"Port #0, Speed 32GT/s, Width x16, ..." -> (32.0, 16); "Speed unknown" -> None."""
    speed = width = None
    for m in _LINK.finditer(value):
        if m.group("speed"):
            speed = _float(m.group("speed"), "lspci", "link speed")
        elif m.group("width"):
            width = to_int(m.group("width"), "lspci", "link width")
    return speed, width


def _lspci_head(m: re.Match[str]) -> dict[str, Any]:
    rest = _PROG_IF.sub("", m.group("rest").strip()).rstrip()
    revision = None
    if rev := _REV.search(rest):
        revision, rest = rev.group(1).lower(), rest[: rev.start()].rstrip()
    vendor = device = ""
    if ids := _IDS.search(rest):
        vendor, device, rest = ids.group(1).lower(), ids.group(2).lower(), rest[: ids.start()]
    return {
        "address": normalize_pci_address(m.group("addr")) or m.group("addr"),
        "class_name": m.group("cls").strip(),
        "class_id": m.group("clsid").lower() if m.group("clsid") else None,
        "vendor_id": vendor, "device_id": device, "description": rest.strip(),
        "revision": revision, "link_speed_gts": None, "link_width": None,
        "link_speed_max_gts": None, "link_width_max": None, "driver": None,
    }


def parse_lspci(text: str) -> list[PCIDeviceFacts]:
    """``lspci`` with any of ``-D``, ``-nn``, ``-k``, ``-vv``: one entry per device.

    Without ``-D`` the domain is 0000; without ``-n`` vendor_id/device_id are "". The link
    fields come from LnkSta/LnkCap of ``-vv`` output (run as root), otherwise None.
    """
    devices: list[dict[str, Any]] = []
    for line in _lines(text):
        if m := _LSPCI_DEVICE.match(line):
            devices.append(_lspci_head(m))
            continue
        if not devices or not line[:1].isspace():
            continue
        key, _, value = line.strip().partition(":")
        if key == "LnkSta":
            devices[-1]["link_speed_gts"], devices[-1]["link_width"] = _link(value)
        elif key == "LnkCap":
            devices[-1]["link_speed_max_gts"], devices[-1]["link_width_max"] = _link(value)
        elif key == "Kernel driver in use":
            devices[-1]["driver"] = value.strip()
    if not devices and any(line.strip() for line in _lines(text)):
        first = next(line.strip() for line in _lines(text) if line.strip())
        raise ParseError("lspci", f"no device lines: {first[:200]}")
    return [PCIDeviceFacts(**d) for d in devices]


_GPU_CLASS_IDS = {"0300", "0302"}  # VGA compatible controller, 3D controller
_GPU_CLASS_NAMES = {"VGA compatible controller", "3D controller"}


def nvidia_gpus_on_pci(devices: Iterable[PCIDeviceFacts]) -> list[PCIDeviceFacts]:
    """The NVIDIA GPUs among ``devices`` (not NVSwitches, not their audio functions).

    Compare with nvidia-smi to tell "driver missing" (on the bus, not in nvidia-smi) from
    "GPU missing" (not even on the bus).
    """
    found = []
    for dev in devices:
        if dev.vendor_id:
            is_gpu = dev.vendor_id == "10de" and (
                dev.class_id in _GPU_CLASS_IDS
                if dev.class_id else dev.class_name in _GPU_CLASS_NAMES)
        else:  # lspci without -n: judge by the names
            is_gpu = (dev.description.startswith("NVIDIA Corporation")
                      and dev.class_name in _GPU_CLASS_NAMES)
        if is_gpu:
            found.append(dev)
    return found


# --------------------------------------------------------------------------- kernel log

# Prefixes a kernel log line can carry: dmesg "[ 1234.567890]", dmesg -T
# "[Sun Feb 23 16:24:18 2025]", syslog "Jan  3 07:39:44 host kernel: [ ...]",
# journalctl -o short-iso "2024-01-05T06:18:52+0000 host kernel:", dmesg --time-format iso.
_UPTIME = re.compile(r"^\[\s*([0-9]+\.[0-9]+)\]\s?")
_HUMAN = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]\s?")
_SYSLOG = re.compile(r"^(\w{3} +\d+ \d\d:\d\d:\d\d) \S+ kernel: ?")
_ISO = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:?\d\d|Z)?)"
                  r"(?: \S+ kernel:)? ?")


def _split_prefix(line: str) -> tuple[float | None, str | None, str]:
    """(seconds since boot, wall-clock time as printed, message) of one log line."""
    wallclock = None
    rest = line
    for pattern in (_SYSLOG, _ISO):
        if m := pattern.match(rest):
            wallclock, rest = " ".join(m.group(1).split()), rest[m.end():]
            break
    if m := _HUMAN.match(rest):
        return None, " ".join(m.group(1).split()), rest[m.end():]
    if m := _UPTIME.match(rest):
        return _decimal(m.group(1), "dmesg", "timestamp"), wallclock, rest[m.end():]
    return None, wallclock, rest


# "NVRM: Xid (PCI:0000:9a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off..."
# and the older "NVRM: Xid (0000:01:00): 3, ..." and "...: 79, GPU has fallen off the bus."
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<dev>[0-9a-fA-F:.]+)\): (?P<code>[0-9]+)"
                  r"(?:, ?(?P<msg>.*))?")
_XID_PROC = re.compile(r"^pid=(?:'[^']*'|[^,\s]*),\s*(?:name=[^,]*,\s*)?")
# "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63 LTSSM Fault Up"
_SXID = re.compile(r"(?P<sw>nvidia-nvswitch\d*): SXid \((?:PCI:)?(?P<dev>[0-9a-fA-F:.]+)\): "
                   r"(?P<code>[0-9]+)(?:, ?(?P<msg>.*))?")
# "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0"; kernels
# since 2024 print "AER: Correctable error message received from 0000:09:04.0".
_AER = re.compile(r"(?P<rep>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): AER: "
                  r"(?P<multi>Multiple )?(?P<cls>Correct(?:ed|able)|"
                  r"Uncorrect(?:ed|able) \((?:Non-)?Fatal\)) error(?: message)? received"
                  r"(?: from)?:? ?(?P<src>\S*)")
# Detail lines the AER driver prints after the "error received" line.
_AER_DETAIL = re.compile(r"(?P<dev>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):"
                         r"(?: AER:)?\s+(?P<detail>PCIe Bus Error: .*|device \[.*|\[\s*\d+\] .*|"
                         r"TLP Header: .*)$")


def _xid_event(m: re.Match[str], uptime: float | None, wallclock: str | None,
               line: str) -> KernelEvent:
    code = to_int(m.group("code"), "dmesg", "Xid code")
    info = classify_xid(code)
    message = _XID_PROC.sub("", (m.group("msg") or "").strip()) or info.name
    return KernelEvent(kind="xid", code=code, device=m.group("dev"), message=message,
                       timestamp=uptime, severity=info.severity, line=line,
                       wallclock=wallclock, name=info.name)


def _sxid_event(m: re.Match[str], uptime: float | None, wallclock: str | None,
                line: str) -> KernelEvent:
    code = to_int(m.group("code"), "dmesg", "SXid code")
    message = (m.group("msg") or "").strip()
    info = classify_sxid(code, message)
    return KernelEvent(kind="sxid", code=code, device=m.group("dev"), message=message,
                       timestamp=uptime, severity=info.severity, line=line,
                       wallclock=wallclock, name=info.name, notes=(m.group("sw"),))


def _aer_event(m: re.Match[str], uptime: float | None, wallclock: str | None,
               line: str) -> KernelEvent:
    cls = m.group("cls").replace("Uncorrectable", "Uncorrected").replace("Correctable",
                                                                          "Corrected")
    # Any uncorrected error lost data (non-fatal) or the link (fatal); corrected ones are
    # signal-quality warnings that matter when they repeat.
    severity = WARNING if cls == "Corrected" else CRITICAL
    source = m.group("src")
    # Old kernels print "received: id=0008" (a requester id, not an address).
    device = source if re.fullmatch(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]",
                                    source) else m.group("rep")
    notes = () if device == source else (f"source {source}",) if source else ()
    return KernelEvent(kind="aer", code=None, device=device,
                       message=f"{m.group('multi') or ''}{cls} error",
                       timestamp=uptime, severity=severity, line=line, wallclock=wallclock,
                       name=f"PCIe AER {cls}", notes=notes)


def parse_dmesg(text: str) -> list[KernelEvent]:
    """Xid, SXid and PCIe AER events of a kernel log, in order.

    Accepts ``dmesg``, ``dmesg -T``, syslog/journal lines ("Jan  3 07:39:44 host kernel:")
    and bare messages. Any text is a kernel log: unrelated text has no events; only a number no
    kernel prints (an Xid code or a timestamp beyond 64 bits) raises ParseError. AER detail
    lines ("PCIe Bus Error: ...", "[14] CmpltTO") become ``notes`` of the event they follow.
    """
    events: list[KernelEvent] = []
    for raw in _lines(text):
        line = raw.rstrip()
        if not line.strip():
            continue
        uptime, wallclock, message = _split_prefix(line)
        if m := _XID.search(message):
            events.append(_xid_event(m, uptime, wallclock, line))
        elif m := _SXID.search(message):
            events.append(_sxid_event(m, uptime, wallclock, line))
        elif m := _AER.search(message):
            events.append(_aer_event(m, uptime, wallclock, line))
        elif (m := _AER_DETAIL.search(message)) and events and events[-1].kind == "aer":
            last = events[-1]
            events[-1] = replace(last, notes=(*last.notes, m.group("detail").strip()))
    return events


# --------------------------------------------------------------------------- os-release

_OS_RELEASE_LINE = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")


def _shell_unquote(value: str) -> str:
    """os-release values are shell-quoted: "..." with \\-escapes, '...' literal, or bare."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r'\\([\\$"`])', r"\1", value[1:-1])
    return value


def parse_os_release(text: str) -> dict[str, str]:
    """``/etc/os-release``: KEY -> unquoted value (comments and blank lines skipped)."""
    result = {}
    for line in _lines(text):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if m := _OS_RELEASE_LINE.match(stripped):
            result[m.group(1)] = _shell_unquote(m.group(2))
    if not result and any(line.strip() for line in _lines(text)):
        raise ParseError("os-release", "no KEY=value lines")
    return result


def _lscpu_entries(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise ParseError("lscpu", "not the JSON of lscpu -J: fields are not a list of objects")
    return value


def _lscpu_text(entry: dict[str, Any], key: str) -> str:
    value = entry.get(key)
    if isinstance(value, list | dict):  # str() of a host's nesting may recurse too deep
        raise ParseError("lscpu", f"not the JSON of lscpu -J: a {key} is not a value")
    return "" if value is None else str(value)


def _lscpu_fields(entries: Any) -> dict[str, str]:
    """Flatten lscpu's JSON: util-linux >= 2.39 nests fields under "children". In document
    order, the last of a name wins; a loop, not recursion: a host nests as deep as it likes."""
    fields: dict[str, str] = {}
    pending = _lscpu_entries(entries)[::-1]
    while pending:
        entry = pending.pop()
        fields[_lscpu_text(entry, "field").rstrip(":")] = _lscpu_text(entry, "data")
        pending.extend(reversed(_lscpu_entries(entry.get("children") or [])))
    return fields


def parse_lscpu_json(text: str) -> CPUFacts:
    """``lscpu -J``: CPU model and topology. A count lscpu leaves out ("-" on Arm) is None."""
    document = load_json(text, "lscpu")
    if not isinstance(document, dict) or "lscpu" not in document:
        raise ParseError("lscpu", "not the JSON of lscpu -J: no \"lscpu\" list")
    fields = _lscpu_fields(document["lscpu"])

    def number(key: str) -> int | None:
        return to_int(fields.get(key), "lscpu", key)

    return CPUFacts(model=fields.get("Model name") or None, sockets=number("Socket(s)"),
                    cores_per_socket=number("Core(s) per socket"), threads=number("CPU(s)"))


def parse_meminfo(text: str) -> int | None:
    """``/proc/meminfo``: MemTotal in MiB."""
    for line in _lines(text):
        if line.startswith("MemTotal:"):
            kib = to_int(line.removeprefix("MemTotal:"), "meminfo", "MemTotal")
            if kib is None:
                raise ParseError("meminfo", f"MemTotal: no number in {_shown(line)}")
            return kib // 1024
    raise ParseError("meminfo", "no MemTotal line")
