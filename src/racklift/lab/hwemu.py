#!/usr/bin/env python3
"""Lab hardware emulator: an 8x H100 HGX server's GPU, HCA and DMI tools.

Stdlib only, Python 3.11. The file is copied verbatim onto lab hosts as
``/usr/local/lib/racklift-lab/hwemu.py`` and invoked through symlinks named ``nvidia-smi``,
``ibstat``, ``ibv_devinfo``, ``dmidecode`` and ``dmesg`` (dispatch on the program name), or
as ``python3 hwemu.py <subcommand>`` (``profile``, ``write-sysfs ROOT``, ``generate``,
``inject``, ``heal``, or any tool name). The hardware is described by a JSON profile read
from ``$RACKLIFT_HW_PROFILE`` (default ``/etc/racklift-lab/hardware.json``). On lab hosts the
driver is not the profile's but the installed package's (``Profile.driver_from_packages``).

Output formats follow real captures (see ``tests/fixtures/real/SOURCES.md``):

* ``nvidia-smi -q -x`` / ``-q``: the R550 layout (DTD ``nvsmi_device_v12.dtd``, tab
  indentation, Hopper ECC/row-remapper/T.Limit elements) as printed by driver 550.x on
  H100/H200/GH200.
* ``nvidia-smi --query-gpu``: canonical field names in the header, units in brackets,
  ``[N/A]`` for unsupported values, ``Field "x" is not a valid field to query.`` + exit 2.
* ``ibstat`` / ``ibv_devinfo``: infiniband-diags / rdma-core layouts for ConnectX-7.
* ``dmidecode`` 3.4, sysfs value formats (``4: ACTIVE``, ``400 Gb/sec (4X NDR)``), and
  ``dmesg`` lines with ``[%5d.%06d]`` timestamps and the NVRM Xid format.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape, quoteattr

DEFAULT_PROFILE_PATH = "/etc/racklift-lab/hardware.json"
PROFILE_ENV = "RACKLIFT_HW_PROFILE"

# The CUDA version nvidia-smi prints for each driver branch the nvidia_driver role installs.
_CUDA_BY_BRANCH = {"535": "12.2", "550": "12.4", "560": "12.6", "565": "12.7", "570": "12.8",
                   "575": "12.9", "580": "13.0"}


def _cuda_for(driver: str) -> str | None:
    return _CUDA_BY_BRANCH.get(driver.split(".")[0])


DEFAULT_DRIVER = "550.127.08"
DEFAULT_CUDA = _cuda_for(DEFAULT_DRIVER)
WRONG_DRIVER = "535.183.01"

# Packages whose version is the driver's, as NVIDIA's CUDA repository (nvidia-open-550,
# cuda-drivers-550, cuda-drivers, nvidia-driver, nvidia-kernel-open-dkms, nvidia-smi) and
# Ubuntu (nvidia-driver-550-open, nvidia-utils-550-server, nvidia-dkms-550) name them; not
# nvidia-fabricmanager-*, which follows the driver's version but is not the driver.
_DRIVER_PACKAGE = re.compile(
    r"(nvidia-open|cuda-drivers|nvidia-driver|nvidia-utils|nvidia-dkms)(-\d+)?(-server)?(-open)?"
    r"|nvidia-kernel(-open)?-dkms|nvidia-smi")
# What the fact collector runs too (playbooks/files/collect.py): name, version, status.
DPKG_QUERY = ("dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Abbrev}\n")

# Build stamps printed in the NVRM "loading" line. Approximate: no public capture of these
# exact builds was found; only the line format is taken from real logs.
_DRIVER_BUILD_DATES = {
    "550.127.08": "Tue Nov 12 19:41:35 UTC 2024",
    "535.183.01": "Sun May 12 19:39:15 UTC 2024",
}

# HGX H100 8-GPU baseboard bus numbers (real capture: 18 2A 3A 5D 9A AB BA DB).
HGX_H100_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
# SXM module id per slot; the first one (bus 0x18 -> module 2) is from a real capture.
_HGX_MODULE_IDS = (2, 4, 3, 1, 7, 5, 8, 6)
# One ConnectX-7 per GPU, behind the same PCIe switch.
_HCA_BUSES = (0x1A, 0x2C, 0x3C, 0x5E, 0x9C, 0xAD, 0xBC, 0xDC)

NVIDIA_SMI_NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)


# --------------------------------------------------------------------------- profile model


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass
class System:
    vendor: str = "Supermicro"
    product: str = "SYS-421GE-TNHR2-LCC"
    version: str = "0123456789"
    serial: str = ""
    uuid: str = ""
    sku: str = "To be filled by O.E.M."
    family: str = "To be filled by O.E.M."
    bios_vendor: str = "American Megatrends International, LLC."
    bios_version: str = "2.1"
    bios_date: str = "03/08/2024"
    board_vendor: str = "Supermicro"
    board_name: str = "X13DEG-OAD"
    board_version: str = "1.01"
    board_serial: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> System:
        return cls(**_known(cls, data))


@dataclass
class GPU:
    index: int
    serial: str
    uuid: str
    pci_bus_id: str
    minor_number: int = 0
    product_name: str = "NVIDIA H100 80GB HBM3"
    product_brand: str = "NVIDIA"
    product_architecture: str = "Hopper"
    display_mode: str = "Enabled"
    display_active: str = "Disabled"
    persistence_mode: str = "Enabled"
    addressing_mode: str = "None"
    mig_mode_current: str = "Disabled"
    mig_mode_pending: str = "Disabled"
    vbios_version: str = "96.00.89.00.01"
    board_part_number: str = "692-2G520-0200-000"
    gpu_part_number: str = "2330-885-A1"
    module_id: int = 1
    inforom_image_version: str = "G520.0200.00.05"
    inforom_oem_object: str = "2.1"
    inforom_ecc_object: str = "7.16"
    virtualization_mode: str = "None"
    pci_device_id: str = "233010DE"
    pci_sub_system_id: str = "16C110DE"
    pcie_gen_current: int = 5
    pcie_gen_max: int = 5
    pcie_gen_host_max: int = 5
    pcie_link_width_current: int = 16
    pcie_link_width_max: int = 16
    pcie_replay_counter: int = 0
    pcie_tx_kbps: int = 550
    pcie_rx_kbps: int = 550
    performance_state: str = "P0"
    compute_mode: str = "Default"
    compute_cap: str = "9.0"
    fb_memory_total_mib: int = 81559
    fb_memory_reserved_mib: int = 454
    fb_memory_used_mib: int = 1
    bar1_memory_total_mib: int = 131072
    bar1_memory_used_mib: int = 1
    utilization_gpu: int = 0
    utilization_memory: int = 0
    ecc_mode_current: str = "Enabled"
    ecc_mode_pending: str = "Enabled"
    ecc_volatile_sram_correctable: int = 0
    ecc_volatile_sram_uncorrectable_parity: int = 0
    ecc_volatile_sram_uncorrectable_secded: int = 0
    ecc_volatile_dram_correctable: int = 0
    ecc_volatile_dram_uncorrectable: int = 0
    ecc_aggregate_sram_correctable: int = 0
    ecc_aggregate_sram_uncorrectable_parity: int = 0
    ecc_aggregate_sram_uncorrectable_secded: int = 0
    ecc_aggregate_dram_correctable: int = 0
    ecc_aggregate_dram_uncorrectable: int = 0
    ecc_aggregate_sram_threshold_exceeded: bool = False
    # Hopper uses row remapping; page retirement reads N/A (real H100/H200 captures).
    retired_pages_single_bit: str = "N/A"
    retired_pages_double_bit: str = "N/A"
    retired_pages_pending: str = "N/A"
    remapped_rows_correctable: int = 0
    remapped_rows_uncorrectable: int = 0
    remapped_rows_pending: bool = False
    remapped_rows_failure: bool = False
    remap_histogram_max: int = 2560
    remap_histogram_high: int = 0
    remap_histogram_partial: int = 0
    remap_histogram_low: int = 0
    remap_histogram_none: int = 0
    temperature_gpu: int = 30
    temperature_tlimit: int = 57
    temperature_memory: int = 36
    power_draw_w: float = 80.0
    memory_power_draw_w: float = 50.0
    power_limit_w: float = 700.0
    power_default_limit_w: float = 700.0
    power_min_limit_w: float = 200.0
    power_max_limit_w: float = 700.0
    clocks_graphics_mhz: int = 345
    clocks_sm_mhz: int = 345
    clocks_mem_mhz: int = 2619
    clocks_video_mhz: int = 765
    clocks_app_graphics_mhz: int = 1980
    clocks_app_mem_mhz: int = 2619
    clocks_max_graphics_mhz: int = 1980
    clocks_max_sm_mhz: int = 1980
    clocks_max_mem_mhz: int = 2619
    clocks_max_video_mhz: int = 1545
    voltage_mv: float = 685.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GPU:
        return cls(**_known(cls, data))

    @property
    def bus(self) -> int:
        return int(self.pci_bus_id.split(":")[1], 16)


@dataclass
class HCAPort:
    ca: str
    node_guid: str
    sys_image_guid: str
    port_guid: str
    pci_bus_id: str
    ca_type: str = "MT4129"
    fw_ver: str = "28.39.1002"
    hw_ver: str = "0"
    port: int = 1
    state: str = "Active"
    phys_state: str = "LinkUp"
    rate: int = 400
    base_lid: int = 1
    sm_lid: int = 1
    lmc: int = 0
    link_layer: str = "InfiniBand"
    capability_mask: str = "0xa751e848"
    board_id: str = "MT_0000000838"
    vendor_id: str = "0x02c9"
    vendor_part_id: int = 4129
    max_mtu: int = 4096
    active_mtu: int = 4096
    pcie_gen: int = 5
    pcie_width: int = 16

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HCAPort:
        return cls(**_known(cls, data))


@dataclass
class Profile:
    hostname: str
    system: System
    gpus: list[GPU] = field(default_factory=list)
    hcas: list[HCAPort] = field(default_factory=list)
    kernel_log: list[str] = field(default_factory=list)
    driver_version: str | None = DEFAULT_DRIVER
    cuda_version: str | None = DEFAULT_CUDA
    # Set on lab hosts (lab_hardware role): the driver is the installed package's, read with
    # dpkg-query when a tool runs (with_installed_driver); unset (fixtures, tests on the
    # controller), driver_version and cuda_version as given.
    driver_from_packages: bool = False
    nvswitch: bool = False
    mac_swapped: bool = False
    faults: list[str] = field(default_factory=list)
    seed: int = 0
    original_serial: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        d = dict(data)
        d["system"] = System.from_dict(d.get("system") or {})
        d["gpus"] = [GPU.from_dict(g) for g in d.get("gpus") or []]
        d["hcas"] = [HCAPort.from_dict(h) for h in d.get("hcas") or []]
        return cls(**_known(cls, d))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Profile:
        return cls.from_dict(json.loads(text))


def load_profile(path: str | None = None) -> Profile:
    path = path or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE_PATH
    with open(path, encoding="utf-8") as fh:
        return Profile.from_json(fh.read())


def save_profile(profile: Profile, path: str | None = None) -> None:
    path = path or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE_PATH
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(profile.to_json())
    os.replace(tmp, path)


# --------------------------------------------------------------------------- generation


def _uuid_from(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _ts(seconds: float) -> str:
    whole = int(seconds)
    micros = round((seconds - whole) * 1_000_000)
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    return f"[{whole:5d}.{micros:06d}]"


def _driver_stamp(version: str) -> str:
    return _DRIVER_BUILD_DATES.get(version, "Thu Oct 17 00:00:00 UTC 2024")


def _boot_log(
    rng: random.Random, system: System, driver: str | None, hcas: list[HCAPort]
) -> list[str]:
    root_uuid = _uuid_from(rng)
    kernel = "6.1.0-28-amd64"
    lines: list[tuple[float, str]] = [
        (
            0.0,
            f"Linux version {kernel} (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) "
            "12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC "
            "Debian 6.1.119-1 (2024-11-22)",
        ),
        (0.0, f"Command line: BOOT_IMAGE=/boot/vmlinuz-{kernel} root=UUID={root_uuid} ro quiet"),
        (
            0.0,
            f"DMI: {system.vendor} {system.product}/{system.board_name}, "
            f"BIOS {system.bios_version} {system.bios_date}",
        ),
    ]
    t = 4.0 + rng.random()
    for h in hcas:
        t += 0.01 + rng.random() * 0.05
        lines.append((t, f"mlx5_core {h.pci_bus_id}: firmware version: {h.fw_ver}"))
        t += 0.001 + rng.random() * 0.004
        lines.append(
            (
                t,
                f"mlx5_core {h.pci_bus_id}: 504.112 Gb/s available PCIe bandwidth "
                f"(32.0 GT/s PCIe x{h.pcie_width} link)",
            )
        )
        t += 0.2 + rng.random() * 0.2
        lines.append((t, f"mlx5_core {h.pci_bus_id}: Port module event: module 0, Cable plugged"))
    if driver:
        t += 1.0 + rng.random()
        lines.append((t, "nvidia: loading out-of-tree module taints kernel."))
        t += 0.000012
        lines.append((t, "nvidia: module license 'NVIDIA' taints kernel."))
        t += 0.000004
        lines.append((t, "Disabling lock debugging due to kernel taint"))
        t += 0.04 + rng.random() * 0.01
        lines.append(
            (t, "nvidia-nvlink: Nvlink Core is being initialized, major device number 510")
        )
        t += 0.3 + rng.random() * 0.1
        lines.append(
            (
                t,
                f"NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {driver}  "
                f"{_driver_stamp(driver)}",
            )
        )
        t += 0.05 + rng.random() * 0.02
        lines.append(
            (
                t,
                "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  "
                f"{driver}  {_driver_stamp(driver)}",
            )
        )
        t += 0.1 + rng.random() * 0.05
        lines.append(
            (
                t,
                "nvidia_uvm: module uses symbols nvUvmInterfaceDisableAccessCntr from proprietary "
                "module nvidia, inheriting taint.",
            )
        )
    return [f"{_ts(ts)} {msg}" for ts, msg in lines]


def generate_profile(hostname: str, serial: str, seed: int) -> Profile:
    """A healthy 8x H100 + 8x ConnectX-7 NDR host; deterministic for the same arguments."""
    rng = random.Random(f"racklift-hwemu:{seed}:{hostname}:{serial}")
    system = System(
        serial=serial,
        uuid=_uuid_from(rng),
        board_serial=f"OM{rng.randrange(10**9, 10**10)}",
    )
    used_serials: set[str] = set()
    gpus: list[GPU] = []
    for i, bus in enumerate(HGX_H100_BUSES):
        gserial = ""
        while not gserial or gserial in used_serials:
            gserial = f"16542{rng.randrange(10**8):08d}"
        used_serials.add(gserial)
        gpus.append(
            GPU(
                index=i,
                minor_number=i,
                serial=gserial,
                uuid="GPU-" + _uuid_from(rng),
                pci_bus_id=f"00000000:{bus:02X}:00.0",
                module_id=_HGX_MODULE_IDS[i],
                pcie_tx_kbps=rng.randrange(450, 700),
                pcie_rx_kbps=rng.randrange(450, 700),
                temperature_gpu=rng.randrange(28, 34),
                temperature_tlimit=rng.randrange(54, 60),
                temperature_memory=rng.randrange(34, 40),
                power_draw_w=round(rng.uniform(70.0, 105.0), 2),
                memory_power_draw_w=round(rng.uniform(40.0, 70.0), 2),
            )
        )
    used_guids: set[int] = set()
    lids = rng.sample(range(2, 2048), len(_HCA_BUSES))
    hcas: list[HCAPort] = []
    for i, bus in enumerate(_HCA_BUSES):
        low = 0
        while not low or low in used_guids:
            low = rng.randrange(1, 1 << 24)
        used_guids.add(low)
        guid = f"0x946dae0300{low:06x}"
        hcas.append(
            HCAPort(
                ca=f"mlx5_{i}",
                node_guid=guid,
                sys_image_guid=guid,
                port_guid=guid,
                pci_bus_id=f"0000:{bus:02x}:00.0",
                base_lid=lids[i],
            )
        )
    return Profile(
        hostname=hostname,
        system=system,
        gpus=gpus,
        hcas=hcas,
        kernel_log=_boot_log(rng, system, DEFAULT_DRIVER, hcas),
        driver_version=DEFAULT_DRIVER,
        cuda_version=DEFAULT_CUDA,
        nvswitch=False,
        seed=seed,
        original_serial=serial,
    )


# --------------------------------------------------------------------------- faults


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


def _hca(p: Profile, ca: str) -> HCAPort | None:
    return next((h for h in p.hcas if h.ca == ca), None)


def _gpu_missing(p: Profile) -> None:
    p.gpus = [g for g in p.gpus if g.index != 7]


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


def _ib_port_down(p: Profile) -> None:
    h = _hca(p, "mlx5_3")
    if h is not None:
        # As real ibstat shows a disabled IB port: no LID (65535), no SM, base rate.
        h.state, h.phys_state, h.rate = "Down", "Disabled", 10
        h.base_lid, h.sm_lid = 65535, 0


def _ib_rate_wrong(p: Profile) -> None:
    h = _hca(p, "mlx5_5")
    if h is not None:
        h.rate = 200


def _mac_swapped(p: Profile) -> None:
    p.mac_swapped = True


def _wrong_system_serial(p: Profile) -> None:
    rng = random.Random(f"sys-serial:{p.system.serial}")
    new = p.system.serial
    while new == p.system.serial:
        new = f"S{rng.randrange(10**6, 10**7)}X{rng.randrange(10**6, 10**7)}"
    p.system.serial = new


def _set_driver(p: Profile, version: str) -> None:
    """Driver `version` wherever the host shows it: nvidia-smi and the module's boot lines."""
    old = p.driver_version
    p.driver_version, p.cuda_version = version, _cuda_for(version)
    if old and old != version:
        old_tok = f"  {old}  {_driver_stamp(old)}"
        new_tok = f"  {version}  {_driver_stamp(version)}"
        p.kernel_log = [line.replace(old_tok, new_tok) for line in p.kernel_log]


