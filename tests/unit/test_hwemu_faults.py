"""The lab's faults (src/racklift/lab/hwemu/faults.py): the documented set, each one visible in the
tool output it is meant to change (read back by racklift's own parsers where the gate reads it)
and gone again after heal, through the JSON round trip; unknown kinds; faults that combine. One
of the emulator's test files, one per module of src/racklift/lab/hwemu, named
test_hwemu_<module>.py."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable

import hwemu_support
import pytest
from hwemu_support import _check_driver, _xml, ib_write_bw_pair

from racklift.facts.observed import IbLink
from racklift.facts.parsers.dcgmi import parse_dcgmi_diag
from racklift.facts.parsers.ibnetdiscover import parse_ibnetdiscover
from racklift.facts.parsers.nccl_tests import parse_nccl_tests
from racklift.facts.parsers.nvlink_errors import parse_nvidia_smi_nvlink_errors
from racklift.facts.parsers.perftest import parse_perftest_bw
from racklift.facts.parsers.topology import parse_nvidia_smi_nvlink, parse_nvidia_smi_topo
from racklift.lab import hwemu

profile = hwemu_support.profile


# --------------------------------------------------------------------------- faults


def _gpu_el(p: hwemu.Profile, index: int) -> ET.Element:
    return _xml(p).findall("gpu")[index]


def _check_gpu_missing(p: hwemu.Profile) -> bool:
    text = hwemu.nvidia_smi_xml(p)
    return (text.count("<gpu id=") == 7 and "<attached_gpus>7</attached_gpus>" in text
            and "00000000:DB:00.0" not in text and len(hwemu.nvidia_smi_list(p).splitlines()) == 7)


def _check_serial(p: hwemu.Profile, healthy: hwemu.Profile) -> bool:
    serial = _gpu_el(p, 3).findtext("serial")
    csv = hwemu.nvidia_smi_query(p, ["serial"], noheader=True).splitlines()
    return serial != healthy.gpus[3].serial and csv[3] == serial and bool(
        re.fullmatch(r"\d{13}", serial or ""))


def _check_ecc(p: hwemu.Profile) -> bool:
    g = _gpu_el(p, 2)
    csv = hwemu.nvidia_smi_query(p, ["ecc.errors.uncorrected.volatile.total",
                                     "ecc.errors.uncorrected.aggregate.total",
                                     "remapped_rows.pending"], noheader=True).splitlines()[2]
    vol, agg, pending = csv.split(", ")
    return (int(g.findtext("ecc_errors/volatile/dram_uncorrectable")) > 0
            and int(g.findtext("ecc_errors/aggregate/dram_uncorrectable")) > 0
            and g.findtext("remapped_rows/remapped_row_pending") == "Yes"
            and int(vol) > 0 and int(agg) > 0 and pending == "Yes")


def _check_xid(p: hwemu.Profile) -> bool:
    return bool(re.search(r"NVRM: Xid \(PCI:0000:9a:00\): 79, pid=.*, GPU has fallen off the bus\.",
                          hwemu.dmesg(p)))


def _check_ibstat_panic(p: hwemu.Profile) -> bool:
    try:
        hwemu.TOOLS["ibstat"](p, [])
    except hwemu.ToolExit as exc:
        return exc.code == 255 and "stat of IB device 'mlx5_8' failed" in exc.stderr
    return False


def _check_pcie(p: hwemu.Profile) -> bool:
    g = _gpu_el(p, 1)
    csv = hwemu.nvidia_smi_query(p, ["pcie.link.width.current", "pcie.link.width.max"],
                                 noheader=True).splitlines()[1]
    return (g.findtext("pci/pci_gpu_link_info/link_widths/current_link_width") == "8x"
            and g.findtext("pci/pci_gpu_link_info/link_widths/max_link_width") == "16x"
            and csv == "8, 16")


def _check_ib_down(p: hwemu.Profile) -> bool:
    text = hwemu.ibstat(p, "mlx5_3")
    tree = hwemu.sysfs_tree(p)
    return ("\t\tState: Down\n\t\tPhysical state: Disabled\n\t\tRate: 10\n" in text
            and tree["class/infiniband/mlx5_3/ports/1/state"] == "1: DOWN\n"
            and tree["class/infiniband/mlx5_3/ports/1/phys_state"] == "3: Disabled\n"
            and "PORT_DOWN (1)" in hwemu.ibv_devinfo(p, "mlx5_3"))


def _check_ib_rate(p: hwemu.Profile, ca: str = "mlx5_5") -> bool:
    return ("\t\tRate: 200\n" in hwemu.ibstat(p, ca)
            and hwemu.sysfs_tree(p)[f"class/infiniband/{ca}/ports/1/rate"]
            == "200 Gb/sec (4X HDR)\n")


def _check_system_serial(p: hwemu.Profile, healthy: hwemu.Profile) -> bool:
    serial = hwemu.dmidecode_string(p, "system-serial-number").strip()
    return (serial != healthy.system.serial
            and hwemu.sysfs_tree(p)["devices/virtual/dmi/id/product_serial"] == serial + "\n"
            and f"\tSerial Number: {serial}\n" in hwemu.dmidecode(p, "system"))


def _nvlinks(p: hwemu.Profile):
    return parse_nvidia_smi_nvlink(hwemu.nvidia_smi_nvlink(p))


def _topology(p: hwemu.Profile):
    return parse_nvidia_smi_topo(hwemu.nvidia_smi_topo(p))


def _rising(p: hwemu.Profile) -> set[tuple[int, int, str]]:
    """The NVLink counters that grow between two runs of nvlink -e, 10 s apart."""
    first, later = (parse_nvidia_smi_nvlink_errors(hwemu.nvidia_smi_nvlink_errors(p, now=t))
                    for t in (1.8e9, 1.8e9 + 10))
    return {(b.gpu, link, name) for a, b in zip(first, later, strict=True)
            for (link, name), value in b.by_counter().items()
            if value > a.by_counter()[(link, name)]}


def _fabric(p: hwemu.Profile) -> dict[str, IbLink]:
    """Each CA's link in the emulated fabric map, found by node GUID as the gate finds it."""
    guids = {h.node_guid: h.ca for h in p.hcas}
    return {guids[link.node_guid]: link for link in parse_ibnetdiscover(hwemu.ibnetdiscover(p))
            if link.node_type == "ca"}


