"""InfiniBand ports (src/racklift/facts/parsers/infiniband.py): ibstat on real H100 node captures
(InfiniBand, Ethernet and RoCE, ports down or polling), virtual functions, ibv_devinfo on a real
ConnectX-3 and `-v`, the sysfs tree, and the lab emulator's output under every fault. One of the
parsers' test files, one per module of src/racklift/facts/parsers (and facts/xid.py), named
test_parse_<module>.py. Inline samples that are not captures are marked "synthetic"."""

from __future__ import annotations

import parse_support
import pytest
from parse_support import IBSTAT_IB_ETH, IBSTAT_ROCE, IBV_DEVINFO, real

from racklift.facts.observed import HCAPortFacts
from racklift.facts.parsers import (
    ParseError,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_sysfs_infiniband,
)
from racklift.lab import hwemu

profile = parse_support.profile


# --------------------------------------------------------------------------- ibstat


def test_ibstat_real_h100_node_ib_and_ethernet_leptonai_gpud() -> None:
    """8x ConnectX-7 NDR IB + 4 ConnectX-6 Dx Ethernet ports, 3 of them down
    (leptonai/gpud ibstat.47.0.h100.some.down.0)."""
    ports = parse_ibstat(real(IBSTAT_IB_ETH))
    assert len(ports) == 12
    by_ca = {p.ca: p for p in ports}
    assert {p.ca for p in ports if p.state == "Down"} == {"mlx5_2", "mlx5_7", "mlx5_8"}
    assert {p.phys_state for p in ports if p.state == "Down"} == {"Disabled"}
    assert {p.ca for p in ports if p.link_layer == "Ethernet"} == {
        "mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"}
    infiniband = [p for p in ports if p.link_layer == "InfiniBand"]
    assert len(infiniband) == 8
    assert {(p.state, p.rate_gbps, p.ca_type) for p in infiniband} == {
        ("Active", 400, "MT4129")}
    assert by_ca["mlx5_0"] == HCAPortFacts(
        ca="mlx5_0", ca_type="MT4129", firmware="28.39.1002", node_guid="0x946dae0300cde72c",
        port=1, state="Active", phys_state="LinkUp", rate_gbps=400, link_layer="InfiniBand",
        port_guid="0x946dae0300cde72c", base_lid=75, is_vf=False)
    assert by_ca["mlx5_2"].rate_gbps == 40
    assert not any(p.is_vf for p in ports)


def test_ibstat_real_roce_node_polling_leptonai_gpud() -> None:
    """An H100 node whose ConnectX-7s run Ethernet (RoCE), one port Polling, one Disabled
    (leptonai/gpud ibstat.47.0.h100.some.down.with.polling.1; no trailing newline)."""
    ports = parse_ibstat(real(IBSTAT_ROCE))
    assert len(ports) == 12
    assert {p.link_layer for p in ports} == {"Ethernet"}
    down = {p.ca: p.phys_state for p in ports if p.state == "Down"}
    assert down == {"mlx5_11": "Polling", "mlx5_5": "Disabled"}
    assert next(p for p in ports if p.ca == "mlx5_9").port_guid == "0xa288c2fffeadeb60"


@pytest.mark.parametrize("ca_type", ["MT4126", "MT4124", "MT4120",
                                     "ConnectX Virtual Function"])
def test_ibstat_virtual_function(ca_type: str) -> None:
    """Derived from the real gpud capture: mlx5_1's CA type replaced by a VF's (mlx5 driver
    PCI table: 0x101e mlx5Gen VF = MT4126, 0x101c CX-6 VF = MT4124, 0x1018 CX-5 VF)."""
    text = real(IBSTAT_IB_ETH).replace("CA 'mlx5_1'\n\tCA type: MT4125",
                                       f"CA 'mlx5_1'\n\tCA type: {ca_type}")
    ports = {p.ca: p for p in parse_ibstat(text)}
    assert ports["mlx5_1"].is_vf
    assert not ports["mlx5_0"].is_vf and not ports["mlx5_2"].is_vf


