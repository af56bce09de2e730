"""The warm inventory against a real NetBox: random edits of every kind the inventory reads,
made through NetBox's API, and after each round the warm read equals a cold read
(racklift.netbox.warm_inventory)."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import SEEDED
from racklift.ansible_inventory import build_inventory
from racklift.lab import netbox_server
from racklift.netbox.client import NetBox
from racklift.netbox.inventory_hosts import build_inventory_hosts, read_inventory_hosts
from racklift.netbox.selection import Selection
from racklift.netbox.warm_inventory import state_path, sync

SELECTIONS = {"everything": Selection(),
              "GPU servers at lab1": Selection.of(sites="lab1", roles="gpu-server")}
ROUNDS = 6

pytestmark = pytest.mark.vm_lane  # tests/lanes.py: it evens the lanes out


def cold(netbox: NetBox, selection: Selection) -> dict:
    return build_inventory(read_inventory_hosts(netbox, selection))


def warm(netbox: NetBox, selection: Selection, kept: Path) -> tuple[dict, str]:
    synced = sync(netbox, selection, kept)
    return build_inventory(build_inventory_hosts(synced.raw)), synced.how


def one(netbox: NetBox, endpoint: str, params: dict | None = None) -> dict:
    return netbox.get_all(endpoint, params)[0]


def mac(rng: random.Random) -> str:
    return "02:" + ":".join(f"{rng.randrange(256):02X}" for _ in range(5))


class Edits:
    """Each edit changes one thing the inventory reads, through NetBox's API, and says what."""

    def __init__(self, netbox: NetBox, rng: random.Random) -> None:
        self.netbox, self.rng = netbox, rng

    def _device(self, role: str = "gpu-server") -> dict:
        return self.rng.choice(self.netbox.get_all("dcim/devices", {"role": role}))

    def _interface(self, with_mac: bool) -> dict:
        found = [i for i in self.netbox.get_all("dcim/interfaces", {"device_role": "gpu-server"})
                 if bool(i["primary_mac_address"]) == with_mac]
        return self.rng.choice(found)

    def serial(self) -> str:
        device = self._device()
        self.netbox.update("dcim/devices", [{"id": device["id"],
                                             "serial": f"S{self.rng.randrange(10**6)}"}])
        return f"serial of {device['name']}"

    def same_again(self) -> str:
        # A write that changes nothing: NetBox logs no change, yet updates last_updated.
        device = self._device()
        self.netbox.update("dcim/devices", [{"id": device["id"], "serial": device["serial"]}])
        return f"{device['name']} written unchanged"

    def status(self) -> str:
        device = self._device()
        status = self.rng.choice(["planned", "staged", "active", "failed", "offline"])
        self.netbox.update("dcim/devices", [{"id": device["id"], "status": status}])
        return f"{device['name']} {status}"

    def role(self) -> str:
        # Out of (or back into) the GPU-server selection.
        device = self._device(self.rng.choice(["gpu-server", "leaf-switch"]))
        other = one(self.netbox, "dcim/device-roles",
                    {"slug__n": device["role"]["slug"], "slug": ["gpu-server", "leaf-switch"]})
        self.netbox.update("dcim/devices", [{"id": device["id"], "role": other["id"]}])
        return f"{device['name']} role {other['slug']}"

    def device_tag(self) -> str:
        device = self._device()
        tag = self.rng.choice(self.netbox.get_all("extras/tags"))
        tags = {t["id"] for t in device["tags"]} ^ {tag["id"]}
        self.netbox.update("dcim/devices", [{"id": device["id"], "tags": sorted(tags)}])
        return f"{device['name']} tag {tag['slug']} toggled"

    def local_context(self) -> str:
        device = self._device()
        data = {"racklift": {"os_disk": f"/dev/nvme{self.rng.randrange(4)}n1"}}
        self.netbox.update("dcim/devices", [{"id": device["id"], "local_context_data": data}])
        return f"{device['name']} local context"

    def interface_rename(self) -> str:
        iface = self._interface(with_mac=True)
        self.netbox.update("dcim/interfaces", [{"id": iface["id"],
                                                "name": f"{iface['name']}x"}])
        return f"{iface['device']['name']} {iface['name']} renamed"

    def mac_value(self) -> str:
        found = self.rng.choice(self.netbox.get_all("dcim/mac-addresses"))
        self.netbox.update("dcim/mac-addresses", [{"id": found["id"],
                                                   "mac_address": mac(self.rng)}])
        return f"MAC {found['id']} changed"

    def mac_new(self) -> str:
        iface = self._interface(with_mac=False)
        new = self.netbox.create("dcim/mac-addresses", [{
            "mac_address": mac(self.rng), "assigned_object_type": "dcim.interface",
            "assigned_object_id": iface["id"]}])[0]
        self.netbox.update("dcim/interfaces", [{"id": iface["id"],
                                                "primary_mac_address": new["id"]}])
        return f"{iface['device']['name']} {iface['name']} got a MAC"

    def _ip(self) -> dict:
        return self.rng.choice(self.netbox.get_all("ipam/ip-addresses"))

    def ip_value(self) -> str:
        ip = self._ip()
        address = f"10.{self.rng.randrange(100, 200)}.{self.rng.randrange(256)}.1/24"
        self.netbox.update("ipam/ip-addresses", [{"id": ip["id"], "address": address}])
        return f"IP {ip['address']} → {address}"

    def ip_move(self) -> str:
        # NetBox keeps a device's primary and OOB addresses on their interfaces.
        held = {ip["id"] for d in self.netbox.get_all("dcim/devices")
                for ip in (d["primary_ip4"], d["primary_ip6"], d["oob_ip"]) if ip}
        movable = [ip for ip in self.netbox.get_all("ipam/ip-addresses") if ip["id"] not in held]
        if not movable:
            self.ip_new()
            return self.ip_move()
        ip = self.rng.choice(movable)
        iface = self._interface(with_mac=False)
        self.netbox.update("ipam/ip-addresses", [{
            "id": ip["id"], "assigned_object_type": "dcim.interface",
            "assigned_object_id": iface["id"]}])
        return f"IP {ip['address']} moved to {iface['device']['name']} {iface['name']}"

    def ip_new(self) -> str:
        iface = self._interface(with_mac=self.rng.random() < 0.5)
        address = f"10.{self.rng.randrange(200, 250)}.{self.rng.randrange(256)}.1/24"
        self.netbox.create("ipam/ip-addresses", [{
            "address": address, "assigned_object_type": "dcim.interface",
            "assigned_object_id": iface["id"]}])
        return f"IP {address} on {iface['device']['name']} {iface['name']}"

    def ip_delete(self) -> str:
        ip = self._ip()
        self.netbox.delete("ipam/ip-addresses", [ip["id"]])
        return f"IP {ip['address']} deleted"

    def tag_rename(self) -> str:
        tag = self.rng.choice(self.netbox.get_all("extras/tags"))
        suffix = self.rng.randrange(1000)
        self.netbox.update("extras/tags", [{"id": tag["id"], "name": f"{tag['name']}-{suffix}",
                                            "slug": f"{tag['slug']}-{suffix}"}])
        return f"tag {tag['slug']} renamed"

    def context(self) -> str:
        context = self.rng.choice(self.netbox.get_all("extras/config-contexts"))
        data = {**context["data"], "racklift_note": f"edit {self.rng.randrange(1000)}"}
        self.netbox.update("extras/config-contexts", [{"id": context["id"], "data": data}])
        return f"config context {context['name']}"

    def template(self) -> str:
        device = self._device()
        type_id = device["device_type"]["id"]
        self.netbox.create("dcim/interface-templates", [{
            "device_type": type_id, "name": f"eth{self.rng.randrange(10**6)}",
            "type": "100gbase-x-qsfp28"}])
        return f"an interface template on device type {type_id}"

    def device_delete(self) -> str:
        device = self._device()
        self.netbox.delete("dcim/devices", [device["id"]])
        return f"{device['name']} deleted"

    def device_new(self) -> str:
        like = self._device()
        name = f"gpu-new-{self.rng.randrange(10**6)}"
        self.netbox.create("dcim/devices", [{
            "name": name, "device_type": like["device_type"]["id"],
            "role": like["role"]["id"], "site": like["site"]["id"], "status": "planned",
            "serial": f"NEW{self.rng.randrange(10**6)}"}])
        return f"{name} created"

    def all(self) -> list[Callable[[], str]]:
        return [getattr(self, name) for name in (
            "serial", "same_again", "status", "role", "device_tag", "local_context",
            "interface_rename", "mac_value", "mac_new", "ip_value", "ip_move", "ip_new",
            "ip_delete", "tag_rename", "context", "template", "device_delete", "device_new")]