def _driver_version_wrong(p: Profile) -> None:
    """The driver that answers is not the one NetBox asks for. On a lab host it is not the
    installed package's either (with_installed_driver keeps it): as after NVIDIA's .run
    installer put another driver over the packaged one, which dpkg still lists. (Not a stale
    kernel module after an upgrade: real nvidia-smi then refuses with "Driver/library version
    mismatch", exit 18, and reports no version.)"""
    _set_driver(p, WRONG_DRIVER)


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
        ("gpu-serial-changed", _gpu_serial_changed),
        ("ecc-uncorrected", _ecc_uncorrected),
        ("xid-79", _xid_79),
        ("pcie-degraded", _pcie_degraded),
        ("ib-port-down", _ib_port_down),
        ("ib-rate-wrong", _ib_rate_wrong),
        ("mac-swapped", _mac_swapped),
        ("wrong-system-serial", _wrong_system_serial),
        ("driver-version-wrong", _driver_version_wrong),
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
    return dataclasses.replace(healthy, driver_from_packages=profile.driver_from_packages)


# --------------------------------------------------------------------------- installed driver


def installed_driver(packages: str) -> str | None:
    """The driver's upstream version from ``dpkg-query -W`` output (DPKG_QUERY's format): the
    newest installed driver package's (they agree but in a half-done upgrade); None if none."""
    versions = []
    for line in packages.splitlines():
        name, _, rest = line.partition("\t")
        version, _, status = rest.partition("\t")
        # The second status letter is the package's state: "ii", or "hi" when held (as the
        # nvidia_driver role leaves them); "rc" is removed, only its configuration left.
        if status[1:2] == "i" and _DRIVER_PACKAGE.fullmatch(name):
            versions.append(version.split("-")[0])  # the upstream version: no Debian revision
    return max(versions, key=lambda v: [int(n) for n in re.findall(r"\d+", v)], default=None)


def with_installed_driver(profile: Profile, installed: str | None) -> Profile:
    """The profile as a host with driver `installed` (:func:`installed_driver`) shows it. None:
    no driver, so nvidia-smi fails and the kernel log has no nvidia lines. Under the
    driver-version-wrong fault the profile's (wrong) driver answers whatever is installed."""
    p = copy.deepcopy(profile)
    if installed is None:
        p.driver_version = p.cuda_version = None
        p.kernel_log = [line for line in p.kernel_log if not line.partition("] ")[2].startswith(
            ("nvidia", "NVRM", "Disabling lock debugging"))]
    elif "driver-version-wrong" not in p.faults:
        _set_driver(p, installed)
    return p


# --------------------------------------------------------------------------- nvidia-smi tree


class _Node:
    """One nvidia-smi attribute: XML tag, ``-q`` label, value or children."""

    __slots__ = ("children", "extra_indent", "label", "tag", "text_leaf", "value",
                 "xml_block", "xml_only")

    def __init__(
        self,
        tag: str,
        label: str,
        value: str | None = None,
        children: list[_Node] | None = None,
        *,
        xml_only: bool = False,
        text_leaf: str | None = None,
        xml_block: str | None = None,
        extra_indent: int = 0,
    ) -> None:
        self.tag, self.label, self.value, self.children = tag, label, value, children
        self.xml_only, self.text_leaf, self.xml_block = xml_only, text_leaf, xml_block
        self.extra_indent = extra_indent


