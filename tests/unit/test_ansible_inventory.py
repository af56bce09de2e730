import json
from dataclasses import replace

from racklift.ansible_inventory import INCOMPLETE_GROUP, build_inventory, group_name
from racklift.netbox.bulk_reads import reads_everything
from racklift.netbox.expected import InventoryHost, Problem
from racklift.netbox.graphql_records import rest_shaped_device, rest_shaped_ip
from racklift.netbox.inventory_hosts import RawInventory, build_inventory_hosts


def host(name: str, rack: str = "R01", problems=(), ip: str | None = "10.16.0.1/16"):
    return InventoryHost(
        name=name, netbox_id=1, status="planned", site="lab1", rack=rack, role="gpu-server",
        platform=None, serial="S1", primary_ip=ip, primary_ip_interface="eno1",
        oob_ip="10.32.0.1/16", provisioning_interface="eno1",
        macs={"eno1": "02:00:00:00:00:01", "bmc": "02:00:00:00:00:00"},
        ips={"eno1": (ip,)} if ip else {},
        config={"nvidia_driver": {"version": "550.127.08"}, "hardware": {"nvswitch": True}},
        tags=("racklift-lab",), problems=tuple(problems))


def test_group_names_are_ansible_safe():
    assert group_name("rack", "R12") == "rack_r12"
    assert group_name("site", "dc-1.eu") == "site_dc_1_eu"


def test_hosts_are_grouped_by_site_rack_role_status_and_tag():
    inv = build_inventory([host("gpu-0001"), host("gpu-0002", rack="R02")])
    assert inv["rack_r01"]["hosts"] == ["gpu-0001"]
    assert inv["rack_r02"]["hosts"] == ["gpu-0002"]
    assert inv["site_lab1"]["hosts"] == ["gpu-0001", "gpu-0002"]
    assert inv["status_planned"]["hosts"] == ["gpu-0001", "gpu-0002"]
    assert inv["role_gpu_server"]["hosts"] == ["gpu-0001", "gpu-0002"]
    assert inv["tag_racklift_lab"]["hosts"] == ["gpu-0001", "gpu-0002"]
    assert "rack_r01" in inv["all"]["children"]
    hv = inv["_meta"]["hostvars"]["gpu-0001"]
    assert hv["ansible_host"] == "10.16.0.1"


def test_host_vars_hold_what_playbooks_use_and_the_addresses_by_interface():
    hv = build_inventory([host("gpu-0001")])["_meta"]["hostvars"]["gpu-0001"]
    assert hv["racklift_expected"] == {
        "serial": "S1", "rack": "R01", "tags": ["racklift-lab"], "oob_ip": "10.32.0.1/16",
        "provisioning_interface": "eno1", "provisioning_mac": "02:00:00:00:00:01",
        "macs": {"eno1": "02:00:00:00:00:01", "bmc": "02:00:00:00:00:00"},
        "ips": {"eno1": ["10.16.0.1/16"]}}
    assert hv["netbox_status"] == "planned"
    assert hv["racklift_problems"] == []
    assert set(hv) == {"netbox_id", "netbox_status", "racklift_expected", "racklift_desired",
                       "racklift_problems", "ansible_host"}


