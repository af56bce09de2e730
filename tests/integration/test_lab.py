"""The lab rack on real podman containers (systemd + sshd), registered in the real test
NetBox, reached by Ansible through racklift's inventory, with emulated hardware and faults."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

from helpers import BIN, REPO, TEST_NET
from racklift import podman
from racklift.ansible import run_playbook
from racklift.facts.host import own_links
from racklift.facts.parsers import (
    parse_ibnetdiscover,
    parse_ibstat,
    parse_lldpctl_json,
    parse_nvidia_smi_nvlink,
    parse_nvidia_smi_nvlink_errors,
    parse_nvidia_smi_topo,
)
from racklift.lab import hardware, hosts, seed
from racklift.lab import rack as lab_rack
from racklift.netbox.reader import Selection, read_hosts
from racklift.verify.cabling import ib_is, lldp_is

pytestmark = pytest.mark.containers

RACK = "T01"


def ssh(host: seed.HostPlan, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ssh", "-i", str(hosts.ssh_key()), "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes",
         f"root@{host.primary_ip.split('/')[0]}", command],
        capture_output=True, text=True, timeout=60)


def out(host: seed.HostPlan, command: str) -> str:
    result = ssh(host, command)
    assert result.returncode == 0, f"{command}: {result.stderr}"
    return result.stdout


def ansible(instance, *args):
    env = {**os.environ, "NETBOX_URL": instance.url, "NETBOX_TOKEN": instance.token,
           "ANSIBLE_INVENTORY_CACHE": "false", "PATH": f"{BIN}:{os.environ['PATH']}"}
    return subprocess.run([str(BIN / "ansible"), *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)


@pytest.fixture(scope="module")
def lab(netbox, settings):
    lab_rack.down(netbox, TEST_NET)  # leftovers of an interrupted run
    result = lab_rack.up(netbox, 4, RACK, net=TEST_NET)
    print(f"\n[lab] 4 hosts up in {result.seconds:.1f} s, containers {result.memory_mib:.0f} MiB")
    # The emulated nvidia-smi reports the installed driver package's version (and fails, as
    # without a driver, when there is none): the stand-in driver, as configure installs it.
    driver = run_playbook("configure.yml", [h.name for h in result.hosts], settings,
                          extravars={"racklift_roles": ["nvidia_driver"]})
    assert driver.rc == 0, driver.failed
    yield result
    lab_rack.down(netbox, TEST_NET)


def test_hosts_are_registered_with_what_they_really_have(netbox, lab):
    expected = {h.name: h for h in read_hosts(netbox, Selection(racks=(RACK,),
                                                                roles=("gpu-server",)))}
    assert sorted(expected) == [f"lab-t01-0{n}" for n in range(1, 5)]
    for host in lab.hosts:
        record = expected[host.name]
        assert record.problems == ()
        link = json.loads(out(host, "ip -j link show eno1"))[0]
        addr = json.loads(out(host, "ip -j addr show eno1"))[0]["addr_info"][0]
        assert record.provisioning_mac == link["address"].upper()
        assert record.primary_ip == f"{addr['local']}/{addr['prefixlen']}"
        assert record.primary_ip_interface == "eno1"
        profile = hardware.load(host.name, TEST_NET)
        assert record.serial == profile.system.serial == host.serial
        assert out(host, "dmidecode -s system-serial-number").strip() == record.serial
        assert out(host, "hostname").strip() == host.name
        assert out(host, "systemctl is-system-running").strip() == "running"


def test_ansible_reaches_every_host_through_the_netbox_inventory(instance, lab):
    ping = ansible(instance, "rack_t01", "-m", "ansible.builtin.ping", "-o")
    assert ping.returncode == 0, ping.stdout + ping.stderr
    assert ping.stdout.count("SUCCESS") == 4
    facts = ansible(instance, "rack_t01", "-m", "ansible.builtin.setup",
                    "-a", "filter=ansible_default_ipv4,ansible_hostname")
    assert facts.returncode == 0, facts.stdout + facts.stderr
    for host in lab.hosts:
        assert f"address: {host.primary_ip.split('/')[0]}" in facts.stdout
        assert f"ansible_hostname: {host.name}" in facts.stdout


def test_every_fault_shows_in_the_real_formats_and_heals(instance, settings, netbox, lab):
    victim, bystander = lab.hosts[0], lab.hosts[1]
    record = read_hosts(netbox, Selection(names=(victim.name,)))[0]
    macs = {i.name: i.mac for i in record.interfaces if i.mac}
    kinds = sorted(hardware.hwemu.FAULTS)
    hardware.inject({victim.name: kinds}, {victim.name: macs}, settings, TEST_NET)

    smi = ssh(victim, "nvidia-smi -q -x")
    lost, _, document = smi.stdout.partition("\n")
    assert smi.returncode == 15  # gpu-lost: GPU 5 named by bus id, before the document
    assert lost == "Unable to determine the device handle for GPU 0000:AB:00.0: Unknown Error"
    log = ET.fromstring(document)
    gpus = log.findall("gpu")
    assert log.findtext("attached_gpus") == "7" and len(gpus) == 6  # gpu-missing, gpu-lost
    assert log.findtext("driver_version") == "535.183.01"  # driver-version-wrong
    healthy = hardware.hwemu.generate_profile(victim.name, victim.serial, seed=1)
    assert gpus[3].findtext("serial") != healthy.gpus[3].serial  # gpu-serial-changed
    dram = gpus[2].find("ecc_errors/volatile")
    assert dram is not None and any(
        e.text not in ("0", "N/A") for e in dram.iter() if "uncorrect" in e.tag)  # ecc
    assert gpus[1].findtext("pci/pci_gpu_link_info/link_widths/current_link_width") == "8x"
    panicked = ssh(victim, "ibstat")  # ibstat-panic: the eight CAs, then ibpanic, exit 255
    assert panicked.returncode == 255 and "'mlx5_8'" in panicked.stderr + panicked.stdout
    ibstat = panicked.stdout
    mlx5_3 = ibstat.split("CA 'mlx5_3'")[1].split("CA '")[0]
    assert "State: Down" in mlx5_3  # ib-port-down
    mlx5_5 = ibstat.split("CA 'mlx5_5'")[1].split("CA '")[0]
    assert "Rate: 200" in mlx5_5  # ib-rate-wrong
    assert "Xid" in out(victim, "dmesg") and ": 79, " in out(victim, "dmesg")  # xid-79
    assert out(victim, "dmidecode -s system-serial-number").strip() != victim.serial
    sysfs = "/var/lib/racklift-lab/sys/class/infiniband"
    assert out(victim, f"cat {sysfs}/mlx5_3/ports/1/state").strip() == "1: DOWN"
    link = json.loads(out(victim, "ip -j link show eno1"))[0]
    assert link["address"].upper() == macs["eno2"]  # mac-swapped
    # nvlink-down: GPU 3's link 7; numa-misplaced: mlx5_6 behind no GPU's PCIe switch.
    (gpu3,) = [g for g in parse_nvidia_smi_nvlink(ssh(victim, "nvidia-smi nvlink -s").stdout)
               if g.gpu == 3]
    assert gpu3.inactive == (7,)
    # nvlink-errors-rising: GPU 2's link 5 counts replay and CRC errors from one read to the next.
    # (ssh, not out: with gpu-lost, every nvidia-smi command exits 15, as the real one does.)
    first, later = (parse_nvidia_smi_nvlink_errors(ssh(victim, "nvidia-smi nvlink -e").stdout)
                    for _ in range(2))
    grew = {(b.gpu, link) for a, b in zip(first, later, strict=True)
            for (link, name), value in b.by_counter().items()
            if value > a.by_counter()[(link, name)]}
    assert grew == {(2, 5)}
    topo = parse_nvidia_smi_topo(ssh(victim, "nvidia-smi topo -m").stdout)
    assert {topo.link("GPU3", g) for g in topo.gpus if g != "GPU3"} == {"NV17"}
    (mlx5_6,) = [n for n, name in topo.nic_names.items() if name == "mlx5_6"]
    assert "PIX" not in {topo.link(mlx5_6, g) for g in topo.gpus}
    # The cabling faults, in the fabric map, against the cables NetBox records.
    cas = {h.ca: h for h in parse_ibstat(ibstat)}
    links = own_links(parse_ibnetdiscover(out(victim, "ibnetdiscover")), list(cas.values()))
    assert links is not None
    peers = {i.name: i.peer for i in record.ib_ports}
    assert ib_is(links["mlx5_0"], peers["mlx5_1"]) and ib_is(links["mlx5_1"], peers["mlx5_0"])
    assert not ib_is(links["mlx5_2"], peers["mlx5_2"])  # cable-wrong-leaf
    assert links["mlx5_2"].peer_desc.split(";")[1].startswith(peers["mlx5_3"].device + ":")
    assert (links["mlx5_4"].width, links["mlx5_4"].speed) == ("4x", "HDR")  # ib-link-degraded
    assert not links["mlx5_7"].linked  # link-no-neighbor: in the map without a link
    assert heard_on_eno2(victim) == []  # eth-link-no-neighbor (after eth-cable-wrong-port)
    assert ib_is(links["mlx5_5"], peers["mlx5_5"])

    # The other hosts are untouched.
    assert ET.fromstring(out(bystander, "nvidia-smi -q -x")).findtext("attached_gpus") == "8"

    hardware.heal([victim.name], {victim.name: macs}, settings, TEST_NET)
    log = ET.fromstring(out(victim, "nvidia-smi -q -x"))
    assert log.findtext("attached_gpus") == "8"
    assert log.findtext("driver_version") == "550.127.08"
    assert "State: Down" not in out(victim, "ibstat")
    assert "Xid" not in out(victim, "dmesg")
    assert out(victim, "dmidecode -s system-serial-number").strip() == victim.serial
    assert json.loads(out(victim, "ip -j link show eno1"))[0]["address"].upper() == macs["eno1"]
    links = own_links(parse_ibnetdiscover(out(victim, "ibnetdiscover")),
                      list(parse_ibstat(out(victim, "ibstat"))))
    assert links is not None and all(ib_is(links[ca], peer) for ca, peer in peers.items())
    (eno2,) = [i.peer for i in record.interfaces if i.name == seed.INBAND]
    assert [lldp_is(n, eno2) for n in heard_on_eno2(victim)] == [True]


def heard_on_eno2(host: seed.HostPlan) -> list:
    """What the host's real lldpd hears on its in-band port."""
    return [n for n in parse_lldpctl_json(out(host, "lldpctl -f json"))
            if n.interface == seed.INBAND]