@pytest.mark.parametrize("selection", SELECTIONS.values(), ids=SELECTIONS.keys())
def test_random_edits_then_the_warm_read_equals_a_cold_one(seeded_netbox, tmp_path, selection):
    seed = int(os.environ.get("RACKLIFT_SYNC_SEED", random.randrange(10**6)))
    print(f"random edits with RACKLIFT_SYNC_SEED={seed}")
    rng = random.Random(seed)
    edits = Edits(seeded_netbox, rng)
    kept = state_path(tmp_path, seeded_netbox.url, seeded_netbox.settings.token, selection)
    first, how = warm(seeded_netbox, selection, kept)
    assert how.startswith("full read (nothing kept"), how
    assert first == cold(seeded_netbox, selection)
    kinds = edits.all()
    order = rng.sample(kinds, len(kinds))  # every kind at least once over the rounds
    for round_ in range(ROUNDS):
        done = [edit() for edit in order[round_::ROUNDS]]
        done += [rng.choice(kinds)() for _ in range(rng.randrange(3))]
        synced, how = warm(seeded_netbox, selection, kept)
        expected = cold(seeded_netbox, selection)
        assert not how.startswith("full read"), (done, how)
        assert synced == expected, (seed, round_, done, how)
    # Nothing changed since: nothing read again.
    assert warm(seeded_netbox, selection, kept)[1].startswith("0 changes")


