"""The warm inventory's pure parts: what change records touch, the merge, the unlogged-write
check, and the kept file (racklift.netbox.changes, racklift.netbox.warm_inventory)."""

import json
import os
import time

from racklift.netbox.changes import touched
from racklift.netbox.inventory_hosts import RawInventory
from racklift.netbox.selection import Selection
from racklift.netbox.warm_inventory import (
    Kept,
    load,
    merge,
    save,
    state_key,
    unlogged,
    update_keys,
)


def change(kind, object_id, pre=None, post=None):
    return {"changed_object_type": kind, "changed_object_id": object_id,
            "prechange_data": pre, "postchange_data": post}


DEVICES = [{"id": 1, "tags": [{"slug": "gpu", "name": "GPU"}]},
           {"id": 2, "tags": [{"slug": "gpu"}, {"slug": "spare"}]},
           {"id": 3, "tags": []}]


def test_devices_and_their_components_touch_their_device():
    found = touched([change("dcim.device", 7, None, {"name": "new"}),
                     change("dcim.interface", 40, {"device": 1}, {"device": 2}),
                     change("dcim.module", 9, {"device": 3}, {}),
                     change("dcim.modulebay", 5, None, {"device": 4})], DEVICES)
    assert found.devices == {1, 2, 3, 4, 7}
    assert not (found.types or found.contexts or found.full_read or found.interfaces)


def test_addresses_name_the_interfaces_they_were_and_are_on():
    found = touched([change("ipam.ipaddress", 1, {"assigned_object_id": 10},
                            {"assigned_object_id": 11}),
                     change("dcim.macaddress", 2, None, {"assigned_object_id": 12}),
                     change("dcim.macaddress", 3, {"assigned_object_id": None}, None)],
                    DEVICES)
    assert found.interfaces == {10, 11, 12} and not found.devices


def test_a_tag_touches_the_devices_carrying_it_by_slug_or_name():
    renamed = change("extras.tag", 1, {"name": "GPU", "slug": "gpu"},
                     {"name": "GPU nodes", "slug": "gpu-nodes"})
    assert touched([renamed], DEVICES).devices == {1, 2}
    by_name = change("extras.tag", 2, {"name": "spare", "slug": "x"}, {})
    assert touched([by_name], DEVICES).devices == {2}


def test_an_address_change_touches_the_devices_holding_it_as_primary_or_oob():
    devices = [{"id": 1, "primary_ip4": {"address": "10.0.0.1/24"}, "oob_ip": None},
               {"id": 2, "primary_ip6": {"address": "fd00::2/64"},
                "oob_ip": {"address": "10.1.0.2/24"}}]
    # A NAT outside address on no interface of device 1's; an OOB address on another's.
    nat = change("ipam.ipaddress", 5, {"address": "10.0.0.1/24", "assigned_object_id": None},
                 {"address": "10.0.0.9/24", "assigned_object_id": None})
    oob = change("ipam.ipaddress", 6, {"address": "10.1.0.2/24", "assigned_object_id": 77}, {})
    assert touched([nat], devices).devices == {1}
    found = touched([oob], devices)
    assert found.devices == {2} and found.interfaces == {77}


def test_the_kept_model_is_named_by_netbox_token_selection_and_code():
    one = state_key("http://nb", "token-a", Selection())
    assert one == state_key("http://nb", "token-a", Selection())
    assert len({one, state_key("http://nb", "token-b", Selection()),
                state_key("http://other", "token-a", Selection()),
                state_key("http://nb", "token-a", Selection(racks=("R1",)))}) == 4
    assert "token-a" not in one


def test_types_contexts_and_what_forces_a_full_read():
    found = touched([change("dcim.interfacetemplate", 1, {"device_type": 1}, None),
                     change("extras.configcontext", 2, {}, {}),
                     change("dcim.rack", 3, {"name": "R1"}, {"name": "R2"}),
                     change("dcim.site", 4, {}, {})], DEVICES)
    assert found.types and found.contexts
    assert found.full_read == "a dcim.rack changed (object 3)"  # the first one named


def test_what_the_inventory_does_not_read_touches_nothing():
    found = touched([change("dcim.cable", 1, {}, {}), change("users.user", 2, {}, {}),
                     change("dcim.device", True, {}, {})], DEVICES)  # not an id
    assert found.devices == set() and found.full_read is None


def raw(devices=(), interfaces=(), ips=(), modules=(), types=()):
    return RawInventory(list(devices), list(types), [], [], list(interfaces), list(ips),
                        list(modules))