def test_ibstat_rate_with_name_and_multi_port_ca() -> None:
    """Synthetic: a two-port CA with the "Rate: 400 (NDR)" form some versions print."""
    text = ("CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 2\n\tFirmware version: 28.39.1002\n"
            "\tNode GUID: 0x946dae0300cde72c\n\tPort 1:\n\t\tState: Active\n"
            "\t\tPhysical state: LinkUp\n\t\tRate: 400 (NDR)\n\t\tBase lid: 7\n"
            "\t\tLink layer: InfiniBand\n\tPort 2:\n\t\tState: Initializing\n"
            "\t\tPhysical state: LinkUp\n\t\tRate: 200 (HDR)\n\t\tBase lid: 65535\n"
            "\t\tLink layer: InfiniBand\n")
    p1, p2 = parse_ibstat(text)
    assert (p1.port, p1.rate_gbps, p2.port, p2.rate_gbps) == (1, 400, 2, 200)
    assert (p2.state, p2.base_lid, p2.node_guid) == ("Initializing", 65535, "0x946dae0300cde72c")


def test_ibstat_single_port_form(profile: hwemu.Profile) -> None:
    (port,) = parse_ibstat(hwemu.ibstat(profile, "mlx5_3", 1), ca="mlx5_3")
    assert (port.ca, port.port, port.state, port.rate_gbps) == ("mlx5_3", 1, "Active", 400)


@pytest.mark.parametrize("fault", [None, *hwemu.FAULTS])
def test_ibstat_emulator_every_fault(fault: str | None, profile: hwemu.Profile) -> None:
    p = profile if fault is None else hwemu.inject(profile, fault)
    ports = {x.ca: x for x in parse_ibstat(hwemu.ibstat(p))}
    assert set(ports) == {h.ca for h in p.hcas}
    for h in p.hcas:
        assert (ports[h.ca].state, ports[h.ca].phys_state, ports[h.ca].rate_gbps) == (
            h.state, h.phys_state, h.rate)
        assert ports[h.ca].node_guid == h.node_guid
        assert ports[h.ca].base_lid == h.base_lid


def test_ibstat_emulator_ib_port_down_and_rate_wrong(profile: hwemu.Profile) -> None:
    down = {p.ca: p for p in parse_ibstat(hwemu.ibstat(hwemu.inject(profile, "ib-port-down")))}
    assert (down["mlx5_3"].state, down["mlx5_3"].phys_state) == ("Down", "Disabled")
    assert down["mlx5_3"].base_lid == 65535
    assert {p.state for ca, p in down.items() if ca != "mlx5_3"} == {"Active"}
    slow = {p.ca: p for p in parse_ibstat(hwemu.ibstat(hwemu.inject(profile, "ib-rate-wrong")))}
    assert slow["mlx5_5"].rate_gbps == 200


