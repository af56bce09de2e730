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
- The boot server: one systemd container (the lab host image) joined to the namespace, so it
  has the bridge's address; Ansible reaches it, and the VMs, with an SSH ProxyCommand that
  enters the namespace (`proxy_command`, and inventory/group_vars/tag_racklift_lab_prov.yml).
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
- Emulated hardware: each VM has a profile (one GPU, one HCA port, its serial) kept in its
  state dir; the lab_hardware role, first in the VMs' `racklift_roles`
  (inventory/group_vars/tag_racklift_lab_vm.yml), installs it on the imaged VM.
- NetBox: each VM a device (status planned, serial, provisioning MAC, primary IP = the address
  the boot server's DHCP will give it, OOB IP = its emulator's address), the boot server a
  device (status active, primary IP = the bridge's address).

`up()` converges (re-run: nothing new; fewer VMs: the extra ones go), `down()` removes exactly
what `up()` made (the shared vocabulary stays: tags, roles, device types, as bootstrap's do).
State and disks live under racklift.paths.state_dir()/vrack/<namespace>.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import requests

from racklift import podman
from racklift.ansible import run_playbook
from racklift.errors import LabError
from racklift.imaging import diskimage
from racklift.lab import hosts, hwemu, images, seed, standin_repo, tags, vrack_uplink
from racklift.netbox.bootstrap import ROLE_GPU_SERVER, bootstrap
from racklift.netbox.client import NetBox, NetBoxSettings
from racklift.netbox.model import CONTEXT_KEY, GPU_ROLE
from racklift.paths import REPO_ROOT, state_dir
from racklift.pipeline.image import with_boot_servers

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


LAB = Vrack("racklift-prov", "rlprov0", ipaddress.ip_network("10.90.0.0/24"),
            ipaddress.ip_network("fd52:4c90::/64"), ipaddress.ip_network("127.0.77.0/24"),
            rack="V01")


@dataclass(frozen=True)
class VmPlan:
    name: str
    uuid: str
    serial: str
    mac: str
    ip: str  # address/prefix the boot server's DHCP gives it
    bmc: str  # the emulator's loopback address

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
            bmc=str(rack.bmc_net.network_address + 1 + slot)))
    return tuple(vms)


def proxy_command(rack: Vrack = LAB) -> str:
    """How SSH reaches an address inside the rack's namespace."""
    return f"ip netns exec {rack.netns} nc %h %p"


# ---------------------------------------------------------------------------------------------
# Pure rendering


def domain_xml(vm: VmPlan, rack: Vrack, disk: Path, nvram: Path, console: Path) -> str:
    """The libvirt domain: TCG, UEFI (or BIOS), disk first then network, serial to a file.
    QEMU runs as root (static DAC label): the state dir is under root's home."""
    if rack.firmware not in FIRMWARES:
        raise LabError(f"firmware {rack.firmware!r} is not one of {', '.join(FIRMWARES)}")
    loader = (f"<loader readonly='yes' type='pflash'>{OVMF_CODE}</loader>"
              f"<nvram template='{OVMF_VARS}'>{escape(str(nvram))}</nvram>"
              if rack.firmware == "uefi" else "")
    return f"""<domain type='qemu'>
  <name>{vm.name}</name>
  <uuid>{vm.uuid}</uuid>
  <memory unit='MiB'>{rack.memory_mib}</memory>
  <vcpu>1</vcpu>
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
  <features><acpi/><apic/><tcg><tb-cache unit='MiB'>128</tb-cache></tcg></features>
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


def emulator_config(vm: VmPlan, cert: Path, key: Path, auth_file: Path) -> str:
    """sushy-emulator's configuration (a Python file) for the one VM it manages."""
    return (f"SUSHY_EMULATOR_LISTEN_IP = {vm.bmc!r}\n"
            f"SUSHY_EMULATOR_LISTEN_PORT = {BMC_PORT}\n"
            f"SUSHY_EMULATOR_SSL_CERT = {str(cert)!r}\n"
            f"SUSHY_EMULATOR_SSL_KEY = {str(key)!r}\n"
            f"SUSHY_EMULATOR_AUTH_FILE = {str(auth_file)!r}\n"
            f"SUSHY_EMULATOR_LIBVIRT_URI = {LIBVIRT_URI!r}\n"
            f"SUSHY_EMULATOR_ALLOWED_INSTANCES = [{vm.uuid!r}, {vm.name!r}]\n")


# ---------------------------------------------------------------------------------------------
# Paths and commands


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


