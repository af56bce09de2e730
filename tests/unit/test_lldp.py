"""lldpctl's JSON: json0 from real captures (Cumulus, SONiC, H3C, Palo Alto and Ubuntu lldpd
neighbours, tests/fixtures/real/SOURCES.md), the collapsed json form of the same documents, the
json form from old SONiC with a Juniper neighbour and from the lab's own lldpd; its keyvalue
form from real captures (Cisco, Juniper) and one made from a json0 capture; and hostile
input."""

import json
from pathlib import Path

import pytest

from racklift.facts.parsers import ParseError
from racklift.facts.parsers.lldp import parse_lldpctl, parse_lldpctl_json, parse_lldpctl_keyvalue
from racklift.tasks.verify import PARSERS

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
JSON0 = sorted(REAL.glob("lldpctl-json0_*.json"))


def _neighbors(name: str):
    return parse_lldpctl_json((REAL / name).read_text())


def test_a_gpu_host_on_sonic_rail_leaves():
    found = _neighbors("lldpctl-json0_sonic-cuos-ds730-leafs_gpu-host-rail.json")
    assert [(n.interface, n.chassis_name, n.port_id) for n in found][:3] == [
        ("ens1np0", "StorageSW", "Ethernet120"), ("ens841np0", "LEAF03", "Ethernet184"),
        ("ens842np0", "LEAF04", "Ethernet184")]
    assert {n.port_id_type for n in found} == {"local"}
    assert found[0].system_descr.startswith("SONiC Software Version: SONiC.CuOS_4.0-0.R")
    assert found[0].chassis_id == "70:06:92:6e:32:64" and found[0].chassis_id_type == "mac"


def test_a_switch_without_management_address_and_a_peer_known_by_mac():
    h3c, peer, _ = _neighbors("lldpctl-json0_h3c-s5130-and-ubuntu-lldpd-neighbors_gpu-host.json")
    assert (h3c.chassis_name, h3c.port_id, h3c.mgmt_ips) == (
        "DaoCloud_ShangPu_H3C_D01_AccessSwitch", "GigabitEthernet1/0/17", ())
    assert "\r\n" in h3c.system_descr
    assert (peer.port_id_type, peer.port_id) == ("mac", "e8:eb:d3:93:ae:10")


def test_a_firewall_that_sends_few_fields():
    firewall = _neighbors("lldpctl-json0_cumulus-4.1.1-exit_paloalto-and-cumulus-neighbors.json")[2]
    assert (firewall.interface, firewall.chassis_name, firewall.port_id) == (
        "swp3", "firewall01", "ethernet1/1")
    assert firewall.mgmt_ips == () and firewall.port_descr is None


def _collapse(node, key=None):
    """lldpd's json writer applied to a json0 document (json_element_cleanup, 0.9.7+): a
    one-element list becomes its element, {"value": v} becomes v, and an object with a name is
    keyed by it (interfaces and chassis)."""
    if isinstance(node, list):
        items = [_collapse(item, key) for item in node]
        return items[0] if len(items) == 1 else items
    if not isinstance(node, dict):
        return node
    if set(node) == {"value"}:
        return node["value"]
    body = {k: _collapse(v, k) for k, v in node.items() if k != "name"}
    if "name" in node and key in ("interface", "chassis"):
        name = node["name"]
        return {name if isinstance(name, str) else name[0]["value"]: body}
    return {k: _collapse(v, k) for k, v in node.items()}


@pytest.mark.parametrize("path", JSON0, ids=lambda p: p.name)
def test_json_and_json0_of_the_same_neighbours_agree(path):
    document = json.loads(path.read_text())
    collapsed = {"lldp": _collapse(document["lldp"][0])}
    assert parse_lldpctl_json(json.dumps(collapsed)) == parse_lldpctl_json(path.read_text())


def test_one_interface_is_an_object_in_the_json_form():
    document = json.loads((REAL / JSON0[0].name).read_text())
    first = document["lldp"][0]["interface"][0]
    one = {"lldp": {"interface": _collapse([first], "interface")}}
    assert isinstance(one["lldp"]["interface"], dict)
    (neighbor,) = parse_lldpctl_json(json.dumps(one))
    assert neighbor == parse_lldpctl_json(JSON0[0].read_text())[0]


def test_an_old_lldpd_json_form_with_a_juniper_neighbour():
    """SONiC's management port (lldpd < 0.9.7: ttl under the chassis) on a Junos switch that
    sends its SNMP ifIndex as the port id and the logical unit as the description."""
    (juniper,) = _neighbors(
        "lldpctl-json_sonic-2016-mgmt-eth0_juniper-ex-neighbor-anonymized-reserialized.json")
    assert (juniper.interface, juniper.chassis_name, juniper.port_id_type, juniper.port_id,
            juniper.port_descr, juniper.mgmt_ips) == (
        "eth0", "switchad11", "local", "535", "ge-0/0/15.0", ())


def test_the_lab_leaf_as_a_lab_host_hears_it():
    lab = Path(__file__).resolve().parent.parent / "fixtures" / "lab"
    (leaf,) = parse_lldpctl_json(
        (lab / "lldpctl-json_lab-u01-01-eno2_leaf-u01-swp2.json").read_text())
    assert (leaf.interface, leaf.chassis_name, leaf.port_id_type, leaf.port_id) == (
        "eno2", "leaf-u01", "ifname", "swp2")


