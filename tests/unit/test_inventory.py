from racklift.inventory import INCOMPLETE_GROUP, build_inventory, group_name
from racklift.netbox.model import DeviceTypeRef, ExpectedHost, ExpectedInterface, Problem
from racklift.netbox.reader import reads_everything


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


def test_incomplete_hosts_stay_in_the_inventory_with_their_problems():
    problem = Problem("gpu-0003", "primary_ip4", "no primary IP")
    inv = build_inventory([host("gpu-0003", problems=[problem], ip=None)])
    assert inv[INCOMPLETE_GROUP]["hosts"] == ["gpu-0003"]
    hv = inv["_meta"]["hostvars"]["gpu-0003"]
    assert "ansible_host" not in hv
    assert hv["racklift_problems"] == ["gpu-0003: primary_ip4: no primary IP"]


def test_a_whole_site_reads_every_component_a_rack_reads_its_own():
    assert reads_everything(selected_interfaces=110_000, all_interfaces=110_000)
    assert reads_everything(selected_interfaces=60_000, all_interfaces=110_000)
    assert not reads_everything(selected_interfaces=88, all_interfaces=110_000)
    assert reads_everything(selected_interfaces=0, all_interfaces=0)  # an empty NetBox
