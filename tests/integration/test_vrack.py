"""The virtual rack's `up`/`down` with one VM for real (namespace, libvirtd, QEMU,
sushy-emulator, the boot server container, the test NetBox). Its pure planning and rendering:
tests/unit/test_vrack_plan.py."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import requests

from helpers import BIN, REPO
from racklift.lab import hosts, tags, vrack, vrack_uplink
from racklift.lab.sources import LAB_SOURCE
from racklift.lab.vrack.layout import ib_leaves, ib_links
from racklift.netbox.reader import Selection, read_hosts

pytestmark = pytest.mark.vm

RACK = vrack.Vrack("rltest-prov", "rltest0", ipaddress.ip_network("10.91.0.0/24"),
                   ipaddress.ip_network("fd52:4c91::/64"), ipaddress.ip_network("127.0.78.0/24"),
                   rack="V91", mac_base=0x5800, memory_mib=512, disk_gib=1)


@pytest.fixture(scope="module")
def rack(netbox):
    vrack.down(netbox, RACK)  # leftovers of an interrupted run
    try:
        result = vrack.up(netbox, 1, RACK)
        print(f"\n[vrack] up with 1 VM in {result.seconds:.1f} s")
        yield result
    finally:
        vrack.down(netbox, RACK)


def _ns(*cmd: str) -> str:
    return subprocess.run(["ip", "netns", "exec", RACK.netns, *cmd], capture_output=True,
                          text=True, check=True, timeout=30).stdout


def test_vms_are_planned_devices_with_mac_ip_and_bmc(netbox, rack):
    vm = rack.vms[0]
    host, = read_hosts(netbox, Selection(names=(vm.name,)))
    assert (host.status, host.serial, host.rack, host.role) == \
        ("planned", vm.serial, "V91", "gpu-server")
    assert host.primary_ip == vm.ip and host.oob_ip == f"{vm.bmc}/32"
    assert {i.name: i.mac for i in host.interfaces}[vrack.VM_NIC] == vm.mac
    assert {tags.LAB, tags.VM, tags.PROV} <= set(host.tags)
    assert not [p for p in host.problems if p.field in ("serial", "oob_ip", "primary_ip4")]
    assert vrack.domains(RACK) == {vm.name: "shut off"}  # racks arrive powered off
    # A GPU server's record: its GPUs, the board's hardware context on its device type, and
    # each HCA port cabled to its rail's leaf, as the VM's emulated fabric has it.
    assert len(host.gpus) == vrack.VM_GPUS
    assert host.desired is not None and host.desired.hardware.nvswitch
    assert host.desired.hardware.gpu_link == "NV18"
    assert {i.name: (i.peer.device, i.peer.port) for i in host.interfaces if i.peer} == \
        ib_links(RACK, vm.slot)


def test_boot_server_is_an_active_device_at_the_bridge_address(netbox, rack):
    host, = read_hosts(netbox, Selection(names=(RACK.boot_server,)))
    assert (host.status, host.role, host.primary_ip) == ("active", "boot-server",
                                                         "10.91.0.1/24")
    assert tags.PROV in host.tags and tags.VM not in host.tags


def test_namespace_bridge_has_the_private_v4_and_a_ula(rack):
    addresses = _ns("ip", "-br", "addr", "show", "dev", RACK.bridge)
    assert "10.91.0.1/24" in addresses and "fd52:4c91::1/64" in addresses
    host_links = subprocess.run(["ip", "-br", "addr"], capture_output=True, text=True).stdout
    assert "10.91.0.1" not in host_links  # private addresses stay inside the namespace


def boot_server_ssh(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ssh", "-i", str(hosts.ssh_key()), "-o", f"ProxyCommand={vrack.proxy_command(RACK)}",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "LogLevel=ERROR", "-o", "BatchMode=yes", f"root@{RACK.gateway}", command],
        capture_output=True, text=True, timeout=60)


def test_ssh_reaches_the_boot_server_through_the_namespace(rack):
    result = boot_server_ssh(
        "hostname; ip -br addr show dev rltest0; systemctl is-system-running --wait")
    assert result.returncode == 0, result.stderr
    name, bridge, state = result.stdout.split("\n")[:3]
    assert name == RACK.boot_server and "10.91.0.1/24" in bridge and state == "running"


FETCH = ("import sys, urllib.request, urllib.error\n"
         "proxy = urllib.request.ProxyHandler({'http': 'http://127.0.0.1:3142'})\n"
         "try:\n"
         "    answer = urllib.request.build_opener(proxy).open(sys.argv[1], timeout=30)\n"
         "    print(answer.status, answer.read(200))\n"
         "except urllib.error.HTTPError as exc:\n"
         "    print(exc.code, exc.read(200))\n")


def test_the_boot_server_reaches_the_mirror_and_only_the_mirror(rack):
    conf = boot_server_ssh("apt-config dump Acquire::http::Proxy").stdout
    assert '"http://127.0.0.1:3142"' in conf  # apt there goes through the uplink
    mirror = boot_server_ssh(f"python3 -c \"{FETCH}\" "
                             "http://deb.debian.org/debian/dists/bookworm/Release")
    assert mirror.stdout.startswith("200 b'Origin: Debian"), mirror.stdout + mirror.stderr
    other = boot_server_ssh(f"python3 -c \"{FETCH}\" http://example.com/")
    assert other.stdout.startswith("403 ") and \
        "example.com:80 is not the lab's mirror" in other.stdout, other.stdout + other.stderr
    assert "default" not in _ns("ip", "route")  # no way out but the uplink


@pytest.mark.parametrize("head, parsed", [
    (b"GET http://deb.debian.org/debian/dists/bookworm/InRelease HTTP/1.1\r\nHost: x\r\n\r\n",
     ("GET", "deb.debian.org", 80)),
    (b"GET http://mirror.example:8080/debian/ HTTP/1.1\r\n\r\n", ("GET", "mirror.example", 8080)),
    (b"CONNECT deb.debian.org:443 HTTP/1.1\r\n\r\n", ("CONNECT", "deb.debian.org", 443)),
])
def test_uplink_reads_proxy_requests(head, parsed):
    assert vrack_uplink.parse_request_head(head) == parsed


@pytest.mark.parametrize("head", [b"GET /debian/ HTTP/1.1\r\n\r\n", b"garbage\r\n\r\n",
                                  b"CONNECT deb.debian.org HTTP/1.1\r\n\r\n"])
def test_uplink_refuses_what_is_not_a_proxy_request(head):
    with pytest.raises(ValueError):
        vrack_uplink.parse_request_head(head)


def test_ansible_reaches_the_boot_server_with_the_namespace_group_vars(instance, rack,
                                                                      tmp_path):
    # The lab's source brings its group_vars (tag_racklift_lab_prov.yml); the third selects the
    # boot server (role boot-server). Only the namespace differs from the lab's.
    (tmp_path / "boot.racklift.yml").write_text(
        f"plugin: racklift_netbox\nroles: [boot-server]\nnames: [{RACK.boot_server}]\n")
    env = {**os.environ, "NETBOX_URL": instance.url, "NETBOX_TOKEN": instance.token,
           "ANSIBLE_INVENTORY_CACHE": "false", "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true",
           "PATH": f"{BIN}:{os.environ['PATH']}"}
    result = subprocess.run(
        [str(BIN / "ansible"), "-i", "inventory/netbox.racklift.yml", "-i", str(LAB_SOURCE),
         "-i", str(tmp_path / "boot.racklift.yml"), "-e", f"racklift_vrack_netns={RACK.netns}",
         RACK.boot_server, "-m", "ansible.builtin.command", "-a", "hostname"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{RACK.boot_server} | CHANGED | rc=0 >>\n{RACK.boot_server}" in result.stdout


def test_the_bmc_answers_over_tls_with_the_lab_ca_and_wants_credentials(rack):
    vm = rack.vms[0]
    url = f"https://{vm.bmc}:{vrack.BMC_PORT}/redfish/v1/Systems"
    assert requests.get(url, verify=str(vrack.ca_bundle()), timeout=10).status_code == 401
    answer = requests.get(url, verify=str(vrack.ca_bundle()), timeout=10,
                          auth=(vrack.BMC_USERNAME, vrack.bmc_password(RACK)))
    assert answer.json()["Members@odata.count"] == 1
    assert oct(os.stat(vrack.vrack_dir(RACK) / "bmc-password").st_mode)[-3:] == "600"


def _vcpus(name: str) -> str:
    return ET.fromstring(vrack.virsh("dumpxml", "--inactive", name).stdout).find("vcpu").text


def test_up_again_converges(netbox, rack, tmp_path):
    """Nothing new, and a domain defined otherwise (an older racklift's, left behind with
    its state directory) takes this plan's definition again."""
    vm = rack.vms[0]
    stale = ET.fromstring(vrack.virsh("dumpxml", "--inactive", vm.name).stdout)
    stale.find("vcpu").text = "3"
    (tmp_path / "stale.xml").write_text(ET.tostring(stale, encoding="unicode"))
    vrack.virsh("define", str(tmp_path / "stale.xml"))
    assert _vcpus(vm.name) == "3"
    devices = netbox.count("dcim/devices", {"rack": "V91"})
    cables = netbox.count("dcim/cables", {"site": RACK.site, "rack": RACK.rack})
    again = vrack.up(netbox, 1, RACK)
    assert (again.created_vms, again.started_emulators) == (0, 0)
    assert _vcpus(vm.name) == str(RACK.vcpus) == "1"
    # The VM, the boot server and a leaf per rail; a cable per HCA port.
    assert netbox.count("dcim/devices", {"rack": "V91"}) == devices == 2 + vrack.VM_GPUS
    assert netbox.count("dcim/cables", {"site": RACK.site, "rack": RACK.rack}) == cables == \
        vrack.VM_GPUS
    assert again.seconds < 30