def _run(*cmd: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise LabError(f"{cmd[0]} not found: run scripts/bootstrap (it installs the virtual "
                       "rack's packages)") from None
    if check and result.returncode != 0:
        raise LabError(f"{' '.join(cmd[:6])}: {(result.stderr or result.stdout).strip()[-600:]}")
    return result


def _in_ns(rack: Vrack, *cmd: str, timeout: float = 60,
           check: bool = True) -> subprocess.CompletedProcess:
    return _run("ip", "netns", "exec", rack.netns, *cmd, timeout=timeout, check=check)


def virsh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run("virsh", "-q", "-c", LIBVIRT_URI, *args, check=check)


# ---------------------------------------------------------------------------------------------
# Namespace and libvirtd


def _netns_path(rack: Vrack) -> Path:
    return Path("/run/netns") / rack.netns


def ensure_network(rack: Vrack) -> None:
    if not _netns_path(rack).exists():
        _run("ip", "netns", "add", rack.netns)
    _in_ns(rack, "ip", "link", "set", "lo", "up")
    if _in_ns(rack, "ip", "link", "show", rack.bridge, check=False).returncode != 0:
        _in_ns(rack, "ip", "link", "add", rack.bridge, "type", "bridge")
    _in_ns(rack, "ip", "addr", "replace", f"{rack.gateway}/{rack.subnet.prefixlen}",
           "dev", rack.bridge)
    # nodad: the bridge has no carrier until a VM starts; a tentative address would stall RA.
    _in_ns(rack, "ip", "-6", "addr", "replace", f"{rack.ula.network_address + 1}/"
           f"{rack.ula.prefixlen}", "dev", rack.bridge, "nodad")
    _in_ns(rack, "ip", "link", "set", rack.bridge, "up")


def _alive_pid(pid_file: Path, comm: str) -> int | None:
    """The pid in `pid_file` when that process is alive and is `comm`."""
    try:
        pid = int(pid_file.read_text().split()[0])
        if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
            return pid
    except (OSError, ValueError, IndexError):
        pass
    return None


def _netns_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def _in_our_ns(rack: Vrack, pid: int) -> bool:
    return _netns_path(rack).exists() and _netns_inode(pid) == _netns_path(rack).stat().st_ino


LIBVIRTD_PID = Path("/run/libvirtd.pid")
VIRTLOGD_PID = Path("/run/virtlogd.pid")


def _wait(what: str, ready: Callable[[], bool], seconds: float, hint: str) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            raise LabError(f"{what} not ready after {seconds:.0f} s: {hint}")
        time.sleep(0.3)


def ensure_libvirtd(rack: Vrack) -> None:
    """libvirtd (and virtlogd) inside the rack's namespace. /dev/kvm group-readable first:
    otherwise libvirt re-probes QEMU on every call (a define takes ~56 s, not 0.07 s)."""
    kvm = Path("/dev/kvm")
    if kvm.exists():
        shutil.chown(kvm, group="kvm")
        kvm.chmod(0o660)
    pid = _alive_pid(LIBVIRTD_PID, "libvirtd")
    if pid is not None and not _in_our_ns(rack, pid):
        raise LabError(f"libvirtd (pid {pid}) already runs outside the namespace {rack.netns}: "
                       "one virtual rack per machine; bring the other one down "
                       f"(`invoke vrack.down`) or stop that libvirtd (kill {pid})")
    if _alive_pid(VIRTLOGD_PID, "virtlogd") is None:
        _in_ns(rack, "virtlogd", "-d")
    if pid is None:
        _in_ns(rack, "libvirtd", "-d")
    _wait("libvirtd", lambda: virsh("version", check=False).returncode == 0, 30,
          "see /var/log/libvirt/libvirtd.log")
    # A machine whose libvirt autostarts its default network would get 192.168.122.0/24 and
    # a dnsmasq next to the boot server's: the rack uses its own bridge only.
    if "default" in virsh("net-list", "--name").stdout.split():
        virsh("net-destroy", "default")


def _stop(pid_file: Path, comm: str, rack: Vrack) -> None:
    pid = _alive_pid(pid_file, comm)
    if pid is None or not _in_our_ns(rack, pid):
        return
    os.kill(pid, 15)
    _wait(comm, lambda: _alive_pid(pid_file, comm) is None, 20, f"kill -9 {pid}")


# ---------------------------------------------------------------------------------------------
# TLS and the BMC password


def _ensure_ca() -> None:
    directory = ca_dir()
    if (directory / "ca.pem").exists():
        return
    directory.mkdir(parents=True, exist_ok=True)
    _run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(directory / "ca.key"), "-out", str(directory / "ca.pem"),
         "-days", "3650", "-subj", "/CN=racklift lab BMC CA",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign")


def _ensure_cert(rack: Vrack, vm: VmPlan) -> tuple[Path, Path]:
    directory = vm_dir(rack, vm.name)
    cert, key = directory / "bmc.pem", directory / "bmc.key"
    if cert.exists() and key.exists():
        return cert, key
    csr, ext = directory / "bmc.csr", directory / "bmc.ext"
    _run("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={vm.name}-bmc")
    ext.write_text(f"subjectAltName=IP:{vm.bmc}\nbasicConstraints=CA:FALSE\n"
                   "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
                   "authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n")
    _run("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca_bundle()),
         "-CAkey", str(ca_dir() / "ca.key"), "-CAcreateserial", "-days", "825",
         "-extfile", str(ext), "-out", str(cert))
    csr.unlink()
    ext.unlink()
    return cert, key


def _password_file(rack: Vrack) -> Path:
    return vrack_dir(rack) / "bmc-password"


def bmc_password(rack: Vrack = LAB) -> str:
    """The lab BMCs' password (made once per rack; mode 0600)."""
    path = _password_file(rack)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(18))
    return path.read_text().strip()