def test_in_band_ports_hear_their_leaf_over_real_lldp_and_faults_move_the_cable(
        settings, netbox, lab):
    """The rack's leaf is a container running lldpd under the NetBox switch's name; each host's
    lldpd hears it on eno2, on the port NetBox's cable ends at. The Ethernet faults move the
    real cable, and heal puts it back."""
    records = {h.name: h for h in read_hosts(
        netbox, Selection(names=tuple(h.name for h in lab.hosts)))}
    peers = {name: next(i.peer for i in r.interfaces if i.name == seed.INBAND)
             for name, r in records.items()}
    assert {str(p) for p in peers.values()} == {
        "leaf-t01 swp2", "leaf-t01 swp4", "leaf-t01 swp6", "leaf-t01 swp8"}
    for host in lab.hosts:
        assert [lldp_is(n, peers[host.name]) for n in heard_on_eno2(host)] == [True]

    victim = lab.hosts[1]
    macs = {victim.name: {i.name: i.mac for i in records[victim.name].interfaces if i.mac}}
    try:
        hardware.inject({victim.name: ["eth-cable-wrong-port"]}, macs, settings, TEST_NET)
        (wrong,) = heard_on_eno2(victim)
        assert (wrong.chassis_name, wrong.port_id) == ("leaf-t01", "swp3")  # eno1's, by plan
        hardware.inject({victim.name: ["eth-link-no-neighbor"]}, macs, settings, TEST_NET)
        assert heard_on_eno2(victim) == []
        link = json.loads(out(victim, "ip -j link show eno2"))[0]
        assert link["operstate"] == "DOWN" and "NO-CARRIER" in link["flags"]
        assert link["address"].upper() == macs[victim.name]["eno2"]  # the same NIC, unplugged
        for host in lab.hosts:  # the other hosts' cables are untouched
            if host != victim:
                assert [lldp_is(n, peers[host.name]) for n in heard_on_eno2(host)] == [True]
    finally:
        hardware.heal([victim.name], macs, settings, TEST_NET)
    assert [lldp_is(n, peers[victim.name]) for n in heard_on_eno2(victim)] == [True]


