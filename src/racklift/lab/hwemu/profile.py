"""The emulated machine: its profile (system, GPUs, HCAs, kernel log, faults, driver), the
constants real captures give, and the driver a lab host has installed."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

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
    # The chassis record's (DMI type 3) serial: Supermicro's own, not the system's (a real
    # SYS-110P-WTR: system E424030X2100634, chassis C1160LK21P50540).
    chassis_serial: str = ""

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
    # NVML cannot open it (fallen off the bus, say): nvidia-smi names it by bus id and lists the
    # others.
    lost: bool = False
    # NVLinks: the H100 SXM's 18, all to the baseboard's NVSwitches; those down print
    # <inactive> (nvlink -s) and the GPU's pairs show one NV fewer (topo -m).
    nvlinks: int = 18
    nvlinks_down: list[int] = field(default_factory=list)
    # Links whose error counters rise (a marginal link retraining): link number → replay errors
    # per second, counted from the Unix epoch so every run of the tool reads more.
    nvlink_errors_per_s: dict[str, float] = field(default_factory=dict)
    # What shows only under load, in the acceptance tools (dcgm.py, nccl_tests.py): DCGM's
    # memory test fails on it; the share of its NVLink bandwidth an all-reduce gets (below 1: a
    # link that retrains under traffic while nvlink -s shows every link up).
    memory_test_fails: bool = False
    nvlink_load_factor: float = 1.0

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
    # The leaf switch port the cable goes to (the lab's cable plan), and what the link trained
    # at; no switch: no link in the fabric map.
    peer_switch: str = ""
    peer_port: int = 0
    link_width: str = "4x"
    link_speed: str = "NDR"
    # The share of its line rate the port carries under load (ib_write_bw, perftest.py); below
    # 1: a link that degrades under traffic while ibstat shows it Active at full rate.
    load_factor: float = 1.0

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
    # The lab's cable plan for the HCAs: CA → [leaf switch, port number]. Each HCA's peer is
    # set from it (cabled); a fault may move a peer, healing puts it back.
    cables: dict[str, list[Any]] = field(default_factory=dict)
    # How long each tool takes to answer (latency.py): invocation → seconds; empty: at once.
    latency: dict[str, float] = field(default_factory=dict)
    # RDMA devices that ibstat lists and then cannot read (gone from /sys/class/infiniband by
    # the time it reads them): ibstat prints the CAs before one, then panics (infiniband.py).
    # No other tool sees them.
    vanishing_cas: list[str] = field(default_factory=list)
    # False: the installed DCGM does not support the host's GPUs; `dcgmi diag` passes its
    # deployment checks and skips every test (dcgm.py).
    dcgm_supports_gpus: bool = True

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


def cabled(p: Profile, cables: dict[str, list[Any]]) -> Profile:
    """The profile with this cable plan, each HCA's link going where the plan says."""
    hcas = [dataclasses.replace(h, peer_switch=str(cables[h.ca][0]), peer_port=int(cables[h.ca][1]))
            if h.ca in cables else h for h in p.hcas]
    return dataclasses.replace(p, hcas=hcas, cables=dict(cables))


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


def _ts(seconds: float) -> str:
    whole = int(seconds)
    micros = round((seconds - whole) * 1_000_000)
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    return f"[{whole:5d}.{micros:06d}]"


def _driver_stamp(version: str) -> str:
    return _DRIVER_BUILD_DATES.get(version, "Thu Oct 17 00:00:00 UTC 2024")


def _hca(p: Profile, ca: str) -> HCAPort | None:
    return next((h for h in p.hcas if h.ca == ca), None)


def _set_driver(p: Profile, version: str) -> None:
    """Driver `version` wherever the host shows it: nvidia-smi and the module's boot lines."""
    old = p.driver_version
    p.driver_version, p.cuda_version = version, _cuda_for(version)
    if old and old != version:
        old_tok = f"  {old}  {_driver_stamp(old)}"
        new_tok = f"  {version}  {_driver_stamp(version)}"
        p.kernel_log = [line.replace(old_tok, new_tok) for line in p.kernel_log]


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
