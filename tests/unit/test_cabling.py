"""The gate's cabling check on real captures: a GPU host's rail NICs as lldpd heard SONiC leaves,
and an NDR DGX fabric as ibnetdiscover mapped it, against the far ends NetBox records."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import emulated
from racklift.facts.bundle import Output
from racklift.facts.host import HostFacts, NICFacts, from_bundle, own_links
from racklift.facts.observed import HCAPortFacts
from racklift.facts.parsers import parse_ibnetdiscover, parse_lldpctl_json
from racklift.netbox.expected import ExpectedHost, ExpectedInterface, LinkPeer
from racklift.verify.cabling import cabling, ib_is, lldp_is, switch_name
from racklift.verify.compare import compare
from racklift.verify.mismatch import CRITICAL, WARNING
from racklift.verify.record_cables import SeenLink, far_device, links_to_record

REAL = Path(__file__).parents[1] / "fixtures" / "real"
# A GPU host's NICs: ens1np0 to a storage switch, four rails to LEAF01-04 (SONiC, port ids
# of type local).
LLDP = parse_lldpctl_json((REAL / "lldpctl-json0_sonic-cuos-ds730-leafs_gpu-host-rail.json")
                          .read_text())
FABRIC = parse_ibnetdiscover((REAL / "ibnetdiscover_ndr-quantum2-qm9701-dgx_full-fabric-plain.txt")
                             .read_text())
RAILS = {"ens108np0": "leaf01", "ens110np0": "leaf02", "ens841np0": "leaf03",
         "ens842np0": "leaf04"}
# DGX a08-p1-dgx-04-c17's mlx5_5 (node GUID from the map) on leaf A09-P1-IBLEAF-04-04 port 17.
DGX_CA = HCAPortFacts(ca="mlx5_5", ca_type="MT4129", firmware=None,
                      node_guid="0xe09d7303007a5a68", port=1, state="Active",
                      phys_state="LinkUp", rate_gbps=400, link_layer="InfiniBand",
                      port_guid=None, base_lid=None, is_vf=False)


def _host(peers: dict[str, tuple[str, str]], provisioning: str = "ens1np0") -> ExpectedHost:
    """The emulated host's record with these interfaces cabled (name → switch, port); mlx5_*
    are NDR ports, the rest 100G Ethernet."""
    interfaces = tuple(ExpectedInterface(
        name, "infiniband-ndr" if name.startswith("mlx5") else "100gbase-x-qsfp28", False,
        True, None, peer=LinkPeer(*peer)) for name, peer in peers.items())
    return replace(emulated.expected_host(), interfaces=interfaces,
                   provisioning_interface=provisioning, parsed=None)


def _findings(expected: ExpectedHost, facts: HostFacts) -> dict[str, tuple]:
    return {m.field: (m.expected, m.observed, m.severity) for m in cabling(expected, facts)}


def _eth(**changes: tuple[str, str]) -> dict[str, tuple[str, str]]:
    plan = {"ens1np0": ("storagesw", "Ethernet120"),
            **{nic: (leaf, "Ethernet184") for nic, leaf in RAILS.items()}}
    return {**plan, **changes}


def test_rails_as_netbox_records_them_pass_whatever_the_case_of_names():
    assert _findings(_host(_eth()), HostFacts("h", lldp=LLDP)) == {}


def test_two_rails_swapped_are_named_swapped_each_with_the_other():
    record = _host(_eth(ens108np0=("leaf02", "Ethernet184"), ens110np0=("leaf01", "Ethernet184")))
    found = list(cabling(record, HostFacts("h", lldp=LLDP)))
    assert {m.field for m in found} == {"cable.swapped[ens108np0]", "cable.swapped[ens110np0]"}
    first = next(m for m in found if m.field == "cable.swapped[ens108np0]")
    assert (first.expected, first.observed) == ("leaf02 Ethernet184", "LEAF01 Ethernet184")
    assert "ens110np0" in first.hint
    # A data rail, not the provisioning port: what LLDP heard is evidence, the host is refused.
    assert first.severity == CRITICAL


def test_a_port_on_another_switch_port_is_a_wrong_peer_and_critical_on_any_port():
    found = _findings(_host(_eth(ens1np0=("storagesw", "Ethernet0"),
                                 ens841np0=("leaf07", "Ethernet184"))),
                      HostFacts("h", lldp=LLDP))
    assert found == {
        "cable.wrong_peer[ens1np0]": ("storagesw Ethernet0", "StorageSW Ethernet120", CRITICAL),
        "cable.wrong_peer[ens841np0]": ("leaf07 Ethernet184", "LEAF03 Ethernet184", CRITICAL)}


def _silent_switches(record: ExpectedHost) -> ExpectedHost:
    """The record with its device type's context saying its switches send no LLDP."""
    hardware = {**record.config.get("hardware", {}), "lldp_switches": False}
    return replace(record, config={**record.config, "hardware": hardware}, parsed=None)


