"""The virtual rack's pure planning and rendering: VM names, addresses and MACs, the libvirt
domain, each BMC emulator's configuration, the lab's SSH proxy."""

from __future__ import annotations

import ipaddress
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import jinja2
import pytest
import yaml

import emulated
from racklift.errors import LabError
from racklift.facts.host import from_bundle
from racklift.lab import hosts, vrack
from racklift.lab.sources import LAB_SOURCE
from racklift.lab.vrack.layout import VM_GPUS, ib_leaves, ib_links
from racklift.lab.vrack.vms import vm_profile
from racklift.netbox.expected import ExpectedInterface, LinkPeer
from racklift.verify.compare import compare

RACK = vrack.Vrack("rltest-prov", "rltest0", ipaddress.ip_network("10.91.0.0/24"),
                   ipaddress.ip_network("fd52:4c91::/64"), ipaddress.ip_network("127.0.78.0/24"),
                   rack="V91", mac_base=0x5800, memory_mib=512, disk_gib=1)


def test_plan_is_fixed_and_inside_the_racks_networks():
    vms = vrack.plan(3, RACK)
    assert vms == vrack.plan(3, RACK)
    assert [v.name for v in vms] == ["vm-v91-01", "vm-v91-02", "vm-v91-03"]
    assert [v.ip for v in vms] == ["10.91.0.11/24", "10.91.0.12/24", "10.91.0.13/24"]
    assert [v.bmc for v in vms] == ["127.0.78.1", "127.0.78.2", "127.0.78.3"]
    assert all(v.mac.startswith("02:52:4C:") for v in vms)  # racklift's lab prefix
    assert len({v.mac for v in vms} | {v.uuid for v in vms} | {v.serial for v in vms}) == 9
    lab_macs = {m for h in hosts.plan(8).hosts for m in h.macs.values()}
    assert not lab_macs & {v.mac for v in vrack.plan(8)}  # clear of the container hosts'


def test_plan_refuses_what_the_rack_cannot_hold():
    with pytest.raises(LabError, match="holds 1 to"):
        vrack.plan(0, RACK)
    with pytest.raises(LabError, match=f"not {RACK.capacity + 1}"):
        vrack.plan(RACK.capacity + 1, RACK)


def _xml(rack: vrack.Vrack) -> ET.Element:
    vm = vrack.plan(1, rack)[0]
    return ET.fromstring(vrack.domain_xml(vm, rack, Path("/s/disk.qcow2"), Path("/s/nvram.fd"),
                                          Path("/s/console.log")))


def test_domain_is_tcg_uefi_with_the_netbox_identity():
    domain = _xml(RACK)
    vm = vrack.plan(1, RACK)[0]
    assert domain.get("type") == "qemu"
    assert domain.find("features/tcg/tb-cache").text == "1024"
    assert domain.find("os/loader").text == str(vrack.OVMF_CODE)
    assert domain.find("os/nvram").get("template") == str(vrack.OVMF_VARS)
    assert domain.find("sysinfo/system/entry[@name='serial']").text == vm.serial
    nic = domain.find("devices/interface")
    assert nic.get("type") == "bridge" and nic.find("source").get("bridge") == "rltest0"
    assert nic.find("mac").get("address") == vm.mac.lower()
    assert domain.find("devices/serial/source").get("path") == "/s/console.log"
    assert domain.find("memory").text == "512"
    # The tests' racks one vCPU (their VMs run beside the other lane); the demo's two.
    assert domain.find("vcpu").text == "1"
    assert _xml(vrack.LAB).find("vcpu").text == "2"


def test_bios_domain_has_no_uefi_loader_and_unknown_firmware_is_refused():
    assert _xml(replace(RACK, firmware="bios")).find("os/loader") is None
    with pytest.raises(LabError, match="firmware 'coreboot'"):
        _xml(replace(RACK, firmware="coreboot"))


def test_each_emulator_manages_only_its_vm():
    vm = vrack.plan(2, RACK)[1]
    config: dict = {}
    exec(vrack.emulator_config(vm, Path("/c.pem"), Path("/c.key"), Path("/auth")), config)
    assert config["SUSHY_EMULATOR_ALLOWED_INSTANCES"] == [vm.uuid, vm.name]
    assert (config["SUSHY_EMULATOR_LISTEN_IP"], config["SUSHY_EMULATOR_LISTEN_PORT"]) == \
        ("127.0.78.2", 8443)
    assert config["SUSHY_EMULATOR_AUTH_FILE"] == "/auth"


def test_group_vars_proxy_command_is_the_labs():
    group_vars = yaml.safe_load(
        (LAB_SOURCE.parent / "group_vars/tag_racklift_lab_prov.yml").read_text())
    args = jinja2.Template(group_vars["ansible_ssh_common_args"]).render(group_vars)
    assert f'ProxyCommand="{vrack.proxy_command(vrack.LAB)}"' in args




def _hardware_findings(vm: vrack.VmPlan, profile) -> list[str]:
    """What the gate finds in the board's links and cables of a VM with this hardware, against
    the VM's record: the lab GPU server type's hardware context and the cables register()
    records (ib_links)."""
    lab = emulated.expected_host()
    expected = replace(lab, name=vm.name, gpus=lab.gpus[:VM_GPUS], interfaces=tuple(
        ExpectedInterface(port, "infiniband-ndr", False, True, None, (), LinkPeer(*peer))
        for port, peer in ib_links(RACK, vm.slot).items()))
    return [str(m) for m in compare(expected, from_bundle(emulated.bundle(profile)))
            if m.field.startswith(("cable", "topology", "nvlink"))]


def test_each_vm_has_a_gpu_server_s_board_and_rail_cables_that_match_its_record():
    """A VM's healthy profile, read through the real tools' formats, has VM_GPUS GPUs joined
    as the HGX board of the device type's context is (NV18, 18 NVLinks each, each GPU's HCA
    behind its PCIe switch), and its HCA ports reach the rack's rail leaves where NetBox's
    cables say: the gate finds nothing. Another VM's profile in its place: every cable is
    on the wrong port."""
    first, second = vrack.plan(2, RACK)
    assert ib_leaves(RACK) == ["ib-leaf-v91-0", "ib-leaf-v91-1"]
    assert ib_links(RACK, 1) == {"mlx5_0": ("ib-leaf-v91-0", "p2"),
                                 "mlx5_1": ("ib-leaf-v91-1", "p2")}
    for vm in (first, second):
        profile = vm_profile(RACK, vm)
        assert len(profile.gpus) == len(profile.hcas) == VM_GPUS == 2
        assert _hardware_findings(vm, profile) == []
    swapped = _hardware_findings(second, vm_profile(RACK, first))
    assert [f.split(":")[0] for f in swapped] == ["cable.wrong_peer[mlx5_0]",
                                                  "cable.wrong_peer[mlx5_1]"], swapped
