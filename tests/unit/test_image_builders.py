"""The image builders' pure parts: the disk image's build id is its recipe, the deploy
ramdisk's kernel modules load dependencies first, and its initramfs is a valid newc archive."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from racklift.imaging import diskimage, ramdisk


def test_build_id_is_the_recipe() -> None:
    assert diskimage.build_id() == diskimage.build_id(diskimage.PACKAGES)
    assert diskimage.build_id((*diskimage.PACKAGES, "jq")) != diskimage.build_id()
    assert re.fullmatch(r"[0-9a-f]{16}", diskimage.build_id())


def test_module_load_order_puts_dependencies_first() -> None:
    dep = ramdisk.parse_modules_dep(
        "kernel/fs/ext4/ext4.ko: kernel/fs/jbd2/jbd2.ko kernel/fs/mbcache.ko\n"
        "kernel/fs/jbd2/jbd2.ko:\nkernel/fs/mbcache.ko:\n"
        "kernel/drivers/net/virtio_net.ko.xz: kernel/drivers/net/net_failover.ko.xz\n"
        "kernel/drivers/net/net_failover.ko.xz: kernel/net/core/failover.ko.xz\n"
        "kernel/net/core/failover.ko.xz:\n")
    order = ramdisk.load_order(["virtio-net", "ext4", "virtio_pci"], dep, {"virtio_pci"})
    assert order == ["kernel/net/core/failover.ko.xz", "kernel/drivers/net/net_failover.ko.xz",
                     "kernel/drivers/net/virtio_net.ko.xz", "kernel/fs/jbd2/jbd2.ko",
                     "kernel/fs/mbcache.ko", "kernel/fs/ext4/ext4.ko"]
    with pytest.raises(diskimage.ImageBuildError, match="kernel module nvme is neither"):
        ramdisk.load_order(["nvme"], dep, set())


def test_initramfs_archive_is_valid_newc(tmp_path) -> None:
    archive = ramdisk.cpio_newc([("bin", 0o40755, b""), ("bin/hello", 0o100755, b"hi\n"),
                                 ("bin/sh", 0o120777, b"hello")])
    assert archive == ramdisk.cpio_newc([("bin", 0o40755, b""),
                                         ("bin/hello", 0o100755, b"hi\n"),
                                         ("bin/sh", 0o120777, b"hello")])  # reproducible
    listing = subprocess.run(["cpio", "-itv"], input=archive, capture_output=True, check=True)
    names = [line.split()[-1] for line in listing.stdout.decode().splitlines()]
    assert names == ["bin", "bin/hello", "hello"]  # the symlink line ends with its target
    subprocess.run(["cpio", "-idm", "--quiet"], input=archive, cwd=tmp_path, check=True)
    assert (tmp_path / "bin" / "hello").read_bytes() == b"hi\n"
    assert os.readlink(tmp_path / "bin" / "sh") == "hello"
