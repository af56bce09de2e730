"""The deploy ramdisk: the OS image's own kernel plus a small initramfs (busybox-static, the build
host's zstd with the shared libraries it loads, the few kernel modules a deploy needs, and
racklift's /init), which PXE-boots, writes the image to the target disk and reports to the
deploy API (see ramdisk/init).

The initramfs is written as a newc cpio by this module (no root, no mknod, fixed timestamps), and
cached under cache_dir()/ramdisk/<build_id> with build_id a hash of its recipe.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from racklift import podman
from racklift.child_env import without_secrets
from racklift.imaging import diskimage
from racklift.imaging.diskimage import ImageBuildError
from racklift.paths import cache_dir, cache_lock

HERE = Path(__file__).resolve().parent / "ramdisk"
INIT = HERE / "init"
UDHCPC_SCRIPT = HERE / "udhcpc.script"
BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static: no libraries to carry along
# The image's decompressor (busybox has none for zstd): the build host's, with its libraries.
ZSTD = "zstd"
LDD_ADDRESS = re.compile(r"\s*\(0x[0-9a-fA-F]+\)\s*$")
# What a deploy needs: the NIC, the disk, ext4 (and crc32c, which ext4 asks the crypto API for
# by name at mount time, so modules.dep does not list it). Virtio for VMs; NVMe, AHCI and
# common Intel NICs for physical servers.
MODULES = ("virtio_pci", "virtio_net", "virtio_blk", "virtio_scsi", "sd_mod", "ahci", "nvme",
           "e1000", "e1000e", "igb", "ext4", "crc32c_generic")


@dataclass(frozen=True)
class Ramdisk:
    build_id: str
    directory: Path
    kernel_version: str
    image_build_id: str  # the disk image whose kernel this is
    size: int  # bytes of initrd.img
    seconds: float
    cached: bool

    @property
    def kernel(self) -> Path:
        return self.directory / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.directory / "initrd.img"

    @property
    def url_path(self) -> str:
        """The boot server's ramdisk/<build_id>/ directory, relative to its HTTP root."""
        return f"ramdisk/{self.build_id}"


def kernel_args(api_url: str, token: str, mac: str) -> str:
    """The kernel command line of the deploy script (boot contract)."""
    return f"console=ttyS0 racklift.api={api_url} racklift.token={token} racklift.mac={mac}"


def module_name(path: str) -> str:
    """kernel/drivers/net/virtio_net.ko(.xz) -> virtio_net (modules.dep spells - and _ both)."""
    return Path(path).name.split(".ko")[0].replace("-", "_")


def parse_modules_dep(text: str) -> dict[str, tuple[str, list[str]]]:
    """modules.dep -> {name: (path, [dependency paths])}."""
    out = {}
    for line in text.splitlines():
        path, sep, deps = line.partition(":")
        if sep:
            out[module_name(path)] = (path, deps.split())
    return out


def load_order(wanted: Iterable[str], dep: dict[str, tuple[str, list[str]]],
               builtin: set[str]) -> list[str]:
    """Module paths in an order insmod can load them: each after its dependencies, once.
    A wanted module built into the kernel needs nothing; one that is neither is an error."""
    order: list[str] = []

    def visit(path: str) -> None:
        if path in order:
            return
        for needed in dep[module_name(path)][1]:
            visit(needed)
        order.append(path)

    for name in wanted:
        key = name.replace("-", "_")
        if key in dep:
            visit(dep[key][0])
        elif key not in builtin:
            raise ImageBuildError(f"kernel module {name} is neither a module of the image's "
                                  "kernel nor built into it: remove it from ramdisk.MODULES")
    return order


def _cpio_entry(name: str, mode: int, data: bytes = b"", ino: int = 0) -> bytes:
    fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0)
    header = "070701" + "".join(f"{value:08x}" for value in fields)
    head = header.encode() + name.encode() + b"\0"
    head += b"\0" * (-len(head) % 4)
    return head + data + b"\0" * (-len(data) % 4)