def _leaf(tag: str, label: str, value: object, **kw: Any) -> _Node:
    return _Node(tag, label, str(value), **kw)


def _grp(tag: str, label: str, children: list[_Node], **kw: Any) -> _Node:
    return _Node(tag, label, None, children, **kw)


class _PciLeaf(_Node):
    """PCI numbers print as hex without prefix in XML and with ``0x`` in ``-q``."""

    __slots__ = ()


def _pci(tag: str, label: str, xml_value: str) -> _Node:
    return _PciLeaf(tag, label, xml_value)


def _fb_free(g: GPU) -> int:
    return g.fb_memory_total_mib - g.fb_memory_reserved_mib - g.fb_memory_used_mib


def _w(v: float) -> str:
    return f"{v:.2f} W"


def _yn(b: bool) -> str:
    return "Yes" if b else "No"


def _ecc_counts(g: GPU, which: str) -> list[_Node]:
    enabled = g.ecc_mode_current == "Enabled"

    def v(name: str) -> str:
        return str(getattr(g, f"ecc_{which}_{name}")) if enabled else "N/A"

    nodes = [
        _leaf("sram_correctable", "SRAM Correctable", v("sram_correctable")),
        _leaf("sram_uncorrectable_parity", "SRAM Uncorrectable Parity",
              v("sram_uncorrectable_parity")),
        _leaf("sram_uncorrectable_secded", "SRAM Uncorrectable SEC-DED",
              v("sram_uncorrectable_secded")),
        _leaf("dram_correctable", "DRAM Correctable", v("dram_correctable")),
        _leaf("dram_uncorrectable", "DRAM Uncorrectable", v("dram_uncorrectable")),
    ]
    if which == "aggregate":
        nodes.append(_leaf("sram_threshold_exceeded", "SRAM Threshold Exceeded",
                           _yn(g.ecc_aggregate_sram_threshold_exceeded) if enabled else "N/A"))
    return nodes


def _supported_graphics_clocks(g: GPU) -> list[int]:
    return list(range(g.clocks_max_graphics_mhz, 344, -15))


