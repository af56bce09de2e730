"""Image tasks: the OS disk image racklift deploys and the deploy ramdisk that writes it."""

from __future__ import annotations

from invoke import task

from racklift.console import console
from racklift.imaging import diskimage, ramdisk
from racklift.tasks.common import operator_errors

MIB = 1024 * 1024


def _build_image() -> diskimage.DiskImage:
    result = diskimage.build()
    how = "from the cache" if result.cached else "built"
    console.print(f"image {result.name} {result.build_id} {how} in {result.seconds:.1f} s")
    console.print(f"  {result.path}  {result.size / MIB:.0f} MiB "
                  f"(disk {result.raw_size / MIB:.0f} MiB)")
    console.print(f"  sha256 {result.sha256}")
    console.print(f"  served as {result.url_path}")
    return result


@task
def build(c):
    """Build (or find in the cache) the Debian 12 disk image: BIOS + UEFI bootable, keyed by a
    hash of its recipe; prints its path, build id, size, sha256 and build time."""
    with operator_errors():
        _build_image()


@task(name="ramdisk")
def ramdisk_(c):
    """Build (or find in the cache) the deploy ramdisk for the disk image's kernel; prints its
    kernel and initrd paths, build id, size and build time."""
    with operator_errors():
        image = _build_image()
        result = ramdisk.build(image)
    how = "from the cache" if result.cached else "built"
    console.print(f"ramdisk {result.build_id} {how} in {result.seconds:.1f} s "
                  f"(kernel {result.kernel_version})")
    console.print(f"  {result.kernel}  {result.kernel.stat().st_size / MIB:.1f} MiB")
    console.print(f"  {result.initrd}  {result.size / MIB:.1f} MiB")
    console.print(f"  served as {result.url_path}/vmlinuz and {result.url_path}/initrd.img")
