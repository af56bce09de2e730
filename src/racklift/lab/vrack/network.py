"""The provisioning network: the namespace and its bridge, libvirtd inside it, and the uplink
proxy to the Debian mirror."""

from __future__ import annotations

import shutil
import sys
import urllib.parse
from pathlib import Path

from racklift import podman
from racklift.errors import LabError
from racklift.lab import vrack_uplink
from racklift.lab.vrack.commands import (
    _alive_pid,
    _in_ns,
    _in_our_ns,
    _netns_path,
    _process_pid,
    _run,
    _spawn,
    _wait,
    virsh,
)
from racklift.lab.vrack.layout import Vrack, vrack_dir


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


LIBVIRTD_PID = Path("/run/libvirtd.pid")


VIRTLOGD_PID = Path("/run/virtlogd.pid")


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


UPLINK = b"racklift.lab.vrack_uplink"


def _uplink_pid_file(rack: Vrack) -> Path:
    return vrack_dir(rack) / "uplink.pid"


def apt_proxy_conf(address: str = "127.0.0.1") -> str:
    """apt's configuration on a boot server: the mirror through the uplink at `address`."""
    return f'Acquire::http::Proxy "http://{address}:{vrack_uplink.PORT}";\n'


def _ensure_uplink(rack: Vrack) -> None:
    ensure_uplink(rack.netns, _uplink_pid_file(rack))


def ensure_uplink(netns: str, pid_file: Path) -> None:
    """The uplink proxy listening in `netns` (the simulated fleet's too), unless it runs."""
    if _process_pid(pid_file, UPLINK) is not None:
        return
    mirror = urllib.parse.urlsplit(podman.DEBIAN_MIRROR).hostname or "deb.debian.org"
    _spawn(f"uplink proxy in {netns}",
           [sys.executable, "-m", "racklift.lab.vrack_uplink", "--netns", netns,
            "--port", str(vrack_uplink.PORT), "--allow", mirror], pid_file,
           lambda: _run("ip", "netns", "exec", netns, "nc", "-z", "127.0.0.1",
                        str(vrack_uplink.PORT), check=False).returncode == 0)


# Stand-in vendor repositories, served inside the namespace
