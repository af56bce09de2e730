"""racklift on a NetBox it did not write: NetBox's own demonstration data (72 devices in 24
sites; 22 without a name, `PP:MDF` in three sites), loaded into the test NetBox and migrated to
4.7. bootstrap, the expected model, the inventory, provision --check, verify --check and the
adoption report run on it: nothing crashes, every device is accounted for once, the names
racklift cannot use are refused with the field, and NetBox changes by what bootstrap creates
and nothing else."""

from __future__ import annotations

import pytest

from racklift import ansible_inventory
from racklift.netbox.adoption import adoption_report
from racklift.netbox.bootstrap import REQUIREMENTS, bootstrap
from racklift.netbox.identity import AMBIGUOUS, has_identity
from racklift.netbox.reader import Selection, read_hosts
from racklift.pipeline.outcome import PLANNED, PREFLIGHT, SKIPPED
from racklift.pipeline.plan import Options
from racklift.pipeline.progress import QUIET, Progress
from racklift.pipeline.provision import run
from racklift.verify.gate import verify

pytestmark = pytest.mark.netbox

ALL = Selection()
# What bootstrap may create, as NetBox's change log names the object types.
BOOTSTRAP_TYPES = {"extras.tag", "dcim.devicerole", "dcim.inventoryitemrole",
                   "extras.customfield"}


def changes_since(netbox, first_id: int) -> list[dict]:
    return [c for c in netbox.get_all("core/object-changes", {"id__gt": first_id})]


def last_change(netbox) -> int:
    found = netbox.get_all("core/object-changes", {"ordering": "-id", "limit": 1},
                           fields=("id",))
    return found[0]["id"] if found else 0


@pytest.fixture(scope="module")
def devices(demo_data_netbox) -> dict[int, str | None]:
    return {d["id"]: d["name"] for d in demo_data_netbox.get_all(
        "dcim/devices", {}, fields=("id", "name"))}


def test_the_demo_data_is_what_its_readme_says(devices):
    assert len(devices) == 72
    assert sum(1 for n in devices.values() if not n) == 22
    assert sum(1 for n in devices.values() if n == "PP:MDF") == 3


def test_every_command_accounts_for_every_device_once_and_writes_only_bootstrap(
        demo_data_netbox, settings, devices):
    netbox = demo_data_netbox
    before = last_change(netbox)

    created = [r for r in bootstrap(netbox) if r.created]
    assert len(created) == len(REQUIREMENTS)  # the demo data has none of racklift's objects
    assert not any(r.created for r in bootstrap(netbox))

    # The expected model: each device once, by its NetBox id.
    model = read_hosts(netbox, ALL)
    assert sorted(h.netbox_id for h in model) == sorted(devices)
    by_id = {h.netbox_id: h for h in model}
    for device_id, name in devices.items():
        fields = {p.field for p in by_id[device_id].problems}
        if not name:
            assert by_id[device_id].name == f"device-{device_id}" and "name" in fields
        if name == "PP:MDF":
            assert {AMBIGUOUS, "name"} <= fields  # shared, and no host name

    # The inventory agrees host by host: an Ansible host is the model's host of that id and
    # name; every other device is refused, with its identity problem named.
    inv = ansible_inventory.load(settings, ALL)
    hostvars = inv["_meta"]["hostvars"]
    refused = {d["netbox_id"]: d for d in inv["_meta"]["racklift_refused"]}
    in_inventory = {v["netbox_id"]: name for name, v in hostvars.items()}
    assert not set(in_inventory) & set(refused)
    assert sorted([*in_inventory, *refused]) == sorted(devices)
    assert all(by_id[i].name == name for i, name in in_inventory.items())
    assert all(not has_identity(by_id[i].problems) for i in refused)
    assert all(any(p.startswith(("name", AMBIGUOUS)) or ": name" in p
                   for p in d["problems"]) for d in refused.values())

    # provision --check: each device planned or told why not; nothing written.
    result = run(netbox, ALL, Options(), check=True, progress=Progress(print, QUIET))
    assert sorted(h.host.netbox_id for h in result.hosts) == sorted(devices)
    assert {h.result for h in result.hosts} <= {PLANNED, PREFLIGHT, SKIPPED}
    # A name racklift cannot use is never planned: refused at preflight with the field, or
    # skipped first for its status (an active device is never provisioned).
    for h in result.hosts:
        if h.host.netbox_id in refused:
            assert (h.result == PREFLIGHT and "name" in (h.error or "")) or (
                h.result == SKIPPED and h.plan.skip), (h.name, h.result, h.error)

    # verify --check: a verdict for each device; none is contacted without a complete record.
    run_ = verify(netbox, ALL, write=False)
    assert sorted(v.netbox_id for v in run_.verdicts) == sorted(devices)
    assert not any(v.passed for v in run_.verdicts)

    # The adoption report counts every device once and names what each device type lacks.
    report = adoption_report(model)
    assert report.devices == 72 and report.ready == ()
    assert sum(t.devices for t in report.types) == 72
    assert report.gaps["config_context.racklift"] == 72
    assert len(report.refused) == sum(1 for i in refused)
    assert len(report.by_device) == 72

    # Nothing in NetBox changed but what bootstrap created.
    assert {c["changed_object_type"] for c in changes_since(netbox, before)} == BOOTSTRAP_TYPES
    assert all(c["action"]["value"] == "create" for c in changes_since(netbox, before))
