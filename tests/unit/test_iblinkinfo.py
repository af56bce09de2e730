"""iblinkinfo on real captures (tests/fixtures/real/SOURCES.md): an EDR SB7700 switch with two
hosts and Down/Polling ports, the same fabric as `iblinkinfo | grep Up`, two DDR ConnectX CAs
cabled back to back; and what is no iblinkinfo output."""

from pathlib import Path

import pytest

from racklift.facts.host import own_links
from racklift.facts.observed import HCAPortFacts
from racklift.facts.parsers import ParseError, parse_iblinkinfo

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def _links(name: str):
    return parse_iblinkinfo((REAL / name).read_text())


def test_an_edr_switch_with_down_ports_and_its_hosts():
    links = _links("iblinkinfo_edr-sb7700-2-hosts_down-polling-ports-1-18_excerpt.txt")
    assert len(links) == 4  # 16 Down/Polling switch ports have no link
    n02, mgt = (link for link in links if link.node_type == "ca")
    assert (n02.node_guid, n02.node_desc, n02.port) == ("0xec0d9a03003d62be", "n02 HCA-1", 1)
    assert (n02.peer_desc, n02.peer_port, n02.width, n02.speed) == (
        "MF0;SB7700:MSB7700/U1", 17, "4x", "EDR")
    assert (mgt.node_desc, mgt.peer_port) == ("mgt mlx5_0", 36)
    ports = {link.port: link.peer_desc for link in links if link.node_type == "switch"}
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


@pytest.mark.parametrize("text", [
    "rm -rf /\n",
    "CA: n02 HCA-1:\n      0xec0d9a03003d62be      4    1[  ] ==( 4X 25.78125 Gbps Active/ LinkUp"
    ')==>       2   17[  ] "' + "x" * 300 + '" ( )\n',
    "ibwarn: [3617] mad_rpc_open_port: client_register for mgmt 1 failed\n",
])
def test_what_is_no_iblinkinfo_output_is_refused(text):
    with pytest.raises(ParseError):
        parse_iblinkinfo(text)
