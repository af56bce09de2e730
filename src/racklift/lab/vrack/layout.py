"""A virtual rack's layout: its networks, its VMs' plan (names, addresses, MACs, serials),
where its state lives, and the SSH proxy into its namespace."""

from __future__ import annotations

import ipaddress
import uuid
from dataclasses import dataclass
from pathlib import Path

from racklift.errors import LabError
from racklift.lab import hosts, seed
from racklift.paths import state_dir

ROLE_BOOT_SERVER = "boot-server"


VM_TYPE = "racklift-lab-vm"


BOOT_SERVER_TYPE = "racklift-lab-boot-server"


BMC_PORT = 8443


BMC_USERNAME = "racklift"


LIBVIRT_URI = "qemu:///system"


OVMF_CODE = Path("/usr/share/OVMF/OVMF_CODE_4M.fd")


OVMF_VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")


FIRMWARES = ("uefi", "bios")


VM_NIC = "enp1s0"  # the VMs' NIC as the OS names it (virtio on the first PCIe port), and NetBox


VM_CONTEXT_WEIGHT = 2000  # over the GPU servers' context (racklift.lab.seed)


# GPUs per VM, with one InfiniBand port each on its own rail: the least that has GPU pairs
# (NVLink topology) and rails (a leaf per rail) for the gate to check.
VM_GPUS = 2


@dataclass(frozen=True)
class Vrack:
    """One virtual rack: its namespace, networks and names. The tests run their own."""

    netns: str
    bridge: str  # at most 15 characters (a Linux interface name)
    subnet: ipaddress.IPv4Network
    ula: ipaddress.IPv6Network
    bmc_net: ipaddress.IPv4Network  # loopback addresses for the emulators
    rack: str
    site: str = "lab1"
    mac_base: int = 0x5000  # clear of the container hosts' (racklift.lab.hosts)
    firmware: str = "uefi"
    memory_mib: int = 1024
    disk_gib: int = 8
    vcpus: int = 1  # under TCG each is a thread on the controller's cores

    @property
    def gateway(self) -> ipaddress.IPv4Address:
        return self.subnet.network_address + 1

    @property
    def capacity(self) -> int:
        return min(self.subnet.num_addresses - hosts.FIRST_HOST - 1,
                   self.bmc_net.num_addresses - 2)

    @property
    def boot_server(self) -> str:
        return f"boot-{self.rack.lower()}"

    @property
    def vm_prefix(self) -> str:
        return f"vm-{self.rack.lower()}-"

    @property
    def label(self) -> str:
        return f"racklift.vrack={self.netns}"


# The demo's rack: its VM runs alone once the lab rack is done, so it takes both cores (the
# stream and boot run on two; benchmarks/README.md). The tests' racks keep one: their VMs run
# beside the other lane's tests.
LAB = Vrack("racklift-prov", "rlprov0", ipaddress.ip_network("10.90.0.0/24"),
            ipaddress.ip_network("fd52:4c90::/64"), ipaddress.ip_network("127.0.77.0/24"),
            rack="V01", vcpus=2)


@dataclass(frozen=True)
class VmPlan:
    name: str
    uuid: str
    serial: str
    mac: str
    ip: str  # address/prefix the boot server's DHCP gives it
    bmc: str  # the emulator's loopback address
    slot: int  # 0-based, in the rack

    @property
    def address(self) -> str:
        return self.ip.split("/")[0]


def plan(count: int, rack: Vrack = LAB) -> tuple[VmPlan, ...]:
    """`count` VMs with fixed names, UUIDs, MACs and addresses, so re-running converges."""
    if not 0 < count <= rack.capacity:
        raise LabError(f"the virtual rack {rack.rack} holds 1 to {rack.capacity} VMs, "
                       f"not {count}")
    vms = []
    for slot in range(count):
        name = f"{rack.vm_prefix}{slot + 1:02d}"
        vms.append(VmPlan(
            name=name, uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{name}.racklift.lab")),
            serial=f"VM{rack.rack}{slot + 1:04d}",
            mac=seed.mac_for(rack.mac_base + slot, 1),
            ip=f"{rack.subnet.network_address + hosts.FIRST_HOST + slot}/{rack.subnet.prefixlen}",
            bmc=str(rack.bmc_net.network_address + 1 + slot), slot=slot))
    return tuple(vms)


def ib_links(rack: Vrack, slot: int) -> dict[str, tuple[str, str]]:
    """The HCA ports of the VM in `slot` to the rack's rail leaves (HCA i to leaf i, the VM's
    port on each its slot's), as the seed cables a rail group, the rack being the group."""
    return dict(list(seed.ib_links(rack.rack.lower(), slot).items())[:VM_GPUS])


def ib_leaves(rack: Vrack) -> list[str]:
    return sorted({switch for switch, _ in ib_links(rack, 0).values()})


def proxy_command(rack: Vrack = LAB) -> str:
    """How SSH reaches an address inside the rack's namespace."""
    return f"ip netns exec {rack.netns} nc %h %p"


# Pure rendering


def vrack_dir(rack: Vrack = LAB) -> Path:
    return state_dir() / "vrack" / rack.netns


def ca_dir() -> Path:
    """The lab BMC CA, shared by every virtual rack on this machine."""
    return state_dir() / "vrack" / "ca"


def ca_bundle() -> Path:
    return ca_dir() / "ca.pem"


def vm_dir(rack: Vrack, name: str) -> Path:
    return vrack_dir(rack) / "vms" / name


def console_log(rack: Vrack, name: str) -> Path:
    """A VM's serial console: firmware, iPXE, kernel and ramdisk output."""
    return vm_dir(rack, name) / "console.log"
