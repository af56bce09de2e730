"""Seed → read back the expected model from the real NetBox, field by field."""

from importlib import import_module

import pytest
from invoke import Context
from invoke.exceptions import Exit

from racklift.lab import seed
from racklift.netbox.adoption import adoption_report
from racklift.netbox.bootstrap import ROLE_GPU_SERVER, ensure_role_context
from racklift.netbox.inventory_hosts import read_inventory_hosts
from racklift.netbox.reader import Selection, read_hosts

SERVERS = (ROLE_GPU_SERVER,)  # a rack holds its leaf switches too


def test_seeded_rack_reads_back_field_by_field(seeded_netbox, demo_plan):
    hosts = read_hosts(seeded_netbox, Selection(racks=("R01",), roles=SERVERS))
    assert [h.name for h in hosts] == [p.name for p in demo_plan.hosts]
    for host, planned in zip(hosts, demo_plan.hosts, strict=True):
        assert host.problems == ()
        assert host.status == "planned"
        assert (host.site, host.rack, host.position) == ("lab1", "R01", planned.position)
        assert host.role == "gpu-server"
        assert host.device_type.model == seed.DEVICE_TYPE["model"]
        assert host.device_type.manufacturer == "Supermicro"
        assert host.serial == planned.serial
        assert host.asset_tag == planned.asset_tag
        assert host.primary_ip == planned.primary_ip
        assert host.primary_ip_interface == "eno1"
        assert host.oob_ip == planned.oob_ip
        assert host.oob_interface == "bmc"
        assert host.address == planned.primary_ip.split("/")[0]
        assert host.provisioning_mac == planned.macs["eno1"]
        assert {i.name: i.mac for i in host.interfaces if i.mac} == planned.macs
        assert [p.name for p in host.ib_ports] == list(seed.IB_PORTS)
        assert {p.type for p in host.ib_ports} == {"infiniband-ndr"}
        assert [i.name for i in host.interfaces if i.mgmt_only] == ["bmc"]
        assert [g.name for g in host.gpus] == [f"GPU{n}" for n in range(8)]
        assert {(g.manufacturer, g.part_id) for g in host.gpus} == {
            ("NVIDIA", "NVIDIA H100 80GB HBM3")}
        assert all(g.serial is None for g in host.gpus)  # not observed yet
        # The role's context merged with the device type's (racklift.hardware).
        assert host.config == {**seed.DESIRED_SOFTWARE, "hardware": seed.DEVICE_TYPE["hardware"]}
        assert host.tags == ("racklift-lab",)


def test_selection_filters(seeded_netbox):
    assert [h.name for h in read_hosts(seeded_netbox, Selection(names=("gpu-0003",)))] == [
        "gpu-0003"]
    assert len(read_hosts(seeded_netbox, Selection(sites=("lab1",), statuses=("planned",),
                                                  roles=SERVERS))) == 8
    assert read_hosts(seeded_netbox, Selection(statuses=("active",), roles=SERVERS)) == []


def test_gpu_serials_recorded_in_netbox_are_expected(seeded_netbox):
    item = seeded_netbox.get_all("dcim/inventory-items", {"device": "gpu-0002", "name": "GPU3"})[0]
    seeded_netbox.update("dcim/inventory-items", [{"id": item["id"], "serial": "1654922000123"}])
    host = read_hosts(seeded_netbox, Selection(names=("gpu-0002",)))[0]
    assert {g.name: g.serial for g in host.gpus if g.serial} == {"GPU3": "1654922000123"}


def test_seeding_again_changes_nothing(seeded_netbox, demo_plan):
    report = seed.apply(seeded_netbox, demo_plan)
    assert sum(report.created.values()) == 0
    assert seeded_netbox.count("dcim/devices", {"role": ROLE_GPU_SERVER}) == 8
    assert seeded_netbox.count("dcim/devices", {"role": seed.SWITCH_ROLE}) == 9
    assert seeded_netbox.count("dcim/cables") == 80
    assert seeded_netbox.count("dcim/mac-addresses") == 24
    assert seeded_netbox.count("ipam/ip-addresses") == 16


def test_interrupted_seed_is_finished_by_a_rerun(empty_netbox):
    two_racks = seed.plan(racks=2)
    first_rack_only = seed.SeedPlan(site=two_racks.site, racks=two_racks.racks[:1],
                                    hosts=two_racks.hosts[:8])
    seed.apply(empty_netbox, first_rack_only)
    report = seed.apply(empty_netbox, two_racks)
    assert report.created == {"racks": 1, "devices": 8, "switches": 1, "mac addresses": 24,
                              "ip addresses": 16, "cables": 80}
    hosts = read_hosts(empty_netbox, Selection(roles=SERVERS))
    assert len(hosts) == 16 and not any(h.problems for h in hosts)