def _gpu_tree(p: Profile, g: GPU) -> list[_Node]:
    bus = g.pci_bus_id.split(":")
    driver = p.driver_version or ""
    na = "N/A"
    if p.nvswitch:
        fabric = [("state", "State", "Completed"), ("status", "Status", "Success"),
                  ("cliqueId", "CliqueId", "0"),
                  ("clusterUuid", "ClusterUUID", "00000000-0000-0000-0000-000000000000")]
    else:
        fabric = [("state", "State", na), ("status", "Status", na), ("cliqueId", "CliqueId", na),
                  ("clusterUuid", "ClusterUUID", na)]
    reasons = [
        ("clocks_event_reason_gpu_idle", "Idle", "Active", 0),
        ("clocks_event_reason_applications_clocks_setting", "Applications Clocks Setting",
         "Not Active", 0),
        ("clocks_event_reason_sw_power_cap", "SW Power Cap", "Not Active", 0),
        ("clocks_event_reason_hw_slowdown", "HW Slowdown", "Not Active", 0),
        ("clocks_event_reason_hw_thermal_slowdown", "HW Thermal Slowdown", "Not Active", 4),
        ("clocks_event_reason_hw_power_brake_slowdown", "HW Power Brake Slowdown", "Not Active",
         4),
        ("clocks_event_reason_sync_boost", "Sync Boost", "Not Active", 0),
        ("clocks_event_reason_sw_thermal_slowdown", "SW Thermal Slowdown", "Not Active", 0),
        ("clocks_event_reason_display_clocks_setting", "Display Clock Setting", "Not Active", 0),
    ]
    fb_free = _fb_free(g)
    supported = [_leaf("value", "Value", f"{g.clocks_mem_mhz} MHz")] + [
        _leaf("supported_graphics_clock", "Graphics", f"{mhz} MHz")
        for mhz in _supported_graphics_clocks(g)
    ]
    return [
        _leaf("product_name", "Product Name", g.product_name),
        _leaf("product_brand", "Product Brand", g.product_brand),
        _leaf("product_architecture", "Product Architecture", g.product_architecture),
        _leaf("display_mode", "Display Mode", g.display_mode),
        _leaf("display_active", "Display Active", g.display_active),
        _leaf("persistence_mode", "Persistence Mode", g.persistence_mode),
        _leaf("addressing_mode", "Addressing Mode", g.addressing_mode),
        _grp("mig_mode", "MIG Mode", [
            _leaf("current_mig", "Current", g.mig_mode_current),
            _leaf("pending_mig", "Pending", g.mig_mode_pending),
        ]),
        _grp("mig_devices", "MIG Devices", [], xml_only=True, xml_block="None"),
        _leaf("accounting_mode", "Accounting Mode", "Disabled"),
        _leaf("accounting_mode_buffer_size", "Accounting Mode Buffer Size", "4000"),
        _grp("driver_model", "Driver Model", [
            _leaf("current_dm", "Current", na),
            _leaf("pending_dm", "Pending", na),
        ]),
        _leaf("serial", "Serial Number", g.serial),
        _leaf("uuid", "GPU UUID", g.uuid),
        _leaf("minor_number", "Minor Number", g.minor_number),
        _leaf("vbios_version", "VBIOS Version", g.vbios_version),
        _leaf("multigpu_board", "MultiGPU Board", "No"),
        _leaf("board_id", "Board ID", f"0x{g.bus:x}00"),
        _leaf("board_part_number", "Board Part Number", g.board_part_number),
        _leaf("gpu_part_number", "GPU Part Number", g.gpu_part_number),
        _leaf("gpu_fru_part_number", "FRU Part Number", na),
        _leaf("gpu_module_id", "Module ID", g.module_id),
        _grp("inforom_version", "Inforom Version", [
            _leaf("img_version", "Image Version", g.inforom_image_version),
            _leaf("oem_object", "OEM Object", g.inforom_oem_object),
            _leaf("ecc_object", "ECC Object", g.inforom_ecc_object),
            _leaf("pwr_object", "Power Management Object", na),
        ]),
        _grp("inforom_bbx_flush", "Inforom BBX Object Flush", [
            _leaf("latest_timestamp", "Latest Timestamp", na),
            _leaf("latest_duration", "Latest Duration", na),
        ]),
        _grp("gpu_operation_mode", "GPU Operation Mode", [
            _leaf("current_gom", "Current", na),
            _leaf("pending_gom", "Pending", na),
        ]),
        _leaf("c2c_mode", "GPU C2C Mode", "Disabled"),
        _grp("gpu_virtualization_mode", "GPU Virtualization Mode", [
            _leaf("virtualization_mode", "Virtualization Mode", g.virtualization_mode),
            _leaf("host_vgpu_mode", "Host VGPU Mode", na),
            _leaf("vgpu_heterogeneous_mode", "vGPU Heterogeneous Mode", na),
        ]),
        _grp("gpu_reset_status", "GPU Reset Status", [
            _leaf("reset_required", "Reset Required", "No"),
            _leaf("drain_and_reset_recommended", "Drain and Reset Recommended", "No"),
        ]),
        _leaf("gsp_firmware_version", "GSP Firmware Version", driver),
        _grp("ibmnpu", "IBMNPU", [_leaf("relaxed_ordering_mode", "Relaxed Ordering Mode", na)]),
        _grp("pci", "PCI", [
            _pci("pci_bus", "Bus", bus[1].upper()),
            _pci("pci_device", "Device", bus[2].split(".")[0].upper()),
            _pci("pci_domain", "Domain", bus[0][-4:]),
            _pci("pci_base_class", "Base Classcode", "3"),
            _pci("pci_sub_class", "Sub Classcode", "2"),
            _pci("pci_device_id", "Device Id", g.pci_device_id),
            _leaf("pci_bus_id", "Bus Id", g.pci_bus_id),
            _pci("pci_sub_system_id", "Sub System Id", g.pci_sub_system_id),
            _grp("pci_gpu_link_info", "GPU Link Info", [
                _grp("pcie_gen", "PCIe Generation", [
                    _leaf("max_link_gen", "Max", g.pcie_gen_max),
                    _leaf("current_link_gen", "Current", g.pcie_gen_current),
                    _leaf("device_current_link_gen", "Device Current", g.pcie_gen_current),
                    _leaf("max_device_link_gen", "Device Max", g.pcie_gen_max),
                    _leaf("max_host_link_gen", "Host Max", g.pcie_gen_host_max),
                ]),
                _grp("link_widths", "Link Width", [
                    _leaf("max_link_width", "Max", f"{g.pcie_link_width_max}x"),
                    _leaf("current_link_width", "Current", f"{g.pcie_link_width_current}x"),
                ]),
            ]),
            _grp("pci_bridge_chip", "Bridge Chip", [
                _leaf("bridge_chip_type", "Type", na),
                _leaf("bridge_chip_fw", "Firmware", na),
            ]),
            _leaf("replay_counter", "Replays Since Reset", g.pcie_replay_counter),
            _leaf("replay_rollover_counter", "Replay Number Rollovers", 0),
            _leaf("tx_util", "Tx Throughput", f"{g.pcie_tx_kbps} KB/s"),
            _leaf("rx_util", "Rx Throughput", f"{g.pcie_rx_kbps} KB/s"),
            _leaf("atomic_caps_inbound", "Atomic Caps Inbound", na),
            _leaf("atomic_caps_outbound", "Atomic Caps Outbound", na),
        ]),
        _leaf("fan_speed", "Fan Speed", na),
        _leaf("performance_state", "Performance State", g.performance_state),
        _grp("clocks_event_reasons", "Clocks Event Reasons", [
            _leaf(tag, label, val, extra_indent=extra) for tag, label, val, extra in reasons
        ]),
        _leaf("sparse_operation_mode", "Sparse Operation Mode", "Disabled"),
        _grp("fb_memory_usage", "FB Memory Usage", [
            _leaf("total", "Total", f"{g.fb_memory_total_mib} MiB"),
            _leaf("reserved", "Reserved", f"{g.fb_memory_reserved_mib} MiB"),
            _leaf("used", "Used", f"{g.fb_memory_used_mib} MiB"),
            _leaf("free", "Free", f"{fb_free} MiB"),
        ]),
        _grp("bar1_memory_usage", "BAR1 Memory Usage", [
            _leaf("total", "Total", f"{g.bar1_memory_total_mib} MiB"),
            _leaf("used", "Used", f"{g.bar1_memory_used_mib} MiB"),
            _leaf("free", "Free", f"{g.bar1_memory_total_mib - g.bar1_memory_used_mib} MiB"),
        ]),
        _grp("cc_protected_memory_usage", "Conf Compute Protected Memory Usage", [
            _leaf("total", "Total", "0 MiB"),
            _leaf("used", "Used", "0 MiB"),
            _leaf("free", "Free", "0 MiB"),
        ]),
        _leaf("compute_mode", "Compute Mode", g.compute_mode),
        _grp("utilization", "Utilization", [
            _leaf("gpu_util", "Gpu", f"{g.utilization_gpu} %"),
            _leaf("memory_util", "Memory", f"{g.utilization_memory} %"),
            _leaf("encoder_util", "Encoder", "0 %"),
            _leaf("decoder_util", "Decoder", "0 %"),
            _leaf("jpeg_util", "JPEG", "0 %"),
            _leaf("ofa_util", "OFA", "0 %"),
        ]),
        _grp("encoder_stats", "Encoder Stats", [
            _leaf("session_count", "Active Sessions", 0),
            _leaf("average_fps", "Average FPS", 0),
            _leaf("average_latency", "Average Latency", 0),
        ]),
        _grp("fbc_stats", "FBC Stats", [
            _leaf("session_count", "Active Sessions", 0),
            _leaf("average_fps", "Average FPS", 0),
            _leaf("average_latency", "Average Latency", 0),
        ]),
        _grp("ecc_mode", "ECC Mode", [
            _leaf("current_ecc", "Current", g.ecc_mode_current),
            _leaf("pending_ecc", "Pending", g.ecc_mode_pending),
        ]),
        _grp("ecc_errors", "ECC Errors", [
            _grp("volatile", "Volatile", _ecc_counts(g, "volatile")),
            _grp("aggregate", "Aggregate", _ecc_counts(g, "aggregate")),
            _grp("aggregate_uncorrectable_sram_sources", "Aggregate Uncorrectable SRAM Sources", [
                _leaf("sram_l2", "SRAM L2", 0),
                _leaf("sram_sm", "SRAM SM", 0),
                _leaf("sram_microcontroller", "SRAM Microcontroller", 0),
                _leaf("sram_pcie", "SRAM PCIE", 0),
                _leaf("sram_other", "SRAM Other", 0),
            ]),
        ]),
        _grp("retired_pages", "Retired Pages", [
            _grp("multiple_single_bit_retirement", "Single Bit ECC", [
                _leaf("retired_count", "Retired Count", g.retired_pages_single_bit),
                _leaf("retired_pagelist", "Retired Pagelist", na),
            ], text_leaf=g.retired_pages_single_bit),
            _grp("double_bit_retirement", "Double Bit ECC", [
                _leaf("retired_count", "Retired Count", g.retired_pages_double_bit),
                _leaf("retired_pagelist", "Retired Pagelist", na),
            ], text_leaf=g.retired_pages_double_bit),
            _leaf("pending_blacklist", "Pending Page Blacklist", g.retired_pages_pending),
            _leaf("pending_retirement", "Pending Page Retirement", g.retired_pages_pending,
                  xml_only=True),
        ]),
        _grp("remapped_rows", "Remapped Rows", [
            _leaf("remapped_row_corr", "Correctable Error", g.remapped_rows_correctable),
            _leaf("remapped_row_unc", "Uncorrectable Error", g.remapped_rows_uncorrectable),
            _leaf("remapped_row_pending", "Pending", _yn(g.remapped_rows_pending)),
            _leaf("remapped_row_failure", "Remapping Failure Occurred",
                  _yn(g.remapped_rows_failure)),
            _grp("row_remapper_histogram", "Bank Remap Availability Histogram", [
                _leaf("row_remapper_histogram_max", "Max", f"{g.remap_histogram_max} bank(s)"),
                _leaf("row_remapper_histogram_high", "High", f"{g.remap_histogram_high} bank(s)"),
                _leaf("row_remapper_histogram_partial", "Partial",
                      f"{g.remap_histogram_partial} bank(s)"),
                _leaf("row_remapper_histogram_low", "Low", f"{g.remap_histogram_low} bank(s)"),
                _leaf("row_remapper_histogram_none", "None", f"{g.remap_histogram_none} bank(s)"),
            ]),
        ]),
        _grp("temperature", "Temperature", [
            _leaf("gpu_temp", "GPU Current Temp", f"{g.temperature_gpu} C"),
            _leaf("gpu_temp_tlimit", "GPU T.Limit Temp", f"{g.temperature_tlimit} C"),
            _leaf("gpu_temp_max_tlimit_threshold", "GPU Shutdown T.Limit Temp", "-8 C"),
            _leaf("gpu_temp_slow_tlimit_threshold", "GPU Slowdown T.Limit Temp", "-2 C"),
            _leaf("gpu_temp_max_gpu_tlimit_threshold", "GPU Max Operating T.Limit Temp", "0 C"),
            _leaf("gpu_target_temperature", "GPU Target Temperature", na),
            _leaf("memory_temp", "Memory Current Temp", f"{g.temperature_memory} C"),
            _leaf("gpu_temp_max_mem_tlimit_threshold", "Memory Max Operating T.Limit Temp",
                  "0 C"),
        ]),
        _grp("supported_gpu_target_temp", "Supported GPU Target Temp", [
            _leaf("gpu_target_temp_min", "GPU Target Temp Min", na),
            _leaf("gpu_target_temp_max", "GPU Target Temp Max", na),
        ], xml_only=True),
        _grp("gpu_power_readings", "GPU Power Readings", [
            _leaf("power_state", "Power State", g.performance_state, xml_only=True),
            _leaf("power_draw", "Power Draw", _w(g.power_draw_w)),
            _leaf("current_power_limit", "Current Power Limit", _w(g.power_limit_w)),
            _leaf("requested_power_limit", "Requested Power Limit", _w(g.power_limit_w)),
            _leaf("default_power_limit", "Default Power Limit", _w(g.power_default_limit_w)),
            _leaf("min_power_limit", "Min Power Limit", _w(g.power_min_limit_w)),
            _leaf("max_power_limit", "Max Power Limit", _w(g.power_max_limit_w)),
        ]),
        # The trailing space in the -q label is what the real tool prints.
        _grp("gpu_memory_power_readings", "GPU Memory Power Readings ", [
            _leaf("power_draw", "Power Draw", _w(g.memory_power_draw_w)),
        ]),
        _grp("module_power_readings", "Module Power Readings", [
            _leaf("power_state", "Power State", g.performance_state, xml_only=True),
            _leaf("power_draw", "Power Draw", na),
            _leaf("current_power_limit", "Current Power Limit", na),
            _leaf("requested_power_limit", "Requested Power Limit", na),
            _leaf("default_power_limit", "Default Power Limit", na),
            _leaf("min_power_limit", "Min Power Limit", na),
            _leaf("max_power_limit", "Max Power Limit", na),
        ]),
        _grp("clocks", "Clocks", [
            _leaf("graphics_clock", "Graphics", f"{g.clocks_graphics_mhz} MHz"),
            _leaf("sm_clock", "SM", f"{g.clocks_sm_mhz} MHz"),
            _leaf("mem_clock", "Memory", f"{g.clocks_mem_mhz} MHz"),
            _leaf("video_clock", "Video", f"{g.clocks_video_mhz} MHz"),
        ]),
        _grp("applications_clocks", "Applications Clocks", [
            _leaf("graphics_clock", "Graphics", f"{g.clocks_app_graphics_mhz} MHz"),
            _leaf("mem_clock", "Memory", f"{g.clocks_app_mem_mhz} MHz"),
        ]),
        _grp("default_applications_clocks", "Default Applications Clocks", [
            _leaf("graphics_clock", "Graphics", f"{g.clocks_app_graphics_mhz} MHz"),
            _leaf("mem_clock", "Memory", f"{g.clocks_app_mem_mhz} MHz"),
        ]),
        _grp("deferred_clocks", "Deferred Clocks", [_leaf("mem_clock", "Memory", na)]),
        _grp("max_clocks", "Max Clocks", [
            _leaf("graphics_clock", "Graphics", f"{g.clocks_max_graphics_mhz} MHz"),
            _leaf("sm_clock", "SM", f"{g.clocks_max_sm_mhz} MHz"),
            _leaf("mem_clock", "Memory", f"{g.clocks_max_mem_mhz} MHz"),
            _leaf("video_clock", "Video", f"{g.clocks_max_video_mhz} MHz"),
        ]),
        _grp("max_customer_boost_clocks", "Max Customer Boost Clocks", [
            _leaf("graphics_clock", "Graphics", f"{g.clocks_max_graphics_mhz} MHz"),
        ]),
        _grp("clock_policy", "Clock Policy", [
            _leaf("auto_boost", "Auto Boost", na),
            _leaf("auto_boost_default", "Auto Boost Default", na),
        ]),
        _grp("voltage", "Voltage", [_leaf("graphics_volt", "Graphics", f"{g.voltage_mv:.3f} mV")]),
        _grp("fabric", "Fabric", [
            *(_leaf(tag, label, val) for tag, label, val in fabric),
            _grp("health", "Health", [_leaf("bandwidth", "Bandwidth", na)]),
        ]),
        _grp("supported_clocks", "Supported Clocks", [
            _grp("supported_mem_clock", "Memory", supported),
        ], xml_only=True),
        _grp("processes", "Processes", [], text_leaf="None"),
        _grp("accounted_processes", "Accounted Processes", [], xml_only=True),
    ]


def _xml_node(node: _Node, depth: int, out: list[str]) -> None:
    ind = "\t" * depth
    if node.children is None:
        out.append(f"{ind}<{node.tag}>{escape(node.value or '')}</{node.tag}>")
        return
    out.append(f"{ind}<{node.tag}>")
    if node.xml_block is not None:
        out.append(f"{ind}\t{node.xml_block}")
    for child in node.children:
        _xml_node(child, depth + 1, out)
    out.append(f"{ind}</{node.tag}>")


def _kv(left: str, value: str) -> str:
    return (left.ljust(42) if len(left) < 42 else left + " ") + ": " + value


def _text_node(node: _Node, indent: int, out: list[str]) -> None:
    if node.xml_only:
        return
    ind = " " * (indent + node.extra_indent)
    if node.children is None:
        value = node.value or ""
        if isinstance(node, _PciLeaf):
            value = "0x" + value
        out.append(_kv(ind + node.label, value))
    elif node.text_leaf is not None:
        out.append(_kv(ind + node.label, node.text_leaf))
    else:
        out.append(ind + node.label)
        for child in node.children:
            _text_node(child, indent + 4, out)


def _select_gpus(p: Profile, ids: str | None) -> list[GPU]:
    if not ids:
        return list(p.gpus)
    wanted = [i.strip() for i in ids.split(",") if i.strip()]
    chosen: list[GPU] = []
    for w in wanted:
        for g in p.gpus:
            bus_short = g.pci_bus_id[4:]
            if w in (str(g.index), g.uuid, g.serial) or w.upper() in (
                g.pci_bus_id.upper(), bus_short.upper()
            ):
                if g not in chosen:
                    chosen.append(g)
                break
        else:
            raise LookupError(w)
    return chosen


