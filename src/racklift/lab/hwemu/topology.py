"""``nvidia-smi topo -m`` and ``nvidia-smi nvlink -s`` of the emulated board, in the formats of
the real captures (an HGX H100's tab-separated matrix with affinity columns and NIC Legend; link
lines indented by a tab and a space).

The board: GPU i and HCA i behind one PCIe switch (HGX_H100_BUSES[i], _HCA_BUSES[i]: PIX); buses
below 0x80 on socket 0, the rest on socket 1 (NODE within a socket, SYS across); GPUs joined
through the NVSwitches by their active NVLinks (NV18, or fewer where links are down).
"""

from __future__ import annotations

import time

from .profile import _HCA_BUSES, GPU, HGX_H100_BUSES, HCAPort, Profile

# Per-link speed nvidia-smi prints for NVLink4 (H100). Approximate: no public H100 capture of
# `nvlink -s` was found; the A100 (25 GB/s) and V100 (25.781 GB/s) captures give the format.
NVLINK4_GBPS = "26.562"
# The 2 x 56-core layout of the HGX H100 capture (tests/fixtures/real, NVIDIA/nccl #1264).
_CPUS = ("0-55,112-167", "56-111,168-223")


def _bus(pci_bus_id: str) -> int:
    return int(pci_bus_id.split(":")[1], 16)


def _socket(pci_bus_id: str) -> int:
    return 0 if _bus(pci_bus_id) < 0x80 else 1


def _switch(device: GPU | HCAPort) -> int | None:
    """The PCIe switch a device sits behind, by the board's slot pairs."""
    buses = HGX_H100_BUSES if isinstance(device, GPU) else _HCA_BUSES
    bus = _bus(device.pci_bus_id)
    return buses.index(bus) if bus in buses else None


def _pcie(a: GPU | HCAPort, b: GPU | HCAPort) -> str:
    if _switch(a) is not None and _switch(a) == _switch(b):
        return "PIX"
    return "NODE" if _socket(a.pci_bus_id) == _socket(b.pci_bus_id) else "SYS"


def _active(g: GPU) -> int:
    return g.nvlinks - len(set(g.nvlinks_down))


def _link(a: GPU | HCAPort, b: GPU | HCAPort) -> str:
    if a is b:
        return " X "
    if isinstance(a, GPU) and isinstance(b, GPU) and min(_active(a), _active(b)) > 0:
        return f"NV{min(_active(a), _active(b))}"
    return _pcie(a, b)


def nvidia_smi_topo(p: Profile) -> str:
    gpus = [g for g in p.gpus if not g.lost]
    devices: list[GPU | HCAPort] = [*gpus, *p.hcas]
    labels = [f"GPU{n}" for n in range(len(gpus))] + [f"NIC{n}" for n in range(len(p.hcas))]
    out = ["\t" + "\t".join(labels) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for label, a in zip(labels, devices, strict=True):
        cells = [_link(a, b) for b in devices]
        if isinstance(a, GPU):
            socket = _socket(a.pci_bus_id)
            cells += [_CPUS[socket], str(socket), "", "N/A"]
        else:
            cells += ["", "", "", ""]
        out.append(label + "\t" + "\t".join(cells))
    out += ["", "Legend:", "",
            "  X    = Self",
            "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA "
            "nodes (e.g., QPI/UPI)",
            "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "
            "Bridges within a NUMA node",
            "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
            "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe "
            "Host Bridge)",
            "  PIX  = Connection traversing at most a single PCIe bridge",
            "  NV#  = Connection traversing a bonded set of # NVLinks",
            "", "NIC Legend:", ""]
    out += [f"  NIC{n}: {h.ca}" for n, h in enumerate(p.hcas)]
    return "\n".join(out) + "\n\n"


def _nvlink_gpus(p: Profile) -> list[tuple[int, GPU]]:
    """Numbered as topo -m and nvidia-smi number them: in order among the GPUs it can reach."""
    return [(number, g) for number, g in enumerate(g for g in p.gpus if not g.lost) if g.nvlinks]


def nvidia_smi_nvlink(p: Profile) -> str:
    out = []
    for number, g in _nvlink_gpus(p):
        out.append(f"GPU {number}: {g.product_name} (UUID: {g.uuid})")
        out += [f"\t Link {n}: {'<inactive>' if n in g.nvlinks_down else NVLINK4_GBPS + ' GB/s'}"
                for n in range(g.nvlinks)]
    return "\n".join(out) + "\n" if out else ""


def nvidia_smi_nvlink_errors(p: Profile, now: float | None = None) -> str:
    """``nvidia-smi nvlink -e`` as the A100 and H100 captures print it: three counters per
    link, a blank line after each link's."""
    now = time.time() if now is None else now
    out = []
    for number, g in _nvlink_gpus(p):
        out.append(f"GPU {number}: {g.product_name} (UUID: {g.uuid})")
        for n in range(g.nvlinks):
            replay = int(now * g.nvlink_errors_per_s.get(str(n), 0.0))
            out += [f"\t Link {n}: Replay Errors: {replay}", f"\t Link {n}: Recovery Errors: 0",
                    f"\t Link {n}: CRC Errors: {replay // 4}", ""]
    return "\n".join(out) + "\n" if out else ""
