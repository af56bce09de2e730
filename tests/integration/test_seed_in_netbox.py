"""The lab's bulk loader (inside NetBox's own shell) must build exactly what the API builds."""

from dataclasses import replace
from functools import partial

from racklift.lab import netbox_server, seed
from racklift.netbox.reader import Selection, read_hosts


def _model(netbox):
    return [replace(h, netbox_id=0) for h in read_hosts(netbox, Selection())]


def test_loader_and_api_build_the_same_model(instance, empty_netbox):
    plan = seed.plan(racks=2)
    loader = partial(netbox_server.run_in_netbox, instance, seed.ORM_SCRIPT)
    report = seed.apply(empty_netbox, plan, host_loader=loader)
    assert report.created == {"racks": 2, "devices": 16, "mac addresses": 48, "ip addresses": 32}
    loaded = _model(empty_netbox)
    device = empty_netbox.get_all("dcim/devices", {"name": "gpu-0009"})[0]
    assert (device["interface_count"], device["inventory_item_count"]) == (11, 8)
    assert empty_netbox.count("dcim/devices", {"tag": "racklift-lab"}) == 16

    again = seed.apply(empty_netbox, plan, host_loader=loader)
    assert sum(again.created.values()) == 0

    netbox_server.reset(instance)
    seed.apply(empty_netbox, plan)
    assert loaded == _model(empty_netbox)
