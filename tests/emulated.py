"""An emulated lab host as pure data: its expected NetBox record and the support bundle its
tools would produce, for testing the gate without containers."""

from __future__ import annotations

import json
from pathlib import Path

from racklift.facts.bundle import Bundle, Output
from racklift.lab import hardware, hosts, hwemu, seed
from racklift.netbox.expected import (
    DeviceTypeRef,
    ExpectedGPU,
    ExpectedHost,
    ExpectedInterface,
    LinkPeer,
)

PLAN = hosts.plan(1, "U01").hosts[0]
# What the lab host's real lldpd hears from its real lab leaf on the port PLAN cables.
LLDP = (Path(__file__).parent / "fixtures" / "lab"
        / "lldpctl-json_lab-u01-01-eno2_leaf-u01-swp2.json").read_text()
# lscpu -J of util-linux 2.39+ (fields nested under the vendor), for a 2-socket Sapphire Rapids
LSCPU = json.dumps({"lscpu": [
    {"field": "Architecture:", "data": "x86_64"},
    {"field": "CPU(s):", "data": "224"},
    {"field": "Vendor ID:", "data": "GenuineIntel", "children": [
        {"field": "Model name:", "data": "Intel(R) Xeon(R) Platinum 8480+", "children": [
            {"field": "Core(s) per socket:", "data": "56"},
            {"field": "Socket(s):", "data": "2"}]}]}]})


def expected_host(gpu_serials: dict[int, str] | None = None) -> ExpectedHost:
    """What NetBox expects of the lab host, as the reader builds it from the seed."""
    dt = seed.DEVICE_TYPE
    interfaces = tuple(sorted(
        (ExpectedInterface(t["name"], t["type"], bool(t.get("mgmt_only")), True,
                           PLAN.macs.get(t["name"]),
                           (PLAN.primary_ip,) if t["name"] == seed.PROVISIONING else
                           (PLAN.oob_ip,) if t["name"] == seed.BMC else (),
                           LinkPeer(*PLAN.links[t["name"]]) if t["name"] in PLAN.links else None)
         for t in dt["interfaces"]), key=lambda i: i.name))
    gpus = tuple(ExpectedGPU(g["name"], g["manufacturer"], g["part_id"],
                             (gpu_serials or {}).get(n)) for n, g in enumerate(dt["gpus"]))
    # The device type's context (the HGX board: NVSwitches, its links) rendered in, as NetBox
    # does.
    config = {**seed.DESIRED_SOFTWARE, **hosts.LAB_SOFTWARE,
              "nvidia_driver": seed.DESIRED_SOFTWARE["nvidia_driver"],
              "hardware": seed.DEVICE_TYPE["hardware"]}
    return ExpectedHost(
        name=PLAN.name, netbox_id=1, status="staged", site="lab1", rack="U01", position=1,
        role="gpu-server", platform=None,
        device_type=DeviceTypeRef(dt["manufacturer"], dt["model"], dt["slug"],
                                  dt["part_number"]),
        serial=PLAN.serial, asset_tag=PLAN.asset_tag, primary_ip=PLAN.primary_ip,
        primary_ip_interface=seed.PROVISIONING, oob_ip=PLAN.oob_ip, oob_interface=seed.BMC,
        provisioning_interface=seed.PROVISIONING, interfaces=interfaces, gpus=gpus,
        config=config, tags=("racklift-lab", "racklift-lab-host"))


def healthy_profile() -> hwemu.Profile:
    return hwemu.cabled(hwemu.generate_profile(PLAN.name, PLAN.serial, seed=1),
                        hardware.ib_cables(PLAN.links))


def _ip_json(profile: hwemu.Profile) -> tuple[str, str]:
    eno1_mac = PLAN.macs[seed.INBAND if profile.mac_swapped else seed.PROVISIONING]
    links = [{"ifname": "lo", "link_type": "loopback", "address": "00:00:00:00:00:00",
              "operstate": "UNKNOWN"},
             {"ifname": "eno1", "link_type": "ether", "address": eno1_mac.lower(),
              "operstate": "UP"},
             {"ifname": "eno2", "link_type": "ether", "address": PLAN.macs["eno2"].lower(),
              "operstate": "UP"}]
    address, prefix = PLAN.primary_ip.split("/")
    addrs = [{"ifname": "eno1", "addr_info": [{"local": address, "prefixlen": int(prefix)}]}]
    return json.dumps(links), json.dumps(addrs)


def bundle(profile: hwemu.Profile) -> Bundle:
    """The support bundle the collector would bring back from a host with this hardware."""
    links, addrs = _ip_json(profile)
    outputs = {
        "nvidia-smi-q-x.xml": Output(hwemu.nvidia_smi_xml(profile)),
        "nvidia-smi-topo.txt": Output(hwemu.nvidia_smi_topo(profile)),
        "nvidia-smi-nvlink.txt": Output(hwemu.nvidia_smi_nvlink(profile)),
        # The collector's two readings, 5 s apart.
        "nvidia-smi-nvlink-e.txt": Output(hwemu.nvidia_smi_nvlink_errors(profile, now=1.8e9)
                                          + hwemu.nvidia_smi_nvlink_errors(profile,
                                                                           now=1.8e9 + 5)),
        "ibstat.txt": Output(hwemu.ibstat(profile)),
        "ibv_devinfo.txt": Output(hwemu.ibv_devinfo(profile)),
        "ibnetdiscover.txt": Output(hwemu.ibnetdiscover(profile)),
        "lldpctl.json": Output(LLDP),
        "dmidecode.txt": Output(hwemu.dmidecode(profile, "0,1,3")),
        "dmesg.txt": Output(hwemu.dmesg(profile)),
        "lspci.txt": Output("", rc=127, stderr="sh: 1: lspci: not found"),
        "ip-link.json": Output(links),
        "ip-addr.json": Output(addrs),
        "os-release.txt": Output('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'
                                 'VERSION_ID="12"\n'),
        "uname.txt": Output("6.1.0-28-amd64\n"),
        "lscpu.json": Output(LSCPU),
        "meminfo.txt": Output("MemTotal:       2113445472 kB\nMemFree:        2000000000 kB\n"),
        "packages.txt": Output("openssh-server\t1:9.2p1-2+deb12u3\tii \n"),
        "services.txt": Output("nvidia-fabricmanager\tactive\ndocker\tinactive\n"),
        "df.txt": Output("Filesystem 1-blocks Used Available Capacity Mounted on\n"
                         "overlay 100000000000 20000000000 80000000000 20% /\n"),
    }
    return Bundle(PLAN.name, outputs, hwemu.sysfs_tree(profile), {"hostname": PLAN.name})


def with_fault(kind: str) -> hwemu.Profile:
    return hwemu.inject(healthy_profile(), kind)