def test_a_cabled_port_lldpd_heard_nothing_on_has_no_neighbor():
    record = _host(_eth(eno1=("storagesw", "Ethernet1")))
    # The device type's switches speak LLDP (racklift's default): a silent port is refused.
    assert record.desired is not None and record.desired.hardware.lldp_switches
    found = _findings(record, HostFacts("h", lldp=LLDP))
    assert found == {"cable.no_neighbor[eno1]": ("storagesw Ethernet1", None, CRITICAL)}
    # Where the context says they do not, a link that is up may be just that: a warning.
    found = _findings(_silent_switches(record), HostFacts("h", lldp=LLDP))
    assert found == {"cable.no_neighbor[eno1]": ("storagesw Ethernet1", None, WARNING)}


@pytest.mark.parametrize(("state", "severity"), [("DOWN", CRITICAL), ("LOWERLAYERDOWN", CRITICAL),
                                                 ("NOTPRESENT", CRITICAL), ("UP", WARNING),
                                                 (None, WARNING)])
def test_a_silent_port_whose_link_is_down_is_critical(state, severity):
    """A pulled cable: the NIC (matched by its NetBox MAC, whatever the OS names it) has no
    link, so the silence is not a switch that does not speak LLDP, even where the device
    type's switches may not."""
    record = _silent_switches(_host(_eth(eno1=("storagesw", "Ethernet1"))))
    record = replace(record, interfaces=tuple(
        replace(i, mac="02:00:00:00:00:01") if i.name == "eno1" else i
        for i in record.interfaces))
    nic = NICFacts("enp1s0", "02:00:00:00:00:01", state, 100000)
    found = _findings(record, HostFacts("h", lldp=LLDP, nics=(nic,)))
    assert found == {"cable.no_neighbor[eno1]": ("storagesw Ethernet1", None, severity)}


def test_lldp_not_collected_fails_a_host_whose_cables_it_cannot_check():
    assert _findings(_host(_eth()), HostFacts("h"))["cable.lldp"][2] == CRITICAL
    uncabled_provisioning = _host(_eth(), provisioning="eno1")
    assert _findings(uncabled_provisioning, HostFacts("h"))["cable.lldp"][2] == CRITICAL
    # Only where the switches send no LLDP, and the provisioning port is not cabled, it warns.
    assert _findings(_silent_switches(uncabled_provisioning),
                     HostFacts("h"))["cable.lldp"][2] == WARNING
    assert _findings(_silent_switches(_host(_eth())), HostFacts("h"))["cable.lldp"][2] == CRITICAL


def test_a_bundle_with_lldpctl_keyvalue_gives_the_same_verdict_handmade_variant():
    """An offline bundle from other tools holds `lldpctl -f keyvalue` (hand-made from the rail
    capture, SOURCES.md): the same neighbours, the same findings."""
    keyvalue = (REAL / "lldpctl-keyvalue_sonic-cuos-ds730-leafs_gpu-host-rail_handmade-from-"
                "json0.txt").read_text()
    healthy = emulated.bundle(emulated.healthy_profile())
    bundle = replace(healthy, outputs={**healthy.outputs, "lldpctl.json": Output(keyvalue)})
    facts = from_bundle(bundle)
    assert facts.lldp == LLDP
    swapped = _host(_eth(ens108np0=("leaf02", "Ethernet184"), ens110np0=("leaf01", "Ethernet184")))
    assert _findings(swapped, facts) == _findings(swapped, HostFacts("h", lldp=LLDP))
    assert set(_findings(swapped, facts)) == {"cable.swapped[ens108np0]",
                                              "cable.swapped[ens110np0]"}


