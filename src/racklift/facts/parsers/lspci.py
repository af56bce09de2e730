"""``lspci -vmmnn``-style device lists and the NVIDIA GPUs on the PCI bus."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from racklift.facts.observed import PCIDeviceFacts
from racklift.facts.parsers.common import (
    ParseError,
    normalize_pci_address,
    text_lines,
    to_float,
    to_int,
)

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
            speed = to_float(m.group("speed"), "lspci", "link speed")
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
    for line in text_lines(text):
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
    if not devices and any(line.strip() for line in text_lines(text)):
        first = next(line.strip() for line in text_lines(text) if line.strip())
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