def _dcgm_failed(p: hwemu.Profile, level: int) -> set[tuple[str, int]]:
    """The tests dcgmi diag fails at `level`, with the GPUs they fail on."""
    return {(t.name, gpu) for t in parse_dcgmi_diag(hwemu.dcgmi_diag(p, level)).failed
            for gpu, result in t.gpus if result == "Fail"}


def _busbw(p: hwemu.Profile) -> float:
    run = hwemu.parse_all_reduce_perf(["-b", "128M", "-e", "4G", "-f", "2", "-g", "8"])
    return parse_nccl_tests(hwemu.all_reduce_perf_output(p, run, 1)).avg_busbw


def _rdma_gbps(p: hwemu.Profile, device: str) -> float:
    """A loopback pair on one port: as ib_write_bw's client prints it."""
    client, _ = ib_write_bw_pair(p, p, "-d", device, "--report_gbits")
    return parse_perftest_bw(client).rows[0].average_gbps


FAULT_CHECKS: dict[str, Callable[[hwemu.Profile, hwemu.Profile], bool]] = {
    "gpu-missing": lambda p, _h: _check_gpu_missing(p),
    "gpu-lost": lambda p, _h: "Unable to determine the device handle for GPU 0000:AB:00.0: "
                              "Unknown Error\n" in hwemu.nvidia_smi_xml(p),
    "gpu-serial-changed": _check_serial,
    "ecc-uncorrected": lambda p, _h: _check_ecc(p),
    "xid-79": lambda p, _h: _check_xid(p),
    # The real-world forms: test_hwemu_real_forms has the details.
    "aer-gpu-endpoint": lambda p, _h: "nvidia 0000:18:00.0: AER: can't recover" in hwemu.dmesg(p),
    "xid-nvlink5-nonfatal": lambda p, _h: len(re.findall(
        r"NVRM: Xid \(PCI:0000:2a:00\): 14[45], \w+ Nonfatal ", hwemu.dmesg(p))) == 2,
    "gpu-off-bus-open-module": lambda p, _h: (_check_gpu_missing(p) and "NVRM: fallen off the "
                                               "bus" in hwemu.dmesg(p)),
    "ibstat-panic": lambda p, _h: _check_ibstat_panic(p),
    "dmi-chassis-only": lambda p, h: (
        hwemu.dmidecode_string(p, "system-serial-number") == "To be filled by O.E.M.\n"
        and hwemu.dmidecode_string(p, "chassis-serial-number") == h.system.serial + "\n"),
    "pcie-degraded": lambda p, _h: _check_pcie(p),
    "ib-port-down": lambda p, _h: _check_ib_down(p),
    "ib-rate-wrong": lambda p, _h: _check_ib_rate(p),
    "mac-swapped": lambda p, _h: p.mac_swapped,
    "wrong-system-serial": _check_system_serial,
    "driver-version-wrong": lambda p, _h: _check_driver(p),
    "nvlink-down": lambda p, _h: _nvlinks(p)[3].inactive == (7,),
    "nvlink-errors-rising": lambda p, _h: _rising(p) == {(2, 5, "Replay Errors"),
                                                         (2, 5, "CRC Errors")},
    "numa-misplaced": lambda p, _h: _topology(p).link("GPU6", "NIC6") == "SYS",
    "cable-swapped": lambda p, _h: (
        "ib-leaf-x-1-1:" in _fabric(p)["mlx5_0"].peer_desc
        and "ib-leaf-x-1-0:" in _fabric(p)["mlx5_1"].peer_desc),
    "cable-wrong-leaf": lambda p, _h: (_fabric(p)["mlx5_2"].peer_desc,
                                       _fabric(p)["mlx5_2"].peer_port) == (
        "MF0;ib-leaf-x-1-3:MQM9700/U1", 35),
    "ib-link-degraded": lambda p, _h: (_fabric(p)["mlx5_4"].speed == "HDR"
                                         and _check_ib_rate(p, "mlx5_4")),
    "link-no-neighbor": lambda p, _h: not _fabric(p)["mlx5_7"].linked,
    # The in-band cable is real (racklift.lab.leaf moves it; test_lab sees it in lldpd): the
    # profile only records the fault, so that heal puts the cable back.
    **{kind: lambda p, _h, kind=kind: kind in p.faults for kind in hwemu.ETHERNET_FAULTS},
    # Load-only: acceptance's tools show them (test_hwemu_acceptance has the details).
    "hbm-fail": lambda p, _h: _dcgm_failed(p, 2) == {("GPU Memory", 4)},
    "nvlink-slow": lambda p, _h: _busbw(p) < 350,
    "rail-slow": lambda p, _h: _rdma_gbps(p, "mlx5_3") < 150,
    "dcgm-skip-required": lambda p, _h: {t.result for t in parse_dcgmi_diag(
        hwemu.dcgmi_diag(p, 2)).tests if t.category != "Deployment"} == {"Skip"},
}