def test_no_neighbours_is_an_empty_answer():
    assert parse_lldpctl_json('{"lldp": {}}') == ()
    assert parse_lldpctl_json('{"lldp": {\n  }}') == ()


@pytest.mark.parametrize("text", [
    (REAL / "lldpctl-json_sonic-0.9.x-mgmt-eth0_cisco-c6500-neighbor_PARTIAL.txt").read_text(),
    "",
    "[]",
    '{"lldp": 7}',
    '{"lldp": {"interface": "eth0"}}',
    '{"lldp": {"interface": {"eth0": {"chassis": {"a": {}, "b": {}}}}}}',
    '{"lldp": {"interface": {"eth0": {"port": {"id": {"type": "ifname", "value": 5}}}}}}',
    '{"lldp": {"interface": {"' + "x" * 300 + '": {}}}}',
    '{"lldp": {"interface": [' + ",".join(['{"e": {}}'] * 1025) + "]}}",
    "[" * 100_000,
])
def test_what_is_no_lldpctl_json_is_refused(text):
    with pytest.raises(ParseError):
        parse_lldpctl_json(text)


def _keyvalue(name: str):
    return parse_lldpctl_keyvalue((REAL / f"lldpctl-keyvalue_{name}.txt").read_text())


def test_keyvalue_with_a_cisco_description_over_several_lines():
    (cisco,) = _keyvalue("cisco-c2960x-neighbor_multiline-descr")
    assert (cisco.interface, cisco.chassis_name, cisco.chassis_id_type, cisco.chassis_id,
            cisco.port_id_type, cisco.port_id, cisco.port_descr, cisco.mgmt_ips) == (
        "eno1", "s35-b12.dc3", "mac", "38:20:56:67:90:80", "ifname", "Gi1/0/29",
        "GigabitEthernet1/0/29", ("10.43.31.35",))
    assert cisco.system_descr is not None and cisco.system_descr.splitlines() == [
        "Cisco IOS Software, C2960X Software (C2960X-UNIVERSALK9-M), Version 15.0(2a)EX5, "
        "RELEASE SOFTWARE (fc3)", "Technical Support: http://www.cisco.com/techsupport",
        "Copyright (c) 1986-2015 by Cisco Systems, Inc.",
        "Compiled Mon 16-Feb-15 08:16 by prod_rel_team"]


def test_keyvalue_with_juniper_neighbours_sending_their_ifindex():
    """Junos sends the port's SNMP ifIndex as a local port id and its name as the description,
    as in the JSON capture of a Juniper neighbour."""
    f06, f05 = _keyvalue("juniper-qfx5100-2-neighbors_port-local-ifindex")
    assert [(n.interface, n.chassis_name, n.port_id_type, n.port_id, n.port_descr)
            for n in (f06, f05)] == [("eth0", "sw-filer-f06.dc42", "local", "512", "xe-0/0/1"),
                                     ("eth1", "sw-filer-f05.dc42", "local", "512", "xe-0/0/1")]
    assert f05.mgmt_ips == ("10.192.192.115",) and f05.system_descr.startswith("Juniper")


def test_keyvalue_and_json0_of_the_same_neighbours_agree_handmade_variant():
    """The rail capture's json0, written as lldpctl's keyvalue writer writes the same tree
    (SOURCES.md): the same neighbours, whichever the format; `racklift parse lldpctl` and the
    bundle reader take either."""
    json0 = (REAL / "lldpctl-json0_sonic-cuos-ds730-leafs_gpu-host-rail.json").read_text()
    keyvalue = (REAL / "lldpctl-keyvalue_sonic-cuos-ds730-leafs_gpu-host-rail_handmade-from-"
                "json0.txt").read_text()
    assert parse_lldpctl_keyvalue(keyvalue) == parse_lldpctl_json(json0)
    assert PARSERS["lldpctl"] is parse_lldpctl
    assert parse_lldpctl(keyvalue) == parse_lldpctl(json0) == parse_lldpctl_json(json0)


def test_keyvalue_with_two_neighbours_on_one_interface_handmade_variant():
    """Hand-made from the Juniper capture: both switches heard on eth0 (a hub, or a switch
    relaying LLDP): each neighbour begins at its `via`."""
    text = (REAL / "lldpctl-keyvalue_juniper-qfx5100-2-neighbors_port-local-ifindex.txt")
    f06, f05 = parse_lldpctl_keyvalue(text.read_text().replace("lldp.eth1.", "lldp.eth0."))
    assert [(n.interface, n.chassis_name) for n in (f06, f05)] == [
        ("eth0", "sw-filer-f06.dc42"), ("eth0", "sw-filer-f05.dc42")]


@pytest.mark.parametrize("text", [
    "",
    "\n\n",
    "rm -rf /\n",
    "lldp.eth0\n",
    "lldpctl: unable to connect to lldpd daemon\n",
    "lldp.eth0.chassis.name=" + "x" * 300 + "\n",
    "lldp.eth0.via=LLDP\nlldp.eth0.chassis.descr=a\n" + "b" * 5000 + "\n",
    "".join(f"lldp.e{n}.via=LLDP\n" for n in range(1025)),
])
def test_what_is_no_lldpctl_keyvalue_is_refused(text):
    with pytest.raises(ParseError):
        parse_lldpctl(text)
