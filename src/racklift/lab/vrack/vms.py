"""The VMs: their libvirt domains (TCG, UEFI or BIOS), disks and consoles, and the emulated
hardware profile each one's lab_hardware step installs."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from xml.sax.saxutils import escape

from racklift.errors import LabError
from racklift.lab import hardware, hwemu
from racklift.lab.vrack.bmc import stop_emulator
from racklift.lab.vrack.commands import _alive_pid, _run, virsh
from racklift.lab.vrack.layout import (
    FIRMWARES,
    OVMF_CODE,
    OVMF_VARS,
    VM_GPUS,
    VM_TYPE,
    VmPlan,
    Vrack,
    console_log,
    ib_links,
    vm_dir,
)
from racklift.lab.vrack.network import LIBVIRTD_PID


def domain_xml(vm: VmPlan, rack: Vrack, disk: Path, nvram: Path, console: Path) -> str:
    """The libvirt domain: TCG, UEFI (or BIOS), disk first then network, serial to a file.
    QEMU runs as root (static DAC label): the state dir is under root's home. The translation
    cache is QEMU's own default for system emulation, 1 GiB (128 MiB was flushed and
    retranslated under a configure: Python, apt and systemd code; 10-15% slower in a
    micro-benchmark, benchmarks/README.md)."""
    if rack.firmware not in FIRMWARES:
        raise LabError(f"firmware {rack.firmware!r} is not one of {', '.join(FIRMWARES)}")
    loader = (f"<loader readonly='yes' type='pflash'>{OVMF_CODE}</loader>"
              f"<nvram template='{OVMF_VARS}'>{escape(str(nvram))}</nvram>"
              if rack.firmware == "uefi" else "")
    return f"""<domain type='qemu'>
  <name>{vm.name}</name>
  <uuid>{vm.uuid}</uuid>
  <memory unit='MiB'>{rack.memory_mib}</memory>
  <vcpu>{rack.vcpus}</vcpu>
  <sysinfo type='smbios'>
    <system>
      <entry name='manufacturer'>racklift lab</entry>
      <entry name='product'>{VM_TYPE}</entry>
      <entry name='serial'>{vm.serial}</entry>
    </system>
  </sysinfo>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    {loader}
    <boot dev='hd'/>
    <boot dev='network'/>
    <smbios mode='sysinfo'/>
  </os>
  <features><acpi/><apic/><tcg><tb-cache unit='MiB'>1024</tb-cache></tcg></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='{escape(str(disk))}'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <interface type='bridge'>
      <mac address='{vm.mac.lower()}'/>
      <source bridge='{rack.bridge}'/>
      <model type='virtio'/>
    </interface>
    <serial type='file'>
      <source path='{escape(str(console))}' append='on'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
  <seclabel type='static' model='dac' relabel='no'><label>+0:+0</label></seclabel>


</domain>


"""


def domains(rack: Vrack) -> dict[str, str]:
    """The rack's libvirt domains and their states ('running', 'shut off', ...)."""
    if _alive_pid(LIBVIRTD_PID, "libvirtd") is None:
        return {}
    names = virsh("list", "--all", "--name").stdout.split()
    return {n: virsh("domstate", n).stdout.strip() for n in names
            if n.startswith(rack.vm_prefix)}


def _ensure_vm(rack: Vrack, vm: VmPlan, existing: dict[str, str]) -> bool:
    directory = vm_dir(rack, vm.name)
    directory.mkdir(parents=True, exist_ok=True)
    disk = directory / "disk.qcow2"
    if not disk.exists():
        _run("qemu-img", "create", "-q", "-f", "qcow2", str(disk), f"{rack.disk_gib}G")
    # Defined again when it exists too: a domain an older racklift (or a state directory
    # removed under it) left behind takes this plan's definition (its vCPUs, its NIC), from
    # its next boot.
    xml = directory / "domain.xml"
    xml.write_text(domain_xml(vm, rack, disk, directory / "nvram.fd",
                              console_log(rack, vm.name)))
    virsh("define", str(xml))
    return vm.name not in existing


# Background processes of the rack (BMC emulators, the uplink): a pid file and a log each.


def _remove_vm(rack: Vrack, name: str, existing: dict[str, str]) -> None:
    stop_emulator(rack, name)
    if name in existing:
        if existing[name] != "shut off":
            virsh("destroy", name, check=False)
        virsh("undefine", "--nvram", name)
    shutil.rmtree(vm_dir(rack, name), ignore_errors=True)


# The uplink: the Debian mirror, and only it, through a proxy inside the namespace


def profile_path(rack: Vrack, name: str) -> Path:
    """Where lab_hardware reads a VM's profile (tag_racklift_lab_vm.yml names the same path)."""
    return vm_dir(rack, name) / "hardware.json"


def vm_profile(rack: Vrack, vm: VmPlan) -> hwemu.Profile:
    """A healthy host as the VM's device type has it in NetBox: VM_GPUS GPUs on an NVLink
    board, an InfiniBand port each, cabled to the rack's rail leaves."""
    full = hwemu.generate_profile(vm.name, vm.serial, seed=vm.slot + 1)
    return hwemu.cabled(replace(full, gpus=full.gpus[:VM_GPUS], hcas=full.hcas[:VM_GPUS]),
                        hardware.ib_cables(ib_links(rack, vm.slot)))


def _ensure_profiles(rack: Vrack, vms: tuple[VmPlan, ...]) -> None:
    """Each VM's healthy profile, where it has none or one cabled otherwise (an older
    racklift's, of another shape); a profile of the same plan is kept."""
    for vm in vms:
        path = profile_path(rack, vm.name)
        healthy = vm_profile(rack, vm)
        if path.exists() and hwemu.Profile.from_json(path.read_text()).cables == healthy.cables:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(healthy.to_json())


def set_vm_mac(rack: Vrack, name: str, mac: str) -> None:
    """Give a powered-off VM's NIC another MAC than NetBox has (a swapped cable or board, for
    failure tests); `up` does not undo it: set the planned MAC back the same way."""
    xml = virsh("dumpxml", "--inactive", name).stdout
    tree = ET.fromstring(xml)
    tree.find("devices/interface/mac").set("address", mac.lower())
    path = vm_dir(rack, name) / "domain.xml"
    path.write_text(ET.tostring(tree, encoding="unicode"))
    virsh("define", str(path))


# The boot server container