def test_the_adoption_report_on_the_seed_finds_the_servers_ready(seeded_netbox):
    """The seed's GPU servers lack nothing; its switches are no GPU servers and say so; with
    --apply, the role that has a racklift context gets no second one."""
    servers = adoption_report(read_hosts(seeded_netbox, Selection(sites=("lab1",),
                                                                  roles=SERVERS)))
    assert (servers.devices, len(servers.ready), servers.gaps) == (8, 8, {})
    everything = adoption_report(read_hosts(seeded_netbox, Selection(sites=("lab1",))))
    assert everything.devices == 17 and len(everything.ready) == 8
    (switches,) = [t for t in everything.types if t.model == "MSN4600C"]
    assert switches.ready == 0 and switches.gaps["config_context.racklift"] == switches.devices
    contexts = seeded_netbox.count("extras/config-contexts")
    assert not ensure_role_context(seeded_netbox, ROLE_GPU_SERVER).created
    assert ensure_role_context(seeded_netbox, seed.SWITCH_ROLE).created
    assert seeded_netbox.count("extras/config-contexts") == contexts + 1
    switch = read_hosts(seeded_netbox, Selection(roles=(seed.SWITCH_ROLE,)))[0]
    assert "config_context.racklift" not in {p.field for p in switch.problems}


def test_adopt_apply_overrides_no_existing_context_unless_forced(seeded_netbox, monkeypatch):
    """`netbox.adopt --apply`'s role context (weight 1000, versions and mirror null) would
    override what a site context sets for the role's devices: refused, naming the context and
    the key, nothing created; with --force created, and the output names them."""
    nb = seeded_netbox
    netbox_tasks = import_module("racklift.tasks.netbox")
    monkeypatch.setattr(netbox_tasks, "connect", lambda: nb)
    site = nb.get_all("dcim/sites", {"slug": "lab1"}, fields=("id",))[0]
    # Planted: the site pins the driver of every device in it, its switches included.
    nb.create("extras/config-contexts", [{
        "name": "lab1-driver", "weight": 100, "sites": [site["id"]],
        "data": {"racklift": {"nvidia_driver": {"branch": "550", "version": "550.127.08"}}}}])
    contexts = nb.count("extras/config-contexts")
    with pytest.raises(Exit) as refused:
        netbox_tasks.adopt(Context(), site="lab1", role=seed.SWITCH_ROLE, apply=True)
    assert "'lab1-driver'" in str(refused.value.message)
    assert "racklift.nvidia_driver.version" in str(refused.value.message)
    assert "racklift.ofed.version" not in str(refused.value.message)  # set by none
    assert nb.count("extras/config-contexts") == contexts
    with netbox_tasks.console.capture() as printed:
        netbox_tasks.adopt(Context(), site="lab1", role=seed.SWITCH_ROLE, apply=True,
                           force=True)
    out = " ".join(printed.get().split())  # as printed, wrapped or not
    assert f"racklift-{seed.SWITCH_ROLE}" in out and "overriding" in out
    assert "racklift.nvidia_driver.version set by config context 'lab1-driver'" in out
    assert nb.count("extras/config-contexts") == contexts + 1


def test_gpus_recorded_as_modules_are_read_from_the_real_api(seeded_netbox):
    """A device type without GPU templates whose devices hold GPU modules (module type profile
    GPU, NetBox's own) in module bays: the model reads them in bay order with their serials,
    and neither reader reports missing GPU templates."""
    nb = seeded_netbox
    nvidia = nb.get_all("dcim/manufacturers", {"slug": "nvidia"})[0]
    tray = nb.create("dcim/device-types", [{"manufacturer": nvidia["id"], "model": "HGX tray",
                                             "slug": "hgx-tray"}])[0]
    device = nb.create("dcim/devices", [{
        "name": "tray-001", "device_type": tray["id"], "role": {"slug": ROLE_GPU_SERVER},
        "site": {"slug": "lab1"}, "status": "planned", "serial": "TRAY1"}])[0]
    profile = nb.get_all("dcim/module-type-profiles", {"name": "GPU"})[0]
    gpu = nb.create("dcim/module-types", [{"manufacturer": nvidia["id"], "profile": profile["id"],
                                           "model": "NVIDIA H100 80GB HBM3"}])[0]
    bays = nb.create("dcim/module-bays", [{"device": device["id"], "name": f"GPU{n}"}
                                          for n in (1, 0)])
    nb.create("dcim/modules", [{"device": device["id"], "module_bay": bay["id"],
                                "module_type": gpu["id"], "serial": f"SN-{bay['name']}"}
                               for bay in bays])
    (host,) = read_hosts(nb, Selection(names=("tray-001",)))
    assert [(g.name, g.part_id, g.serial) for g in host.gpus] == [
        ("GPU0", "NVIDIA H100 80GB HBM3", "SN-GPU0"), ("GPU1", "NVIDIA H100 80GB HBM3", "SN-GPU1")]
    assert "device_type.inventory_item_templates" not in {p.field for p in host.problems}
    (listed,) = read_inventory_hosts(nb, Selection(names=("tray-001",)))
    assert "device_type.inventory_item_templates" not in {p.field for p in listed.problems}
