"""iblinkinfo on real captures (tests/fixtures/real/SOURCES.md): an EDR SB7700 switch with two
hosts and Down/Polling ports, the same fabric as `iblinkinfo | grep Up`, two DDR ConnectX CAs
cabled back to back; a host's port in each state the tool prints (hand-made from the capture);
and what is no iblinkinfo output."""

from dataclasses import replace
from pathlib import Path

import pytest

import emulated
from racklift.facts.host import HostFacts, own_links
from racklift.facts.observed import HCAPortFacts
from racklift.facts.parsers import ParseError, parse_iblinkinfo
from racklift.netbox.expected import ExpectedInterface, LinkPeer
from racklift.verify.cabling import cabling
from racklift.verify.mismatch import CRITICAL

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def _links(name: str):
    return parse_iblinkinfo((REAL / name).read_text())


def test_an_edr_switch_with_down_ports_and_its_hosts():
    links = _links("iblinkinfo_edr-sb7700-2-hosts_down-polling-ports-1-18_excerpt.txt")
    assert len(links) == 20  # the 16 Down/Polling switch ports are kept, without a link
    down = [link for link in links if not link.linked]
    assert [link.port for link in down] == list(range(1, 17))
    assert {(link.state, link.phys_state, link.width) for link in down} == {
        ("Down", "Polling", "")}
    assert {(link.state, link.phys_state) for link in links if link.linked} == {
        ("Active", "LinkUp")}
    n02, mgt = (link for link in links if link.node_type == "ca")
    assert (n02.node_guid, n02.node_desc, n02.port) == ("0xec0d9a03003d62be", "n02 HCA-1", 1)
    assert (n02.peer_desc, n02.peer_port, n02.width, n02.speed) == (
        "MF0;SB7700:MSB7700/U1", 17, "4x", "EDR")
    assert (mgt.node_desc, mgt.peer_port) == ("mgt mlx5_0", 36)
    ports = {link.port: link.peer_desc for link in links
             if link.node_type == "switch" and link.linked}
    assert ports == {17: "n02 HCA-1", 18: "n01 HCA-1"}
    assert {link.node_guid for link in links if link.node_type == "switch"} == {
        "0x506b4b0300820910"}


def test_grep_up_port_lines_alone_and_a_host_found_by_its_port_guid():
    links = _links("iblinkinfo_edr-sb7700-2-hosts_grep-Up_excerpt.txt")
    assert [link.node_type for link in links] == ["ca", "ca", "switch", "switch", "switch", "ca"]
    n01 = HCAPortFacts(ca="mlx5_0", ca_type=None, firmware=None, node_guid="0xec0d9a03003d6779",
                       port=1, state="Active", phys_state="LinkUp", rate_gbps=100,
                       link_layer="InfiniBand", port_guid="0xec0d9a03003d677a", base_lid=1,
                       is_vf=False)
    found = own_links(links, [n01])
    assert found is not None and found["mlx5_0"].peer_port == 18


def test_two_ddr_cas_back_to_back():
    a, b = _links("iblinkinfo_ddr-connectx-mt25408_2-cas-back-to-back.txt")
    assert {a.speed, b.speed} == {"DDR"} and (a.node_type, b.node_type) == ("ca", "ca")
    assert (b.node_desc, b.peer_desc) == ("hostname mlx4_0", "MT25408 ConnectX Mellanox "
                                          "Technologies")


# n02's port line of the real capture, and the same port as iblinkinfo prints it in other
# states (its source, infiniband-diags/iblinkinfo.c: a Down port has no link and no peer).
N02 = ("      0xec0d9a03003d62be      4    1[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>"
       '       2   17[  ] "MF0;SB7700:MSB7700/U1" ( )')
N02_DOWN = ('      0xec0d9a03003d62be      4    1[  ] ==(                Down/ Polling)==>'
            '             [  ] "" ( )')


@pytest.mark.parametrize(("line", "state", "peer_port", "speed"), [
    (N02, ("Active", "LinkUp"), 17, "EDR"),
    (N02.replace("Active/", "Initialize/"), ("Initialize", "LinkUp"), 17, "EDR"),
    (N02.replace("Active/", " Armed/"), ("Armed", "LinkUp"), 17, "EDR"),
    (N02_DOWN, ("Down", "Polling"), None, ""),
    (N02.split("==>")[0] + '==>      "Port not available"', ("Active", "LinkUp"), None, ""),
    (N02.replace("     25.78125 Gbps", " 10.0 Gbps (FDR10)"), ("Active", "LinkUp"), 17,
     "FDR10"),
])
def test_a_cas_port_keeps_its_state_and_one_without_link_is_kept_handmade_variant(
        line, state, peer_port, speed):
    """Hand-made: the real capture with n02's port line in each state iblinkinfo prints."""
    text = (REAL / "iblinkinfo_edr-sb7700-2-hosts_down-polling-ports-1-18_excerpt.txt").read_text()
    assert N02 in text
    (n02,) = [link for link in parse_iblinkinfo(text.replace(N02, line))
              if link.node_desc == "n02 HCA-1"]
    assert ((n02.state, n02.phys_state), n02.peer_port, n02.speed) == (state, peer_port, speed)
    assert n02.node_guid == "0xec0d9a03003d62be" and n02.node_type == "ca"


@pytest.mark.parametrize(("line", "found"), [
    (N02, {}),
    (N02.replace("Active/", "Initialize/"),
     {"cable.link_state[mlx5_0]": ("Active/LinkUp", "Initialize/LinkUp", CRITICAL)}),
    (N02.replace("Active/", " Armed/"),
     {"cable.link_state[mlx5_0]": ("Active/LinkUp", "Armed/LinkUp", CRITICAL)}),
    (N02_DOWN, {"cable.no_neighbor[mlx5_0]": ("sb7700 p17", "no link (Down/Polling)", CRITICAL)}),
])
def test_the_gate_takes_only_an_active_link_and_names_the_state_handmade_variant(line, found):
    """Hand-made, as above: n02's HCA, cabled in NetBox to the switch's port 17, is a good link
    only Active/LinkUp; Down, it is reported as a port without a link."""
    text = (REAL / "iblinkinfo_edr-sb7700-2-hosts_down-polling-ports-1-18_excerpt.txt").read_text()
    n02 = HCAPortFacts(ca="mlx5_0", ca_type=None, firmware=None, node_guid="0xec0d9a03003d62bd",
                       port=1, state=None, phys_state=None, rate_gbps=None,
                       link_layer="InfiniBand", port_guid="0xec0d9a03003d62be", base_lid=4,
                       is_vf=False)
    record = replace(emulated.expected_host(), parsed=None, interfaces=(ExpectedInterface(
        "mlx5_0", "infiniband-edr", False, True, None, peer=LinkPeer("sb7700", "p17")),))
    links = own_links(parse_iblinkinfo(text.replace(N02, line)), [n02])
    facts = HostFacts("n02", hca_ports=(n02,), ib_links=links)
    assert {m.field: (m.expected, m.observed, m.severity)
            for m in cabling(record, facts)} == found


@pytest.mark.parametrize("text", [
    "rm -rf /\n",
    "CA: n02 HCA-1:\n      0xec0d9a03003d62be      4    1[  ] ==( 4X 25.78125 Gbps Active/ LinkUp"
    ')==>       2   17[  ] "' + "x" * 300 + '" ( )\n',
    "ibwarn: [3617] mad_rpc_open_port: client_register for mgmt 1 failed\n",
])
def test_what_is_no_iblinkinfo_output_is_refused(text):
    with pytest.raises(ParseError):
        parse_iblinkinfo(text)
