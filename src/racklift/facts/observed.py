"""Observed-facts dataclasses: what a host *is*, as its tools reported it.

Parsed on the controller by :mod:`racklift.facts.parsers` from captured tool output. Every
field that a tool can leave out, mask or report as "N/A" is ``None`` here, never a guess;
the comparison with what NetBox expects happens elsewhere.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


class _Facts:
    """``to_dict()`` for the frozen fact records (tuples of records become lists of dicts)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True, slots=True)
class SystemFacts(_Facts):
    """DMI type 1 (System Information), type 0 (BIOS), type 2 (board), type 3 (chassis)."""

    vendor: str | None
    product: str | None
    serial: str | None
    bios_vendor: str | None
    bios_version: str | None
    uuid: str | None  # lower case, as the kernel prints it in sysfs
    version: str | None = None
    sku: str | None = None
    family: str | None = None
    bios_date: str | None = None
    board_vendor: str | None = None
    board_product: str | None = None
    board_serial: str | None = None
    # The chassis serial is what some vendors print on the label (and operators record in
    # NetBox), where the system serial is left to a placeholder.
    chassis_serial: str | None = None
    chassis_asset_tag: str | None = None


@dataclass(frozen=True, slots=True)
class GPUFacts(_Facts):
    """One ``<gpu>`` of ``nvidia-smi -q -x``."""

    index: int  # position in the output (nvidia-smi lists GPUs in index order)
    name: str | None
    serial: str | None
    uuid: str | None
    pci_bus_id: str | None  # "0000:18:00.0": lower case, 4-digit domain
    vbios_version: str | None
    board_part_number: str | None
    ecc_mode_current: str | None  # "Enabled" / "Disabled"; None when N/A
    ecc_mode_pending: str | None
    ecc_volatile_uncorrected: int | None  # DRAM + SRAM (or old-schema double-bit) totals
    ecc_aggregate_uncorrected: int | None
    ecc_volatile_corrected: int | None
    retired_pages_pending: bool | None  # None when N/A (Hopper uses row remapping)
    retired_pages_count: int | None  # single + double bit retirements
    remapped_rows_pending: bool | None
    remapped_rows_failure: bool | None
    remapped_rows_uncorrectable: int | None
    pcie_gen_current: int | None
    pcie_gen_max: int | None
    pcie_width_current: int | None
    pcie_width_max: int | None
    persistence_mode: str | None
    mig_mode_current: str | None
    mig_devices: int  # number of <mig_device> elements listed
    memory_total_mib: int | None
    temperature_c: int | None
    power_draw_w: float | None
    ecc_aggregate_corrected: int | None = None
    product_architecture: str | None = None
    gpu_part_number: str | None = None
    module_id: int | None = None
    pci_device_id: str | None = None  # "233010DE" as nvidia-smi prints it
    fabric_state: str | None = None
    fabric_status: str | None = None


@dataclass(frozen=True, slots=True)
class NvidiaSmiFacts(_Facts):
    """``nvidia-smi -q -x`` as a whole."""

    driver_version: str | None
    cuda_version: str | None
    attached_gpus: int  # what the log header says; may exceed len(gpus)
    gpus: tuple[GPUFacts, ...]
    errors: tuple[str, ...]  # lines nvidia-smi printed around the XML
    schema: str | None = None  # DTD name, e.g. "nvsmi_device_v12.dtd"
    lost_gpus: tuple[str, ...] = ()  # bus ids of GPUs it could not reach (named in errors)

    def gpu_by_bus_id(self, bus_id: str) -> GPUFacts | None:
        wanted = bus_id.lower()
        return next((g for g in self.gpus if g.pci_bus_id == wanted), None)


@dataclass(frozen=True, slots=True)
class HCAPortFacts(_Facts):
    """One port of an RDMA channel adapter (InfiniBand or RoCE)."""

    ca: str
    ca_type: str | None  # "MT4129" (ibstat); ibv_devinfo gives the same id as vendor_part_id
    firmware: str | None
    node_guid: str | None  # "0x946dae0300cde72c": lower case, 0x + 16 hex digits
    port: int
    state: str | None  # "Active", "Down", "Initializing", "Armed"
    phys_state: str | None  # "LinkUp", "Disabled", "Polling", ...
    rate_gbps: int | None
    link_layer: str | None  # "InfiniBand" / "Ethernet"
    port_guid: str | None
    base_lid: int | None
    is_vf: bool  # a ConnectX virtual function (SR-IOV), not the physical port


@dataclass(frozen=True, slots=True)
class PCIDeviceFacts(_Facts):
    """One device of ``lspci``."""

    address: str  # "0000:18:00.0"
    class_name: str  # "3D controller"
    vendor_id: str  # "10de"; "" when lspci ran without -n
    device_id: str  # "2330"; "" when lspci ran without -n
    description: str  # "NVIDIA Corporation GH100 [H100 SXM5 80GB]"
    link_speed_gts: float | None  # LnkSta (-vv only)
    link_width: int | None
    link_speed_max_gts: float | None  # LnkCap (-vv only)
    link_width_max: int | None
    class_id: str | None = None  # "0302" with -nn
    revision: str | None = None  # "a1"
    driver: str | None = None  # "Kernel driver in use" (-k / -v)


