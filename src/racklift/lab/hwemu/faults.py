"""Faults injected into a profile, and healing them."""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Callable, Iterable

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


def _later(p: Profile) -> float:
    """When a fault's kernel messages come: a day after the log's last line."""
    return max(_last_uptime(p), 60.0) + 86_400.0 + 1234.567891


def _log(p: Profile, at: float, timed: list[tuple[float, str]]) -> None:
    """Append kernel messages, each (seconds after `at`, text)."""
    p.kernel_log += [f"{_ts(at + after)} {message}" for after, message in timed]


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
    msgs = [
        f"NVRM: GPU at PCI:{dom_bus}: {g.uuid}",
        f"NVRM: GPU Board Serial Number: {g.serial}",
        f"NVRM: Xid (PCI:{dom_bus}): 79, pid='<unknown>', name=<unknown>, "
        "GPU has fallen off the bus.",
        f"NVRM: GPU {dom_bus}.0: GPU has fallen off the bus.",
        f"NVRM: GPU {dom_bus}.0: GPU serial number is {g.serial}.",
    ]
    _log(p, _later(p), [(i * 0.000004, msg) for i, msg in enumerate(msgs)])


def _xid_nvlink5_nonfatal(p: Profile) -> None:
    """GPU 1 logs Xid 144 and 145, which the driver calls "Nonfatal", worded as the real GB200
    lines (kmsg_xid-144-145-149_nvlink5-gb200.txt). Their NVLink5 units are Blackwell's, not
    this H100 board's: the gate judges an Xid by its number and words, whatever the GPU."""
    g = _gpu(p, 1)
    if g is None:
        return
    dom_bus = f"0000:{g.bus:02x}:00"
    _log(p, _later(p), [
        (0.0, f"NVRM: Xid (PCI:{dom_bus}): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 "
              "0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)"),
        (0.000004, f"NVRM: Xid (PCI:{dom_bus}): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 "
                   "(0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)"),
    ])


def _gpu_off_bus_open_module(p: Profile) -> None:
    """GPU 7 fell off the bus before the driver probed it: the driver's message over three lines
    and its probe failure come just before its loading line, as the open kernel module printed
    them in the real capture (dmesg_nvrm-fallen-off-bus-3-lines_open-570.158.01.txt, same
    spacing); the driver then has the other seven GPUs, as under gpu-missing."""
    g = _gpu(p, 7)
    load = next((i for i, line in enumerate(p.kernel_log) if "] NVRM: loading " in line), None)
    if g is None or load is None:
        return
    at = float(p.kernel_log[load][1:p.kernel_log[load].index("]")])
    device, vendor = g.pci_device_id[:4].lower(), g.pci_device_id[4:].lower()
    p.kernel_log[load:load] = [
        f"{_ts(at - 0.131524)} NVRM: The NVIDIA GPU 0000:{g.bus:02x}:00.0\n"
        f"NVRM: (PCI ID: {vendor}:{device}) installed in this system has\n"
        "NVRM: fallen off the bus and is not responding to commands.",
        f"{_ts(at - 0.000007)} NVRM: The NVIDIA probe routine failed for 1 device(s).",
    ]
    _gpu_missing(p)


# The root port above a GPU's PCIe switch, in the lab's model of the board: device 01.0 of the
# first bus of the GPU's PCIe stack, three buses above the GPU (root port 15:01.0, switch 16,
# its downstream ports 17, GPU 18), an Intel Sapphire Rapids root port (8086:352a, as a real
# one at 15:01.0 reads in lspci on the linux-pci list).
_ROOT_PORT_ID = "8086:352a"


def _aer_gpu_endpoint(p: Profile) -> None:
    """A fatal completion timeout at GPU 0's root port, which the GPU's driver cannot recover
    from: the lines of the real capture (dmesg-reltime_aer-fatal-gpu-cant-recover_xeon-e5.txt),
    at the capture's times, for one error on this board."""
    g = _gpu(p, 0)
    if g is None:
        return
    port, gpu = f"0000:{g.bus - 3:02x}:01.0", f"0000:{g.bus:02x}:00.0"
    _log(p, _later(p), [
        (0.0, f"pcieport {port}: AER: Uncorrected (Fatal) error received: {port}"),
        (0.000004, f"pcieport {port}: PCIe Bus Error: severity=Uncorrected (Fatal), "
                   "type=Transaction Layer, (Requester ID)"),
        (0.000902, f"pcieport {port}:   device [{_ROOT_PORT_ID}] error status/mask="
                   "00004000/00000000"),
        (0.002685, f"pcieport {port}:    [14] {'CmpltTO':<22} (First)"),
        (0.003606, f"nvidia {gpu}: AER: can't recover (no error_detected callback)"),
        (1.054047, f"pcieport {port}: AER: Root Port link has been reset (0)"),
        (1.054088, f"pcieport {port}: AER: device recovery failed"),
    ])


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


def _ibstat_panic(p: Profile) -> None:
    """A ninth RDMA device, mlx5_8, is gone by the time ibstat reads it: ibstat prints the eight
    CAs, then panics on it and exits 255, as in the real capture
    (ibstat_a100-azure_8-cas_ibpanic-mlx5_8_exit-255.txt)."""
    if "mlx5_8" not in p.vanishing_cas:
        p.vanishing_cas.append("mlx5_8")


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


def inband_port(port: str, faults: Iterable[str]) -> str | None:
    """The leaf port (`swpN`) the in-band cable planned into `port` is in under the Ethernet
    faults; None: pulled, nothing heard."""
    faults = set(faults)
    if "eth-link-no-neighbor" in faults:
        return None
    if "eth-cable-wrong-port" in faults:
        number = int(port.removeprefix("swp"))
        return f"swp{number - 1 if number > 1 else number + 1}"
    return port


def _wrong_system_serial(p: Profile) -> None:
    rng = random.Random(f"sys-serial:{p.system.serial}")
    new = p.system.serial
    while new == p.system.serial:
        new = f"S{rng.randrange(10**6, 10**7)}X{rng.randrange(10**6, 10**7)}"
    p.system.serial = new


# What the BIOS leaves in a DMI string nobody filled in (the system record's SKU and family).
_DMI_PLACEHOLDER = "To be filled by O.E.M."


def _dmi_chassis_only(p: Profile) -> None:
    """Only the chassis record (DMI type 3) carries the serial NetBox has; the system record's
    is the BIOS's placeholder (a board whose FRU was never programmed)."""
    s = p.system
    if s.serial != _DMI_PLACEHOLDER:
        s.chassis_serial, s.serial = s.serial, _DMI_PLACEHOLDER


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


def _dcgm_skip_required(p: Profile) -> None:
    """The installed DCGM does not support the host's GPUs: dcgmi diag passes its deployment
    checks and skips every test it would run (dcgm.py), exiting 0."""
    p.dcgm_supports_gpus = False


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
        ("xid-nvlink5-nonfatal", _xid_nvlink5_nonfatal),
        ("gpu-off-bus-open-module", _gpu_off_bus_open_module),
        ("aer-gpu-endpoint", _aer_gpu_endpoint),
        ("pcie-degraded", _pcie_degraded),
        ("ib-port-down", _ib_port_down),
        ("ib-rate-wrong", _ib_rate_wrong),
        ("ibstat-panic", _ibstat_panic),
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
        ("dmi-chassis-only", _dmi_chassis_only),
        ("driver-version-wrong", _driver_version_wrong),
        ("hbm-fail", _hbm_fail),
        ("nvlink-slow", _nvlink_slow),
        ("rail-slow", _rail_slow),
        ("dcgm-skip-required", _dcgm_skip_required),
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
