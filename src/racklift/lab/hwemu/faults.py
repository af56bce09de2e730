"""Faults injected into a profile, and healing them."""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Callable

from .generate import generate_profile
from .profile import GPU, WRONG_DRIVER, HCAPort, Profile, _hca, _set_driver, _ts, cabled


def _last_uptime(p: Profile) -> float:
    last = 0.0
    for line in p.kernel_log:
        if line.startswith("[") and "]" in line:
            try:
                last = max(last, float(line[1 : line.index("]")].strip()))
            except ValueError:
                continue
    return last


def _gpu(p: Profile, index: int) -> GPU | None:
    return next((g for g in p.gpus if g.index == index), None)


def _gpu_missing(p: Profile) -> None:
    p.gpus = [g for g in p.gpus if g.index != 7]


def _gpu_lost(p: Profile) -> None:
    g = _gpu(p, 5)
    if g is not None:
        g.lost = True


def _gpu_serial_changed(p: Profile) -> None:
    g = _gpu(p, 3)
    if g is not None:
        rng = random.Random(f"serial-swap:{g.serial}")
        new = g.serial
        while new == g.serial:
            new = f"16542{rng.randrange(10**8):08d}"
        g.serial = new


def _ecc_uncorrected(p: Profile) -> None:
    g = _gpu(p, 2)
    if g is None:
        return
    g.ecc_volatile_dram_uncorrectable = 2
    g.ecc_aggregate_dram_uncorrectable = max(g.ecc_aggregate_dram_uncorrectable, 2)
    g.remapped_rows_uncorrectable = max(g.remapped_rows_uncorrectable, 1)
    g.remapped_rows_pending = True
    # One bank used a spare row: it leaves the "max" availability bucket (as in real captures).
    if g.remap_histogram_high == 0:
        g.remap_histogram_max -= 1
        g.remap_histogram_high = 1


def _xid_79(p: Profile) -> None:
    g = _gpu(p, 4) or (p.gpus[0] if p.gpus else None)
    if g is None:
        return
    dom_bus = f"0000:{g.bus:02x}:00"
    t = max(_last_uptime(p), 60.0) + 86_400.0 + 1234.567891
    msgs = [
        f"NVRM: GPU at PCI:{dom_bus}: {g.uuid}",
        f"NVRM: GPU Board Serial Number: {g.serial}",
        f"NVRM: Xid (PCI:{dom_bus}): 79, pid='<unknown>', name=<unknown>, "
        "GPU has fallen off the bus.",
        f"NVRM: GPU {dom_bus}.0: GPU has fallen off the bus.",
        f"NVRM: GPU {dom_bus}.0: GPU serial number is {g.serial}.",
    ]
    for i, msg in enumerate(msgs):
        p.kernel_log.append(f"{_ts(t + i * 0.000004)} {msg}")


def _pcie_degraded(p: Profile) -> None:
    g = _gpu(p, 1)
    if g is not None:
        g.pcie_link_width_current = 8


def _down(h: HCAPort, phys_state: str) -> None:
    """As real ibstat shows a port that is down: no LID (65535), no SM, base rate."""
    h.state, h.phys_state, h.rate = "Down", phys_state, 10
    h.base_lid, h.sm_lid = 65535, 0


def _ib_port_down(p: Profile) -> None:
    h = _hca(p, "mlx5_3")
    if h is not None:
        _down(h, "Disabled")


def _ib_rate_wrong(p: Profile) -> None:
    h = _hca(p, "mlx5_5")
    if h is not None:
        h.rate = 200


def _nvlink_down(p: Profile) -> None:
    g = _gpu(p, 3)
    if g is not None and 7 not in g.nvlinks_down:
        g.nvlinks_down.append(7)


def _nvlink_errors_rising(p: Profile) -> None:
    """GPU 2's link 5 keeps retraining: its replay and CRC counters rise between two reads."""
    g = _gpu(p, 2)
    if g is not None:
        g.nvlink_errors_per_s["5"] = 20.0


# A bus on socket 0 behind no GPU's PCIe switch (the board's other slots: profile._HCA_BUSES).
_STRAY_SLOT = 0x4C


def _numa_misplaced(p: Profile) -> None:
    """GPU 6's HCA in a slot on the other socket, behind no GPU's switch: GPU 6's nearest NIC
    is across the socket's PCIe host bridges (NODE), its own HCA across the sockets (SYS)."""
    h = _hca(p, "mlx5_6")
    if h is not None:
        h.pci_bus_id = f"0000:{_STRAY_SLOT:02x}:00.0"


def _cable_swapped(p: Profile) -> None:
    """mlx5_0's and mlx5_1's cables swapped at the host: each reaches the other's rail leaf."""
    a, b = _hca(p, "mlx5_0"), _hca(p, "mlx5_1")
    if a is not None and b is not None:
        a.peer_switch, a.peer_port, b.peer_switch, b.peer_port = (
            b.peer_switch, b.peer_port, a.peer_switch, a.peer_port)


# A leaf's ports past the 32 a rail group's hosts use (its uplinks, in the lab's plan).
_UPLINKS = 32


def _cable_wrong_leaf(p: Profile) -> None:
    """mlx5_2 cabled to the next rail's leaf (a free port there): its traffic crosses rails."""
    h, other = _hca(p, "mlx5_2"), _hca(p, "mlx5_3")
    if h is not None and other is not None and other.peer_switch:
        h.peer_switch, h.peer_port = other.peer_switch, other.peer_port + _UPLINKS