@dataclass(frozen=True, slots=True)
class KernelEvent(_Facts):
    """A hardware error line of the kernel log."""

    kind: str  # "xid" | "sxid" | "aer" | "nvrm" (a driver message without an Xid)
    code: int | None  # Xid / SXid number; None for AER and NVRM
    device: str | None  # PCI address (as printed) or NVSwitch id
    message: str
    timestamp: float | None  # seconds since boot, from "[ 1234.567890]"
    severity: str  # "critical" | "warning" | "info"
    line: str
    wallclock: str | None = None  # "2025-02-23T16:24:18" from dmesg -T (local time)
    name: str | None = None  # short name of the Xid / AER class
    notes: tuple[str, ...] = field(default_factory=tuple)
    caused_by: int | None = None  # the Xid whose recovery caused this one ("caused by previous")
    endpoint: str | None = None  # AER: the driver and device that could not recover
    reported_by: str | None = None  # AER: the root port that reported the endpoint's error


@dataclass(frozen=True, slots=True)
class CPUFacts(_Facts):
    """``lscpu -J``."""

    model: str | None
    sockets: int | None
    cores_per_socket: int | None
    threads: int | None  # logical CPUs


@dataclass(frozen=True, slots=True)
class TopologyFacts(_Facts):
    """``nvidia-smi topo -m``: how each pair of GPUs and NICs is connected."""

    devices: tuple[str, ...]  # the matrix's labels in order: "GPU0", ..., "NIC0" (or "mlx5_0")
    # links[i][j]: how devices[i] reaches devices[j] ("X", "NV18", "PIX", "PXB", "PHB", "NODE",
    # "SYS"); a row the capture lacks is None.
    links: tuple[tuple[str, ...] | None, ...]
    cpu_affinity: dict[str, str] = field(default_factory=dict)  # GPU label -> CPU list
    numa_affinity: dict[str, str] = field(default_factory=dict)  # GPU label -> NUMA node(s)
    nic_names: dict[str, str] = field(default_factory=dict)  # "NIC0" -> "mlx5_0" (NIC Legend)

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(d for d in self.devices if d.startswith("GPU"))

    @property
    def nics(self) -> tuple[str, ...]:
        return tuple(d for d in self.devices if not d.startswith("GPU"))

    def link(self, a: str, b: str) -> str | None:
        """How `a` reaches `b`, from a's row (or b's, where a's is missing)."""
        i, j = self.devices.index(a), self.devices.index(b)
        row = self.links[i] if self.links[i] is not None else self.links[j]
        if row is None:
            return None
        return row[j] if self.links[i] is not None else row[i]


@dataclass(frozen=True, slots=True)
class NvlinkFacts(_Facts):
    """One GPU of ``nvidia-smi nvlink -s``: each link's speed, None where it is inactive."""

    gpu: int  # nvidia-smi's index
    name: str | None
    links: tuple[float | None, ...]  # GB/s per link number
    all_inactive: bool = False  # "Unable to retrieve NVLink information as all links are inActive"

    @property
    def inactive(self) -> tuple[int, ...]:
        return tuple(n for n, speed in enumerate(self.links) if speed is None)


@dataclass(frozen=True, slots=True)
class NvlinkErrors(_Facts):
    """One GPU's NVLink error counters in one reading of ``nvidia-smi nvlink -e``."""

    gpu: int  # nvidia-smi's index
    name: str | None
    reading: int  # 0 for the first run of the command, 1 for the next
    counters: tuple[tuple[int, str, float], ...]  # (link, counter name, value), e.g. "CRC Errors"

    def by_counter(self) -> dict[tuple[int, str], float]:
        return {(link, name): value for link, name, value in self.counters}


# DCGM's tests by the name `dcgmi diag -r` takes (and 4.x prints), each with the least run
# level that runs it (DCGM 2.x to 4.x; sm_stress is 2.x's, eud a package of its own).
DCGM_TEST_LEVELS = {"software": 1, "pcie": 2, "memory": 2, "diagnostic": 3,
                    "targeted_stress": 3, "targeted_power": 3, "memory_bandwidth": 3,
                    "sm_stress": 3, "eud": 3, "pulse_test": 4, "memtest": 4}
# 2.x's and 3.x's titles whose name is not the title in lower case with underscores.
_DCGM_TITLES = {"gpu_memory": "memory", "eud_test": "eud"}


@dataclass(frozen=True, slots=True)
class DcgmTest(_Facts):
    """One test of a ``dcgmi diag`` run: its overall result, each GPU's where it names them,
    and the warnings, errors and notes it printed."""

    category: str  # "Deployment", "Integration", "Hardware", "Stress"; "" where none is named
    name: str  # "PCIe", "GPU Memory", "memory", "Targeted Stress", ...; "run": the run's own
    result: str  # "Pass", "Fail", "Skip", "Warn", "Error"
    gpus: tuple[tuple[int, str], ...] = ()  # (GPU index, its result) where the run names them
    warnings: tuple[str, ...] = ()  # "Warning" and "Error" rows, each row's wrapped lines joined
    info: tuple[str, ...] = ()

    @property
    def test(self) -> str:
        """The test's name as `dcgmi diag -r` takes it ("memory" for 3.x's "GPU Memory"); 2.x
        and 3.x print each deployment check on a row of its own: together they are
        "software"."""
        if self.category == "Deployment":
            return "software"
        name = "_".join(self.name.lower().replace("-", " ").split())
        return _DCGM_TITLES.get(name, name)


