"""``nvidia-smi --query-gpu``: canonical field names, units in brackets, ``[N/A]``."""

from __future__ import annotations

import time
from collections.abc import Callable

from .nvidia_smi import (
    _aggregate_uncorrected,
    _fb_free,
    _volatile_uncorrected,
    _w,
    _yn,
    answering,
    lost_lines,
)
from .profile import GPU, Profile

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
    chosen = list(p.gpus) if gpus is None else gpus
    for g in answering(chosen):
        values = []
        for name in resolved:
            unit, getter = QUERY_GPU_FIELDS[name]
            value = getter(p, g)
            if nounits and unit and value.endswith(" " + unit):
                value = value[: -len(unit) - 1]
            values.append(value)
        lines.append(", ".join(values))
    return lost_lines(chosen) + "\n".join(lines) + "\n"