def _auth_file(rack: Vrack) -> Path:
    """htpasswd for the emulators (sushy-tools accepts bcrypt entries only)."""
    import bcrypt  # sushy-tools' dependency: present wherever the virtual rack can run

    path = vrack_dir(rack) / "bmc-htpasswd"
    password = bmc_password(rack).encode()
    if path.exists():
        _, digest = path.read_text().strip().split(":", 1)
        if bcrypt.checkpw(password, digest.encode()):
            return path
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"{BMC_USERNAME}:{bcrypt.hashpw(password, bcrypt.gensalt()).decode()}\n")
    return path


# ---------------------------------------------------------------------------------------------
# VMs and their BMC emulators


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
    if vm.name in existing:
        return False
    xml = directory / "domain.xml"
    xml.write_text(domain_xml(vm, rack, disk, directory / "nvram.fd",
                              console_log(rack, vm.name)))
    virsh("define", str(xml))
    return True


# Background processes of the rack (BMC emulators, the uplink): a pid file and a log each.


def _process_pid(pid_file: Path, marker: bytes) -> int | None:
    """The pid in `pid_file` while that process lives and its command line has `marker`."""
    try:
        pid = int(pid_file.read_text())
        if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
    except (OSError, ValueError):
        pass
    return None


def _spawn(what: str, command: list[str], pid_file: Path, ready: Callable[[], bool]) -> None:
    """Start `command` in the background (log next to the pid file), wait until `ready`."""
    log_file = pid_file.with_suffix(".log")
    with open(log_file, "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    pid_file.write_text(str(process.pid))
    _wait(what, lambda: ready() or process.poll() is not None, 30, f"see {log_file}")
    if process.poll() is not None:
        raise LabError(f"{what} exited at start: see {log_file}")


def _terminate(what: str, pid_file: Path, marker: bytes) -> None:
    pid = _process_pid(pid_file, marker)
    if pid is None:
        return
    os.kill(pid, 15)

    def gone() -> bool:
        # A process this one started stays a zombie until collected; init reaps the others.
        with suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return _process_pid(pid_file, marker) is None

    _wait(f"{what} (pid {pid}) to stop", gone, 10, f"kill -9 {pid}")


SUSHY = b"sushy-emulator"


def _emulator_pid(rack: Vrack, name: str) -> int | None:
    return _process_pid(vm_dir(rack, name) / "bmc.pid", SUSHY)


def _bmc_answers(vm: VmPlan) -> bool:
    try:  # the service root answers without credentials, as on real BMCs
        return requests.get(f"https://{vm.bmc}:{BMC_PORT}/redfish/v1", timeout=2,
                            verify=str(ca_bundle())).ok
    except requests.RequestException:
        return False


def _ensure_emulator(rack: Vrack, vm: VmPlan, auth_file: Path) -> bool:
    if _emulator_pid(rack, vm.name) is not None:
        return False
    program = Path(sys.executable).with_name("sushy-emulator")
    if not program.exists():
        raise LabError(f"{program} not found: install racklift's dev extra "
                       "(pip install -e '.[dev]'), which brings sushy-tools")
    directory = vm_dir(rack, vm.name)
    cert, key = _ensure_cert(rack, vm)
    config = directory / "bmc.conf"
    config.write_text(emulator_config(vm, cert, key, auth_file))
    _spawn(f"BMC emulator of {vm.name} at https://{vm.bmc}:{BMC_PORT}",
           [str(program), "--config", str(config)], directory / "bmc.pid",
           lambda: _bmc_answers(vm))
    return True


def _remove_vm(rack: Vrack, name: str, existing: dict[str, str]) -> None:
    _terminate(f"BMC emulator of {name}", vm_dir(rack, name) / "bmc.pid", SUSHY)
    if name in existing:
        if existing[name] != "shut off":
            virsh("destroy", name, check=False)
        virsh("undefine", "--nvram", name)
    shutil.rmtree(vm_dir(rack, name), ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# The uplink: the Debian mirror, and only it, through a proxy inside the namespace


UPLINK = b"racklift.lab.vrack_uplink"


def _uplink_pid_file(rack: Vrack) -> Path:
    return vrack_dir(rack) / "uplink.pid"


def apt_proxy_conf() -> str:
    """apt's configuration on the boot server: the mirror through the uplink."""
    return f'Acquire::http::Proxy "http://127.0.0.1:{vrack_uplink.PORT}";\n'


def _ensure_uplink(rack: Vrack) -> None:
    if _process_pid(_uplink_pid_file(rack), UPLINK) is not None:
        return
    mirror = urllib.parse.urlsplit(podman.DEBIAN_MIRROR).hostname or "deb.debian.org"
    _spawn(f"uplink proxy in {rack.netns}",
           [sys.executable, "-m", "racklift.lab.vrack_uplink", "--netns", rack.netns,
            "--port", str(vrack_uplink.PORT), "--allow", mirror], _uplink_pid_file(rack),
           lambda: _in_ns(rack, "nc", "-z", "127.0.0.1", str(vrack_uplink.PORT),
                          check=False).returncode == 0)


# ---------------------------------------------------------------------------------------------
# Stand-in vendor repositories, served inside the namespace


STANDIN_PORT = 8080
STANDIN_SERVER = b"http.server"
# URL path → the stand-in recipe: NVIDIA's CUDA repository (driver, fabric manager) and its
# container toolkit repository, each its own repository as in production.
STANDIN_REPOS = {
    "cuda": hosts.STANDIN_PACKAGES,
    "libnvidia-container": REPO_ROOT / "roles" / "container_runtime" / "molecule" / "default"
                           / "standin-packages.yml",
}


def standin_url(rack: Vrack, repo: str) -> str:
    return f"http://{rack.gateway}:{STANDIN_PORT}/{repo}/"


def _standin_pid_file(rack: Vrack) -> Path:
    return vrack_dir(rack) / "standin.pid"


def _ensure_standin_server(rack: Vrack) -> None:
    """Each stand-in repository built (cached by recipe) and linked under the served directory;
    the server started once. Relinking on every `up` serves a rebuilt repository at once."""
    root = vrack_dir(rack) / "standin"
    root.mkdir(parents=True, exist_ok=True)
    for path, spec in STANDIN_REPOS.items():
        link = root / path
        link.unlink(missing_ok=True)
        link.symlink_to(standin_repo.build(spec))
    if _process_pid(_standin_pid_file(rack), STANDIN_SERVER) is not None:
        return
    _spawn(f"stand-in repository server in {rack.netns}",
           ["ip", "netns", "exec", rack.netns, sys.executable, "-m", "http.server",
            str(STANDIN_PORT), "--bind", str(rack.gateway), "--directory", str(root)],
           _standin_pid_file(rack),
           lambda: _in_ns(rack, "nc", "-z", str(rack.gateway), str(STANDIN_PORT),
                          check=False).returncode == 0)


# ---------------------------------------------------------------------------------------------
# The registry mirror on the boot server container


MIRROR_PORT = 5000


def mirror_url(rack: Vrack) -> str:
    return f"https://{rack.gateway}:{MIRROR_PORT}"


def _ensure_registry(settings: NetBoxSettings, rack: Vrack) -> None:
    """The stand-in upstream, then the registry_mirror role, on the boot server (both
    converge). The VMs' container runtime is pointed at it by the configure stage."""
    if _in_ns(rack, "nc", "-z", str(rack.gateway), str(MIRROR_PORT),
              check=False).returncode == 0:
        return  # set up by an earlier `up`: re-running converges without Ansible
    lab = {"racklift_vrack_netns": rack.netns}
    env = with_boot_servers(vrack_dir(rack))
    upstream = run_playbook("lab_registry_upstream.yml", [rack.boot_server], settings, env,
                            extravars=lab)
    mirror = upstream if upstream.rc or rack.boot_server not in upstream.ok else run_playbook(
        "registry_mirror.yml", [rack.boot_server], settings,
        {**env, "RACKLIFT_MIRROR_SERVERS": rack.boot_server, "RACKLIFT_MIRROR_CLIENTS": "none"},
        extravars={**lab, "registry_mirror_endpoint_host": str(rack.gateway),
                   "registry_mirror_tls_names": [str(rack.gateway)],
                   "registry_mirror_upstreams": [
                       {"name": "dockerhub", "registry": "docker.io",
                        "url": "http://127.0.0.1:5100", "port": MIRROR_PORT}]})
    if mirror.rc or rack.boot_server not in mirror.ok:
        details = "; ".join(f"{h}: {why}" for h, why in sorted(mirror.failed.items()))
        raise LabError(f"the registry mirror on {rack.boot_server} could not be set up "
                       f"(exit {mirror.rc}): {details or 'see the Ansible output'}")


# ---------------------------------------------------------------------------------------------
# Emulated hardware of the VMs


def profile_path(rack: Vrack, name: str) -> Path:
    """Where lab_hardware reads a VM's profile (tag_racklift_lab_vm.yml names the same path)."""
    return vm_dir(rack, name) / "hardware.json"


def vm_profile(vm: VmPlan, number: int) -> hwemu.Profile:
    """A healthy host as the VM's device type has it in NetBox: one GPU, one InfiniBand port."""
    full = hwemu.generate_profile(vm.name, vm.serial, seed=number)
    return replace(full, gpus=full.gpus[:1], hcas=full.hcas[:1])


def _ensure_profiles(rack: Vrack, vms: tuple[VmPlan, ...]) -> None:
    for number, vm in enumerate(vms, start=1):
        path = profile_path(rack, vm.name)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(vm_profile(vm, number).to_json())


def set_vm_mac(rack: Vrack, name: str, mac: str) -> None:
    """Give a powered-off VM's NIC another MAC than NetBox has (a swapped cable or board, for
    failure tests); `up` does not undo it: set the planned MAC back the same way."""
    xml = virsh("dumpxml", "--inactive", name).stdout
    tree = ET.fromstring(xml)
    tree.find("devices/interface/mac").set("address", mac.lower())
    path = vm_dir(rack, name) / "domain.xml"
    path.write_text(ET.tostring(tree, encoding="unicode"))
    virsh("define", str(path))


# ---------------------------------------------------------------------------------------------
# The boot server container


def boot_server_containers(rack: Vrack) -> list[str]:
    out = podman.podman("ps", "-a", "--filter", f"label={rack.label}", "--format", "json")
    return [c["Names"][0] for c in json.loads(out or "[]")]


def ssh_answers(rack: Vrack, address: str) -> bool:
    """Whether sshd at `address` inside the namespace sends its banner."""
    result = _in_ns(rack, "nc", "-w", "2", address, "22", timeout=10, check=False)
    return result.stdout.startswith("SSH-")


def _ensure_boot_server(rack: Vrack) -> bool:
    name = rack.boot_server
    if name in boot_server_containers(rack):
        podman.podman("start", name)
        created = False
    else:
        apt_conf = vrack_dir(rack) / "apt-uplink.conf"
        apt_conf.write_text(apt_proxy_conf())
        podman.podman(
            "run", "-d", "--name", name, "--hostname", name, "--systemd=always",
            "--label", f"{hosts.LABEL}={rack.netns}", "--label", rack.label,
            "--network", f"ns:{_netns_path(rack)}",
            # dnsmasq answers DHCP and sends router advertisements on the bridge.
            "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW",
            "--mount", f"type=bind,src={hosts.ssh_key()}.pub,dst=/root/.ssh/authorized_keys,"
                       "ro=true",
            "--mount", f"type=bind,src={apt_conf},dst=/etc/apt/apt.conf.d/01racklift-uplink,"
                       "ro=true",
            "--memory", "512m", images.host_image())
        created = True
    _wait(f"SSH of the boot server {name} at {rack.gateway}",
          lambda: ssh_answers(rack, str(rack.gateway)), 120, f"see `podman logs {name}`")
    return created


# ---------------------------------------------------------------------------------------------
# NetBox


def _ensure_types(netbox: NetBox) -> dict[str, int]:
    maker, _ = netbox.get_or_create("dcim/manufacturers", {"slug": "qemu"}, {"name": "QEMU"})
    ids = {}
    for slug, interfaces in (
            (VM_TYPE, [{"name": seed.BMC, "type": "1000base-t", "mgmt_only": True,
                        "label": "BMC (sushy-emulator)"},
                       {"name": VM_NIC, "type": "1000base-t",
                        "label": "provisioning"}]),
            (BOOT_SERVER_TYPE, [{"name": seed.PROVISIONING, "type": "1000base-t",
                                 "label": "provisioning"}])):
        device_type, _ = netbox.get_or_create(
            "dcim/device-types", {"slug": slug},
            {"manufacturer": maker["id"], "model": slug, "u_height": 1})
        have = {t["name"]: t["id"] for t in netbox.get_all(
            "dcim/interface-templates", {"device_type_id": device_type["id"]},
            fields=("id", "name"))}
        netbox.create("dcim/interface-templates", [{**i, "device_type": device_type["id"]}
                                                   for i in interfaces if i["name"] not in have])
        # An older racklift named the VMs' NIC eno1: the type now has the name the OS gives.
        stale = have.get(seed.PROVISIONING) if slug == VM_TYPE else None
        if stale is not None:
            netbox.delete("dcim/interface-templates", [stale])
        ids[slug] = int(device_type["id"])
    return ids


def _drop_stale_vms(netbox: NetBox, vms: tuple[VmPlan, ...]) -> None:
    """VM devices an older racklift registered without the NIC the OS names (VM_NIC) go, so
    they are registered again as `up` registers them now."""
    found = netbox.get_all("dcim/devices", {"tag": tags.VM, "name": [vm.name for vm in vms]},
                           fields=("id",))
    if not found:
        return
    named = {i["device"]["id"] for i in netbox.get_all(
        "dcim/interfaces", {"device_id": [d["id"] for d in found], "name": VM_NIC},
        fields=("id", "device"))}
    netbox.delete("dcim/devices", [d["id"] for d in found if d["id"] not in named])


def _ensure_devices(netbox: NetBox, wanted: list[dict]) -> dict[str, int]:
    names = [d["name"] for d in wanted]
    existing = {d["name"]: d["id"] for d in netbox.get_all(
        "dcim/devices", {"name": names}, fields=("id", "name"))}
    created = netbox.create("dcim/devices", [d for d in wanted if d["name"] not in existing])
    return {**existing, **{d["name"]: d["id"] for d in created}}


def vm_software(rack: Vrack) -> dict[str, Any]:
    """What the VMs should run, whole (it outweighs the GPU servers' context, which asks for
    DOCA and a mirror the rack does not have): the stand-in driver and toolkit, inbox OFED,
    the rack's own registry mirror, and the OS image on the VMs' one virtio disk (the same on
    each, so here where a server records its own disk on its device), and the GPU container
    check run through the rack's mirror."""
    return {**seed.DESIRED_SOFTWARE, "provisioning_interface": VM_NIC,
            "os_image": diskimage.IMAGE_NAME, "os_disk": "/dev/vda",
            "ofed": {"source": "inbox", "version": None},
            # The stand-in runtime runs containers without a GPU: no --gpus all, and a command
            # the image (busybox, playbooks/lab_registry_upstream.yml) has.
            "registry_mirror": {"url": mirror_url(rack), "check_image": "rackhello:1.0",
                                "check_command": ["/bin/busybox", "uname", "-s"],
                                "check_gpus": False}}


def _stand_in_for_gpu_servers(netbox: NetBox, rack: Vrack, device_type_id: int) -> None:
    """What a GPU server's record has and a VM's would lack, so the pipeline takes the VMs as
    the GPU servers they stand in for: one GPU and one InfiniBand port template on their device
    type (the lab emulates both on the VM), and a `racklift` config context (vm_software)."""
    port = seed.IB_PORTS[0]
    netbox.get_or_create("dcim/interface-templates",
                         {"device_type_id": device_type_id, "name": port},
                         {"device_type": device_type_id, "name": port,
                          "type": "infiniband-ndr"})
    # The GPU role is bootstrap's (register runs it first).
    gpu_role = netbox.get_all("dcim/inventory-item-roles", {"slug": GPU_ROLE})[0]
    maker, _ = netbox.get_or_create("dcim/manufacturers", {"slug": "nvidia"},
                                    {"name": "NVIDIA"})
    netbox.get_or_create("dcim/inventory-item-templates",
                         {"device_type_id": device_type_id, "name": "GPU0"},
                         {"device_type": device_type_id, "name": "GPU0", "role": gpu_role["id"],
                          "manufacturer": maker["id"], "part_id": seed.GPU_PART})
    data = {CONTEXT_KEY: vm_software(rack)}
    context, _ = netbox.get_or_create("extras/config-contexts", {"name": "racklift-lab-vm"},
                                      {"name": "racklift-lab-vm", "tags": [tags.VM],
                                       "weight": VM_CONTEXT_WEIGHT, "data": data})
    if (context["data"], context["weight"]) != (data, VM_CONTEXT_WEIGHT):
        # An older racklift's, or another rack's mirror: this rack's now.
        netbox.update("extras/config-contexts", [{"id": context["id"], "data": data,
                                                  "weight": VM_CONTEXT_WEIGHT}])


def register(netbox: NetBox, rack: Vrack, vms: tuple[VmPlan, ...]) -> dict[str, int]:
    """The VMs and the boot server as NetBox devices; returns their ids by name."""
    bootstrap(netbox)
    tags.ensure(netbox)
    role = netbox.get_all("dcim/device-roles", {"slug": ROLE_GPU_SERVER})[0]
    boot_role, _ = netbox.get_or_create("dcim/device-roles", {"slug": ROLE_BOOT_SERVER},
                                        {"name": "Boot server", "color": "ff9800"})
    site, _ = netbox.get_or_create("dcim/sites", {"slug": rack.site},
                                   {"name": rack.site, "status": "active"})
    nb_rack, _ = netbox.get_or_create("dcim/racks", {"site_id": site["id"], "name": rack.rack},
                                      {"site": site["id"], "name": rack.rack, "status": "active",
                                       "tags": [{"slug": tags.LAB}]})
    types = _ensure_types(netbox)
    _drop_stale_vms(netbox, vms)
    _stand_in_for_gpu_servers(netbox, rack, types[VM_TYPE])
    common = {"site": site["id"], "rack": nb_rack["id"]}
    vm_tags = [{"slug": t} for t in (tags.LAB, tags.VM, tags.PROV)]
    devices = _ensure_devices(netbox, [
        *({"name": vm.name, "device_type": types[VM_TYPE], "role": role["id"],
           "status": "planned", "serial": vm.serial, "tags": vm_tags, **common} for vm in vms),
        {"name": rack.boot_server, "device_type": types[BOOT_SERVER_TYPE],
         "role": boot_role["id"], "status": "active", "tags": vm_tags[:1] + vm_tags[2:],
         **common}])
    # MACs and IPs the way the seed writes them (interface MAC objects, primary and OOB IPs).
    plan_ = seed.SeedPlan(site=rack.site, racks=(rack.rack,), hosts=tuple(
        seed.HostPlan(name=vm.name, rack=rack.rack, position=None, serial=vm.serial,
                      asset_tag="", macs={VM_NIC: vm.mac}, primary_ip=vm.ip,
                      oob_ip=f"{vm.bmc}/32") for vm in vms), provisioning_interface=VM_NIC)
    vm_ids = {vm.name: devices[vm.name] for vm in vms}
    seed._assign_macs(netbox, plan_, vm_ids)
    seed._assign_ips(netbox, plan_, vm_ids)
    _ensure_boot_server_ip(netbox, rack, devices[rack.boot_server])
    return devices


def _ensure_boot_server_ip(netbox: NetBox, rack: Vrack, device_id: int) -> None:
    address = f"{rack.gateway}/{rack.subnet.prefixlen}"
    iface = netbox.get_all("dcim/interfaces", {"device_id": device_id,
                                               "name": seed.PROVISIONING})[0]
    ip, _ = netbox.get_or_create(
        "ipam/ip-addresses", {"address": address, "interface_id": iface["id"]},
        {"address": address, "status": "active", "assigned_object_type": "dcim.interface",
         "assigned_object_id": iface["id"], "tags": [{"slug": tags.LAB}]})
    netbox.update("dcim/devices", [{"id": device_id, "primary_ip4": ip["id"]}])


def _unregister(netbox: NetBox, names: list[str]) -> int:
    if not names or netbox.count("extras/tags", {"slug": tags.LAB}) == 0:
        return 0
    # Only devices the lab tagged, under the names this rack gave them.
    devices = netbox.get_all("dcim/devices", {"tag": tags.LAB, "name": names}, fields=("id",))
    netbox.delete("dcim/devices", [d["id"] for d in devices])
    return len(devices)


def _unregister_rack(netbox: NetBox, rack: Vrack) -> None:
    """The rack up() made, once nothing is left in it."""
    if netbox.count("extras/tags", {"slug": tags.LAB}) == 0:
        return
    racks = netbox.get_all("dcim/racks", {"tag": tags.LAB, "name": rack.rack, "site": rack.site},
                           fields=("id",))
    empty = [r["id"] for r in racks if netbox.count("dcim/devices", {"rack_id": r["id"]}) == 0]
    netbox.delete("dcim/racks", empty)


# ---------------------------------------------------------------------------------------------
# up / down / status


def _state_file(rack: Vrack) -> Path:
    return vrack_dir(rack) / "state.json"


def _state(rack: Vrack) -> dict:
    """{"vms": names up() made, "registered": whether they went into NetBox}"""
    try:
        return dict(json.loads(_state_file(rack).read_text()))
    except (OSError, ValueError):
        return {}


def _recorded(rack: Vrack) -> list[str]:
    return list(_state(rack).get("vms", []))


@dataclass(frozen=True)
class VmsUp:
    vms: tuple[VmPlan, ...]
    created: int  # domains defined
    emulators: int  # BMC emulators started
    removed: tuple[str, ...]  # VMs beyond `count`, removed


def start_vms(rack: Vrack, count: int) -> VmsUp:
    """The namespace, libvirtd, and `count` VMs (powered off, as racks arrive) each behind its
    BMC emulator; VMs beyond `count` are removed. No boot server, no NetBox."""
    vms = plan(count, rack)
    vrack_dir(rack).mkdir(parents=True, exist_ok=True)
    # Recorded first: a failure half-way still leaves `down` knowing what to remove.
    previous = _recorded(rack)
    _state_file(rack).write_text(json.dumps(
        {**_state(rack), "vms": sorted({*previous, *(vm.name for vm in vms)})}))
    ensure_network(rack)
    ensure_libvirtd(rack)
    _ensure_ca()
    auth_file = _auth_file(rack)
    existing = domains(rack)
    extra = tuple(sorted({*existing, *previous} - {vm.name for vm in vms}))
    for name in extra:
        _remove_vm(rack, name, existing)
    created = sum(_ensure_vm(rack, vm, existing) for vm in vms)
    emulators = sum(_ensure_emulator(rack, vm, auth_file) for vm in vms)
    return VmsUp(vms, created, emulators, extra)


@dataclass(frozen=True)
class VrackUp:
    vms: tuple[VmPlan, ...]
    boot_server: str
    created_vms: int
    started_emulators: int
    seconds: float


def up(netbox: NetBox, count: int, rack: Vrack = LAB) -> VrackUp:
    started = time.monotonic()
    result = start_vms(rack, count)
    _ensure_uplink(rack)
    _ensure_standin_server(rack)
    _ensure_profiles(rack, result.vms)
    # Lab group vars read the rack's gateway (apt proxy, stand-in repositories) from here.
    (vrack_dir(rack) / "gateway").write_text(f"{rack.gateway}\n")
    _ensure_boot_server(rack)
    _state_file(rack).write_text(json.dumps({**_state(rack), "registered": True}))
    register(netbox, rack, result.vms)
    _unregister(netbox, list(result.removed))
    _ensure_registry(netbox.settings, rack)
    _state_file(rack).write_text(json.dumps({"vms": sorted(vm.name for vm in result.vms),
                                             "registered": True}))
    return VrackUp(result.vms, rack.boot_server, result.created, result.emulators,
                   time.monotonic() - started)


@dataclass(frozen=True)
class VrackDown:
    vms: int
    containers: int
    devices: int


def down(netbox: NetBox | None, rack: Vrack = LAB) -> VrackDown:
    """Remove the VMs (with disks), their emulators, the boot server container, libvirtd
    and the namespace, and the rack's NetBox devices; nothing else."""
    recorded = _recorded(rack)
    if recorded and _alive_pid(LIBVIRTD_PID, "libvirtd") is None:
        # The VMs are defined persistently: only a libvirtd can undefine them.
        ensure_network(rack)
        ensure_libvirtd(rack)
    existing = domains(rack) if _libvirtd_is_ours(rack) else {}
    names = sorted({*existing, *recorded})
    for name in names:
        _remove_vm(rack, name, existing)
    containers = boot_server_containers(rack)
    for name in containers:
        podman.podman("rm", "-f", "-t", "2", name)
    _terminate("uplink proxy", _uplink_pid_file(rack), UPLINK)
    _terminate("stand-in repository server", _standin_pid_file(rack), STANDIN_SERVER)
    _stop(LIBVIRTD_PID, "libvirtd", rack)
    _stop(VIRTLOGD_PID, "virtlogd", rack)
    if _netns_path(rack).exists():
        _run("ip", "netns", "del", rack.netns)
    devices = 0
    if netbox is not None:
        devices = _unregister(netbox, [*names, rack.boot_server])
        _unregister_rack(netbox, rack)
    # The state names what to remove from NetBox: kept until NetBox is clean too.
    if netbox is not None or not _state(rack).get("registered"):
        shutil.rmtree(vrack_dir(rack), ignore_errors=True)
    return VrackDown(len(names), len(containers), devices)


def _libvirtd_is_ours(rack: Vrack) -> bool:
    pid = _alive_pid(LIBVIRTD_PID, "libvirtd")
    return pid is not None and _in_our_ns(rack, pid)


@dataclass(frozen=True)
class VmStatus:
    name: str
    state: str  # libvirt's domain state
    bmc: str  # the emulator's URL
    bmc_running: bool


def status(rack: Vrack = LAB) -> list[VmStatus]:
    existing = domains(rack) if _libvirtd_is_ours(rack) else {}
    by_name = {vm.name: vm for vm in plan(rack.capacity, rack)}
    return [VmStatus(name, existing.get(name, "not defined"),
                     f"https://{by_name[name].bmc}:{BMC_PORT}" if name in by_name else "?",
                     _emulator_pid(rack, name) is not None)
            for name in sorted({*existing, *_recorded(rack)})]