def test_fault_names_are_exactly_the_documented_set() -> None:
    assert set(hwemu.FAULTS) == set(FAULT_CHECKS)


@pytest.mark.parametrize("kind", sorted(FAULT_CHECKS))
def test_fault_visible_and_healed(kind: str, profile: hwemu.Profile) -> None:
    assert not FAULT_CHECKS[kind](profile, profile)
    faulty = hwemu.inject(profile, kind)
    assert faulty.faults == [kind]
    assert FAULT_CHECKS[kind](faulty, profile)
    assert profile.faults == [] and not FAULT_CHECKS[kind](profile, profile)  # input untouched
    # The fault survives the JSON round trip the lab uses.
    assert FAULT_CHECKS[kind](hwemu.Profile.from_json(faulty.to_json()), profile)
    healed = hwemu.heal(faulty)
    assert healed.faults == [] and not FAULT_CHECKS[kind](healed, profile)
    assert healed.to_dict() == profile.to_dict()


def test_mac_swapped_changes_no_tool_output(profile: hwemu.Profile) -> None:
    p = hwemu.inject(profile, "mac-swapped")
    assert hwemu.ibstat(p) == hwemu.ibstat(profile)
    assert hwemu.dmesg(p) == hwemu.dmesg(profile)
    assert hwemu.sysfs_tree(p) == hwemu.sysfs_tree(profile)


def test_inject_unknown_kind_lists_valid_kinds(profile: hwemu.Profile) -> None:
    with pytest.raises(ValueError) as err:
        hwemu.inject(profile, "gpu-on-fire")
    assert all(kind in str(err.value) for kind in hwemu.FAULTS)


def test_faults_combine(profile: hwemu.Profile) -> None:
    p = hwemu.inject(hwemu.inject(profile, "ib-port-down"), "ecc-uncorrected")
    assert p.faults == ["ib-port-down", "ecc-uncorrected"]
    assert _check_ib_down(p) and _check_ecc(p)