def test_host_vars_hold_the_desired_state_the_roles_read_with_defaults():
    desired = build_inventory([host("gpu-0001")])["_meta"]["hostvars"]["gpu-0001"][
        "racklift_desired"]
    assert desired == {
        # The context's driver version; the branch and modules are racklift's defaults, and
        # fabric manager follows the device type's NVSwitches.
        "nvidia_driver": {"branch": "550", "version": "550.127.08", "kernel_modules": "open",
                          "fabricmanager": True},
        "ofed": {"source": "inbox", "version": None, "repo_url": None, "repo_key_url": None,
                 "repo_key_fingerprint": None, "hca_firmware_version": None},
        "container_toolkit": {"version": "1.17.3"},
        "registry_mirror": {"url": None,
                            "check_image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                            "check_command": ["nvidia-smi", "-L"], "check_gpus": True},
        "hardware": {"nvswitch": True}}
    assert json.loads(json.dumps(desired)) == desired  # plain data


def test_a_host_whose_context_does_not_parse_has_no_desired_state_for_the_roles():
    wrong = replace(host("gpu-0006"), config={"nvidia_driver": {"kernel_modules": "closed"}})
    assert wrong.desired is None
    hv = build_inventory([wrong])["_meta"]["hostvars"]["gpu-0006"]
    assert "racklift_desired" not in hv


def test_incomplete_hosts_stay_in_the_inventory_with_their_problems():
    problem = Problem("gpu-0003", "primary_ip4", "no primary IP")
    inv = build_inventory([host("gpu-0003", problems=[problem], ip=None)])
    assert inv[INCOMPLETE_GROUP]["hosts"] == ["gpu-0003"]
    hv = inv["_meta"]["hostvars"]["gpu-0003"]
    assert "ansible_host" not in hv
    assert hv["racklift_problems"] == ["gpu-0003: primary_ip4: no primary IP"]


def device(id_: int, name: str, **extra):
    return {"id": id_, "name": name, "status": {"value": "planned"}, "site": {"slug": "lab1"},
            "rack": {"name": "R01"}, "role": {"slug": "gpu-server"}, "platform": None,
            "device_type": {"id": 5}, "serial": f"S{id_}",
            "primary_ip4": {"address": f"10.16.0.{id_}/16"}, "oob_ip": {"address": "10.32.0.1/16"},
            "config_context": {"racklift": {"os_image": "debian-12-gpu"}}, "tags": [], **extra}


def iface(id_: int, device_id: int, name: str, mac: str | None = None):
    return {"id": id_, "device": {"id": device_id}, "name": name,
            "primary_mac_address": {"mac_address": mac} if mac else None}


def ip(address: str, interface_id: int):
    return {"address": address, "assigned_object_type": "dcim.interface",
            "assigned_object_id": interface_id}


TEMPLATES = {
    "device_types": [{"id": 5, "slug": "x", "model": "X"}],
    "interface_templates": [
        {"device_type": {"id": 5}, "name": "bmc", "type": {"value": "1000base-t"},
         "mgmt_only": True},
        {"device_type": {"id": 5}, "name": "ib0", "type": {"value": "infiniband-ndr"},
         "mgmt_only": False}],
    "item_templates": [{"device_type": {"id": 5}, "name": "GPU0", "role": {"slug": "gpu"}}],
}


def test_a_context_racklift_cannot_take_is_a_problem_naming_the_field():
    context = {"racklift": {"provisioning_interface": "eno2",
                            "nvidia_driver": {"version": "550.127"}}}
    raw = RawInventory(devices=[device(1, "gpu-0001", config_context=context)], **TEMPLATES,
                       interfaces=[iface(11, 1, "eno2", "02:aa:00:00:00:01")],
                       ip_addresses=[ip("10.16.0.1/16", 11)])
    (only,) = build_inventory_hosts(raw)
    assert only.desired is None
    # The provisioning interface the context names still holds: no second problem about it.
    assert only.provisioning_interface == "eno2" and only.provisioning_mac
    assert [(p.field, p.message) for p in only.problems] == [
        ("config_context.racklift.nvidia_driver.version",
         'is \'550.127\': set it to an exact driver version of the branch, e.g. "550.127.08", '
         "or null for the newest of the branch")]
    hv = build_inventory([only])["_meta"]["hostvars"]["gpu-0001"]
    assert only.name in build_inventory([only])[INCOMPLETE_GROUP]["hosts"]
    assert "racklift_desired" not in hv


def test_the_device_type_and_device_records_alone_are_no_desired_software():
    records = {"racklift": {"hardware": {"nvswitch": True},
                            "os_disk": "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4"}}
    raw = RawInventory(devices=[device(1, "gpu-0001", config_context=records)], **TEMPLATES,
                       interfaces=[iface(11, 1, "eno1", "02:aa:00:00:00:01")],
                       ip_addresses=[ip("10.16.0.1/16", 11)])
    (only,) = build_inventory_hosts(raw)
    assert [p.field for p in only.problems] == ["config_context.racklift"]
    assert only.desired is not None and only.desired.os_disk.endswith("c3d4")


def test_inventory_hosts_carry_macs_and_ips_by_interface_and_their_problems():
    raw = RawInventory(
        devices=[device(2, "gpu-0002"), device(1, "gpu-0001")], **TEMPLATES,
        interfaces=[iface(11, 1, "eno1", "02:aa:00:00:00:01"),
                    iface(12, 1, "bmc", "02:aa:00:00:00:00"), iface(13, 1, "bond0"),  # IPs, no MAC
                    iface(21, 2, "eno2", "02:aa:00:00:00:22")],
        ip_addresses=[ip("10.16.0.1/16", 11), ip("10.32.0.1/16", 12), ip("10.50.0.1/24", 13),
                      ip("10.50.0.9/24", 13), ip("10.16.0.2/16", 21)],
    )
    first, second = build_inventory_hosts(raw)
    assert first.name == "gpu-0001" and second.name == "gpu-0002"
    assert first.macs == {"eno1": "02:AA:00:00:00:01", "bmc": "02:AA:00:00:00:00"}
    assert first.ips == {"eno1": ("10.16.0.1/16",), "bmc": ("10.32.0.1/16",),
                         "bond0": ("10.50.0.1/24", "10.50.0.9/24")}
    assert first.primary_ip_interface == "eno1" and first.provisioning_mac == "02:AA:00:00:00:01"
    assert first.problems == ()
    # gpu-0002's provisioning interface eno1 holds no MAC; its primary IP sits on eno2.
    assert [p.field for p in second.problems] == ["interfaces.eno1.primary_mac_address"]
    assert second.primary_ip_interface == "eno2"


def test_a_whole_site_reads_every_component_a_rack_reads_its_own():
    assert reads_everything(selected=10_000, total=10_000)
    assert reads_everything(selected=6_000, total=10_000)
    assert not reads_everything(selected=8, total=10_000)
    assert reads_everything(selected=0, total=0)  # an empty NetBox


def test_graphql_devices_and_addresses_are_shaped_as_rest_returns_them():
    context = {"racklift": {"os_image": "debian-12-gpu"}}
    device_ = {"id": 7, "position": "12.5", "site": {"slug": "lab1"}}
    assert rest_shaped_device(device_, context, ["lab"]) == {
        "id": 7, "position": 12.5, "site": {"slug": "lab1"}, "config_context": context,
        "tags": [{"slug": "lab"}]}
    assert rest_shaped_device({"id": 8, "position": None}, {}, [])["position"] is None
    address = {"id": 3, "address": "10.16.0.1/16", "assigned_object": {"id": 41}}
    assert rest_shaped_ip(address) == {"id": 3, "address": "10.16.0.1/16",
                                        "assigned_object_type": "dcim.interface",
                                        "assigned_object_id": 41}
    assert rest_shaped_ip({"id": 4, "address": "10.0.0.1/24", "assigned_object": {}}) is None
    assert rest_shaped_ip({"id": 5, "address": "10.0.0.2/24", "assigned_object": None}) is None


def test_gpu_slots_are_in_natural_order():
    from racklift.netbox.expected_hosts import gpu_templates

    slots = [{"name": f"GPU{i}", "role": {"slug": "gpu"}} for i in (10, 2, 0, 1)]
    assert [t["name"] for t in gpu_templates(slots)] == ["GPU0", "GPU1", "GPU2", "GPU10"]