def cpio_newc(entries: Iterable[tuple[str, int, bytes]]) -> bytes:
    """A newc archive (what the kernel unpacks as an initramfs) of (name, mode, data); for a
    symlink, data is its target. Owner root, timestamps 0: same inputs, same bytes."""
    out = b"".join(_cpio_entry(name, mode, data, ino)
                   for ino, (name, mode, data) in enumerate(entries, 1))
    return out + _cpio_entry("TRAILER!!!", 0)


def _module_bytes(path: Path) -> bytes:
    """A module as insmod takes it: busybox's insmod reads plain .ko only."""
    data = path.read_bytes()
    if path.name.endswith(".ko.xz"):
        return lzma.decompress(data)
    if path.name.endswith(".ko.zst"):
        return subprocess.run(["zstd", "-dc", str(path)], capture_output=True,
                              check=True, env=without_secrets()).stdout
    return data


def parse_ldd(text: str, binary: str = "the binary") -> list[str]:
    """ldd's output -> the absolute paths of the shared libraries and the dynamic loader the
    binary loads, in ldd's order (the kernel's vDSO, which is no file, left out). Empty for a
    static binary. A library the loader cannot find is an ImageBuildError."""
    paths = []
    for line in text.splitlines():
        line = LDD_ADDRESS.sub("", line).strip()
        name, arrow, target = line.partition("=>")
        name, target = name.strip(), target.strip()
        if arrow and name.startswith("/"):  # the loader as ld.so --list names it: its path
            paths.append(name)
        elif arrow:  # "libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)"
            if target == "not found":
                raise ImageBuildError(f"{binary} needs {name}, which the build host's "
                                      "dynamic loader does not find")
            if target:  # older glibc: "linux-vdso.so.1 =>  (0x...)", no file
                paths.append(target)
        elif line.startswith("/"):  # the loader: "/lib64/ld-linux-x86-64.so.2 (0x...)"
            paths.append(line)
    return paths


def zstd_path() -> Path:
    """The build host's zstd (the Debian package zstd)."""
    found = shutil.which(ZSTD)
    if not found:
        raise ImageBuildError(f"{ZSTD} not found: install the Debian package zstd (the deploy "
                              "ramdisk carries it to decompress the image)")
    return Path(found).resolve()


def shared_libraries(binary: Path) -> list[str]:
    """The shared libraries and the dynamic loader `binary` loads on the build host, as ldd
    resolves them: the paths the same loader finds them at in the initramfs (its default
    directories, /lib/x86_64-linux-gnu on Debian, and the ELF interpreter's own path)."""
    try:
        result = subprocess.run(["ldd", str(binary)], capture_output=True, text=True,
                                timeout=60, env=without_secrets())
    except FileNotFoundError:
        raise ImageBuildError("ldd not found: install the Debian package libc-bin") from None
    text = result.stdout + result.stderr
    paths = parse_ldd(text, str(binary))
    if result.returncode != 0 and paths == [] and "not a dynamic executable" not in text:
        raise ImageBuildError(f"ldd {binary} failed: {text.strip()[-400:]}")
    return paths


def executable_entries(binary: Path, name: str) -> list[tuple[str, int, bytes]]:
    """`binary` as the initramfs's `name` (e.g. bin/zstd) with the libraries it loads, each at
    the path it has on the build host, as a file with its content there (a symlink's target's).
    The directories they are in are initramfs_entries'."""
    files = [(name, stat.S_IFREG | 0o755, binary.read_bytes())]
    files += [(path.lstrip("/"), stat.S_IFREG | 0o755, Path(path).read_bytes())
              for path in shared_libraries(binary)]
    return files


def _parents(names: Iterable[str]) -> list[str]:
    """Every directory above the names, parents first."""
    out: list[str] = []
    for name in names:
        parts = name.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            directory = "/".join(parts[:depth])
            if directory not in out:
                out.append(directory)
    return out


