"""A healthy profile, generated from (hostname, serial, seed): an 8x H100 HGX server with
its boot log."""

from __future__ import annotations

import random

from .profile import (
    _HCA_BUSES,
    _HGX_MODULE_IDS,
    DEFAULT_CUDA,
    DEFAULT_DRIVER,
    GPU,
    HGX_H100_BUSES,
    HCAPort,
    Profile,
    System,
    _driver_stamp,
    _ts,
)


def _uuid_from(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


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
    kernel_log = _boot_log(rng, system, DEFAULT_DRIVER, hcas)
    # Drawn last, so that every value drawn before it stays what it was before it existed.
    system.chassis_serial = (f"C{rng.randrange(1000, 10000)}LK{rng.randrange(10, 100)}"
                             f"P{rng.randrange(10**4, 10**5)}")
    return Profile(
        hostname=hostname,
        system=system,
        gpus=gpus,
        hcas=hcas,
        kernel_log=kernel_log,
        driver_version=DEFAULT_DRIVER,
        cuda_version=DEFAULT_CUDA,
        nvswitch=False,
        seed=seed,
        original_serial=serial,
    )