def test_merge_replaces_the_touched_devices_and_only_them():
    kept = raw(devices=[{"id": 1, "v": "old"}, {"id": 2, "v": "old"}, {"id": 3, "v": "old"}],
               interfaces=[{"id": 10, "device": {"id": 1}}, {"id": 20, "device": {"id": 2}},
                           {"id": 30, "device": {"id": 3}}],
               ips=[{"id": 100, "assigned_object_id": 10}, {"id": 200, "assigned_object_id": 20},
                    {"id": 300, "assigned_object_id": 30}],
               modules=[{"id": 5, "device": {"id": 2}}], types=[{"id": 9}])
    # 2 changed (its IP 200 moved to device 1's interface 10), 3 was deleted.
    fresh = raw(devices=[{"id": 1, "v": "new"}, {"id": 2, "v": "new"}],
                interfaces=[{"id": 10, "device": {"id": 1}}, {"id": 20, "device": {"id": 2}}],
                ips=[{"id": 100, "assigned_object_id": 10}, {"id": 200, "assigned_object_id": 10}])
    merged = merge(kept, fresh, {1, 2, 3})
    assert merged.devices == [{"id": 1, "v": "new"}, {"id": 2, "v": "new"}]
    assert {i["id"] for i in merged.interfaces} == {10, 20}
    assert sorted((ip["id"], ip["assigned_object_id"]) for ip in merged.ip_addresses) == \
        [(100, 10), (200, 10)]
    assert merged.modules == [] and merged.device_types == [{"id": 9}]
    untouched = merge(kept, raw(), set())
    assert untouched == kept


def test_an_ip_on_an_untouched_device_stays():
    kept = raw(devices=[{"id": 1}, {"id": 2}],
               interfaces=[{"id": 10, "device": {"id": 1}}, {"id": 20, "device": {"id": 2}}],
               ips=[{"id": 100, "assigned_object_id": 10}, {"id": 200, "assigned_object_id": 20}])
    merged = merge(kept, raw(devices=[{"id": 1}]), {1})
    assert merged.ip_addresses == [{"id": 200, "assigned_object_id": 20}]


def test_unlogged_updates_become_changes_from_where_the_model_held_them():
    kept = raw(devices=[{"id": 1}, {"id": 2}],
               interfaces=[{"id": 10, "device": {"id": 1},
                            "primary_mac_address": {"id": 50, "mac_address": "02:00"}}],
               ips=[{"id": 100, "assigned_object_id": 10}], modules=[{"id": 7, "device": 1}])
    updated = {"dcim.device": [{"id": 1}, {"id": 2}],
               "dcim.interface": [{"id": 10, "device": {"id": 2}}],
               "dcim.macaddress": [{"id": 50, "assigned_object_id": 11}],
               "ipam.ipaddress": [{"id": 100, "assigned_object_id": 12}, {"id": 101}],
               "dcim.module": [{"id": 7, "device": 2}]}
    missed = unlogged(updated, [change("dcim.device", 1)], kept)  # device 1's was logged
    assert [(c["changed_object_type"], c["changed_object_id"], c["prechange_data"])
            for c in missed] == [
        ("dcim.device", 2, {}), ("dcim.interface", 10, {"device": {"id": 1}}),
        ("dcim.macaddress", 50, {"assigned_object_id": 10}), ("dcim.module", 7, {"device": 1}),
        ("ipam.ipaddress", 100, {"assigned_object_id": 10}), ("ipam.ipaddress", 101, {})]
    found = touched(missed, kept.devices)
    assert found.devices == {1, 2} and found.interfaces == {10, 11, 12}
    assert unlogged(updated, [change(k, r["id"]) for k, rows in updated.items() for r in rows],
                    kept) == []
    # An update the last read covered (the same object at the same time) is no change; a later
    # update of it is.
    stamped = {"dcim.device": [{"id": 2, "last_updated": "2026-12-02T22:00:00.1Z"}]}
    assert unlogged(stamped, [], kept, update_keys(stamped)) == []
    later = {"dcim.device": [{"id": 2, "last_updated": "2026-12-02T22:00:09.5Z"}]}
    assert [c["changed_object_id"] for c in unlogged(later, [], kept, update_keys(stamped))] \
        == [2]


def test_the_kept_model_round_trips_and_a_broken_file_is_none(tmp_path):
    path = tmp_path / "sub" / "kept.json"
    kept = Kept(raw(devices=[{"id": 1}]), "2026-12-02T22:00:00Z", (42, "2026-12-02T21:59Z"),
                1234.5, (40, 41, 42), ("dcim.device 1 2026-12-02T21:59:58Z",))
    save(path, kept)
    assert load(path) == kept
    assert oct(path.stat().st_mode & 0o777) == "0o600"  # MACs and addresses: the user's own
    assert list(path.parent.iterdir()) == [path]  # no temporary file left
    for broken in ("not json", json.dumps({"raw": {}}), json.dumps([1])):
        path.write_text(broken)
        assert load(path) is None
    assert load(tmp_path / "missing.json") is None


def test_saving_prunes_kept_models_unused_for_a_week(tmp_path):
    old, recent, other = (tmp_path / "racklift-inventory-old.json",
                          tmp_path / "racklift-inventory-recent.json", tmp_path / "notes.json")
    for path in (old, recent, other):
        path.write_text("{}")
    week_ago = time.time() - 8 * 86400
    os.utime(old, (week_ago, week_ago))
    os.utime(other, (week_ago, week_ago))
    save(tmp_path / "racklift-inventory-new.json", Kept(raw(), "2026-12-02T22:00:00Z", None, 0))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "notes.json", "racklift-inventory-new.json", "racklift-inventory-recent.json"]
