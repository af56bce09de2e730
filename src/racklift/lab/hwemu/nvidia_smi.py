"""``nvidia-smi``: ``-q -x`` (the R550 XML layout), ``-q``, ``-L``, ``--version`` and the
summary table."""

from __future__ import annotations

import time
from typing import Any

from .profile import GPU, Profile


# xml.sax.saxutils would do, but importing it loads urllib and http.client: a third of every
# emulated tool call's start-up, paid on every lab host for each tool the collector runs.
def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def quoteattr(text: str) -> str:
    return '"' + escape(text).replace('"', "&quot;") + '"'


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


def lost_lines(gpus: list[GPU]) -> str:
    """What nvidia-smi prints for each GPU NVML cannot open (real form: a 4-digit domain)."""
    return "".join(f"Unable to determine the device handle for GPU {g.pci_bus_id[4:]}: "
                   "Unknown Error\n" for g in gpus if g.lost)


def answering(gpus: list[GPU]) -> list[GPU]:
    return [g for g in gpus if not g.lost]


def nvidia_smi_xml(p: Profile, gpus: list[GPU] | None = None) -> str:
    """``nvidia-smi -q -x``: a lost GPU is counted in attached_gpus, named before the
    document and left out of it."""
    chosen = list(p.gpus) if gpus is None else gpus
    out = [
        '<?xml version="1.0" ?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
        "<nvidia_smi_log>",
        f"\t<timestamp>{time.asctime()}</timestamp>",
        f"\t<driver_version>{escape(p.driver_version or '')}</driver_version>",
        f"\t<cuda_version>{escape(p.cuda_version or '')}</cuda_version>",
        f"\t<attached_gpus>{len(p.gpus)}</attached_gpus>",
    ]
    for g in answering(chosen):
        out.append(f"\t<gpu id={quoteattr(g.pci_bus_id)}>")
        for node in _gpu_tree(p, g):
            _xml_node(node, 2, out)
        out.append("\t</gpu>")
        out.append("")
    out.append("</nvidia_smi_log>")
    return lost_lines(chosen) + "\n".join(out) + "\n"


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
    chosen = list(p.gpus) if gpus is None else gpus
    for g in answering(chosen):
        out.append(f"GPU {g.pci_bus_id}")
        for node in _gpu_tree(p, g):
            _text_node(node, 4, out)
        out.append("")
    return lost_lines(chosen) + "\n".join(out) + "\n"


def nvidia_smi_list(p: Profile) -> str:
    """``nvidia-smi -L``: a lost GPU's error line in its place."""
    return "".join(lost_lines([g]) if g.lost else
                   f"GPU {g.index}: {g.product_name} (UUID: {g.uuid})\n" for g in p.gpus)


def _volatile_uncorrected(g: GPU) -> int:
    return (g.ecc_volatile_sram_uncorrectable_parity + g.ecc_volatile_sram_uncorrectable_secded
            + g.ecc_volatile_dram_uncorrectable)


def _aggregate_uncorrected(g: GPU) -> int:
    return (g.ecc_aggregate_sram_uncorrectable_parity
            + g.ecc_aggregate_sram_uncorrectable_secded + g.ecc_aggregate_dram_uncorrectable)


def nvidia_smi_summary(p: Profile) -> str:
    """``nvidia-smi`` without arguments (the R550 summary table)."""
    if lost := lost_lines(p.gpus):
        return lost  # as real hosts show it: the lost GPU's line, no table
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