def test_an_uncabled_record_is_not_checked():
    cabled = emulated.expected_host()
    host = replace(cabled, interfaces=tuple(replace(i, peer=None) for i in cabled.interfaces),
                   parsed=None)
    assert any(m.field.startswith("cable") for m in compare(cabled, HostFacts("h")))
    assert not any(m.field.startswith("cable") for m in compare(host, HostFacts("h")))


def test_an_fqdn_system_name_and_a_port_description_match():
    neighbor = replace(LLDP[1], chassis_name="LEAF03.fabric.example", port_id="etp47",
                       port_descr="Ethernet184")
    assert lldp_is(neighbor, LinkPeer("leaf03", "Ethernet184"))
    assert not lldp_is(neighbor, LinkPeer("leaf03.fabric", "Ethernet184"))
    assert not lldp_is(neighbor, LinkPeer("leaf03", "Ethernet18"))


def test_the_dgx_hca_port_is_found_by_node_guid_on_its_leaf_port():
    links = own_links(FABRIC, [DGX_CA])
    assert links is not None and links["mlx5_5"].peer_port == 17
    record = _host({"mlx5_5": ("a09-p1-ibleaf-04-04", "p17")})
    assert _findings(record, HostFacts("h", ib_links=links)) == {}
    moved = _host({"mlx5_5": ("a09-p1-ibleaf-04-04", "p18")})
    assert _findings(moved, HostFacts("h", ib_links=links)) == {
        "cable.wrong_peer[mlx5_5]": ("a09-p1-ibleaf-04-04 p18",
                                     "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1 (0x2c5eab0300b87b40) "
                                     "port 17", CRITICAL)}


def test_a_node_description_never_picks_a_hosts_link():
    # Another CA that calls itself c17's mlx5_5: only the node GUID ibstat gives counts.
    impostor = replace(next(link for link in FABRIC if link.node_desc.endswith("c16 mlx5_5")),
                       node_desc="a08-p1-dgx-04-c17 mlx5_5", peer_port=99)
    links = own_links((impostor, *FABRIC), [DGX_CA])
    assert links is not None and links["mlx5_5"].peer_port == 17
    assert own_links(FABRIC, [replace(DGX_CA, node_guid="0x0000000000000001")]) == {}


def test_an_ndr_port_trained_at_hdr_is_degraded_handmade_variant():
    # Hand-made: the real map's c17 link with its speed changed to HDR.
    text = (REAL / "ibnetdiscover_ndr-quantum2-qm9701-dgx_full-fabric-plain.txt").read_text()
    line = next(line for line in text.splitlines() if line.startswith("[1](e09d7303007a5a68)"))
    degraded = parse_ibnetdiscover(text.replace(line, line.replace("4xNDR", "2xHDR")))
    links = own_links(degraded, [DGX_CA])
    found = _findings(_host({"mlx5_5": ("a09-p1-ibleaf-04-04", "p17")}),
                      HostFacts("h", ib_links=links))
    assert found == {"cable.degraded[mlx5_5]": ("4xNDR", "2xHDR", CRITICAL)}


def test_an_edr_hca_on_an_hdr_port_is_degraded_and_an_hdr_one_passes():
    """Selene's storage fabric (real): DGX storage ports at 4xHDR and DDN AI400X HCAs at 4xEDR
    on the same MQM8700 leaves. Recorded in NetBox as HDR ports, the EDR one is degraded."""
    fabric = parse_ibnetdiscover(
        (REAL / "ibnetdiscover_hdr-qm8700-selene_storage-fabric-edr-ai400x.txt").read_text())
    dgx = replace(DGX_CA, ca="mlx5_4", node_guid="0x0c42a10300280050", rate_gbps=200)
    ai400x = replace(DGX_CA, ca="mlx5_0", node_guid="0x0c42a10300595394", rate_gbps=100)
    record = _host({"mlx5_4": ("slg02-05", "p7"), "mlx5_0": ("SLG04-16", "p1")})
    record = replace(record, interfaces=tuple(replace(i, type="infiniband-hdr")
                                              for i in record.interfaces))
    found = _findings(record, HostFacts("h", ib_links=own_links(fabric, [dgx, ai400x])))
    assert found == {"cable.degraded[mlx5_0]": ("4xHDR", "4xEDR", CRITICAL)}