def nvidia_smi_xml(p: Profile, gpus: list[GPU] | None = None) -> str:
    """``nvidia-smi -q -x``."""
    out = [
        '<?xml version="1.0" ?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
        "<nvidia_smi_log>",
        f"\t<timestamp>{time.asctime()}</timestamp>",
        f"\t<driver_version>{escape(p.driver_version or '')}</driver_version>",
        f"\t<cuda_version>{escape(p.cuda_version or '')}</cuda_version>",
        f"\t<attached_gpus>{len(p.gpus)}</attached_gpus>",
    ]
    for g in p.gpus if gpus is None else gpus:
        out.append(f"\t<gpu id={quoteattr(g.pci_bus_id)}>")
        for node in _gpu_tree(p, g):
            _xml_node(node, 2, out)
        out.append("\t</gpu>")
        out.append("")
    out.append("</nvidia_smi_log>")
    return "\n".join(out) + "\n"


def nvidia_smi_q(p: Profile, gpus: list[GPU] | None = None) -> str:
    """``nvidia-smi -q`` (plain text)."""
    out = [
        "",
        "==============NVSMI LOG==============",
        "",
        _kv("Timestamp", time.asctime()),
        _kv("Driver Version", p.driver_version or ""),
        _kv("CUDA Version", p.cuda_version or ""),
        "",
        _kv("Attached GPUs", str(len(p.gpus))),
    ]
    for g in p.gpus if gpus is None else gpus:
        out.append(f"GPU {g.pci_bus_id}")
        for node in _gpu_tree(p, g):
            _text_node(node, 4, out)
        out.append("")
    return "\n".join(out) + "\n"


def nvidia_smi_list(p: Profile) -> str:
    """``nvidia-smi -L``."""
    return "".join(f"GPU {g.index}: {g.product_name} (UUID: {g.uuid})\n" for g in p.gpus)


def _volatile_uncorrected(g: GPU) -> int:
    return (g.ecc_volatile_sram_uncorrectable_parity + g.ecc_volatile_sram_uncorrectable_secded
            + g.ecc_volatile_dram_uncorrectable)


def _aggregate_uncorrected(g: GPU) -> int:
    return (g.ecc_aggregate_sram_uncorrectable_parity
            + g.ecc_aggregate_sram_uncorrectable_secded + g.ecc_aggregate_dram_uncorrectable)


def nvidia_smi_summary(p: Profile) -> str:
    """``nvidia-smi`` without arguments (the R550 summary table)."""
    bar = "+" + "-" * 89 + "+"
    sep = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    ver = (f"| NVIDIA-SMI {p.driver_version or '':<22} Driver Version: {p.driver_version or '':<14}"
           f" CUDA Version: {p.cuda_version or '':<8} |")
    out = [
        time.asctime() + "       ",
        bar,
        ver,
        "|" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+",  # sic: the real tool's
        "| GPU  Name                 Persistence-M |"
        " Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |"
        "           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |"
        "                        |               MIG M. |",
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]
    for g in p.gpus:
        pm = "On" if g.persistence_mode == "Enabled" else "Off"
        disp = "On" if g.display_active == "Enabled" else "Off"
        ecc = str(_volatile_uncorrected(g)) if g.ecc_mode_current == "Enabled" else "N/A"
        name = g.product_name if len(g.product_name) <= 30 else g.product_name[:27] + "..."
        out.append(f"|{g.index:>4}  {name:<30}{pm:>3}  |   {g.pci_bus_id} {disp:>3} |{ecc:>21} |")
        pwr = f"{int(g.power_draw_w)}W"
        cap = f"{int(g.power_limit_w)}W"
        mem = f"{g.fb_memory_used_mib}MiB"
        total = f"{g.fb_memory_total_mib}MiB"
        util = f"{g.utilization_gpu}%"
        out.append(
            f"| N/A  {g.temperature_gpu:>3}C    {g.performance_state:<2}{pwr:>16} / {cap:>5} |"
            f"{mem:>11} / {total:>9} |{util:>8}{g.compute_mode:>13} |"
        )
        out.append(f"|{'':41}|{'':24}|{g.mig_mode_current:>21} |")
        out.append(sep)
    out += [
        " " * 89,
        bar,
        "| Processes:" + " " * 78 + "|",
        "|  GPU   GI   CI        PID   Type   Process name"
        "                              GPU Memory |",
        "|        ID   ID                                  "
        "                             Usage      |",
        "|" + "=" * 89 + "|",
        "|  No running processes found" + " " * 61 + "|",
        bar,
    ]
    return "\n".join(out) + "\n"


def nvidia_smi_version(p: Profile) -> str:
    driver = p.driver_version or ""
    nvml = ".".join(driver.split(".")[:2])
    return (f"NVIDIA-SMI version  : {driver}\nNVML version        : {nvml}\n"
            f"DRIVER version      : {driver}\nCUDA Version        : {p.cuda_version or ''}\n")


# --------------------------------------------------------------------------- --query-gpu

_NA = "[N/A]"


def _q_fields() -> dict[str, tuple[str | None, Callable[[Profile, GPU], str]]]:
    def na(_p: Profile, _g: GPU) -> str:
        return _NA

    def ecc(fn: Callable[[GPU], int]) -> Callable[[Profile, GPU], str]:
        return lambda _p, g: str(fn(g)) if g.ecc_mode_current == "Enabled" else _NA

    f: dict[str, tuple[str | None, Callable[[Profile, GPU], str]]] = {
        "timestamp": (None, lambda _p, _g: time.strftime("%Y/%m/%d %H:%M:%S")
                      + f".{int(time.time() * 1000) % 1000:03d}"),
        "driver_version": (None, lambda p, _g: p.driver_version or _NA),
        "count": (None, lambda p, _g: str(len(p.gpus))),
        "name": (None, lambda _p, g: g.product_name),
        "serial": (None, lambda _p, g: g.serial),
        "uuid": (None, lambda _p, g: g.uuid),
        "pci.bus_id": (None, lambda _p, g: g.pci_bus_id),
        "pci.domain": (None, lambda _p, g: "0x" + g.pci_bus_id.split(":")[0][-4:]),
        "pci.bus": (None, lambda _p, g: f"0x{g.bus:02X}"),
        "pci.device": (None, lambda _p, g: "0x" + g.pci_bus_id.split(":")[2].split(".")[0]),
        "pci.baseClass": (None, lambda _p, _g: "0x3"),
        "pci.subClass": (None, lambda _p, _g: "0x2"),
        "pci.device_id": (None, lambda _p, g: "0x" + g.pci_device_id),
        "pci.sub_device_id": (None, lambda _p, g: "0x" + g.pci_sub_system_id),
        "pcie.link.gen.current": (None, lambda _p, g: str(g.pcie_gen_current)),
        "pcie.link.gen.gpucurrent": (None, lambda _p, g: str(g.pcie_gen_current)),
        "pcie.link.gen.max": (None, lambda _p, g: str(g.pcie_gen_max)),
        "pcie.link.gen.gpumax": (None, lambda _p, g: str(g.pcie_gen_max)),
        "pcie.link.gen.hostmax": (None, lambda _p, g: str(g.pcie_gen_host_max)),
        "pcie.link.width.current": (None, lambda _p, g: str(g.pcie_link_width_current)),
        "pcie.link.width.max": (None, lambda _p, g: str(g.pcie_link_width_max)),
        "index": (None, lambda _p, g: str(g.index)),
        "display_mode": (None, lambda _p, g: g.display_mode),
        "display_active": (None, lambda _p, g: g.display_active),
        "persistence_mode": (None, lambda _p, g: g.persistence_mode),
        "addressing_mode": (None, lambda _p, g: g.addressing_mode),
        "accounting.mode": (None, lambda _p, _g: "Disabled"),
        "accounting.buffer_size": (None, lambda _p, _g: "4000"),
        "driver_model.current": (None, na),
        "driver_model.pending": (None, na),
        "vbios_version": (None, lambda _p, g: g.vbios_version),
        "inforom.img": (None, lambda _p, g: g.inforom_image_version),
        "inforom.oem": (None, lambda _p, g: g.inforom_oem_object),
        "inforom.ecc": (None, lambda _p, g: g.inforom_ecc_object),
        "inforom.pwr": (None, na),
        "gom.current": (None, na),
        "gom.pending": (None, na),
        "fan.speed": ("%", na),
        "pstate": (None, lambda _p, g: g.performance_state),
        "clocks_event_reasons.supported": (None, lambda _p, _g: "0x00000000000001FF"),
        "clocks_event_reasons.active": (None, lambda _p, _g: "0x0000000000000001"),
        "memory.total": ("MiB", lambda _p, g: f"{g.fb_memory_total_mib} MiB"),
        "memory.reserved": ("MiB", lambda _p, g: f"{g.fb_memory_reserved_mib} MiB"),
        "memory.used": ("MiB", lambda _p, g: f"{g.fb_memory_used_mib} MiB"),
        "memory.free": ("MiB", lambda _p, g: f"{_fb_free(g)} MiB"),
        "compute_mode": (None, lambda _p, g: g.compute_mode),
        "compute_cap": (None, lambda _p, g: g.compute_cap),
        "utilization.gpu": ("%", lambda _p, g: f"{g.utilization_gpu} %"),
        "utilization.memory": ("%", lambda _p, g: f"{g.utilization_memory} %"),
        "utilization.encoder": ("%", lambda _p, _g: "0 %"),
        "utilization.decoder": ("%", lambda _p, _g: "0 %"),
        "utilization.jpeg": ("%", lambda _p, _g: "0 %"),
        "utilization.ofa": ("%", lambda _p, _g: "0 %"),
        "ecc.mode.current": (None, lambda _p, g: g.ecc_mode_current),
        "ecc.mode.pending": (None, lambda _p, g: g.ecc_mode_pending),
        "ecc.errors.corrected.volatile.device_memory": (
            None, ecc(lambda g: g.ecc_volatile_dram_correctable)),
        "ecc.errors.corrected.volatile.dram": (
            None, ecc(lambda g: g.ecc_volatile_dram_correctable)),
        "ecc.errors.corrected.volatile.sram": (
            None, ecc(lambda g: g.ecc_volatile_sram_correctable)),
        "ecc.errors.corrected.volatile.total": (None, ecc(
            lambda g: g.ecc_volatile_dram_correctable + g.ecc_volatile_sram_correctable)),
        "ecc.errors.corrected.aggregate.device_memory": (
            None, ecc(lambda g: g.ecc_aggregate_dram_correctable)),
        "ecc.errors.corrected.aggregate.dram": (
            None, ecc(lambda g: g.ecc_aggregate_dram_correctable)),
        "ecc.errors.corrected.aggregate.sram": (
            None, ecc(lambda g: g.ecc_aggregate_sram_correctable)),
        "ecc.errors.corrected.aggregate.total": (None, ecc(
            lambda g: g.ecc_aggregate_dram_correctable + g.ecc_aggregate_sram_correctable)),
        "ecc.errors.uncorrected.volatile.device_memory": (
            None, ecc(lambda g: g.ecc_volatile_dram_uncorrectable)),
        "ecc.errors.uncorrected.volatile.dram": (
            None, ecc(lambda g: g.ecc_volatile_dram_uncorrectable)),
        "ecc.errors.uncorrected.volatile.sram": (None, ecc(
            lambda g: g.ecc_volatile_sram_uncorrectable_parity
            + g.ecc_volatile_sram_uncorrectable_secded)),
        "ecc.errors.uncorrected.volatile.total": (None, ecc(_volatile_uncorrected)),
        "ecc.errors.uncorrected.aggregate.device_memory": (
            None, ecc(lambda g: g.ecc_aggregate_dram_uncorrectable)),
        "ecc.errors.uncorrected.aggregate.dram": (
            None, ecc(lambda g: g.ecc_aggregate_dram_uncorrectable)),
        "ecc.errors.uncorrected.aggregate.sram": (None, ecc(
            lambda g: g.ecc_aggregate_sram_uncorrectable_parity
            + g.ecc_aggregate_sram_uncorrectable_secded)),
        "ecc.errors.uncorrected.aggregate.total": (None, ecc(_aggregate_uncorrected)),
        "retired_pages.single_bit_ecc.count": (None, na),
        "retired_pages.double_bit.count": (None, na),
        "retired_pages.pending": (None, na),
        "remapped_rows.correctable": (None, lambda _p, g: str(g.remapped_rows_correctable)),
        "remapped_rows.uncorrectable": (None, lambda _p, g: str(g.remapped_rows_uncorrectable)),
        "remapped_rows.pending": (None, lambda _p, g: _yn(g.remapped_rows_pending)),
        "remapped_rows.failure": (None, lambda _p, g: _yn(g.remapped_rows_failure)),
        "remapped_rows.histogram.max": (None, lambda _p, g: str(g.remap_histogram_max)),
        "remapped_rows.histogram.high": (None, lambda _p, g: str(g.remap_histogram_high)),
        "remapped_rows.histogram.partial": (None, lambda _p, g: str(g.remap_histogram_partial)),
        "remapped_rows.histogram.low": (None, lambda _p, g: str(g.remap_histogram_low)),
        "remapped_rows.histogram.none": (None, lambda _p, g: str(g.remap_histogram_none)),
        "temperature.gpu": (None, lambda _p, g: str(g.temperature_gpu)),
        "temperature.memory": (None, lambda _p, g: str(g.temperature_memory)),
        "power.management": (None, lambda _p, _g: "Enabled"),
        "power.draw": ("W", lambda _p, g: _w(g.power_draw_w)),
        "power.limit": ("W", lambda _p, g: _w(g.power_limit_w)),
        "enforced.power.limit": ("W", lambda _p, g: _w(g.power_limit_w)),
        "power.default_limit": ("W", lambda _p, g: _w(g.power_default_limit_w)),
        "power.min_limit": ("W", lambda _p, g: _w(g.power_min_limit_w)),
        "power.max_limit": ("W", lambda _p, g: _w(g.power_max_limit_w)),
        "clocks.current.graphics": ("MHz", lambda _p, g: f"{g.clocks_graphics_mhz} MHz"),
        "clocks.current.sm": ("MHz", lambda _p, g: f"{g.clocks_sm_mhz} MHz"),
        "clocks.current.memory": ("MHz", lambda _p, g: f"{g.clocks_mem_mhz} MHz"),
        "clocks.current.video": ("MHz", lambda _p, g: f"{g.clocks_video_mhz} MHz"),
        "clocks.applications.graphics": ("MHz", lambda _p, g: f"{g.clocks_app_graphics_mhz} MHz"),
        "clocks.applications.memory": ("MHz", lambda _p, g: f"{g.clocks_app_mem_mhz} MHz"),
        "clocks.default_applications.graphics": (
            "MHz", lambda _p, g: f"{g.clocks_app_graphics_mhz} MHz"),
        "clocks.default_applications.memory": ("MHz", lambda _p, g: f"{g.clocks_app_mem_mhz} MHz"),
        "clocks.max.graphics": ("MHz", lambda _p, g: f"{g.clocks_max_graphics_mhz} MHz"),
        "clocks.max.sm": ("MHz", lambda _p, g: f"{g.clocks_max_sm_mhz} MHz"),
        "clocks.max.memory": ("MHz", lambda _p, g: f"{g.clocks_max_mem_mhz} MHz"),
        "mig.mode.current": (None, lambda _p, g: g.mig_mode_current),
        "mig.mode.pending": (None, lambda _p, g: g.mig_mode_pending),
        "fabric.state": (None, lambda p, _g: "Completed" if p.nvswitch else _NA),
        "fabric.status": (None, lambda p, _g: "Success" if p.nvswitch else _NA),
    }
    return f


