"""The lab's bulk loader (inside NetBox's own shell) must build exactly what the API builds."""

from dataclasses import replace
from functools import partial

from racklift.lab import netbox_server, seed
from racklift.netbox.expected import LinkPeer
from racklift.netbox.reader import Selection, read_hosts


def _model(netbox):
    return [replace(h, netbox_id=0) for h in read_hosts(netbox, Selection())]


def test_loader_and_api_build_the_same_model(instance, empty_netbox):
    plan = seed.plan(racks=2)
    loader = partial(netbox_server.run_in_netbox, instance, seed.ORM_SCRIPT)
    report = seed.apply(empty_netbox, plan, host_loader=loader)
    # 2 Ethernet leaves (one per rack) and 8 InfiniBand leaves (one rail group); 10 cables a host
    assert report.created == {"racks": 2, "devices": 16, "switches": 10, "mac addresses": 48,
                              "ip addresses": 32, "cables": 160}
    loaded = _model(empty_netbox)
    device = empty_netbox.get_all("dcim/devices", {"name": "gpu-0009"})[0]
    assert (device["interface_count"], device["inventory_item_count"]) == (11, 8)
    assert empty_netbox.count("dcim/devices", {"tag": "racklift-lab"}) == 26
    host = next(h for h in loaded if h.name == "gpu-0009")
    peers = {i.name: i.peer for i in host.interfaces}
    assert peers["eno1"] == LinkPeer("leaf-r02", "swp1")
    assert peers["mlx5_3"] == LinkPeer("ib-leaf-001-3", "p9")
    assert peers["bmc"] is None
    # Read for one rack alone (by interface id, not the whole scan), the far ends are the same.
    rack = read_hosts(empty_netbox, Selection(racks=("R02",), roles=("gpu-server",)))
    assert {i.name: i.peer for i in rack[0].interfaces} == peers

    again = seed.apply(empty_netbox, plan, host_loader=loader)
    assert sum(again.created.values()) == 0

    netbox_server.reset(instance)
    seed.apply(empty_netbox, plan)
    assert loaded == _model(empty_netbox)


def test_replan_puts_a_lab_host_back_to_planned_without_its_last_result(seeded_netbox):
    """A lab host the pipeline took to `active` (stage and result recorded) starts over:
    planned, no stage, no `racklift_result` for the NetBox plugin to show, a journal entry; a
    host already planned and clean is left alone."""
    from racklift.lab import rack as lab_rack

    done, clean = (seeded_netbox.get_all("dcim/devices", {"name": name})[0]
                   for name in ("gpu-0001", "gpu-0002"))
    seeded_netbox.update("dcim/devices", [{"id": done["id"], "status": "active", "custom_fields": {
        "racklift_stage": "verified", "racklift_result": {"last": {"result": "joined"}}}}])
    assert lab_rack.replan(seeded_netbox, ["gpu-0001", "gpu-0002"]) == 1
    after = seeded_netbox.get_all("dcim/devices", {"name": "gpu-0001"})[0]
    assert after["status"]["value"] == "planned"
    assert after["custom_fields"]["racklift_stage"] is None
    assert after["custom_fields"]["racklift_result"] is None
    entries = [e["comments"] for e in seeded_netbox.get_all(
        "extras/journal-entries", {"assigned_object_id": done["id"]})]
    assert "racklift lab: back to planned, to start over" in entries
    assert seeded_netbox.count("extras/journal-entries",
                               {"assigned_object_id": clean["id"]}) == 0