def test_ib_swap_and_no_link_and_not_collected():
    c16 = replace(DGX_CA, ca="mlx5_6", node_guid="0xe09d7303007a4e18")
    links = own_links(FABRIC, [DGX_CA, c16])
    swapped = _host({"mlx5_5": ("A09-P1-IBLEAF-04-04", "p16"),
                     "mlx5_6": ("A09-P1-IBLEAF-04-04", "p17"),
                     "mlx5_7": ("A09-P1-IBLEAF-04-04", "p18")})
    found = _findings(swapped, HostFacts("h", ib_links=links))
    assert set(found) == {"cable.swapped[mlx5_5]", "cable.swapped[mlx5_6]",
                          "cable.no_neighbor[mlx5_7]"}
    assert {f[2] for f in found.values()} == {CRITICAL}
    assert _findings(swapped, HostFacts("h"))["cable.infiniband"][2] == CRITICAL


def _no_link(link):
    """`link`'s CA port as the map lists it without a link."""
    return replace(link, peer_guid="", peer_type="", peer_desc="", peer_port=None, width="",
                   speed="")


@pytest.mark.parametrize("in_map", [False, True])
def test_a_port_cabled_to_where_a_port_without_a_link_belongs_is_a_wrong_peer_not_a_swap(in_map):
    """mlx5_5 is on p17, which NetBox gives mlx5_6; mlx5_6 has no link (the map lacks its CA,
    or lists it without a link), so it sees nothing, and certainly not mlx5_5's p18: no swap."""
    link = own_links(FABRIC, [DGX_CA])["mlx5_5"]  # type: ignore[index]
    links = {"mlx5_5": link, **({"mlx5_6": _no_link(link)} if in_map else {})}
    record = _host({"mlx5_5": ("a09-p1-ibleaf-04-04", "p18"),
                    "mlx5_6": ("a09-p1-ibleaf-04-04", "p17")})
    found = _findings(record, HostFacts("h", ib_links=links))
    assert set(found) == {"cable.wrong_peer[mlx5_5]", "cable.no_neighbor[mlx5_6]"}
    assert found["cable.no_neighbor[mlx5_6]"][1] == ("no link" if in_map else None)


def test_a_degraded_port_listed_after_a_port_without_a_link_is_still_degraded():
    link = own_links(FABRIC, [DGX_CA])["mlx5_5"]  # type: ignore[index]
    links = {"mlx5_4": _no_link(link), "mlx5_5": replace(link, width="2x", speed="HDR")}
    record = _host({"mlx5_3": ("a09-p1-ibleaf-04-04", "p15"),
                    "mlx5_4": ("a09-p1-ibleaf-04-04", "p16"),
                    "mlx5_5": ("a09-p1-ibleaf-04-04", "p17")})
    found = _findings(record, HostFacts("h", ib_links=links))
    assert found == {"cable.no_neighbor[mlx5_3]": ("a09-p1-ibleaf-04-04 p15", None, CRITICAL),
                     "cable.no_neighbor[mlx5_4]": ("a09-p1-ibleaf-04-04 p16", "no link",
                                                   CRITICAL),
                     "cable.degraded[mlx5_5]": ("4xNDR", "2xHDR", CRITICAL)}


@pytest.mark.parametrize("port, matches", [("p17", True), ("IB1/17", True), ("17", True),
                                           ("p7", False), ("uplink", False)])
def test_a_switch_port_name_is_read_by_its_trailing_number(port, matches):
    link = own_links(FABRIC, [DGX_CA])["mlx5_5"]  # type: ignore[index]
    assert ib_is(link, LinkPeer("a09-p1-ibleaf-04-04", port)) is matches


MIXED = "ibnetdiscover_mixed-edr-fdr-qdr-sdr-switchib-sx6012_loopback-cables-stderr-line.txt"


@pytest.mark.parametrize(("desc", "name"), [
    ("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", "A09-P1-IBLEAF-04-04"),  # NDR Quantum-2
    ("MF0;SLG04-16:MQM8700/U1", "SLG04-16"),  # HDR storage fabric
    ("MF0;switch-de779e:SX6012/U1", "switch-de779e"),
    ("MF0;SB7700:MSB7700/U1", "SB7700"),  # iblinkinfo's EDR switch
    ("ib-i1l1s01", "ib-i1l1s01"),  # a ports report's switch, named by the site
    ("a08-p1-dgx-04-c17 mlx5_5", "a08-p1-dgx-04-c17"),  # a host's CA
    ("SwitchIB Mellanox Technologies", None),  # factory defaults: every such switch's
    ("Sun DCS 36 QDR switch localhost", None),
    ("MT4129 ConnectX7   Mellanox Technologies", None),
])
def test_the_name_a_real_node_description_gives(desc, name):
    assert switch_name(desc) == name