QUERY_GPU_FIELDS = _q_fields()

# Alternative spellings accepted by --query-gpu; the header shows the canonical name.
QUERY_GPU_ALIASES = {
    "gpu_name": "name",
    "gpu_serial": "serial",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "vbios": "vbios_version",
    "clocks.gr": "clocks.current.graphics",
    "clocks.sm": "clocks.current.sm",
    "clocks.mem": "clocks.current.memory",
    "clocks.video": "clocks.current.video",
    "clocks.applications.gr": "clocks.applications.graphics",
    "clocks.applications.mem": "clocks.applications.memory",
    "clocks.default_applications.gr": "clocks.default_applications.graphics",
    "clocks.default_applications.mem": "clocks.default_applications.memory",
    "clocks.max.gr": "clocks.max.graphics",
    "clocks.max.mem": "clocks.max.memory",
    "power.draw.instant": "power.draw",
}


class InvalidQueryField(ValueError):
    """An unknown --query-gpu field; ``str()`` is the real nvidia-smi message."""

    def __init__(self, name: str) -> None:
        super().__init__(f'Field "{name}" is not a valid field to query.')
        self.field = name


def nvidia_smi_query(
    p: Profile,
    fields: list[str],
    noheader: bool = False,
    nounits: bool = False,
    gpus: list[GPU] | None = None,
) -> str:
    """``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``."""
    resolved: list[str] = []
    for raw in fields:
        name = raw.strip()
        canonical = QUERY_GPU_ALIASES.get(name, name)
        if canonical not in QUERY_GPU_FIELDS:
            raise InvalidQueryField(name)
        resolved.append(canonical)
    lines: list[str] = []
    if not noheader:
        lines.append(", ".join(
            f"{name} [{QUERY_GPU_FIELDS[name][0]}]" if QUERY_GPU_FIELDS[name][0] else name
            for name in resolved
        ))
    for g in p.gpus if gpus is None else gpus:
        values = []
        for name in resolved:
            unit, getter = QUERY_GPU_FIELDS[name]
            value = getter(p, g)
            if nounits and unit and value.endswith(" " + unit):
                value = value[: -len(unit) - 1]
            values.append(value)
        lines.append(", ".join(values))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- InfiniBand

_IB_STATE = {"Down": 1, "Initializing": 2, "Armed": 3, "Active": 4}
_IB_STATE_SYSFS = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE"}
_IBV_STATE = {1: "PORT_DOWN", 2: "PORT_INIT", 3: "PORT_ARMED", 4: "PORT_ACTIVE"}
_IB_PHYS = {"Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4,
            "LinkUp": 5, "LinkErrorRecovery": 6, "Phy Test": 7}
_IB_RATE_NAME = {10: "4X SDR", 20: "4X DDR", 40: "4X QDR", 56: "4X FDR", 100: "4X EDR",
                 200: "4X HDR", 400: "4X NDR", 800: "4X XDR"}
_MTU_ENUM = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}


def _ca_block(h: HCAPort) -> list[str]:
    return [
        f"CA '{h.ca}'",
        f"\tCA type: {h.ca_type}",
        "\tNumber of ports: 1",
        f"\tFirmware version: {h.fw_ver}",
        f"\tHardware version: {h.hw_ver}",
        f"\tNode GUID: {h.node_guid}",
        f"\tSystem image GUID: {h.sys_image_guid}",
    ]


def _port_block(h: HCAPort, alone: bool) -> list[str]:
    hdr, pre = ("", "") if alone else ("\t", "\t\t")
    return [
        f"{hdr}Port {h.port}:",
        f"{pre}State: {h.state}",
        f"{pre}Physical state: {h.phys_state}",
        f"{pre}Rate: {h.rate}",
        f"{pre}Base lid: {h.base_lid}",
        f"{pre}LMC: {h.lmc}",
        f"{pre}SM lid: {h.sm_lid}",
        f"{pre}Capability mask: {h.capability_mask}",
        f"{pre}Port GUID: {h.port_guid}",
        f"{pre}Link layer: {h.link_layer}",
    ]


def _sorted_hcas(p: Profile) -> list[HCAPort]:
    return sorted(p.hcas, key=lambda h: h.ca)  # ibstat lists CAs in name order


def ibstat(p: Profile, ca: str | None = None, port: int | None = None) -> str:
    """``ibstat`` / ``ibstat CA`` / ``ibstat CA PORT``; unknown CA -> LookupError."""
    if ca is None:
        lines: list[str] = []
        for h in _sorted_hcas(p):
            lines += _ca_block(h) + _port_block(h, alone=False)
        return "\n".join(lines) + "\n"
    h = _hca(p, ca)
    if h is None or (port is not None and port != h.port):
        raise LookupError(ca)
    if port is not None:
        return "\n".join(_port_block(h, alone=True)) + "\n"
    return "\n".join(_ca_block(h) + _port_block(h, alone=False)) + "\n"


def _guid_colon(guid: str) -> str:
    h = guid[2:] if guid.startswith("0x") else guid
    h = h.zfill(16)
    return ":".join(h[i : i + 4] for i in range(0, 16, 4))