def _ib_link_degraded(p: Profile) -> None:
    """mlx5_4's NDR link trained at HDR (a marginal cable): ibstat and the fabric agree."""
    h = _hca(p, "mlx5_4")
    if h is not None:
        h.link_speed, h.rate = "HDR", 200


def _link_no_neighbor(p: Profile) -> None:
    """mlx5_7's cable pulled at the switch: the port polls, the fabric has no link for it."""
    h = _hca(p, "mlx5_7")
    if h is not None:
        h.peer_switch, h.peer_port = "", 0
        _down(h, "Polling")


def _mac_swapped(p: Profile) -> None:
    p.mac_swapped = True


def _at_the_leaf(p: Profile) -> None:
    """Nothing in the profile: the in-band cable is real, racklift.lab.leaf moves it (lab only).
    eth-cable-wrong-port: eno2 in its leaf's port before its own (eno1's in the plan);
    eth-link-no-neighbor: eno2's cable pulled at the leaf, the link down."""


ETHERNET_FAULTS = ("eth-cable-wrong-port", "eth-link-no-neighbor")


def _wrong_system_serial(p: Profile) -> None:
    rng = random.Random(f"sys-serial:{p.system.serial}")
    new = p.system.serial
    while new == p.system.serial:
        new = f"S{rng.randrange(10**6, 10**7)}X{rng.randrange(10**6, 10**7)}"
    p.system.serial = new


def _driver_version_wrong(p: Profile) -> None:
    """The driver that answers is not the one NetBox asks for. On a lab host it is not the
    installed package's either (with_installed_driver keeps it): as after NVIDIA's .run
    installer put another driver over the packaged one, which dpkg still lists. (Not a stale
    kernel module after an upgrade: real nvidia-smi then refuses with "Driver/library version
    mismatch", exit 18, and reports no version.)"""
    _set_driver(p, WRONG_DRIVER)


# Faults that only load shows: nvidia-smi, ibstat and the kernel log stay clean, so the gate
# passes the host and acceptance (dcgmi diag, all_reduce_perf, ib_write_bw) must catch them.


def _hbm_fail(p: Profile) -> None:
    """GPU 4's HBM fails DCGM's memory test (levels 2 and up) while its ECC and row-remap
    counters still read clean."""
    g = _gpu(p, 4)
    if g is not None:
        g.memory_test_fails = True


def _nvlink_slow(p: Profile) -> None:
    """GPU 6's NVLinks retrain under traffic: an all-reduce gets some 30% of its bus
    bandwidth, while every link reads up in nvlink -s."""
    g = _gpu(p, 6)
    if g is not None:
        g.nvlink_load_factor = 0.3


def _rail_slow(p: Profile) -> None:
    """mlx5_3's link degrades under traffic: ib_write_bw gets some 30% of its line rate, from
    either end of a pair, while ibstat shows it Active at 400."""
    h = _hca(p, "mlx5_3")
    if h is not None:
        h.load_factor = 0.3


def _fault(name: str, apply: Callable[[Profile], None]) -> Callable[[Profile], Profile]:
    def run(profile: Profile) -> Profile:
        p = copy.deepcopy(profile)
        apply(p)
        if name not in p.faults:
            p.faults.append(name)
        return p

    run.__name__ = "fault_" + name.replace("-", "_")
    return run


FAULTS: dict[str, Callable[[Profile], Profile]] = {
    name: _fault(name, fn)
    for name, fn in (
        ("gpu-missing", _gpu_missing),
        ("gpu-lost", _gpu_lost),
        ("gpu-serial-changed", _gpu_serial_changed),
        ("ecc-uncorrected", _ecc_uncorrected),
        ("xid-79", _xid_79),
        ("pcie-degraded", _pcie_degraded),
        ("ib-port-down", _ib_port_down),
        ("ib-rate-wrong", _ib_rate_wrong),
        ("nvlink-down", _nvlink_down),
        ("nvlink-errors-rising", _nvlink_errors_rising),
        ("numa-misplaced", _numa_misplaced),
        ("mac-swapped", _mac_swapped),
        ("cable-swapped", _cable_swapped),
        ("cable-wrong-leaf", _cable_wrong_leaf),
        ("ib-link-degraded", _ib_link_degraded),
        ("link-no-neighbor", _link_no_neighbor),
        *((kind, _at_the_leaf) for kind in ETHERNET_FAULTS),
        ("wrong-system-serial", _wrong_system_serial),
        ("driver-version-wrong", _driver_version_wrong),
        ("hbm-fail", _hbm_fail),
        ("nvlink-slow", _nvlink_slow),
        ("rail-slow", _rail_slow),
    )
}


def inject(profile: Profile, kind: str) -> Profile:
    """Return a copy of ``profile`` with fault ``kind`` applied and recorded in ``faults``."""
    if kind not in FAULTS:
        raise ValueError(f"unknown fault kind {kind!r}; valid kinds: {', '.join(FAULTS)}")
    return FAULTS[kind](profile)


def heal(profile: Profile) -> Profile:
    """Regenerate the healthy profile from (hostname, original serial, seed), on the same
    host (driver_from_packages kept)."""
    healthy = generate_profile(profile.hostname, profile.original_serial or profile.system.serial,
                               profile.seed)
    return dataclasses.replace(cabled(healthy, profile.cables),
                               driver_from_packages=profile.driver_from_packages)