@pytest.mark.parametrize("capture", sorted(p.name for p in REAL.glob("ibnetdiscover*")))
def test_no_two_switches_of_a_real_fabric_share_a_name(capture):
    """Words every switch shares (MF0, U1, its model) are never a name: on each real fabric,
    a name belongs to one switch only."""
    fabric = parse_ibnetdiscover((REAL / capture).read_text())
    switches = {(link.node_guid, link.node_desc) for link in fabric
                if link.node_type == "switch"}
    names = [switch_name(desc) for _, desc in switches]
    found = [n for n in names if n is not None]
    assert len(found) == len(set(found))
    assert not {"MF0", "U1", "MQM9701", "MQM8700", "SX6012", "SwitchIB"} & set(found)


@pytest.mark.parametrize("device", ["MF0", "U1", "MQM9701", "mf0;a09-p1-ibleaf-04-04"])
def test_a_word_every_switch_shares_matches_no_switch(device):
    link = own_links(FABRIC, [DGX_CA])["mlx5_5"]  # type: ignore[index]
    assert not ib_is(link, LinkPeer(device, "p17"))


def test_a_switch_port_whose_guid_netbox_keeps_is_matched_by_it():
    """NetBox's WWN of the switch's port (EUI-64, as NetBox writes it) is the switch's GUID as
    the map prints it: it decides, whatever the node description says."""
    link = own_links(FABRIC, [DGX_CA])["mlx5_5"]  # type: ignore[index]
    leaf, other = "2C:5E:AB:03:00:B8:7B:40", "2C:5E:AB:03:00:B8:7B:C0"  # -04-04, -04-02
    assert ib_is(link, LinkPeer("a09-p1-ibleaf-04-04", "p17", leaf))
    assert ib_is(link, LinkPeer("ib-leaf-renamed", "p17", leaf))
    assert not ib_is(link, LinkPeer("a09-p1-ibleaf-04-04", "p18", leaf))
    # A switch that calls itself the recorded one is not it.
    record = _host({"mlx5_5": ("a09-p1-ibleaf-04-04", "p17")})
    record = replace(record, interfaces=tuple(replace(i, peer=replace(i.peer, wwn=other))
                                              for i in record.interfaces if i.peer))
    found = _findings(record, HostFacts("h", ib_links={"mlx5_5": link}))
    assert set(found) == {"cable.wrong_peer[mlx5_5]"}


def test_a_switch_with_its_factory_description_is_told_by_guid_only():
    """The mixed lab fabric's SwitchIB prints its factory node description, which names every
    SwitchIB: only its GUID in NetBox tells which switch a host's port is on."""
    fabric = parse_ibnetdiscover((REAL / MIXED).read_text())
    ufm216 = replace(DGX_CA, ca="mlx5_0", node_guid="0xe41d2d030061f957")
    link = own_links(fabric, [ufm216])["mlx5_0"]  # type: ignore[index]
    assert (link.peer_desc, link.peer_port) == ("SwitchIB Mellanox Technologies", 34)
    assert not ib_is(link, LinkPeer("SwitchIB", "34"))
    assert ib_is(link, LinkPeer("ib-edr-1", "34", "E4:1D:2D:03:00:03:E4:70"))


def test_a_hca_port_without_a_link_is_reported_as_such():
    """The GB200 HCA found no links: it is in the map without one, so its port is reported as
    having no link; a CA the map lacks is reported as seeing no one."""
    fabric = parse_ibnetdiscover(
        (REAL / "ibnetdiscover_gb200-cx-hca_isolated-ca-no-links.txt").read_text())
    gb200 = replace(DGX_CA, ca="mlx5_0", node_guid="0xb8e92403009ca838")
    record = _host({"mlx5_0": ("ib-leaf-1", "p1")})
    assert _findings(record, HostFacts("h", ib_links=own_links(fabric, [gb200]))) == {
        "cable.no_neighbor[mlx5_0]": ("ib-leaf-1 p1", "no link", CRITICAL)}
    assert _findings(record, HostFacts("h", ib_links={})) == {
        "cable.no_neighbor[mlx5_0]": ("ib-leaf-1 p1", None, CRITICAL)}