def ibv_devinfo(p: Profile, device: str | None = None) -> str:
    """``ibv_devinfo`` / ``ibv_devinfo -d DEV``; unknown device -> LookupError."""
    hcas = _sorted_hcas(p)
    if device is not None:
        hcas = [h for h in hcas if h.ca == device]
        if not hcas:
            raise LookupError(device)
    lines: list[str] = []
    for h in hcas:
        state = _IB_STATE.get(h.state, 1)
        lines += [
            f"hca_id:\t{h.ca}",
            "\ttransport:\t\t\tInfiniBand (0)",
            f"\tfw_ver:\t\t\t\t{h.fw_ver}",
            f"\tnode_guid:\t\t\t{_guid_colon(h.node_guid)}",
            f"\tsys_image_guid:\t\t\t{_guid_colon(h.sys_image_guid)}",
            f"\tvendor_id:\t\t\t{h.vendor_id}",
            f"\tvendor_part_id:\t\t\t{h.vendor_part_id}",
            f"\thw_ver:\t\t\t\t0x{int(h.hw_ver, 0):X}",
            f"\tboard_id:\t\t\t{h.board_id}",
            "\tphys_port_cnt:\t\t\t1",
            f"\t\tport:\t{h.port}",
            f"\t\t\tstate:\t\t\t{_IBV_STATE[state]} ({state})",
            f"\t\t\tmax_mtu:\t\t{h.max_mtu} ({_MTU_ENUM[h.max_mtu]})",
            f"\t\t\tactive_mtu:\t\t{h.active_mtu} ({_MTU_ENUM[h.active_mtu]})",
            f"\t\t\tsm_lid:\t\t\t{h.sm_lid}",
            f"\t\t\tport_lid:\t\t{h.base_lid}",
            f"\t\t\tport_lmc:\t\t0x{h.lmc:02x}",
            f"\t\t\tlink_layer:\t\t{h.link_layer}",
            "",
        ]
    return "\n".join(lines) + "\n"


def _ib_rate_sysfs(rate: int) -> str:
    name = _IB_RATE_NAME.get(rate)
    return f"{rate} Gb/sec ({name})" if name else f"{rate} Gb/sec"


# --------------------------------------------------------------------------- DMI

DMIDECODE_VERSION = "3.4"
_DMI_TYPE_KEYWORDS = {
    "bios": (0, 13), "system": (1, 12, 15, 23, 32), "baseboard": (2, 10, 41),
    "chassis": (3,), "processor": (4,), "memory": (5, 6, 16, 17), "cache": (7,),
    "connector": (8,), "slot": (9,),
}
_DMI_STRING_KEYWORDS = (
    "bios-vendor", "bios-version", "bios-release-date", "bios-revision", "firmware-revision",
    "system-manufacturer", "system-product-name", "system-version", "system-serial-number",
    "system-uuid", "system-sku-number", "system-family", "baseboard-manufacturer",
    "baseboard-product-name", "baseboard-version", "baseboard-serial-number",
    "baseboard-asset-tag", "chassis-manufacturer", "chassis-type", "chassis-version",
    "chassis-serial-number", "chassis-asset-tag", "processor-family", "processor-manufacturer",
    "processor-version", "processor-frequency",
)

_SEL_DESCRIPTORS = (
    ("Single-bit ECC memory error", "Multiple-event handle"),
    ("Multi-bit ECC memory error", "Multiple-event handle"),
    ("Parity memory error", "None"), ("Bus timeout", "None"), ("I/O channel block", "None"),
    ("Software NMI", "None"), ("POST memory resize", "None"),
    ("POST error", "POST results bitmap"), ("PCI parity error", "Multiple-event handle"),
    ("PCI system error", "Multiple-event handle"), ("CPU failure", "None"),
    ("EISA failsafe timer timeout", "None"), ("Correctable memory log disabled", "None"),
    ("Logging disabled", "None"), ("System limit exceeded", "None"),
    ("Asynchronous hardware timer expired", "None"),
    ("System configuration information", "None"), ("Hard disk information", "None"),
    ("System reconfigured", "None"), ("Uncorrectable CPU-complex error", "None"),
    ("Log area reset/cleared", "None"), ("System boot", "None"), ("End of log", "None"),
    ("OEM-specific", "OEM-specific"), ("OEM-specific", "OEM-specific"),
)


def _dmi_records(p: Profile) -> dict[int, list[str]]:
    s = p.system
    sel = [
        "Handle 0x0044, DMI type 15, 73 bytes",
        "System Event Log",
        "\tArea Length: 65535 bytes",
        "\tHeader Start Offset: 0x0000",
        "\tHeader Length: 16 bytes",
        "\tData Start Offset: 0x0010",
        "\tAccess Method: Memory-mapped physical 32-bit address",
        "\tAccess Address: 0xFF540000",
        "\tStatus: Valid, Not Full",
        "\tChange Token: 0x00000001",
        "\tHeader Format: Type 1",
        f"\tSupported Log Type Descriptors: {len(_SEL_DESCRIPTORS)}",
    ]
    for i, (desc, fmt) in enumerate(_SEL_DESCRIPTORS, 1):
        sel += [f"\tDescriptor {i}: {desc}", f"\tData Format {i}: {fmt}"]
    return {
        0: [
            "Handle 0x0000, DMI type 0, 26 bytes",
            "BIOS Information",
            f"\tVendor: {s.bios_vendor}",
            f"\tVersion: {s.bios_version}",
            f"\tRelease Date: {s.bios_date}",
            "\tAddress: 0xF0000",
            "\tRuntime Size: 64 kB",
            "\tROM Size: 64 MB",
            "\tCharacteristics:",
            "\t\tPCI is supported",
            "\t\tBIOS is upgradeable",
            "\t\tBIOS shadowing is allowed",
            "\t\tBoot from CD is supported",
            "\t\tSelectable boot is supported",
            "\t\tBIOS ROM is socketed",
            "\t\tEDD is supported",
            "\t\tACPI is supported",
            "\t\tUSB legacy is supported",
            "\t\tBIOS boot specification is supported",
            "\t\tTargeted content distribution is supported",
            "\t\tUEFI is supported",
            "\tBIOS Revision: 5.32",
        ],
        1: [
            "Handle 0x0001, DMI type 1, 27 bytes",
            "System Information",
            f"\tManufacturer: {s.vendor}",
            f"\tProduct Name: {s.product}",
            f"\tVersion: {s.version}",
            f"\tSerial Number: {s.serial}",
            f"\tUUID: {s.uuid}",
            "\tWake-up Type: Power Switch",
            f"\tSKU Number: {s.sku}",
            f"\tFamily: {s.family}",
        ],
        2: [
            "Handle 0x0002, DMI type 2, 15 bytes",
            "Base Board Information",
            f"\tManufacturer: {s.board_vendor}",
            f"\tProduct Name: {s.board_name}",
            f"\tVersion: {s.board_version}",
            f"\tSerial Number: {s.board_serial}",
            "\tAsset Tag: To be filled by O.E.M.",
            "\tFeatures:",
            "\t\tBoard is a hosting board",
            "\t\tBoard is replaceable",
            "\tLocation In Chassis: To be filled by O.E.M.",
            "\tChassis Handle: 0x0003",
            "\tType: Motherboard",
            "\tContained Object Handles: 0",
        ],
        32: ["Handle 0x0041, DMI type 32, 20 bytes", "System Boot Information",
             "\tStatus: No errors detected"],
        15: sel,
    }


def _dmi_header(full_dump: bool) -> list[str]:
    # dmidecode prints the table address only when dumping everything (no -t).
    table = ["Table at 0x6CC53000."] if full_dump else []
    return [f"# dmidecode {DMIDECODE_VERSION}", "Getting SMBIOS data from sysfs.",
            "SMBIOS 3.3.0 present.", *table, ""]


def dmidecode(p: Profile, type_: str | int | None = None) -> str:
    """``dmidecode [-t TYPE[,TYPE...]]``; TYPE a keyword (``system``) or a number.

    Unknown keywords raise ValueError.
    """
    records = _dmi_records(p)
    wanted: set[int] = set()
    if type_ is None:
        wanted = set(records)
    elif isinstance(type_, int):
        wanted = {type_}
    else:
        for item in str(type_).split(","):
            item = item.strip()
            if item.isdigit():
                wanted.add(int(item))
            elif item in _DMI_TYPE_KEYWORDS:
                wanted.update(_DMI_TYPE_KEYWORDS[item])
            else:
                raise ValueError(item)
    out = _dmi_header(full_dump=type_ is None)
    # Records come out in table (handle) order, as dmidecode walks the table.
    for t in sorted((t for t in wanted if t in records), key=lambda t: records[t][0]):
        out += [*records[t], ""]
    return "\n".join(out) + "\n"


def dmidecode_string(p: Profile, keyword: str) -> str:
    """``dmidecode -s KEYWORD``. Bad keyword -> ValueError."""
    s = p.system
    values = {
        "bios-vendor": s.bios_vendor, "bios-version": s.bios_version,
        "bios-release-date": s.bios_date, "bios-revision": "5.32",
        "system-manufacturer": s.vendor, "system-product-name": s.product,
        "system-version": s.version, "system-serial-number": s.serial,
        "system-uuid": s.uuid, "system-sku-number": s.sku, "system-family": s.family,
        "baseboard-manufacturer": s.board_vendor, "baseboard-product-name": s.board_name,
        "baseboard-version": s.board_version, "baseboard-serial-number": s.board_serial,
        "baseboard-asset-tag": "To be filled by O.E.M.",
    }
    if keyword not in _DMI_STRING_KEYWORDS:
        raise ValueError(keyword)
    return values.get(keyword, "Not Specified") + "\n"


# --------------------------------------------------------------------------- dmesg / sysfs


def dmesg(p: Profile) -> str:
    """``dmesg``: the kernel ring buffer, one ``[%5d.%06d] message`` line each."""
    return "".join(line + "\n" for line in p.kernel_log)


def sysfs_tree(p: Profile) -> dict[str, str]:
    """Relative path under a sysfs root -> file content (real sysfs value formats)."""
    tree: dict[str, str] = {}
    for h in p.hcas:
        base = f"class/infiniband/{h.ca}"
        state = _IB_STATE.get(h.state, 1)
        phys = _IB_PHYS.get(h.phys_state, 3)
        port = f"{base}/ports/{h.port}"
        tree.update({
            f"{base}/fw_ver": h.fw_ver,
            f"{base}/node_guid": _guid_colon(h.node_guid),
            f"{base}/sys_image_guid": _guid_colon(h.sys_image_guid),
            f"{base}/hca_type": h.ca_type,
            f"{base}/board_id": h.board_id,
            f"{base}/hw_rev": f"0x{int(h.hw_ver, 0):x}",
            f"{base}/node_type": "1: CA",
            f"{port}/state": f"{state}: {_IB_STATE_SYSFS[state]}",
            f"{port}/phys_state": f"{phys}: {h.phys_state}",
            f"{port}/rate": _ib_rate_sysfs(h.rate),
            f"{port}/link_layer": h.link_layer,
            f"{port}/lid": f"0x{h.base_lid:x}",
            f"{port}/sm_lid": f"0x{h.sm_lid:x}",
            f"{port}/lid_mask_count": str(h.lmc),
            f"{port}/cap_mask": h.capability_mask,
            f"{port}/gids/0": "fe80:0000:0000:0000:" + _guid_colon(h.port_guid),
        })
    s = p.system
    dmi = "devices/virtual/dmi/id"
    tree.update({
        f"{dmi}/sys_vendor": s.vendor,
        f"{dmi}/product_name": s.product,
        f"{dmi}/product_version": s.version,
        f"{dmi}/product_serial": s.serial,
        f"{dmi}/product_uuid": s.uuid,
        f"{dmi}/product_sku": s.sku,
        f"{dmi}/product_family": s.family,
        f"{dmi}/bios_vendor": s.bios_vendor,
        f"{dmi}/bios_version": s.bios_version,
        f"{dmi}/bios_date": s.bios_date,
        f"{dmi}/board_vendor": s.board_vendor,
        f"{dmi}/board_name": s.board_name,
        f"{dmi}/board_version": s.board_version,
        f"{dmi}/board_serial": s.board_serial,
    })
    return {path: value + "\n" for path, value in tree.items()}