@dataclass(frozen=True, slots=True)
class DcgmDiag(_Facts):
    """A ``dcgmi diag`` run, text table or ``-j`` JSON."""

    version: str | None  # DCGM's, where the run prints it (3.x and later)
    driver: str | None
    tests: tuple[DcgmTest, ...]

    @property
    def failed(self) -> tuple[DcgmTest, ...]:
        return tuple(t for t in self.tests if t.result in ("Fail", "Error"))

    @property
    def level(self) -> int | None:
        """The run level the output is of: the highest of the tests it prints, skipped ones
        too (a run prints every test of its level); None where it prints none DCGM has."""
        return max((DCGM_TEST_LEVELS[t.test] for t in self.tests if t.test in DCGM_TEST_LEVELS),
                   default=None)


@dataclass(frozen=True, slots=True)
class NcclRow(_Facts):
    """One message size of an nccl-tests run: out-of-place, then in-place."""

    size: int  # bytes
    busbw: float  # GB/s, out-of-place
    algbw: float
    wrong: int | None  # None: validation off ("N/A")
    busbw_in_place: float
    wrong_in_place: int | None


@dataclass(frozen=True, slots=True)
class NcclRun(_Facts):
    """An nccl-tests run (all_reduce_perf and its kind)."""

    test: str | None  # "all_reduce_perf", where the version prints it
    ranks: int
    rows: tuple[NcclRow, ...]
    out_of_bounds: int | None  # "# Out of bounds values : N OK|FAILED"
    avg_busbw: float | None  # "# Avg bus bandwidth : X" (GB/s); None: the run did not end
    errors: tuple[str, ...]  # "Test failure", "Test CUDA failure ..." lines


@dataclass(frozen=True, slots=True)
class PerftestRow(_Facts):
    size: int  # bytes
    iterations: int
    peak_gbps: float  # Gb/s, whatever unit the run printed
    average_gbps: float


@dataclass(frozen=True, slots=True)
class PerftestRun(_Facts):
    """A perftest bandwidth run (ib_write_bw, ib_read_bw, ib_send_bw), client or server."""

    test: str  # "RDMA_Write BW Test", "RDMA_Write Bidirectional BW Test", ...
    device: str | None  # "mlx5_0"
    link_type: str | None  # "IB", "Ethernet"
    qps: int | None
    bidirectional: bool
    rows: tuple[PerftestRow, ...]


@dataclass(frozen=True, slots=True)
class LldpNeighbor(_Facts):
    """One neighbour lldpd heard on a local interface (``lldpctl -f json`` / ``json0``)."""

    interface: str  # the local interface
    chassis_name: str | None  # the neighbour's system name, e.g. "leaf01"
    chassis_id: str | None
    chassis_id_type: str | None  # "mac", "local", ...
    port_id: str | None  # e.g. "swp51", "Ethernet120", "Gi3/36"
    port_id_type: str | None  # "ifname", "local", "mac", ...
    port_descr: str | None
    system_descr: str | None
    mgmt_ips: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class IbLink(_Facts):
    """One port of a node in a fabric map (``ibnetdiscover``, ``iblinkinfo``), as seen from
    that port's node: the link it trained and the port at the far end, or no link at all."""

    node_guid: str  # "0x2c5eab0300b87b40"
    node_type: str  # "switch" | "ca" | "router"
    node_desc: str  # "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", "a08-p1-dgx-04-c01 mlx5_5"
    port: int
    peer_guid: str  # the far end's node GUID; "" where the tool does not print it or no link
    peer_type: str  # "" likewise
    peer_desc: str
    peer_port: int | None  # None: the port has no link
    width: str  # "4x"; "" without a link
    speed: str  # "NDR", "HDR", "EDR", "FDR10", ...; "" without a link
    # The port's logical and physical state where the tool prints them (iblinkinfo: "Active",
    # "Initialize", "Armed", "Down"; "LinkUp", "Polling", "Disabled"); None: not printed
    # (ibnetdiscover maps links, not their states).
    state: str | None = None
    phys_state: str | None = None

    @property
    def linked(self) -> bool:
        return self.peer_port is not None

    @property
    def state_shown(self) -> str | None:
        """"Initialize/LinkUp"; None where the tool printed no state."""
        if self.state is None:
            return None
        return "/".join(s for s in (self.state, self.phys_state) if s)

    @property
    def up(self) -> bool:
        """Whether the port is a good link as far as the tool tells: linked, and Active/LinkUp
        where it prints the state."""
        return self.linked and self.state in (None, "Active") \
            and self.phys_state in (None, "LinkUp")