def test_of_a_cas_ports_the_linked_one_is_its_link():
    """The Sun capture's 2-port HCA is cabled on port 2 only: port 1 is in the map without a
    link, and the CA's link (ib_links are by CA) is port 2's, whichever the map lists last."""
    fabric = parse_ibnetdiscover((REAL / "ibnetdiscover_qdr-sun-dcs36_single-link.txt").read_text())
    ports = [replace(DGX_CA, ca="mlx4_0", node_guid="0x0003ba000100e388", port=n) for n in (1, 2)]
    links = own_links(fabric, ports)
    assert links is not None and (links["mlx4_0"].port, links["mlx4_0"].peer_port) == (2, 23)


def test_a_ports_report_finds_a_ca_by_its_port_guid():
    report = parse_ibnetdiscover(
        (REAL / "ibnetdiscover-p_edr-osc-cluster_excerpt-with-unconnected-ports.txt").read_text())
    o0001 = replace(DGX_CA, ca="mlx5_0", node_guid="0x7cfe9003003b4bdd",
                    port_guid="0x7cfe9003003b4bde")
    links = own_links(report, [o0001])
    assert links is not None and links["mlx5_0"].peer_port == 10
    record = _host({"mlx5_0": ("ib-i1l1s01", "10")})
    assert _findings(record, HostFacts("h", ib_links=links)) == {
        "cable.degraded[mlx5_0]": ("4xNDR", "4xEDR", CRITICAL)}  # an EDR fabric, an NDR record


def test_record_cables_takes_only_uncabled_ports_of_a_host_that_is_itself():
    facts = from_bundle(emulated.bundle(emulated.healthy_profile()))
    record = emulated.expected_host()
    uncabled = replace(record, interfaces=tuple(
        replace(i, peer=None) if i.name in ("mlx5_0", "eno2") else i for i in record.interfaces),
        parsed=None)
    heard = (replace(LLDP[1], interface="eno2"),)  # LEAF03 Ethernet184, as if heard on eno2
    seen = links_to_record(uncabled, replace(facts, lldp=heard))
    assert [(s.interface, s.port) for s in seen] == [("eno2", "Ethernet184"), ("mlx5_0", 1)]
    assert seen[1].devices == ("ib-leaf-u01-1-0",) and seen[0].devices == ("LEAF03",)
    # Each link names where its far end must be: the host's site, its context's switch roles.
    assert {(s.site, s.switch_roles) for s in seen} == {(record.site, ("leaf-switch",))}
    # A port the map shows without a link sees no switch port to record.
    assert facts.ib_links is not None
    unlinked = replace(facts.ib_links["mlx5_0"], peer_guid="", peer_type="", peer_desc="",
                       peer_port=None, width="", speed="")
    no_link = replace(facts, lldp=heard, ib_links={**facts.ib_links, "mlx5_0": unlinked})
    assert [s.interface for s in links_to_record(uncabled, no_link)] == ["eno2"]
    wrong = replace(facts, system=replace(facts.system, serial="S999"))
    assert links_to_record(uncabled, wrong) == []


def _device(id_: int, name: str, site: str = "lab1", role: str = "leaf-switch") -> dict:
    return {"id": id_, "name": name, "site": {"id": 1, "slug": site},
            "role": {"id": 2, "slug": role}}


def test_a_far_end_is_only_a_switch_of_the_hosts_site_and_never_a_guess():
    link = SeenLink(7, "eno1", ("LEAF-R01",), "swp1", "lab1", ("leaf-switch", "spine"))
    switch = _device(10, "leaf-r01")
    assert far_device(link, [switch]) == 10  # the name, case aside
    assert far_device(link, [_device(11, "leaf-r01", role="spine")]) == 11
    # Planted: a host naming another GPU server as its neighbour gets no cable to it.
    assert far_device(replace(link, devices=("gpu-0002",)),
                      [_device(12, "gpu-0002", role="gpu-server")]) is None
    # Planted: a switch of that name in another site is not the host's.
    assert far_device(link, [_device(13, "leaf-r01", site="lab2")]) is None
    assert far_device(link, [_device(13, "leaf-r01", site="lab2"), switch]) == 10
    # Two switches of the name in the site (other tenants): no guess.
    assert far_device(link, [switch, _device(14, "leaf-r01")]) is None
    assert far_device(replace(link, switch_roles=()), [switch]) is None
