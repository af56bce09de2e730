"""The far end of each interface's cable, from NetBox's cable terminations as REST returns
them (a termination's cable is a bare id; an interface's device nested, or only its id as the
GraphQL read gives it)."""

from racklift.netbox.expected import LinkPeer
from racklift.netbox.expected_hosts import link_peers, port_names
from racklift.netbox.raw_records import RawModel


def _end(id_: int, cable: int, end: str, termination: int,
         kind: str = "dcim.interface") -> dict:
    return {"id": id_, "cable": cable, "cable_end": end, "termination_type": kind,
            "termination_id": termination}


HOST_PORTS = [{"id": 1, "name": "eno1", "device": {"id": 10}},  # GraphQL: the device's id only
              {"id": 2, "name": "mlx5_0", "device": {"id": 10}},
              {"id": 3, "name": "mlx5_1", "device": {"id": 10}},
              {"id": 4, "name": "eno2", "device": {"id": 10}}]
SWITCH_PORTS = [{"id": 101, "name": "swp1", "device": {"id": 50, "name": "leaf-r01"}},
                {"id": 102, "name": "p1", "device": {"id": 51, "name": "ib-leaf-001-0"}},
                {"id": 103, "name": "p2", "device": {"id": 51, "name": "ib-leaf-001-0"}}]
RAW = RawModel(devices=[{"id": 10, "name": "gpu-0001"}], device_types=[],
               interface_templates=[], item_templates=[], interfaces=HOST_PORTS,
               ip_addresses=[], items=[], peer_interfaces=SWITCH_PORTS)


def test_each_end_of_a_cable_is_the_others_peer():
    ends = [_end(1, 7, "A", 1), _end(2, 7, "B", 101), _end(3, 8, "B", 2), _end(4, 8, "A", 102)]
    peers = link_peers(ends, port_names(RAW))
    assert peers == {1: LinkPeer("leaf-r01", "swp1"), 101: LinkPeer("gpu-0001", "eno1"),
                     2: LinkPeer("ib-leaf-001-0", "p1"), 102: LinkPeer("gpu-0001", "mlx5_0")}


def test_breakouts_and_patch_panels_are_not_followed():
    ends = [_end(1, 7, "A", 3), _end(2, 7, "B", 102), _end(3, 7, "B", 103),  # a breakout
            _end(4, 9, "A", 4), _end(5, 9, "B", 900, "dcim.frontport"),  # a patch panel
            _end(6, 11, "A", 1)]  # a cable NetBox has only one end of
    assert link_peers(ends, port_names(RAW)) == {}


def test_a_switch_port_brings_the_guid_netbox_keeps_in_its_wwn():
    ib_port = {**SWITCH_PORTS[1], "wwn": "2C:5E:AB:03:00:B8:7B:40"}
    raw = RawModel(devices=RAW.devices, device_types=[], interface_templates=[],
                   item_templates=[], interfaces=HOST_PORTS, ip_addresses=[], items=[],
                   peer_interfaces=[SWITCH_PORTS[0], ib_port])
    peers = link_peers([_end(1, 8, "A", 2), _end(2, 8, "B", 102)], port_names(raw))
    assert peers[2] == LinkPeer("ib-leaf-001-0", "p1", "2C:5E:AB:03:00:B8:7B:40")
