"""``nvidia-smi topo -m`` and ``nvidia-smi nvlink -s``: how the GPUs reach each other and the
NICs. Formats follow real captures (tests/fixtures/real/SOURCES.md): the matrix tab- or
space-separated, with or without the legend, the ``NIC Legend`` and the CPU/NUMA affinity and
``GPU NUMA ID`` columns; link lines indented by spaces or a tab, ``<inactive>`` links, and the
line NVML prints for a GPU whose links are all down."""

from __future__ import annotations

import re

from racklift.facts.observed import NvlinkFacts, TopologyFacts
from racklift.facts.parsers.common import ParseError, shown, text_lines, to_number

TOPO = "nvidia-smi topo -m"
NVLINK = "nvidia-smi nvlink -s"
MAX_DEVICES = 128  # an HGX board with ten NICs prints 18
MAX_LINKS = 64  # per GPU; Hopper and Blackwell have 18
# The connection kinds nvidia-smi prints (SOC is SYS's name before driver 384).
_LINK = re.compile(r"X|NV[0-9]{1,3}|PIX|PXB|PHB|NODE|SYS|SOC")
_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,31}")
_CPUS = re.compile(r"[0-9][0-9,-]{0,255}|N/A")
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_NIC_LEGEND = re.compile(r"\s*(NIC[0-9]{1,3}): ([A-Za-z0-9_.-]{1,32})\s*")


def _header(lines: list[str]) -> tuple[int, tuple[str, ...], tuple[str, ...]]:
    """The header's line number, the device labels and the affinity columns after them."""
    at = next((i for i, line in enumerate(lines) if re.match(r"\s+GPU0\s", line)), None)
    if at is None:
        raise ParseError(TOPO, "no matrix (a header line of GPU0, GPU1, ... after white space)")
    tokens = lines[at].split()
    labels = []
    for token in tokens:
        if token in ("CPU", "NUMA", "GPU"):  # where "CPU Affinity" ... "GPU NUMA ID" begin
            break
        if not _LABEL.fullmatch(token):
            raise ParseError(TOPO, f"header: {shown(token)} is no device label")
        labels.append(token)
    if len(labels) > MAX_DEVICES or len(set(labels)) != len(labels):
        raise ParseError(TOPO, f"header: {len(labels)} labels, repeated or over {MAX_DEVICES}")
    rest = " ".join(tokens[len(labels):])
    return at, tuple(labels), tuple(c for c in _AFFINITY_COLUMNS if c in rest)


def parse_nvidia_smi_topo(text: str) -> TopologyFacts:
    lines = text_lines(text)
    at, devices, columns = _header(lines)
    rows: dict[str, tuple[str, ...]] = {}
    affinity: dict[str, dict[str, str]] = {"CPU Affinity": {}, "NUMA Affinity": {}}
    end = at + 1
    for end in range(at + 1, len(lines)):
        tokens = lines[end].split()
        if not tokens:
            break  # the blank line before the legend
        label, cells = tokens[0], tokens[1:1 + len(devices)]
        if label not in devices or label in rows:
            raise ParseError(TOPO, f"row {shown(label)} is not one of the header's devices "
                                   "or comes twice")
        if len(cells) < len(devices):
            raise ParseError(TOPO, f"row {label}: {len(cells)} links for {len(devices)} devices")
        for device, cell in zip(devices, cells, strict=True):
            if not _LINK.fullmatch(cell) or (cell == "X") != (device == label):
                raise ParseError(TOPO, f"row {label}, column {device}: {shown(cell)} is no "
                                       "connection nvidia-smi prints")
        rows[label] = tuple(cells)
        for column, value in zip(columns, tokens[1 + len(devices):], strict=False):
            if column in affinity and label.startswith("GPU"):
                if not _CPUS.fullmatch(value):
                    raise ParseError(TOPO, f"row {label}, {column}: {shown(value)}")
                affinity[column][label] = value
    if not rows:
        raise ParseError(TOPO, "a header without rows")
    nic_names = {}
    for line in lines[end:]:
        match = _NIC_LEGEND.fullmatch(line)
        if match and match[1] in devices:
            nic_names[match[1]] = match[2]
    return TopologyFacts(devices, tuple(rows.get(d) for d in devices),
                         affinity["CPU Affinity"], affinity["NUMA Affinity"], nic_names)


# "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)": what nvidia-smi nvlink heads each GPU with.
GPU_HEADER = re.compile(r"GPU ([0-9]{1,3}): (.{1,96}?)(?: \(UUID: [^)]{0,64}\))?")
_LINK_SPEED = re.compile(r"\s+Link ([0-9]{1,3}): (?:([0-9]{1,6}(?:\.[0-9]{1,6})?) GB/s|<inactive>)")
_ALL_INACTIVE = re.compile(r"NVML: Unable to retrieve NVLink information as all links are "
                           r"inactive", re.IGNORECASE)


def parse_nvidia_smi_nvlink(text: str) -> tuple[NvlinkFacts, ...]:
    """Each GPU's links. A system without NVLink prints nothing: no GPUs, not an error."""
    gpus: list[NvlinkFacts] = []
    links: list[float | None] = []

    def close() -> None:
        if gpus:
            gpus[-1] = NvlinkFacts(gpus[-1].gpu, gpus[-1].name, tuple(links),
                                   gpus[-1].all_inactive)

    for line in text_lines(text):
        if not line.strip():
            continue
        if gpu := GPU_HEADER.fullmatch(line.rstrip()):
            close()
            links = []
            gpus.append(NvlinkFacts(int(gpu[1]), gpu[2], ()))
        elif gpus and (link := _LINK_SPEED.fullmatch(line.rstrip())):
            if int(link[1]) != len(links) or len(links) >= MAX_LINKS:
                raise ParseError(NVLINK, f"GPU {gpus[-1].gpu}: link {link[1]} out of order")
            links.append(None if link[2] is None else
                         float(to_number(link[2], NVLINK, f"GPU {gpus[-1].gpu} link {link[1]}")))
        elif gpus and not links and _ALL_INACTIVE.fullmatch(line.strip()):
            gpus[-1] = NvlinkFacts(gpus[-1].gpu, gpus[-1].name, (), True)
        else:
            raise ParseError(NVLINK, f"a line that is no GPU, link or NVML message: "
                                     f"{shown(line.strip())}")
        if len(gpus) > MAX_DEVICES:
            raise ParseError(NVLINK, f"more than {MAX_DEVICES} GPUs")
    close()
    if len({g.gpu for g in gpus}) != len(gpus):
        raise ParseError(NVLINK, "a GPU listed twice")
    return tuple(gpus)
