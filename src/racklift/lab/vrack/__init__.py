"""The virtual rack: QEMU VMs (libvirt, TCG) behind one Redfish BMC emulator each, on a
provisioning network inside a network namespace, with the boot server container there, all
registered in NetBox. Lab only.

- The namespace holds a bridge with the rack's private IPv4 (.1, the boot server's address)
  and an IPv6 ULA (so iPXE does not wait for IPv6 autoconfiguration once the boot server sends
  router advertisements). Private addresses exist only inside it.
- libvirtd runs inside the namespace (a VM's tap can only join a bridge in libvirtd's own
  namespace), so one virtual rack runs per machine; a second one is refused with a clear error.
  libvirt's default network is never started.
- VMs: `<domain type='qemu'>` (TCG: /dev/kvm here cannot run a guest), UEFI firmware (OVMF:
  under TCG the firmware reaches iPXE in ~4 s and DHCP in ~11 s, and it mirrors its console,
  iPXE's included, to the serial port, logged to a file); BIOS on request (`firmware='bios'`).
  The SMBIOS serial equals the NetBox serial, so verify reads the same identity as on metal.
- BMCs: one sushy-emulator per VM (SUSHY_EMULATOR_ALLOWED_INSTANCES: it manages exactly one
  system, as a real BMC does), on its own loopback address (127.0.77.<n>) port 8443, TLS from
  the lab CA, HTTP basic auth with the lab's BMC password (kept in the state dir, mode 0600).
  Each runs sushy-emulator's app with the lab's stand-in (lab_bmc) for what real BMCs do and
  sushy-tools lacks: a firmware inventory, SimpleUpdate tasks that fetch a lab image, BIOS
  settings and a BIOS image pending until the next boot (its state in bmc-state.json).
- The boot server: one systemd container (the lab host image) joined to the namespace, so it
  has the bridge's address; Ansible reaches it, and the VMs, with an SSH ProxyCommand that
  enters the namespace (`proxy_command`, and the lab's inventory source's
  group_vars/tag_racklift_lab_prov.yml, racklift.lab.sources).
- The uplink (racklift.lab.vrack_uplink): the namespace has no route out; an HTTP proxy
  listening inside it (port 3142) reaches the Debian mirror and nothing else, so the boot server
  installs its packages (its apt is pointed there) and deployed VMs can too.
- The stand-in vendor repositories (racklift.lab.standin_repo): NVIDIA's CUDA and container
  toolkit repositories cannot be reached from here, so a static HTTP server in the namespace
  (port 8080 of the bridge's address) serves stand-ins built here under `cuda/` and
  `libnvidia-container/`, signed by racklift's lab key. The node roles install from them through
  the same repository URL + key URL code path as from NVIDIA's.
- The registry mirror: the boot server container doubles as the site's mirror server: the
  registry_mirror role (TLS from racklift's CA) in front of a stand-in for Docker Hub
  (playbooks/lab_registry_upstream.yml) holding one small image, so the gate's GPU-container
  check pulls through a real pull-through cache.
- Emulated hardware: each VM has a profile (two GPUs on an NVSwitch board, an HCA port each
  cabled to the rack's rail leaves, its serial) kept in its state dir; the lab_hardware role,
  first in the VMs' `racklift_roles` (the lab's group_vars/tag_racklift_lab_vm.yml), installs
  it on the imaged VM.
- NetBox: each VM a device (status planned, serial, provisioning MAC, primary IP = the address
  the boot server's DHCP will give it, OOB IP = its emulator's address) of a device type with
  a GPU server's hardware context (NVSwitch, NVLink topology, NIC affinity), its InfiniBand
  ports cabled to one leaf switch per rail; the boot server a device (status active, primary
  IP = the bridge's address).

`up()` converges (re-run: nothing new; fewer VMs: the extra ones go), `down()` removes exactly
what `up()` made (the shared vocabulary stays: tags, roles, device types, as bootstrap's do).
State and disks live under racklift.paths.state_dir()/vrack/<namespace>. Modules: layout,
commands, network, bmc (and lab_bmc, the stand-in it runs), vms, services, records, lifecycle.
"""

from racklift.lab.vrack.bmc import bmc_password, emulator_config
from racklift.lab.vrack.commands import virsh
from racklift.lab.vrack.layout import (
    BMC_PORT,
    BMC_USERNAME,
    LAB,
    OVMF_CODE,
    OVMF_VARS,
    VM_GPUS,
    VM_NIC,
    VmPlan,
    Vrack,
    ca_bundle,
    console_log,
    plan,
    proxy_command,
    vm_dir,
    vrack_dir,
)
from racklift.lab.vrack.lifecycle import down, start_vms, status, up
from racklift.lab.vrack.services import boot_server_containers, mirror_url, ssh_answers
from racklift.lab.vrack.vms import domain_xml, domains, set_vm_mac

__all__ = [
    "BMC_PORT",
    "BMC_USERNAME",
    "LAB",
    "OVMF_CODE",
    "OVMF_VARS",
    "VM_GPUS",
    "VM_NIC",
    "VmPlan",
    "Vrack",
    "bmc_password",
    "boot_server_containers",
    "ca_bundle",
    "console_log",
    "domain_xml",
    "domains",
    "down",
    "emulator_config",
    "mirror_url",
    "plan",
    "proxy_command",
    "set_vm_mac",
    "ssh_answers",
    "start_vms",
    "status",
    "up",
    "virsh",
    "vm_dir",
    "vrack_dir",
]