@pytest.mark.parametrize("text", [
    "ibpanic: [12345] main: stat of IB device 'mlx5_9' failed: No such file or directory\n",
    "garbage\n",
    "",
])
def test_ibstat_not_ibstat_output(text: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_ibstat(text)
    assert err.value.kind == "ibstat"


# --------------------------------------------------------------------------- ibv_devinfo


def test_ibv_devinfo_real_connectx3_port_down_heioy_books() -> None:
    """2x ConnectX-3 (mlx4), MLNX_OFED, one PORT_DOWN port each (Heioy/Books)."""
    ports = parse_ibv_devinfo(real(IBV_DEVINFO))
    assert [(p.ca, p.port, p.state) for p in ports] == [
        ("mlx4_1", 1, "Active"), ("mlx4_1", 2, "Down"),
        ("mlx4_0", 1, "Active"), ("mlx4_0", 2, "Down")]
    first = ports[0]
    assert (first.firmware, first.node_guid, first.ca_type) == (
        "2.42.5000", "0x7cfe900300a595c0", "MT4099")
    assert (first.base_lid, first.link_layer, first.rate_gbps) == (22, "InfiniBand", None)
    assert ports[2].base_lid == 32


@pytest.mark.parametrize("fault", [None, "ib-port-down", "ib-rate-wrong"])
def test_ibv_devinfo_emulator(fault: str | None, profile: hwemu.Profile) -> None:
    p = profile if fault is None else hwemu.inject(profile, fault)
    ports = {x.ca: x for x in parse_ibv_devinfo(hwemu.ibv_devinfo(p))}
    for h in p.hcas:
        assert (ports[h.ca].state, ports[h.ca].base_lid, ports[h.ca].link_layer) == (
            h.state, h.base_lid, h.link_layer)
        assert ports[h.ca].node_guid == h.node_guid
        assert ports[h.ca].ca_type == "MT4129"
        assert ports[h.ca].rate_gbps is None  # plain ibv_devinfo prints no rate
    if fault == "ib-port-down":
        assert ports["mlx5_3"].state == "Down"


def test_ibv_devinfo_verbose_gives_phys_state_and_rate() -> None:
    """Synthetic ``ibv_devinfo -v`` excerpt (rdma-core names: LINK_UP (5), 4X, 100.0 Gbps)."""
    text = ("hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t28.39.1002\n"
            "\tvendor_part_id:\t\t\t4126\n\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n"
            "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tactive_width:\t\t4X (2)\n"
            "\t\t\tactive_speed:\t\t100.0 Gbps (128)\n\t\t\tphys_state:\t\tLINK_UP (5)\n"
            "\t\t\tlink_layer:\t\tInfiniBand\n\t\t\tGID[  0]:\t\tfe80:0000:0000:0000\n")
    (port,) = parse_ibv_devinfo(text)
    assert (port.state, port.phys_state, port.rate_gbps, port.is_vf) == (
        "Active", "LinkUp", 400, True)


def test_ibv_devinfo_no_devices_and_garbage() -> None:
    assert parse_ibv_devinfo("No IB devices found\n") == []
    with pytest.raises(ParseError) as err:
        parse_ibv_devinfo("bash: ibv_devinfo: command not found\n")
    assert err.value.kind == "ibv_devinfo"


# --------------------------------------------------------------------------- sysfs


@pytest.mark.parametrize("fault", [None, *hwemu.FAULTS])
def test_sysfs_infiniband_emulator_every_fault(fault: str | None, profile: hwemu.Profile) -> None:
    p = profile if fault is None else hwemu.inject(profile, fault)
    ports = {x.ca: x for x in parse_sysfs_infiniband(hwemu.sysfs_tree(p))}
    assert set(ports) == {h.ca for h in p.hcas}
    for h in p.hcas:
        got = ports[h.ca]
        assert (got.state, got.phys_state, got.rate_gbps, got.link_layer) == (
            h.state, h.phys_state, h.rate, h.link_layer)
        assert (got.base_lid, got.node_guid, got.port_guid) == (
            h.base_lid, h.node_guid, h.port_guid)
        assert (got.ca_type, got.firmware) == (h.ca_type, h.fw_ver)


def test_sysfs_infiniband_values_and_prefixes(profile: hwemu.Profile) -> None:
    tree = {"/sys/" + k: v for k, v in
            hwemu.sysfs_tree(hwemu.inject(profile, "ib-port-down")).items()}
    ports = {x.ca: x for x in parse_sysfs_infiniband(tree)}
    assert tree["/sys/class/infiniband/mlx5_0/ports/1/rate"] == "400 Gb/sec (4X NDR)\n"
    assert ports["mlx5_0"].rate_gbps == 400
    assert (ports["mlx5_3"].state, ports["mlx5_3"].rate_gbps) == ("Down", 10)
    assert parse_sysfs_infiniband({"class/net/eno1/speed": "1000\n"}) == []
