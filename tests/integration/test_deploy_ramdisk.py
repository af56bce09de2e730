"""The deploy ramdisk without the boot server role or libvirt: its build is cached by recipe,
and a host whose deploy token was already spent network-boots into it and reboots without
touching its disk. QEMU (TCG) PXE-boots through its own user-mode DHCP/TFTP into iPXE (QEMU's
NIC ROM), which chains to the per-host iPXE script, boots the ramdisk, and the ramdisk asks the
real racklift-deploy-api for its deploy data.

A deploy that streams the image, verifies it and boots the disk is the whole run's
(test_imaging.py, on the virtual rack's VMs, through the real boot server): a VM of its own here
would be the same minutes of emulation again.

Stand-in, named as such: the boot server's nginx is replaced by Python's http.server in a thread
on the host's loopback (QEMU's guest reaches it as 10.0.2.2). Everything else is the production
artifact: the disk image, the ramdisk, the deploy API script and the boot contract's layout.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers import load_script
from racklift.imaging import deploy_data, diskimage, host_keys, ramdisk
from racklift.paths import REPO_ROOT

pytestmark = pytest.mark.vm

API_SCRIPT = REPO_ROOT / "roles" / "boot_server" / "files" / "racklift-deploy-api"
GUEST_HOST = "10.0.2.2"  # the host's loopback, seen from QEMU's user-mode network
GUEST_ADDRESS = "10.0.2.15/24"  # the address QEMU's user network forwards to
MIB = 1024 * 1024


def _load_api():
    return load_script(API_SCRIPT, "racklift_deploy_api")


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # the test prints its own summary
        pass


def _serve(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    return thread


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class BootServer:
    """The boot contract's HTTP root and deploy API data directory, served on loopback."""

    root: Path  # HTTP root: ipxe/, ramdisk/, images/
    data: Path  # deploy API: hosts/, used/, reports/
    tftp: Path
    http_port: int
    api_port: int

    @property
    def http_url(self) -> str:
        return f"http://{GUEST_HOST}:{self.http_port}"

    @property
    def api_url(self) -> str:
        return f"http://{GUEST_HOST}:{self.api_port}"

    def report(self, host: str) -> dict | None:
        path = self.data / "reports" / f"{host}.json"
        return json.loads(path.read_text()) if path.exists() else None


@pytest.fixture(scope="module")
def image() -> diskimage.DiskImage:
    result = diskimage.build()
    print(f"\n[image] {result.name} {result.build_id}: {result.size / MIB:.0f} MiB zstd, "
          f"{'cache hit' if result.cached else 'built'} in {result.seconds:.1f} s")
    return result


@pytest.fixture(scope="module")
def deploy_ramdisk(image) -> ramdisk.Ramdisk:
    result = ramdisk.build(image)
    print(f"[ramdisk] {result.build_id}: initrd {result.size / MIB:.1f} MiB, "
          f"{'cache hit' if result.cached else 'built'} in {result.seconds:.1f} s")
    return result


@pytest.fixture(scope="module")
def boot_server(tmp_path_factory, image, deploy_ramdisk) -> Iterator[BootServer]:
    base = tmp_path_factory.mktemp("boot")
    root, data, tftp = base / "http", base / "data", base / "tftp"
    (data / "hosts").mkdir(parents=True)
    tftp.mkdir()
    served = root / deploy_ramdisk.url_path
    served.mkdir(parents=True)
    os.symlink(deploy_ramdisk.kernel, served / "vmlinuz")
    os.symlink(deploy_ramdisk.initrd, served / "initrd.img")
    images = root / image.url_path
    images.parent.mkdir(parents=True)
    os.symlink(image.path, images)
    (root / "ipxe").mkdir()
    # What dnsmasq's bootfile does on the boot server: chain to the per-host script by MAC.
    (tftp / "boot.ipxe").write_text(
        f"#!ipxe\nchain http://{GUEST_HOST}:{{port}}/ipxe/${{net0/mac}}.ipxe || exit\n")
    files = ThreadingHTTPServer(("127.0.0.1", 0),
                                functools.partial(_QuietFiles, directory=str(root)))
    api = _load_api().make_server(("127.0.0.1", 0), data)
    threads = [_serve(files), _serve(api)]
    server = BootServer(root, data, tftp, files.server_address[1], api.server_address[1])
    boot = tftp / "boot.ipxe"
    boot.write_text(boot.read_text().replace("{port}", str(server.http_port)))
    try:
        yield server
    finally:
        for s in (files, api):
            s.shutdown()
            s.server_close()
        for thread in threads:
            thread.join(5)


@pytest.fixture(scope="module")
def ssh_key(tmp_path_factory) -> Path:
    key = tmp_path_factory.mktemp("ssh") / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "racklift-test",
                    "-f", str(key)], check=True)
    return key