def initramfs_entries(modules_dir: Path, order: list[str],
                      zstd: Path | None = None) -> list[tuple[str, int, bytes]]:
    directory, executable, regular = stat.S_IFDIR | 0o755, stat.S_IFREG | 0o755, \
        stat.S_IFREG | 0o644
    base = ["bin", "dev", "etc", "lib", "lib/modules", "mnt", "proc", "sys", "tmp"]
    decompressor = executable_entries(zstd or zstd_path(), "bin/zstd")
    base += [d for d in _parents(name for name, _, _ in decompressor) if d not in base]
    entries = [(d, directory, b"") for d in base]
    entries += decompressor
    entries += [("bin/busybox", executable, BUSYBOX.read_bytes()),
                ("bin/sh", stat.S_IFLNK | 0o777, b"busybox"),
                ("init", executable, INIT.read_bytes()),
                ("etc/udhcpc.script", executable, UDHCPC_SCRIPT.read_bytes())]
    names = []
    for path in order:
        name = module_name(path) + ".ko"
        entries.append((f"lib/modules/{name}", regular, _module_bytes(modules_dir / path)))
        names.append(name)
    entries.append(("etc/racklift-modules", regular, ("\n".join(names) + "\n").encode()))
    return entries


def build_id(image_build_id: str) -> str:
    """Hash of the recipe: the image's kernel (its build id), busybox, zstd and the libraries it
    loads (paths and contents), /init, the modules and this module."""
    digest = hashlib.sha256()
    zstd = zstd_path()
    carried = [str(zstd).encode() + hashlib.sha256(zstd.read_bytes()).digest()]
    carried += [path.encode() + hashlib.sha256(Path(path).read_bytes()).digest()
                for path in shared_libraries(zstd)]
    for part in (image_build_id.encode(), hashlib.sha256(BUSYBOX.read_bytes()).digest(),
                 *carried, INIT.read_bytes(), UDHCPC_SCRIPT.read_bytes(),
                 " ".join(MODULES).encode(), Path(__file__).read_bytes()):
        digest.update(part + b"\0")
    return digest.hexdigest()[:16]


def build(image: diskimage.DiskImage | None = None) -> Ramdisk:
    """The ramdisk for the disk image's kernel: from the cache, or built (seconds) and cached."""
    started = time.monotonic()
    if not BUSYBOX.exists():
        raise ImageBuildError(f"{BUSYBOX} not found: install the Debian package busybox-static")
    zstd_path()  # before the image's build: it names its Debian package
    image = image or diskimage.build()
    build = build_id(image.build_id)
    final = cache_dir() / "ramdisk" / build
    cached = (final / "ramdisk.json").exists()
    if not cached:
        with cache_lock(f"ramdisk-{build}"):
            cached = (final / "ramdisk.json").exists()  # built by another process meanwhile
            if not cached:
                _build(image, final, build)
    meta = json.loads((final / "ramdisk.json").read_text())
    return Ramdisk(build_id=build, directory=final, kernel_version=meta["kernel_version"],
                   image_build_id=image.build_id, size=(final / "initrd.img").stat().st_size,
                   seconds=time.monotonic() - started, cached=cached)


def _build(image: diskimage.DiskImage, final: Path, build: str) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    meta = json.loads((image.directory / "image.json").read_text())
    with tempfile.TemporaryDirectory(dir=final.parent, prefix=f".{build}-") as tmp:
        work = Path(tmp)
        rootfs = work / "rootfs"
        rootfs.mkdir()
        version = meta["kernel"].removeprefix("vmlinuz-")
        ref = meta["rootfs_image"]
        if not podman.image_exists(ref):  # pruned since: the same recipe makes the same tag
            ref = diskimage.rootfs_image()
        diskimage.export_rootfs(ref, rootfs,
                                (f"boot/{meta['kernel']}", f"usr/lib/modules/{version}"))
        modules_dir = rootfs / "usr" / "lib" / "modules" / version
        builtin = {module_name(line) for line in
                   (modules_dir / "modules.builtin").read_text().split()}
        order = load_order(MODULES, parse_modules_dep(
            (modules_dir / "modules.dep").read_text()), builtin)
        out = work / "out"
        out.mkdir()
        (rootfs / "boot" / meta["kernel"]).rename(out / "vmlinuz")
        with gzip.GzipFile(out / "initrd.img", "wb", mtime=0) as gz:
            gz.write(cpio_newc(initramfs_entries(modules_dir, order)))
        (out / "ramdisk.json").write_text(json.dumps(
            {"build_id": build, "kernel_version": version, "image_build_id": image.build_id,
             "modules": [module_name(p) for p in order]}, indent=2) + "\n")
        os.replace(out, final)  # complete or absent: ramdisk.json is inside out/
