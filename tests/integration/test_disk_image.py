"""The OS disk image (src/racklift/imaging/diskimage.py), built for real: its recipe cache and
what is inside it (read without mounting: sgdisk, debugfs and mtools on the image file). Booting
it is proven end to end where it is deployed: through SeaBIOS in test_deploy_ramdisk.py, and
through UEFI firmware (OVMF) on the virtual rack's VMs in test_imaging.py."""

from __future__ import annotations

import hashlib
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from racklift.imaging import diskimage
from racklift.paths import cache_dir

pytestmark = pytest.mark.vm

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def image() -> diskimage.DiskImage:
    result = diskimage.build()
    print(f"\n[image] {result.name} {result.build_id} "
          f"{'from the cache' if result.cached else 'built'} in {result.seconds:.1f} s: "
          f"{result.size / MIB:.0f} MiB zstd, {result.raw_size / MIB:.0f} MiB disk")
    return result


@pytest.fixture(scope="module")
def raw(image, tmp_path_factory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("disk") / "disk.raw"
    with out.open("wb") as dst:
        subprocess.run(["zstd", "-d", "-c", "-q", str(image.path)], stdout=dst, check=True)
    yield out
    out.unlink()  # the size of the disk: not kept for later


def _root(raw: Path) -> str:
    return f"{raw}?offset={diskimage.ROOT_START * diskimage.SECTOR}"


def debugfs(raw: Path, request: str) -> str:
    result = subprocess.run(["debugfs", "-R", request, _root(raw)], capture_output=True,
                            text=True, check=True)
    return result.stdout


def test_second_build_is_a_cache_hit_with_the_same_checksum(image) -> None:
    started = time.monotonic()
    again = diskimage.build()
    assert time.monotonic() - started < 1
    assert again.cached
    assert (again.build_id, again.sha256, again.path) == (image.build_id, image.sha256,
                                                          image.path)
    assert again.path.parent == diskimage.image_dir() == \
        cache_dir() / "images" / f"debian12-{image.build_id}"
    digest = hashlib.sha256(image.path.read_bytes()).hexdigest()
    assert digest == image.sha256
    assert image.path.name == "disk.raw.zst"
    assert (image.directory / "disk.raw.zst.sha256").read_text() == f"{digest}  disk.raw.zst\n"
    assert image.size == image.path.stat().st_size


def test_partitions_and_boot_loaders(raw, image) -> None:
    assert raw.stat().st_size == image.raw_size
    table = subprocess.run(["sgdisk", "-p", str(raw)], capture_output=True, text=True,
                           check=True).stdout
    rows = [line.split() for line in table.splitlines() if re.match(r"\s+\d+\s", line)]
    assert [(r[0], r[1], r[5]) for r in rows] == [
        ("1", str(diskimage.BIOS_BOOT_START), "EF02"),
        ("2", str(diskimage.ESP_START), "EF00"),
        ("3", str(diskimage.ROOT_START), "8304")]
    with raw.open("rb") as disk:
        mbr = disk.read(512)
        disk.seek(diskimage.BIOS_BOOT_START * diskimage.SECTOR)
        core = disk.read(512)
    assert mbr[510:] == b"\x55\xaa"
    assert int.from_bytes(mbr[0x5C:0x64], "little") == diskimage.BIOS_BOOT_START
    assert int.from_bytes(core[500:508], "little") == diskimage.BIOS_BOOT_START + 1
    esp = subprocess.run(["mdir", "-b", "-i",
                          f"{raw}@@{diskimage.ESP_START * diskimage.SECTOR}", "::/EFI/BOOT"],
                         capture_output=True, text=True, check=True).stdout
    assert "BOOTX64.EFI" in esp


def test_root_filesystem_contents(raw, image) -> None:
    fs_uuid = diskimage.root_uuid(image.build_id)
    assert f"Filesystem UUID:          {fs_uuid}" in subprocess.run(
        ["dumpe2fs", "-h", _root(raw)], capture_output=True, text=True, check=True).stdout
    assert debugfs(raw, "cat /etc/racklift/image.json") == diskimage.marker(image.name,
                                                                           image.build_id)
    assert debugfs(raw, "cat /etc/fstab") == f"UUID={fs_uuid} / ext4 errors=remount-ro 0 1\n"
    grub = debugfs(raw, "cat /boot/grub/grub.cfg")
    assert f"root=UUID={fs_uuid}" in grub and "console=ttyS0,115200n8" in grub
    ssh_dir = debugfs(raw, "ls /etc/ssh")
    assert "sshd_config" in ssh_dir
    assert "ssh_host_" not in ssh_dir  # generated on each host's first boot, never shared
    assert debugfs(raw, "cat /etc/machine-id") == ""
    assert "ssh-keygen -A" in debugfs(
        raw, "cat /etc/systemd/system/ssh.service.d/racklift-hostkeys.conf")
    wants = debugfs(raw, "ls /etc/systemd/system/multi-user.target.wants")
    assert "systemd-networkd.service" in wants and "ssh.service" in wants
    # The root grows to the host's disk at boot (the whole-pipeline test sees it grown).
    assert "racklift-growroot.service" in wants
    assert "growpart" in debugfs(raw, "cat /usr/local/sbin/racklift-growroot")
    for program in ("/usr/bin/python3", "/usr/bin/sudo", "/usr/sbin/sshd",
                    "/usr/lib/systemd/systemd", "/usr/bin/growpart", "/usr/sbin/sgdisk"):
        assert "Inode:" in subprocess.run(["debugfs", "-R", f"stat {program}", _root(raw)],
                                          capture_output=True, text=True).stdout, program