def test_a_vm_nic_can_be_given_a_mac_netbox_does_not_have(netbox, rack):
    vm = rack.vms[0]
    swapped = "02:52:4c:ff:ff:01"
    vrack.set_vm_mac(RACK, vm.name, swapped)
    assert swapped in vrack.virsh("domiflist", vm.name).stdout
    host, = read_hosts(netbox, Selection(names=(vm.name,)))
    assert {i.name: i.mac for i in host.interfaces}[vrack.VM_NIC] == vm.mac
    vrack.set_vm_mac(RACK, vm.name, vm.mac)
    assert vm.mac.lower() in vrack.virsh("domiflist", vm.name).stdout


def test_down_leaves_nothing_behind(netbox, rack):
    vm = rack.vms[0]
    emulator = int((vrack.vm_dir(RACK, vm.name) / "bmc.pid").read_text())
    uplink = int((vrack.vrack_dir(RACK) / "uplink.pid").read_text())
    cables = [c["id"] for c in netbox.get_all("dcim/cables", {"site": RACK.site,
                                                              "rack": RACK.rack})]
    assert cables
    vrack.down(netbox, RACK)
    assert not Path(f"/run/netns/{RACK.netns}").exists()
    assert not vrack.boot_server_containers(RACK)
    assert not Path(f"/proc/{emulator}").exists() and not Path(f"/proc/{uplink}").exists()
    assert not Path(f"/etc/libvirt/qemu/{vm.name}.xml").exists()  # undefined, not just off
    assert vrack.virsh("version", check=False).returncode != 0  # libvirtd stopped with it
    assert netbox.count("dcim/devices", {"name": [vm.name, RACK.boot_server,
                                                  *ib_leaves(RACK)]}) == 0
    assert netbox.count("dcim/cables", {"id": cables}) == 0
    assert netbox.count("ipam/ip-addresses", {"address": [vm.ip, "10.91.0.1/24"]}) == 0
    assert netbox.count("dcim/racks", {"name": RACK.rack}) == 0
    assert not vrack.vrack_dir(RACK).exists()
