"""ibnetdiscover's fabric map on real captures (tests/fixtures/real/SOURCES.md): an NDR
Quantum-2 DGX fabric, an HDR storage fabric with EDR storage HCAs, a mixed EDR/FDR/QDR/SDR lab
fabric with loopback cables and a warning before the header, a QDR switch, a GB200 HCA that
found no links (each CA port without a link kept as such); and hostile input."""

from collections import Counter
from pathlib import Path

import pytest

from racklift.facts.parsers import ParseError
from racklift.facts.parsers.ibnetdiscover import parse_ibnetdiscover

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def _links(name: str):
    return parse_ibnetdiscover((REAL / name).read_text())


def test_an_ndr_dgx_fabric():
    links = _links("ibnetdiscover_ndr-quantum2-qm9701-dgx_full-fabric-plain.txt")
    nodes = {(link.node_guid, link.node_type) for link in links}
    assert Counter(kind for _, kind in nodes) == {"switch": 40, "ca": 582}
    assert {(link.width, link.speed) for link in links} == {("4x", "NDR")}
    (hca,) = [link for link in links if link.node_desc == "a08-p1-dgx-04-c17 mlx5_5"]
    assert (hca.node_guid, hca.port, hca.peer_type, hca.peer_port) == (
        "0xe09d7303007a5a68", 1, "switch", 17)
    assert hca.peer_desc == "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"
    # Every cable is listed from both ends, and the two ends agree.
    ends = {(link.node_guid, link.port): (link.peer_guid, link.peer_port) for link in links}
    assert all(ends[peer] == end for end, peer in ends.items())


def test_an_hdr_storage_fabric_with_edr_hcas_on_hdr_leaves():
    links = _links("ibnetdiscover_hdr-qm8700-selene_storage-fabric-edr-ai400x.txt")
    assert Counter((link.width, link.speed) for link in links) == {
        ("4x", "HDR"): 5932, ("4x", "EDR"): 640}
    # Every EDR link is a DDN AI400X HCA's, seen from either end.
    assert all("ai400x" in f"{link.node_desc} {link.peer_desc}" for link in links
               if link.speed == "EDR")
    (edr,) = [link for link in links if link.node_desc == "ai400x-157 HCA-1"]
    assert (edr.node_guid, edr.peer_desc, edr.peer_port) == (
        "0x0c42a10300595394", "MF0;SLG04-16:MQM8700/U1", 1)


def test_mixed_speeds_loopback_cables_and_a_warning_before_the_header():
    links = _links(
        "ibnetdiscover_mixed-edr-fdr-qdr-sdr-switchib-sx6012_loopback-cables-stderr-line.txt")
    assert {link.speed for link in links if link.linked} == {"EDR", "FDR", "QDR", "SDR"}
    # 2-port CAs with one port cabled: the other is in the map without a link.
    assert {(link.node_desc, link.port) for link in links if not link.linked} == {
        ("r-ufm111 HCA-1", 1), ("r-ufm101 HCA-2", 2), ("r-ufm100 HCA-2", 2)}
    loops = [link for link in links if link.node_guid == link.peer_guid]
    assert {(link.port, link.peer_port) for link in loops} >= {(1, 2), (2, 1), (19, 21)}
    (sdr,) = [link for link in links if link.speed == "SDR" and link.node_type == "switch"]
    assert (sdr.port, sdr.peer_desc) == (8, "r-ufm96 HCA-1")


def test_a_qdr_switch_and_cas_with_ports_without_links():
    """ibnetdiscover prints a port only with its link: a CA's other ports are in the map without
    one, so a host whose HCA port has no link is reported as such, not as absent."""
    switch, ca, unlinked = _links("ibnetdiscover_qdr-sun-dcs36_single-link.txt")
    assert (switch.node_desc, switch.port, switch.peer_port, switch.speed) == (
        "Sun DCS 36 QDR switch localhost", 23, 2, "QDR")
    assert (ca.node_type, ca.port, ca.peer_guid) == ("ca", 2, "0x0021283a8389a0a0")
    assert (unlinked.node_desc, unlinked.port, unlinked.linked) == ("nsn33-43 HCA-1", 1, False)
    (isolated,) = _links("ibnetdiscover_gb200-cx-hca_isolated-ca-no-links.txt")
    assert (isolated.node_guid, isolated.node_type, isolated.port, isolated.peer_port) == (
        "0xb8e92403009ca838", "ca", 1, None)


@pytest.mark.parametrize("text", [
    "",
    "ibwarn: [1234] mad_rpc_open_port: can't open UMAD port ((null):0)\n",
    "# Topology file: generated on now\nrm -rf /\n",
    '# Topology file: x\n[1]\t"H-e09d7303007a4bd8"[1](e09d7303007a4bd8) \t\t# "a" lid 1 4xNDR\n',
    '# Topology file: x\nSwitch\t65 "S-2c5eab0300b87b40"\t\t# "' + "x" * 300 + '" lid 1\n',
])
def test_what_is_no_fabric_map_is_refused(text):
    with pytest.raises(ParseError):
        parse_ibnetdiscover(text)


def test_the_ports_report_with_unconnected_ports():
    links = _links("ibnetdiscover-p_edr-osc-cluster_excerpt-with-unconnected-ports.txt")
    # The two unconnected switch ports (speed ??? and SDR) are ports without a link.
    assert {(link.node_desc, link.port) for link in links if not link.linked} == {
        ("ib-i4l1s01", 37), ("ib-i7l2s01", 80)}
    assert len(links) == 9
    (o0001,) = [link for link in links if link.node_desc == "o0001 HCA-1"]
    assert (o0001.node_guid, o0001.node_type, o0001.port) == ("0x7cfe9003003b4bde", "ca", 1)
    assert (o0001.peer_desc, o0001.peer_port, o0001.peer_type) == ("ib-i1l1s01", 10, "switch")
    assert (o0001.width, o0001.speed) == ("4x", "EDR")
    uplink = next(link for link in links if link.peer_desc == "ib-i1l2s01")
    assert (uplink.node_type, uplink.port, uplink.peer_port) == ("switch", 1, 1)


@pytest.mark.parametrize("line", [
    "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' )",
    "CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'a' - 'b' ); id",
])
def test_a_ports_report_with_a_line_that_is_no_port_is_refused(line):
    good = "CA   133  1 0x7cfe9003003b4b96 4x EDR - SW  1719 11 0x7cfe9003009ce5b0 ( 'a' - 'b' )"
    with pytest.raises(ParseError, match="no port of a ports report"):
        parse_ibnetdiscover(f"{good}\n{line}\n")