def test_what_makes_it_read_in_full(instance, seeded_netbox, tmp_path):
    everything = Selection()
    kept = state_path(tmp_path, seeded_netbox.url, seeded_netbox.settings.token,
                      everything)
    assert warm(seeded_netbox, everything, kept)[1].startswith("full read (nothing kept")

    # What the selection and the groups are made of.
    site = one(seeded_netbox, "dcim/sites")
    seeded_netbox.update("dcim/sites", [{"id": site["id"], "slug": "lab-renamed"}])
    after, how = warm(seeded_netbox, everything, kept)
    assert how == f"full read (a dcim.site changed (object {site['id']}))"
    assert "site_lab_renamed" in after and after == cold(seeded_netbox, everything)

    # Writes NetBox did not log: the ORM, outside a request (a script, a database load). A
    # device's: read again from where it is now. A tag's: its devices are found by its old
    # name, which only a logged change holds: a full read.
    device = one(seeded_netbox, "dcim/devices", {"role": "gpu-server"})
    script = tmp_path / "unlogged.py"
    script.write_text(
        "import json, os\nfrom dcim.models import Device\nfrom extras.models import Tag\n"
        "payload = json.load(open(os.environ['RACKLIFT_PAYLOAD']))\n"
        "obj = (Device if payload['kind'] == 'device' else Tag).objects.get(pk=payload['id'])\n"
        "setattr(obj, payload['field'], payload['value'])\nobj.save()\n"
        "json.dump({}, open(os.environ['RACKLIFT_RESULT'], 'w'))\n")
    netbox_server.run_in_netbox(instance, script, {"kind": "device", "id": device["id"],
                                                   "field": "serial", "value": "UNLOGGED"})
    after, how = warm(seeded_netbox, everything, kept)
    assert how == ("0 changes since the last read, 1 objects updated with no change logged: "
                   "1 devices read again")
    assert after["_meta"]["hostvars"][device["name"]]["racklift_expected"]["serial"] == \
        "UNLOGGED"
    assert after == cold(seeded_netbox, everything)
    tag = one(seeded_netbox, "extras/tags", {"slug": "racklift-lab"})
    netbox_server.run_in_netbox(instance, script, {"kind": "tag", "id": tag["id"],
                                                   "field": "slug", "value": "renamed-quietly"})
    after, how = warm(seeded_netbox, everything, kept)
    assert how == f"full read (NetBox holds extras.tag {tag['id']} changed with no change logged)"
    assert after == cold(seeded_netbox, everything)

    # NetBox restored from a backup taken before the last read's newest change.
    seeded_netbox.update("dcim/devices", [{"id": device["id"], "serial": "AFTER-BACKUP"}])
    assert not warm(seeded_netbox, everything, kept)[1].startswith("full read")
    netbox_server.reset(instance, SEEDED)
    after, how = warm(seeded_netbox, everything, kept)
    assert how == ("full read (NetBox's change log no longer holds the newest change of the "
                   "last read (restored from a backup?))")
    assert after == cold(seeded_netbox, everything)

    # Older than the age limit.
    synced = sync(seeded_netbox, everything, kept, max_age=0)
    assert synced.how == "full read (the last full read is over 0 s old)"

    # A kept file that is not one: read in full, and kept again.
    kept.write_text(json.dumps({"raw": "not a model"}))
    assert warm(seeded_netbox, everything, kept)[1].startswith("full read (nothing kept")
    assert warm(seeded_netbox, everything, kept)[1].startswith("0 changes")
