"""Incomplete NetBox records: every device with every missing field is reported; no host is
dropped and nothing crashes on the first one."""

from racklift.lab import seed
from racklift.netbox.reader import Selection, read_hosts


def _device(netbox, name):
    return netbox.get_all("dcim/devices", {"name": name})[0]


def test_every_missing_field_of_every_device_is_reported(seeded_netbox):
    nb = seeded_netbox
    nb.update("dcim/devices", [
        {"id": _device(nb, "gpu-0001")["id"], "serial": ""},
        {"id": _device(nb, "gpu-0002")["id"], "primary_ip4": None},
        {"id": _device(nb, "gpu-0003")["id"], "oob_ip": None},
        {"id": _device(nb, "gpu-0004")["id"], "serial": "", "oob_ip": None},
    ])
    eno1 = nb.get_all("dcim/interfaces", {"device": "gpu-0005", "name": "eno1"})[0]
    nb.update("dcim/interfaces", [{"id": eno1["id"], "primary_mac_address": None}])
    # A device type without the components racklift expects, and a device of it.
    bare = nb.create("dcim/device-types", [{
        "manufacturer": {"slug": "supermicro"}, "model": "bare", "slug": "bare"}])[0]
    nb.create("dcim/devices", [{
        "name": "gpu-bare", "device_type": bare["id"], "role": {"slug": "gpu-server"},
        "site": {"slug": "lab1"}, "status": "planned"}])

    hosts = {h.name: h for h in read_hosts(nb, Selection(sites=("lab1",), roles=("gpu-server",)))}
    assert len(hosts) == 9  # nobody dropped

    def fields(name):
        return sorted(p.field for p in hosts[name].problems)

    assert fields("gpu-0001") == ["serial"]
    assert fields("gpu-0002") == ["primary_ip4"]
    assert fields("gpu-0003") == ["oob_ip"]
    assert fields("gpu-0004") == ["oob_ip", "serial"]
    assert fields("gpu-0005") == ["interfaces.eno1.primary_mac_address"]
    assert fields("gpu-0006") == []
    assert fields("gpu-bare") == [
        "device_type.interface_templates", "device_type.interface_templates",
        "device_type.inventory_item_templates", "interfaces.eno1", "oob_ip", "primary_ip4",
        "serial"]
    # Messages name the host and say what to do.
    problem = hosts["gpu-0002"].problems[0]
    assert str(problem).startswith("gpu-0002: primary_ip4: ")
    assert "assign an IP" in problem.message
    assert any("has no InfiniBand interface templates" in p.message
               for p in hosts["gpu-bare"].problems)


def test_device_without_config_context_is_reported(seeded_netbox):
    nb = seeded_netbox
    other = nb.create("dcim/device-roles", [{"name": "Head", "slug": "head", "color": "000000"}])
    device = _device(nb, "gpu-0007")
    nb.update("dcim/devices", [{"id": device["id"], "role": other[0]["id"]}])
    host = read_hosts(nb, Selection(names=("gpu-0007",)))[0]
    assert [p.field for p in host.problems] == ["config_context.racklift"]
    assert host.provisioning_interface == seed.PROVISIONING  # the documented default
