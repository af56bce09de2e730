import ipaddress

import pytest

from racklift.lab import seed


def test_demo_rack_is_one_rack_of_eight():
    plan = seed.plan(racks=1)
    assert plan.racks == ("R01",)
    assert [h.name for h in plan.hosts] == [f"gpu-{n:04d}" for n in range(1, 9)]
    assert {h.rack for h in plan.hosts} == {"R01"}
    # 8 servers of 4U stacked from U1, inside a 42U rack, no overlap.
    assert [h.position for h in plan.hosts] == [1, 5, 9, 13, 17, 21, 25, 29]
    assert plan.hosts[-1].position + seed.SERVER_U - 1 <= 42


def test_ten_thousand_hosts_have_unique_identities():
    plan = seed.plan(racks=1250)
    hosts = plan.hosts
    assert len(hosts) == 10_000 and len(plan.racks) == 1250
    for attribute in ("name", "serial", "asset_tag", "primary_ip", "oob_ip"):
        values = [getattr(h, attribute) for h in hosts]
        assert len(set(values)) == len(values), attribute
    macs = [mac for h in hosts for mac in h.macs.values()]
    assert len(set(macs)) == len(macs) == 30_000
    for h in hosts:
        assert ipaddress.ip_interface(h.primary_ip).network == seed.PROVISIONING_NET
        assert ipaddress.ip_interface(h.oob_ip).network == seed.OOB_NET


def test_plans_are_deterministic_and_extend_without_clashes():
    first = seed.plan(racks=2)
    assert first == seed.plan(racks=2)
    more = seed.plan(racks=2, first_rack=3)
    assert not {h.name for h in first.hosts} & {h.name for h in more.hosts}
    assert more.racks == ("R03", "R04")
    assert seed.plan(racks=4).hosts == first.hosts + more.hosts


def test_macs_are_locally_administered_unicast():
    for h in seed.plan(racks=1).hosts:
        for mac in h.macs.values():
            first_octet = int(mac.split(":")[0], 16)
            assert first_octet & 0b10 and not first_octet & 0b1, mac


def test_device_type_models_an_hgx_server_the_netbox_way():
    interfaces = seed.DEVICE_TYPE["interfaces"]
    assert sum(1 for i in interfaces if i["type"] == "infiniband-ndr") == 8
    assert [i["name"] for i in interfaces if i.get("mgmt_only")] == ["bmc"]
    assert {i["name"] for i in interfaces} >= {"eno1", "eno2"}
    assert [g["part_id"] for g in seed.DEVICE_TYPE["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 8


def test_cable_plan_puts_hca_i_on_leaf_i_of_its_rail_group():
    plan = seed.plan(racks=1250)
    ends = [end for h in plan.hosts for end in h.links.values()]
    assert len(set(ends)) == len(ends) == 10_000 * (2 + len(seed.IB_PORTS)), "a port cabled twice"
    for index, h in enumerate(plan.hosts):
        group = index // seed.RAIL_GROUP
        for rail, port in enumerate(seed.IB_PORTS):
            assert h.links[port] == (f"ib-leaf-{group + 1:03d}-{rail}",
                                     f"p{index % seed.RAIL_GROUP + 1}")
        assert h.links[seed.PROVISIONING][0] == h.links[seed.INBAND][0] == f"leaf-{h.rack.lower()}"
    kinds = [s.kind for s in plan.switches]
    assert kinds.count("ethernet") == 1250 and kinds.count("infiniband") == 313 * 8
    named = {s.name for s in plan.switches}
    assert {switch for switch, _ in ends} == named
    ports = {kind: {spec["port"].format(n) for n in range(1, seed.SWITCH_PORTS + 1)}
             for kind, spec in seed.SWITCH_TYPES.items()}
    kind_of = {s.name: s.kind for s in plan.switches}
    assert all(port in ports[kind_of[switch]] for switch, port in ends), "no such switch port"


def test_a_rack_too_full_for_its_leaf_is_refused():
    with pytest.raises(ValueError, match="at most 32 hosts per rack"):
        seed.plan(racks=1, hosts_per_rack=33)
