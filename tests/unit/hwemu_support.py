"""What several of the emulator's test files (test_hwemu_<module>.py) share: the profile fixture of
a rack's third host, cabled to its rail leaves; the real captures' folder; the `nvidia-smi -q`
reader; the wrong-driver check; and an ib_write_bw pair over TCP on 127.0.0.1. A test module
takes the fixture with `profile = hwemu_support.profile`."""

from __future__ import annotations

import socket
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from racklift.lab import hwemu

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
UUID_RE = r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


# HCA i to rail leaf i, port 3: as the lab plans a rack's third host.
CABLES = {f"mlx5_{i}": [f"ib-leaf-x-1-{i}", 3] for i in range(8)}


@pytest.fixture
def profile() -> hwemu.Profile:
    return hwemu.cabled(hwemu.generate_profile("gpu-a01", "S421GE0001X0001", 7), CABLES)


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


def _xml(p: hwemu.Profile) -> ET.Element:
    return ET.fromstring(hwemu.nvidia_smi_xml(p))


def _check_driver(p: hwemu.Profile) -> bool:
    root = _xml(p)
    return (root.findtext("driver_version") == "535.183.01"
            and root.findtext("cuda_version") == "12.2"
            and "Kernel Module  535.183.01  " in hwemu.dmesg(p)
            and "550.127.08" not in hwemu.dmesg(p)
            and "| NVIDIA-SMI 535.183.01 " in hwemu.nvidia_smi_summary(p))


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