SYSFS_MANAGED_DIRS = ("class/infiniband", "devices/virtual/dmi/id")


def write_sysfs(p: Profile, root: str) -> list[str]:
    """Write :func:`sysfs_tree` under ``root``; stale files in the managed dirs go first."""
    for rel in SYSFS_MANAGED_DIRS:
        target = os.path.join(root, rel)
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        elif os.path.lexists(target):
            os.unlink(target)
    written = []
    for rel, content in sorted(sysfs_tree(p).items()):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(content)
        written.append(path)
    return written


# --------------------------------------------------------------------------- CLI


class _Exit(Exception):
    def __init__(self, code: int, stdout: str = "", stderr: str = "") -> None:
        super().__init__(code)
        self.code, self.stdout, self.stderr = code, stdout, stderr


def _opt_value(args: list[str], i: int) -> tuple[str, int]:
    """Value of ``--name=V`` / ``--name V`` / ``-n V`` at args[i]; returns (value, next i)."""
    arg = args[i]
    if "=" in arg and arg.startswith("--"):
        return arg.split("=", 1)[1], i + 1
    if i + 1 >= len(args):
        raise _Exit(2, NVSMI_BAD_ARGS)
    return args[i + 1], i + 2


NVSMI_BAD_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n"


def _cli_nvidia_smi(p: Profile, args: list[str]) -> str:
    # Without a driver package a real host has no nvidia-smi at all; this link stays in PATH,
    # so it answers as nvidia-smi does when no driver is loaded.
    if not p.driver_version:
        raise _Exit(9, NVIDIA_SMI_NO_DRIVER + "\n\n")
    query = xml = list_gpus = version = False
    query_gpu: str | None = None
    fmt: str | None = None
    ids: str | None = None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-q", "--query"):
            query, i = True, i + 1
        elif a in ("-x", "--xml-format"):
            xml, i = True, i + 1
        elif a in ("-L", "--list-gpus"):
            list_gpus, i = True, i + 1
        elif a == "--version":
            version, i = True, i + 1
        elif a == "--query-gpu" or a.startswith("--query-gpu="):
            query_gpu, i = _opt_value(args, i)
        elif a == "--format" or a.startswith("--format="):
            fmt, i = _opt_value(args, i)
        elif a in ("-i", "--id") or a.startswith("--id="):
            ids, i = _opt_value(args, i)
        else:
            raise _Exit(2, NVSMI_BAD_ARGS)
    try:
        gpus = _select_gpus(p, ids)
    except LookupError as exc:
        raise _Exit(6, f"No devices were found matching the id: {exc.args[0]}\n") from None
    if version:
        return nvidia_smi_version(p)
    if list_gpus and not (query or xml or query_gpu):
        return nvidia_smi_list(p)
    if query_gpu is not None:
        opts = [o.strip() for o in (fmt or "").split(",") if o.strip()]
        if "csv" not in opts or query or xml:
            raise _Exit(2, NVSMI_BAD_ARGS)
        try:
            return nvidia_smi_query(p, query_gpu.split(","), "noheader" in opts,
                                    "nounits" in opts, gpus)
        except InvalidQueryField as exc:
            raise _Exit(2, f"{exc}\n\n") from None
    if fmt is not None:
        raise _Exit(2, NVSMI_BAD_ARGS)
    if query:
        return nvidia_smi_xml(p, gpus) if xml else nvidia_smi_q(p, gpus)
    if xml:
        raise _Exit(2, NVSMI_BAD_ARGS)
    return nvidia_smi_summary(p)


def _cli_ibstat(p: Profile, args: list[str]) -> str:
    if args and args[0] in ("-l", "--list_of_cas"):
        return "".join(h.ca + "\n" for h in _sorted_hcas(p))
    if args and args[0] in ("-p", "--port_list"):
        return "".join(h.port_guid + "\n" for h in _sorted_hcas(p))
    if any(a.startswith("-") for a in args) or len(args) > 2:
        raise _Exit(255, "", "Usage: ibstat [-d(ebug) -l(ist_of_cas) -s(hort) -p(ort_list) "
                            "-V(ersion)] <ca_name> [portnum]\n")
    ca = args[0] if args else None
    port = int(args[1]) if len(args) > 1 and args[1].isdigit() else None
    try:
        return ibstat(p, ca, port)
    except LookupError:
        raise _Exit(255, "", f"ibpanic: [{os.getpid()}] main: stat of IB device '{ca}' failed: "
                             "No such file or directory\n") from None


def _cli_ibv_devinfo(p: Profile, args: list[str]) -> str:
    device: str | None = None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-l", "--list"):
            names = [h.ca for h in _sorted_hcas(p)]
            return f"{len(names)} HCAs found:\n" + "".join(f"\t{n}\n" for n in names)
        if a in ("-d", "--ib-dev") or a.startswith("--ib-dev="):
            if "=" in a:
                device, i = a.split("=", 1)[1], i + 1
            elif i + 1 < len(args):
                device, i = args[i + 1], i + 2
            else:
                raise _Exit(1, "", "ibv_devinfo: option requires an argument -- 'd'\n")
        else:
            raise _Exit(1, "", f"ibv_devinfo: unrecognized option '{a}'\n")
    try:
        return ibv_devinfo(p, device)
    except LookupError:
        raise _Exit(255, "", f"IB device '{device}' wasn't found\n") from None


def _dmi_usage_error(kind: str, bad: str, valid: list[str]) -> _Exit:
    return _Exit(2, "", f"Invalid {kind} keyword: {bad}\nValid {kind} keywords are:\n"
                        + "".join(f"  {v}\n" for v in valid))


def _cli_dmidecode(p: Profile, args: list[str]) -> str:
    if not args:
        return dmidecode(p)
    a = args[0]
    value = args[1] if len(args) > 1 else None
    if a.startswith("--type=") or a.startswith("--string="):
        a, value = a.split("=", 1)
    if a in ("-t", "--type"):
        if value is None:
            raise _Exit(2, "", "dmidecode: option requires an argument -- 't'\n")
        try:
            return dmidecode(p, value)
        except ValueError:
            raise _dmi_usage_error("type", value, list(_DMI_TYPE_KEYWORDS)) from None
    if a in ("-s", "--string"):
        if value is None:
            raise _Exit(2, "", "dmidecode: option requires an argument -- 's'\n")
        try:
            return dmidecode_string(p, value)
        except ValueError:
            raise _dmi_usage_error("string", value, list(_DMI_STRING_KEYWORDS)) from None
    if a in ("-V", "--version"):
        return DMIDECODE_VERSION + "\n"
    raise _Exit(2, "", f"dmidecode: unrecognized option '{a}'\n")


def _cli_dmesg(p: Profile, args: list[str]) -> str:
    for a in args:
        if a in ("--nopager", "-P"):
            continue
        if a.startswith("--"):
            msg = f"dmesg: unrecognized option '{a}'\n"
        else:
            msg = f"dmesg: invalid option -- '{a.lstrip('-')[:1]}'\n"
        raise _Exit(1, "", msg + "Try 'dmesg --help' for more information.\n")
    return dmesg(p)


TOOLS: dict[str, Callable[[Profile, list[str]], str]] = {
    "nvidia-smi": _cli_nvidia_smi,
    "ibstat": _cli_ibstat,
    "ibv_devinfo": _cli_ibv_devinfo,
    "dmidecode": _cli_dmidecode,
    "dmesg": _cli_dmesg,
}

_USAGE = (
    "usage: hwemu.py {profile | write-sysfs ROOT | generate HOSTNAME SERIAL SEED [PATH] |\n"
    "                 inject KIND... | heal | TOOL [ARGS...]}\n"
    f"tools: {', '.join(TOOLS)}\nfault kinds: {', '.join(FAULTS)}\n"
)


def _host_profile() -> Profile:
    """The profile, with the installed driver where it says so (lab hosts)."""
    profile = load_profile()
    if not profile.driver_from_packages:
        return profile
    packages = subprocess.run(DPKG_QUERY, capture_output=True, text=True, check=True).stdout
    return with_installed_driver(profile, installed_driver(packages))


def _run_tool(name: str, args: list[str]) -> int:
    try:
        profile = _host_profile()
    except (OSError, ValueError, subprocess.CalledProcessError) as exc:
        sys.stderr.write(f"{name}: cannot read the hardware profile or packages: {exc}\n")
        return 1
    try:
        sys.stdout.write(TOOLS[name](profile, args))
    except _Exit as exc:
        sys.stdout.write(exc.stdout)
        sys.stderr.write(exc.stderr)
        sys.stdout.flush()
        return exc.code
    sys.stdout.flush()
    return 0


def _run_subcommand(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(_USAGE)
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd in TOOLS:
        return _run_tool(cmd, rest)
    try:
        if cmd == "profile" and not rest:
            sys.stdout.write(load_profile().to_json())
            return 0
        if cmd == "write-sysfs" and len(rest) == 1:
            write_sysfs(load_profile(), rest[0])
            return 0
        if cmd == "generate" and len(rest) in (3, 4):
            profile = generate_profile(rest[0], rest[1], int(rest[2]))
            if len(rest) == 4:
                save_profile(profile, rest[3])
            else:
                sys.stdout.write(profile.to_json())
            return 0
        if cmd == "inject" and rest:
            profile = load_profile()
            for kind in rest:
                profile = inject(profile, kind)
            save_profile(profile)
            return 0
        if cmd == "heal" and not rest:
            save_profile(heal(load_profile()))
            return 0
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"hwemu: {exc}\n")
        return 1
    sys.stderr.write(_USAGE)
    return 2


def main(argv: list[str] | None = None) -> int:
    """Entry point; ``argv[0]`` (the program name) selects the emulated tool."""
    argv = list(sys.argv if argv is None else argv)
    prog = os.path.basename(argv[0]) if argv else "hwemu.py"
    if prog in TOOLS:
        return _run_tool(prog, argv[1:])
    return _run_subcommand(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
