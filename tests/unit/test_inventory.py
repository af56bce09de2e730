from racklift.inventory import INCOMPLETE_GROUP, build_inventory, group_name
from racklift.netbox.model import DeviceTypeRef, ExpectedHost, ExpectedInterface, Problem
from racklift.netbox.reader import _rest_shaped, _rest_shaped_ip, reads_everything


def host(name: str, rack: str = "R01", problems=(), ip: str | None = "10.16.0.1/16"):
    return ExpectedHost(
        name=name, netbox_id=1, status="planned", site="lab1", rack=rack, position=1,
        role="gpu-server", platform=None, device_type=DeviceTypeRef("Supermicro", "X", "x"),
        serial="S1", asset_tag=None, primary_ip=ip, primary_ip_interface="eno1",
        oob_ip="10.32.0.1/16", oob_interface="bmc", provisioning_interface="eno1",
        interfaces=(ExpectedInterface("eno1", "25gbase-x-sfp28", False, True, "02:00:00:00:00:01",
                                      (ip,) if ip else ()),),
        gpus=(), config={"os_image": "debian-12-gpu"}, problems=tuple(problems))


def test_group_names_are_ansible_safe():
    assert group_name("rack", "R12") == "rack_r12"
    assert group_name("site", "dc-1.eu") == "site_dc_1_eu"


def test_hosts_are_grouped_by_site_rack_role_status():
    inv = build_inventory([host("gpu-0001"), host("gpu-0002", rack="R02")])
    assert inv["rack_r01"]["hosts"] == ["gpu-0001"]
    assert inv["rack_r02"]["hosts"] == ["gpu-0002"]
    assert inv["site_lab1"]["hosts"] == ["gpu-0001", "gpu-0002"]
    assert inv["status_planned"]["hosts"] == ["gpu-0001", "gpu-0002"]
    assert inv["role_gpu_server"]["hosts"] == ["gpu-0001", "gpu-0002"]
    assert "rack_r01" in inv["all"]["children"]
    hv = inv["_meta"]["hostvars"]["gpu-0001"]
    assert hv["ansible_host"] == "10.16.0.1"
    assert hv["racklift_expected"]["provisioning_mac"] == "02:00:00:00:00:01"
    assert hv["racklift_config"] == {"os_image": "debian-12-gpu"}


def test_expected_model_holds_everything_but_the_config_context_once():
    h = host("gpu-0001")
    hv = build_inventory([h])["_meta"]["hostvars"]["gpu-0001"]
    assert "config" not in hv["racklift_expected"]
    assert {**hv["racklift_expected"], "config": hv["racklift_config"]} == h.to_dict()


def test_incomplete_hosts_stay_in_the_inventory_with_their_problems():
    problem = Problem("gpu-0003", "primary_ip4", "no primary IP")
    inv = build_inventory([host("gpu-0003", problems=[problem], ip=None)])
    assert inv[INCOMPLETE_GROUP]["hosts"] == ["gpu-0003"]
    hv = inv["_meta"]["hostvars"]["gpu-0003"]
    assert "ansible_host" not in hv
    assert hv["racklift_problems"] == ["gpu-0003: primary_ip4: no primary IP"]


def test_a_whole_site_reads_every_component_a_rack_reads_its_own():
    assert reads_everything(selected=10_000, total=10_000)
    assert reads_everything(selected=6_000, total=10_000)
    assert not reads_everything(selected=8, total=10_000)
    assert reads_everything(selected=0, total=0)  # an empty NetBox


def test_graphql_devices_and_addresses_are_shaped_as_rest_returns_them():
    device = {"id": 7, "position": "12.5", "site": {"slug": "lab1"}}
    assert _rest_shaped(device) == {"id": 7, "position": 12.5, "site": {"slug": "lab1"}}
    assert _rest_shaped({"id": 8, "position": None}) == {"id": 8, "position": None}
    ip = {"id": 3, "address": "10.16.0.1/16", "assigned_object": {"id": 41}}
    assert _rest_shaped_ip(ip) == {"id": 3, "address": "10.16.0.1/16",
                                   "assigned_object_type": "dcim.interface",
                                   "assigned_object_id": 41}
    assert _rest_shaped_ip({"id": 4, "address": "10.0.0.1/24", "assigned_object": {}}) is None
    assert _rest_shaped_ip({"id": 5, "address": "10.0.0.2/24", "assigned_object": None}) is None
