"""`verify --record-cables` against the real NetBox: the cables a host sees on ports NetBox has
none for are created to the switch ports NetBox has, once; a recorded cable is never
replaced."""

from dataclasses import replace

import emulated
from racklift.facts.host import from_bundle
from racklift.facts.observed import IbLink, LldpNeighbor
from racklift.lab import seed
from racklift.netbox.expected import LinkPeer
from racklift.netbox.reader import Selection, read_hosts
from racklift.verify.record_cables import record_cables


def _host(netbox):
    return read_hosts(netbox, Selection(names=("gpu-0001",)))[0]


def test_observed_links_fill_ports_without_a_cable_and_only_those(empty_netbox):
    seed.apply(empty_netbox, seed.plan(racks=1))
    cabled = {i.name: i.peer for i in _host(empty_netbox).interfaces}
    ports = {p["name"]: p for p in empty_netbox.get_all(
        "dcim/interfaces", {"device": "gpu-0001", "name": ["eno1", "mlx5_0", "mlx5_1"]},
        fields=("id", "name", "cable"))}
    empty_netbox.delete("dcim/cables", [ports["eno1"]["cable"]["id"],
                                        ports["mlx5_0"]["cable"]["id"]])
    expected = _host(empty_netbox)
    assert {i.name: i.peer for i in expected.interfaces}["mlx5_0"] is None
    # The emulated host's facts, as gpu-0001 (its serial): its GPUs pass the identity checks.
    facts = from_bundle(emulated.bundle(emulated.healthy_profile()))
    assert facts.system is not None
    facts = replace(
        facts, system=replace(facts.system, serial=expected.serial),
        lldp=(LldpNeighbor("eno1", "leaf-r01.lab.example", None, None, "swp1", "ifname", None,
                           None),),
        ib_links={"mlx5_0": IbLink("0x1", "ca", "gpu-0001 mlx5_0", 1, "0x2", "switch",
                                   "MF0;ib-leaf-001-0:MQM9700/U1", 1, "4x", "NDR"),
                  # NetBox records mlx5_1's cable: what the host says there is not recorded.
                  "mlx5_1": IbLink("0x3", "ca", "gpu-0001 mlx5_1", 1, "0x2", "switch",
                                   "MF0;ib-leaf-001-0:MQM9700/U1", 2, "4x", "NDR")})
    assert record_cables(empty_netbox, [(expected, facts)]) == 2
    assert {i.name: i.peer for i in _host(empty_netbox).interfaces} == cabled
    assert cabled["mlx5_0"] == LinkPeer("ib-leaf-001-0", "p1")
    assert record_cables(empty_netbox, [(_host(empty_netbox), facts)]) == 0

    # A host that is not the machine NetBox records here: nothing it says is recorded.
    empty_netbox.delete("dcim/cables", [
        empty_netbox.get_all("dcim/interfaces", {"device": "gpu-0001", "name": "eno1"},
                             fields=("cable",))[0]["cable"]["id"]])
    stranger = replace(facts, system=replace(facts.system, serial="S999"))
    assert record_cables(empty_netbox, [(_host(empty_netbox), stranger)]) == 0


def _uncable(netbox, device: str, *names: str) -> None:
    netbox.delete("dcim/cables", [p["cable"]["id"] for p in netbox.get_all(
        "dcim/interfaces", {"device": device, "name": list(names)}, fields=("cable",))])


def _lldp(port: str, switch: str, switch_port: str) -> LldpNeighbor:
    return LldpNeighbor(port, switch, None, None, switch_port, "ifname", None, None)


def test_a_far_end_is_a_switch_of_the_hosts_site_never_another_server(empty_netbox):
    """What a host hears is a claim: it becomes a cable only to a device whose role the host's
    context names as a switch's (`racklift.cabling.switch_roles`) in the host's own site."""
    nb = empty_netbox
    seed.apply(nb, seed.plan(racks=1))
    # Another site with switches named as the lab's leaf and as none of lab1's.
    other = nb.create("dcim/sites", [{"name": "lab2", "slug": "lab2", "status": "active"}])[0]
    switch = nb.get_all("dcim/devices", {"name": "leaf-r01"}, fields=("device_type", "role"))[0]
    nb.create("dcim/devices", [{"name": name, "site": other["id"], "status": "active",
                                "device_type": switch["device_type"]["id"],
                                "role": switch["role"]["id"]}
                               for name in ("leaf-r01", "leaf-r99")])
    _uncable(nb, "gpu-0001", "eno1", "eno2")
    _uncable(nb, "gpu-0002", "eno1")  # a free server port: only its role keeps it out
    expected = _host(nb)
    facts = from_bundle(emulated.bundle(emulated.healthy_profile()))
    assert facts.system is not None
    facts = replace(facts, system=replace(facts.system, serial=expected.serial), lldp=(
        # Planted: gpu-0001 says its eno1 hears another GPU server's eno1.
        _lldp("eno1", "gpu-0002", "eno1"),
        # The lab's leaf, whose name a switch in lab2 shares: lab1's is the one.
        _lldp("eno2", "leaf-r01.lab.example", "swp2")))
    assert record_cables(nb, [(expected, facts)]) == 1
    peers = {i.name: i.peer for i in _host(nb).interfaces}
    assert (peers["eno1"], peers["eno2"]) == (None, LinkPeer("leaf-r01", "swp2"))
    assert [p["cable"] for p in nb.get_all("dcim/interfaces", {
        "device": "gpu-0002", "name": "eno1"}, fields=("cable",))] == [None]
    assert not [p for p in nb.get_all("dcim/interfaces", {"site_id": other["id"]},
                                      fields=("cable",)) if p["cable"]]
    # Planted: a switch that only another site has is not the host's neighbour.
    elsewhere = replace(facts, lldp=(_lldp("eno1", "leaf-r99", "swp1"),))
    assert record_cables(nb, [(_host(nb), elsewhere)]) == 0