def stage_host(server: BootServer, host: str, mac: str, image_url: str,
               image: diskimage.DiskImage, ssh_key: Path) -> str:
    """What the controller and the boot_server role do for a host being deployed; the deploy's
    nonce."""
    token, nonce = deploy_data.new_token(), deploy_data.new_nonce()
    spec = deploy_data.HostDeploy(
        host=host, mac=mac, address=GUEST_ADDRESS, target_disk="/dev/vda", gateway=GUEST_HOST,
        dns=("10.0.2.3",),
        authorized_keys=(ssh_key.with_suffix(".pub").read_text().strip(),),
        host_key=host_keys.new_host_key())
    artifact = deploy_data.ImageArtifact(image.name, image.build_id, image.sha256)
    data = deploy_data.render(spec, artifact, server.http_url, nonce)
    data["image"]["url"] = image_url
    # The token is bound to the host's address: QEMU's user network makes the guest's
    # connections come from this machine's loopback.
    (server.data / "hosts" / f"{host}.json").write_text(
        json.dumps(deploy_data.host_record(token, data, "127.0.0.1")))
    kernel = f"{server.http_url}/{ramdisk_path(server)}"
    (server.root / "ipxe" / f"{mac}.ipxe").write_text(
        f"#!ipxe\nkernel {kernel}/vmlinuz "
        f"{ramdisk.kernel_args(server.api_url, token, mac)}\n"
        f"initrd {kernel}/initrd.img\nboot\n")
    return nonce


def ramdisk_path(server: BootServer) -> str:
    (served,) = (server.root / "ramdisk").iterdir()
    return f"ramdisk/{served.name}"


def test_ramdisk_is_cached_by_recipe(image, deploy_ramdisk) -> None:
    started = time.monotonic()
    again = ramdisk.build(image)
    assert again.cached and time.monotonic() - started < 1
    assert again.build_id == deploy_ramdisk.build_id == ramdisk.build_id(image.build_id)
    assert again.kernel.read_bytes()[0x202:0x206] == b"HdrS"  # a bzImage (boot protocol)
    with gzip.open(again.initrd) as initrd:
        archive = initrd.read()
    listing = subprocess.run(["cpio", "-it", "--quiet"], input=archive, capture_output=True,
                             check=True).stdout.decode().split()
    assert {"init", "bin/busybox", "bin/zstd", "lib64/ld-linux-x86-64.so.2",
            "lib/modules/virtio_net.ko", "lib/modules/ext4.ko",
            "etc/racklift-modules"} <= set(listing)


class VM:
    """One QEMU (TCG) guest that network-boots: a blank virtio disk, user-mode networking with
    QEMU's own DHCP/TFTP, serial to a file."""

    def __init__(self, workdir: Path, mac: str, tftp: Path, disk_bytes: int) -> None:
        self.workdir, self.mac = workdir, mac
        self.disk = workdir / "disk.qcow2"
        self.console = workdir / "console.log"
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(self.disk),
                        str(disk_bytes)], check=True)
        self.tftp = tftp
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["qemu-system-x86_64", "-machine", "pc,accel=tcg", "-m", "768",
             "-nographic", "-monitor", "none", "-serial", f"file:{self.console}",
             "-drive", f"file={self.disk},format=qcow2,if=virtio",
             "-netdev", f"user,id=n0,tftp={self.tftp},bootfile=boot.ipxe",
             "-device", f"virtio-net-pci,netdev=n0,mac={self.mac}", "-boot", "once=n"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def console_text(self) -> str:
        return self.console.read_text(errors="replace") if self.console.exists() else ""

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def vm(tmp_path, boot_server, image) -> Iterator[VM]:
    machine = VM(tmp_path, "52:54:00:b1:00:01", boot_server.tftp,
                 image.raw_size + 256 * MIB)
    try:
        yield machine
    finally:
        machine.stop()
        machine.disk.unlink(missing_ok=True)  # up to the image's size: not kept for later


def wait_for(what: str, check, timeout: float, vm: VM, interval: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        if vm.process and vm.process.poll() is not None:
            break
        time.sleep(interval)
    pytest.fail(f"{what} did not happen within {timeout:.0f} s; VM console ends with:\n"
                f"{vm.console_text()[-3000:]}")


def test_used_token_reboots_without_touching_the_disk(boot_server, image, vm, ssh_key) -> None:
    """A host that network-boots again after its deploy (sushy-tools keeps a "Once" PXE boot)
    finds its token spent: the ramdisk reboots, writes nothing and leaves the report alone."""
    host = "vm-deploy-again"
    stage_host(boot_server, host, vm.mac, f"{boot_server.http_url}/{image.url_path}", image,
               ssh_key)
    script = (boot_server.root / "ipxe" / f"{vm.mac}.ipxe").read_text()
    token = re.search(r"racklift\.token=(\S+)", script)[1]
    with urllib.request.urlopen(f"http://127.0.0.1:{boot_server.api_port}/v1/deploy/{token}",
                                timeout=10) as first:  # the deploy that already ran
        assert first.status == 200
    vm.start()
    wait_for("the ramdisk noticing the spent token",
             lambda: "the deploy token was already used" in vm.console_text(), 300, vm)
    text = wait_for("the reboot", lambda: (t := vm.console_text()).split(
        "the deploy token was already used")[1].count("SeaBIOS (version") and t, 60, vm)
    assert vm.process is not None and vm.process.poll() is None  # rebooted, not powered off
    assert boot_server.report(host) is None
    assert "streaming" not in text
    wiped = subprocess.run(["qemu-io", "-r", "-f", "qcow2", "-c", "read -P 0 0 8M",
                            str(vm.disk)], capture_output=True, text=True)
    assert "Pattern verification failed" not in wiped.stdout  # the blank disk stayed blank