def test_up_again_converges(netbox, lab):
    devices = netbox.count("dcim/devices")
    again = lab_rack.up(netbox, 4, RACK, net=TEST_NET)
    assert again.created == 0
    assert [h.name for h in again.hosts] == [h.name for h in lab.hosts]
    assert netbox.count("dcim/devices") == devices


def test_up_converges_after_a_run_stopped_half_way(netbox, lab):
    # A lab run stopped after registering: one host's record gone, what it was cabled to left
    # (NetBox keeps a cable when one end's device is deleted). Up again puts it all back.
    victim = lab.hosts[-1]
    cabled = netbox.count("dcim/cables", {"device": victim.name})
    assert cabled == len(victim.links) > 0
    netbox.delete("dcim/devices", [d["id"] for d in netbox.get_all(
        "dcim/devices", {"name": victim.name}, fields=("id",))])
    again = lab_rack.up(netbox, 4, RACK, net=TEST_NET)
    assert [h.name for h in again.hosts] == [h.name for h in lab.hosts]
    assert netbox.count("dcim/cables", {"device": victim.name}) == cabled


def test_down_removes_the_lab_and_nothing_else(netbox, lab):
    # Someone else's device at the same site, and the developer's lab if one runs, must stay.
    other = netbox.create("dcim/devices", [{
        "name": "not-a-lab-host", "device_type": {"slug": seed.DEVICE_TYPE["slug"]},
        "role": {"slug": "gpu-server"}, "site": {"slug": "lab1"}, "status": "active"}])[0]
    others_containers = set(hosts.containers(hosts.LAB))
    result = lab_rack.down(netbox, TEST_NET)
    assert (result.containers, result.devices) == (5, 4)  # 4 hosts and their leaf
    assert hosts.containers(TEST_NET) == {}
    assert not podman.succeeds("network", "exists", TEST_NET.name)
    assert read_hosts(netbox, Selection(racks=(RACK,))) == []  # its leaf switches too
    assert netbox.count("ipam/ip-addresses", {"parent": str(TEST_NET.subnet)}) == 0
    assert netbox.count("dcim/devices", {"id": other["id"]}) == 1
    assert set(hosts.containers(hosts.LAB)) == others_containers
