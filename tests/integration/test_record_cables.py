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
