"""One identity per host, the same in the expected model and the inventory, from raw NetBox
JSON: a name several sites share (NetBox keeps names unique per site only, as in its own demo
data's three `PP:MDF`) is refused on every device that has it and is no Ansible host; an
unnamed device is reported by id and refused, never dropped; every other device is one host in
both."""

from racklift.ansible_inventory import build_inventory
from racklift.netbox.expected_hosts import build_hosts
from racklift.netbox.identity import AMBIGUOUS
from racklift.netbox.inventory_hosts import RawInventory, build_inventory_hosts
from racklift.netbox.raw_records import RawModel

TYPE = {"id": 1, "model": "m", "slug": "m", "manufacturer": {"name": "x"}}


def _device(id_: int, name: str | None, site: str) -> dict:
    return {"id": id_, "name": name, "status": {"value": "planned"}, "site": {"slug": site},
            "rack": None, "role": {"slug": "gpu-server"}, "platform": None,
            "device_type": {"id": 1}, "serial": f"S{id_}", "asset_tag": None,
            "primary_ip4": None, "primary_ip6": None, "oob_ip": None, "config_context": {},
            "tags": []}


DEVICES = [_device(1, "gpu-001", "a"), _device(2, "GPU-001", "b"), _device(3, "gpu-002", "a"),
           _device(4, None, "a"), _device(5, "PP:MDF", "a"), _device(6, "PP:MDF", "b"),
           _device(7, "PP:MDF", "c")]


def _problems(host) -> set[str]:
    """The identity problems (the inventory reads less of a device, so it knows fewer others)."""
    return {p.field for p in host.problems if p.field.startswith("name")}


def test_the_model_and_the_inventory_agree_host_by_host():
    model = build_hosts(RawModel(DEVICES, [TYPE], [], [], [], [], []))
    hosts = build_inventory_hosts(RawInventory(DEVICES, [TYPE], [], [], [], []))
    assert [(h.netbox_id, h.name, _problems(h)) for h in model] == [
        (h.netbox_id, h.name, _problems(h)) for h in hosts]
    assert len(model) == len(DEVICES)  # nobody dropped
    ambiguous = {h.netbox_id for h in model if AMBIGUOUS in _problems(h)}
    assert ambiguous == {1, 2, 5, 6, 7}  # names compared case aside
    (mdf,) = [p for h in model if h.netbox_id == 7 for p in h.problems if p.field == AMBIGUOUS]
    assert "device 5 at site a" in mdf.message and "device 6 at site b" in mdf.message
    (unnamed,) = [h for h in model if h.netbox_id == 4]
    assert unnamed.name == "device-4" and "name" in _problems(unnamed)

    # Only a usable name makes an Ansible host: the unnamed device is refused too (its
    # device-4 could be a real device's name), and every device is one or the other.
    inventory = build_inventory(hosts)
    assert set(inventory["_meta"]["hostvars"]) == {"gpu-002"}
    refused = {d["netbox_id"]: d["problems"] for d in inventory["_meta"]["racklift_refused"]}
    assert sorted(refused) == [1, 2, 4, 5, 6, 7]
    assert all(any(AMBIGUOUS in p for p in refused[i]) for i in (1, 2, 5, 6, 7))
    assert any("name: the device has no name" in p for p in refused[4])
    # PP:MDF is also no host name, and says so.
    assert any("'PP:MDF' is not a host name" in p for p in refused[5])
