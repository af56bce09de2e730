"""The OS disk image that racklift deploys: Debian 12 from debootstrap, bootable by BIOS and UEFI,
built without mounting anything.

The root filesystem is racklift's cached debootstrap base (racklift.podman) with the image's
packages installed by `podman build`, exported to a directory. The disk is assembled in a plain
file: GPT by sgdisk, ext4 by `mkfs.ext4 -d ROOTFS -E offset=...`, an ESP made by mkfs.vfat +
mtools, and GRUB (core.img with an embedded config) written into the BIOS boot partition and the
ESP. The result, the disk compressed by zstd (disk.raw.zst) and its sha256, is cached under
cache_dir()/images/<name>-<build_id>, where build_id is a hash of the recipe: the same recipe
is the same build id, and a cache hit.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from racklift import podman
from racklift.child_env import without_secrets
from racklift.errors import RackliftError
from racklift.paths import cache_dir, cache_lock

IMAGE_NAME = "debian12"
IMAGE_REPO = "localhost/racklift-os-image"
BASE_PACKAGES = ("linux-image-amd64", "systemd", "systemd-sysv", "udev", "dbus",
                 # python3-apt: what Ansible's apt modules and package_facts need on a host
                 "openssh-server", "python3", "python3-apt", "sudo", "ca-certificates",
                 "iproute2", "kmod",
                 "initramfs-tools",
                 # growpart (and sgdisk for GPT's backup header): the root grows to the disk
                 "cloud-guest-utils", "gdisk",
                 # what racklift's fact collector reads the host's identity and PCI bus with
                 "dmidecode", "pciutils")
# What each node role installs from Debian (with its defaults), already in the image, as a site's
# golden image holds it: the roles then find them installed and only pin, hold and configure
# them, instead of downloading and unpacking them on every host (most of a configure under
# emulation). The vendor packages (driver, toolkit, DOCA) still come from their repositories at
# the version NetBox asks. The lab's container hosts hold their roles' share (racklift.lab.images).
# tests/unit/test_image_builders.py holds this to the roles' own package lists.
NODE_ROLE_PACKAGES = {"base_os": ("chrony", "lldpd"),
                      "ofed": ("rdma-core", "ibverbs-utils", "infiniband-diags", "mstflint"),
                      "container_runtime": ("apparmor", "docker.io", "containerd")}


# Their services stay off until the roles have configured them (the roles enable and start
# each): a first boot starts no daemon on its packaged defaults (lldpd announcing the image's
# name, dockerd its default bridge), and no daemon starts twice, at boot and again once
# configured, which under emulation delays SSH by a minute.
# Unit → the package that brings it.
NODE_ROLE_SERVICES = {"chrony.service": "chrony", "lldpd.service": "lldpd",
                      "containerd.service": "containerd", "docker.service": "docker.io",
                      "docker.socket": "docker.io"}


def node_role_packages(roles: tuple[str, ...] = tuple(NODE_ROLE_PACKAGES)) -> tuple[str, ...]:
    """The Debian packages `roles` install (roles that install none add nothing)."""
    return tuple(p for role in roles for p in NODE_ROLE_PACKAGES.get(role, ()))


PACKAGES = BASE_PACKAGES + node_role_packages()
SECTOR = 512
MIB = 1024 * 1024
BIOS_BOOT_START = 2048  # sectors; 1 MiB of BIOS boot partition holds GRUB's core.img
ESP_START = 4096
ESP_MIB = 32
ROOT_START = ESP_START + ESP_MIB * MIB // SECTOR
ROOT_LABEL = "racklift-root"
GRUB_DIR = Path("/usr/lib/grub")
GRUB_MODULES = ("part_gpt", "ext2", "search", "search_fs_uuid", "configfile", "normal", "linux",
                "serial", "terminal", "echo", "test", "gzio")
GRUB_PLATFORM_MODULES = {"i386-pc": ("biosdisk",), "x86_64-efi": ("fat", "efi_gop")}
# Offsets inside GRUB's boot.img and core.img that grub-setup patches (grub/boot/i386/pc/boot.S).
BOOT_KERNEL_SECTOR = 0x5C
BOOT_DRIVE_CHECK = 0x66
MBR_CODE_BYTES = 440  # the rest of sector 0 is sgdisk's protective MBR partition table
TOOLS = {"sgdisk": "gdisk", "mkfs.ext4": "e2fsprogs", "mkfs.vfat": "dosfstools",
         "mcopy": "mtools", "mmd": "mtools", "grub-mkimage": "grub-pc-bin and grub-efi-amd64-bin",
         "zstd": "zstd"}
# zstd's level for the image, measured natively on the 1,443 MiB disk (2 cores, loaded;
# benchmarks/README.md): -3 344 MiB in 7 s, -6 324 MiB in 20 s, -9 311 MiB in 29 s, -12
# 308 MiB in 38 s (72 s of CPU), -15 306 MiB in 216 s; gzip -6 was 375 MiB in 46 s. Every
# level decompresses in 1.4-2 s of CPU, where busybox gunzip took 10 s. -9: within 2 % of -15
# at a fraction of the time a fresh machine's first build waits for it (-19: 9 % smaller than
# -9, but minutes of compression).
ZSTD_LEVEL = 9
IMAGE_FILE = "disk.raw.zst"


class ImageBuildError(RackliftError):
    """A disk image or deploy ramdisk could not be built."""


@dataclass(frozen=True)
class DiskImage:
    name: str
    build_id: str
    directory: Path
    sha256: str
    size: int  # bytes of disk.raw.zst, the compressed image
    raw_size: int  # bytes of the disk it expands to
    seconds: float
    cached: bool

    @property
    def path(self) -> Path:
        return self.directory / IMAGE_FILE

    @property
    def url_path(self) -> str:
        """Where the boot server serves it, relative to its HTTP root."""
        return f"images/{self.name}/{self.build_id}/{IMAGE_FILE}"


# apt fetches no translated package descriptions (a third of the lists, on every update).
NO_TRANSLATIONS = "/etc/apt/apt.conf.d/99racklift-no-translations"


def install_packages(packages: tuple[str, ...]) -> str:
    """A Containerfile's RUN that installs `packages` (no Recommends) on racklift's Debian base
    and keeps the package lists (a host's first apt run refreshes them instead of fetching
    them): the disk image's and the lab node image's golden packages."""
    return (f"RUN echo 'Acquire::Languages \"none\";' > {NO_TRANSLATIONS} \\\n"
            " && apt-get update -qq \\\n"
            f" && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
            f"{' '.join(packages)} \\\n"
            " && apt-get clean")


def containerfile(packages: tuple[str, ...] = PACKAGES) -> str:
    """The podman build that turns the debootstrap base into the image's root filesystem."""
    units = [unit for unit, package in NODE_ROLE_SERVICES.items() if package in packages]
    disable = f" && systemctl disable {' '.join(units)} \\\n" if units else ""
    return f"""\
ARG BASE
FROM ${{BASE}}
{install_packages(packages)} \\
 && systemctl enable systemd-networkd ssh \\
{disable} && rm -f /etc/ssh/ssh_host_* /var/lib/dbus/machine-id \\
 && truncate -s 0 /etc/machine-id
"""


# Files racklift adds to the root filesystem (the marker and fstab come from the build id).
IMAGE_FILES = {
    # Host keys are made on first boot, so no two deployed hosts share them (before Debian's
    # `sshd -t`, which fails without them: hence the list is reset).
    "etc/systemd/system/ssh.service.d/racklift-hostkeys.conf":
        "[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\n"
        "ExecStartPre=/usr/sbin/sshd -t\n",
    # Any NIC by DHCP, until the deploy writes a static file for the host's NIC (10-*.network
    # sorts first, and networkd uses the first file that matches).
    "etc/systemd/network/90-racklift-dhcp.network":
        "[Match]\nName=en* eth*\n\n[Network]\nDHCP=yes\n",
    "etc/hostname": "racklift-image\n",
    "etc/hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    "etc/ssh/sshd_config.d/racklift.conf": "PasswordAuthentication no\n",
    # The root partition is sized to its content, so a deploy streams little; at boot it grows
    # to fill the host's disk (growpart: exit 1 means there was nothing to grow).
    "usr/local/sbin/racklift-growroot":
        "#!/bin/sh\nset -eu\nroot=$(findmnt -no SOURCE /)\n"
        "part=$(basename \"$(readlink -f \"$root\")\")\n"
        "disk=$(basename \"$(readlink -f \"/sys/class/block/$part/..\")\")\n"
        "growpart \"/dev/$disk\" \"$(cat \"/sys/class/block/$part/partition\")\" "
        "|| [ $? -eq 1 ]\nresize2fs \"$root\"\n",
    "etc/systemd/system/racklift-growroot.service":
        "[Unit]\nDescription=Grow the root filesystem to the whole disk (racklift)\n"
        "After=local-fs.target\n\n[Service]\nType=oneshot\n"
        "ExecStart=/usr/local/sbin/racklift-growroot\n",
}
# Symbolic links racklift adds (path → target): units enabled the way systemctl enables them.
IMAGE_LINKS = {
    "etc/systemd/system/multi-user.target.wants/racklift-growroot.service":
        "/etc/systemd/system/racklift-growroot.service",
}
EXECUTABLE = ("usr/local/sbin/racklift-growroot",)


def build_id(packages: tuple[str, ...] = PACKAGES) -> str:
    """Hash of everything the image is made from: the base (suite, mirror), the package build,
    racklift's files and this module (partition layout, GRUB setup)."""
    digest = hashlib.sha256()
    for part in (podman.DEBIAN_SUITE, podman.DEBIAN_MIRROR, containerfile(packages),
                 json.dumps([IMAGE_FILES, IMAGE_LINKS], sort_keys=True),
                 Path(__file__).read_text()):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:16]


def root_uuid(build: str) -> str:
    """The root filesystem's UUID: fixed per build, so GRUB and fstab can name it."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"racklift-image:{build}"))


def grub_embedded_config(fs_uuid: str) -> str:
    return (f"search --no-floppy --fs-uuid --set=root {fs_uuid}\n"
            "set prefix=($root)/boot/grub\nconfigfile ($root)/boot/grub/grub.cfg\n")


def grub_config(name: str, build: str, fs_uuid: str, kernel: str, initrd: str) -> str:
    return f"""\
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set default=0
set timeout=1
menuentry "racklift {name} {build}" {{
  linux /boot/{kernel} root=UUID={fs_uuid} ro console=tty0 console=ttyS0,115200n8
  initrd /boot/{initrd}
}}
"""


def fstab(fs_uuid: str) -> str:
    return f"UUID={fs_uuid} / ext4 errors=remount-ro 0 1\n"


def marker(name: str, build: str) -> str:
    return json.dumps({"name": name, "build_id": build}, indent=2) + "\n"


def root_size(content_bytes: int) -> int:
    """Root filesystem size: the content with room for ext4's metadata and a first boot, in
    whole 64 MiB steps. Kept small: every byte of it is streamed and written at each deploy."""
    wanted = int(content_bytes * 1.1) + 160 * MIB
    return -(-wanted // (64 * MIB)) * 64 * MIB


def disk_size(root_bytes: int) -> int:
    """Whole MiB, with room after the root partition for the backup GPT (33 sectors)."""
    return ROOT_START * SECTOR + root_bytes + MIB


def patch_boot_img(boot_img: bytes, core_sector: int) -> bytes:
    """GRUB's MBR code pointing at core.img, as grub-setup leaves it for a hard disk."""
    out = bytearray(boot_img)
    out[BOOT_KERNEL_SECTOR:BOOT_KERNEL_SECTOR + 8] = struct.pack("<Q", core_sector)
    out[BOOT_DRIVE_CHECK:BOOT_DRIVE_CHECK + 2] = b"\x90\x90"  # drive check off, like grub-setup
    return bytes(out[:MBR_CODE_BYTES])


def patch_core_img(core_img: bytes, core_sector: int) -> bytes:
    """core.img's first sector loads the rest from the blocklist at its end: point it at the
    sector after itself, as grub-setup does (grub-mkimage leaves a floppy default there)."""
    out = bytearray(core_img)
    entry = SECTOR - 12  # struct { u64 start; u16 len; u16 segment }
    struct.pack_into("<Q", out, entry, core_sector + 1)
    return bytes(out)


def _run(*args: str, what: str, timeout: float = 900, **kwargs) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(list(args), capture_output=True, timeout=timeout,
                                **{"env": without_secrets(), **kwargs})
    except FileNotFoundError:
        raise ImageBuildError(f"{what}: {args[0]} not found; install the Debian package "
                              f"{TOOLS.get(args[0], args[0])}") from None
    if result.returncode != 0:
        raise ImageBuildError(f"{what} failed ({' '.join(args[:2])}): "
                              f"{result.stderr.decode(errors='replace').strip()[-800:]}")
    return result


def rootfs_image(packages: tuple[str, ...] = PACKAGES) -> str:
    """The podman image holding the root filesystem (built once per recipe)."""
    return podman.derived_image(IMAGE_REPO, podman.base_image(),
                                podman.recipe(containerfile(packages)))


def export_rootfs(ref: str, dest: Path, paths: tuple[str, ...] = ()) -> None:
    """The image's files (or only `paths` in it) into dest, owners and modes kept."""
    container = podman.podman("create", ref, "/bin/true").strip()
    try:
        exported = subprocess.Popen(["podman", "export", container], env=podman.env(),
                                    stdout=subprocess.PIPE)
        _run("tar", "-C", str(dest), "--numeric-owner", "-xpf", "-", *paths,
             what=f"unpacking {ref}", stdin=exported.stdout)
        if exported.wait() != 0:
            raise ImageBuildError(f"podman export of {ref} failed")
    finally:
        podman.podman("rm", "-f", container, check=False)


def kernel_files(rootfs: Path) -> tuple[str, str]:
    """(vmlinuz-*, initrd.img-*) file names in rootfs/boot (exactly one kernel expected)."""
    kernels = sorted(p.name for p in (rootfs / "boot").glob("vmlinuz-*"))
    if len(kernels) != 1:
        raise ImageBuildError(f"expected one kernel in the image's /boot, found {kernels}")
    initrd = "initrd.img-" + kernels[0].removeprefix("vmlinuz-")
    if not (rootfs / "boot" / initrd).exists():
        raise ImageBuildError(f"the image's /boot has {kernels[0]} but no {initrd}")
    return kernels[0], initrd


def _customize(rootfs: Path, name: str, build: str, fs_uuid: str) -> None:
    kernel, initrd = kernel_files(rootfs)
    files = {**IMAGE_FILES, "etc/fstab": fstab(fs_uuid),
             "etc/racklift/image.json": marker(name, build),
             "boot/grub/grub.cfg": grub_config(name, build, fs_uuid, kernel, initrd)}
    for relative, content in files.items():
        path = rootfs / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)  # a symlink in the base must not redirect the write
        path.write_text(content)
    for relative in EXECUTABLE:
        (rootfs / relative).chmod(0o755)
    for relative, target in IMAGE_LINKS.items():
        path = rootfs / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        path.symlink_to(target)


def _grub_image(platform: str, config: Path, out: Path) -> bytes:
    modules = (*GRUB_MODULES, *GRUB_PLATFORM_MODULES[platform])
    _run("grub-mkimage", "-O", platform, "-d", str(GRUB_DIR / platform), "-c", str(config),
         "-p", "/boot/grub", "-o", str(out), *modules, what=f"grub-mkimage {platform}")
    return out.read_bytes()


def _write_at(disk: Path, offset: int, data: bytes) -> None:
    with disk.open("r+b") as f:
        f.seek(offset)
        f.write(data)


def _content_bytes(rootfs: Path) -> int:
    out = _run("du", "-sb", str(rootfs), what="measuring the root filesystem").stdout
    return int(out.split()[0])


def assemble(rootfs: Path, fs_uuid: str, disk: Path, work: Path) -> None:
    """A GPT disk in `disk` (BIOS boot, ESP, root) from the rootfs directory, no mounts."""
    root_bytes = root_size(_content_bytes(rootfs))
    with disk.open("wb") as f:
        f.truncate(disk_size(root_bytes))
    root_end = ROOT_START + root_bytes // SECTOR - 1
    _run("sgdisk", "--clear",
         f"--new=1:{BIOS_BOOT_START}:{ESP_START - 1}", "--typecode=1:EF02",
         "--change-name=1:bios-boot",
         f"--new=2:{ESP_START}:{ROOT_START - 1}", "--typecode=2:EF00", "--change-name=2:esp",
         f"--new=3:{ROOT_START}:{root_end}", "--typecode=3:8304", "--change-name=3:root",
         str(disk), what="partitioning")
    _run("mkfs.ext4", "-F", "-q", "-L", ROOT_LABEL, "-U", fs_uuid, "-d", str(rootfs),
         "-E", f"offset={ROOT_START * SECTOR}", str(disk), f"{root_bytes // 1024}k",
         what="making the root filesystem")
    config = work / "embed.cfg"
    config.write_text(grub_embedded_config(fs_uuid))
    core = _grub_image("i386-pc", config, work / "core.img")
    if len(core) > (ESP_START - BIOS_BOOT_START) * SECTOR:
        raise ImageBuildError(f"GRUB core.img is {len(core)} bytes: too big for the BIOS boot "
                              "partition")
    boot = (GRUB_DIR / "i386-pc" / "boot.img").read_bytes()
    _write_at(disk, 0, patch_boot_img(boot, BIOS_BOOT_START))
    _write_at(disk, BIOS_BOOT_START * SECTOR, patch_core_img(core, BIOS_BOOT_START))
    esp = work / "esp.img"
    with esp.open("wb") as f:
        f.truncate(ESP_MIB * MIB)
    _run("mkfs.vfat", "-n", "ESP", str(esp), what="making the ESP")
    efi = work / "BOOTX64.EFI"
    _grub_image("x86_64-efi", config, efi)
    _run("mmd", "-i", str(esp), "::/EFI", "::/EFI/BOOT", what="ESP directories")
    _run("mcopy", "-i", str(esp), str(efi), "::/EFI/BOOT/BOOTX64.EFI", what="ESP loader")
    _write_at(disk, ESP_START * SECTOR, esp.read_bytes())


def compress(raw: Path, out: Path, level: int = ZSTD_LEVEL) -> str:
    """zstd raw into out; returns the sha256 of the compressed bytes (what the ramdisk checks).
    A zstd frame holds no name or timestamp, and zstd's multithreaded output does not depend
    on the number of worker threads (-T0 is one per core; checked: -T1 and -T2 give the same
    bytes, only --single-thread differs), so the same disk, level and zstd give the same file."""
    _run("zstd", "-q", f"-{level}", "-T0", "--no-progress", "-f", str(raw), "-o", str(out),
         what="compressing the disk image")
    digest = hashlib.sha256()
    with out.open("rb") as f:
        while chunk := f.read(4 * MIB):
            digest.update(chunk)
    return digest.hexdigest()


def load(directory: Path, name: str, build: str, seconds: float, cached: bool) -> DiskImage:
    meta = json.loads((directory / "image.json").read_text())
    return DiskImage(name=name, build_id=build, directory=directory, sha256=meta["sha256"],
                     size=meta["size"], raw_size=meta["raw_size"], seconds=seconds,
                     cached=cached)


def image_dir(name: str = IMAGE_NAME, packages: tuple[str, ...] = PACKAGES) -> Path:
    return cache_dir() / "images" / f"{name}-{build_id(packages)}"


def build(name: str = IMAGE_NAME, packages: tuple[str, ...] = PACKAGES) -> DiskImage:
    """The image for this recipe: from the cache, or built (a few minutes) and cached."""
    started = time.monotonic()
    build = build_id(packages)
    final = image_dir(name, packages)
    if (final / "image.json").exists():
        return load(final, name, build, time.monotonic() - started, cached=True)
    with cache_lock(f"disk-image-{final.name}"):
        cached = (final / "image.json").exists()  # built by another process meanwhile
        if not cached:
            _build(name, build, packages, final)
    return load(final, name, build, time.monotonic() - started, cached=cached)


def _build(name: str, build: str, packages: tuple[str, ...], final: Path) -> None:
    ref = rootfs_image(packages)
    fs_uuid = root_uuid(build)
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final.parent, prefix=f".{name}-") as tmp:
        work = Path(tmp)
        rootfs = work / "rootfs"
        rootfs.mkdir()
        export_rootfs(ref, rootfs)
        _customize(rootfs, name, build, fs_uuid)
        raw = work / "disk.raw"
        assemble(rootfs, fs_uuid, raw, work)
        out = work / "out"
        out.mkdir()
        sha = compress(raw, out / IMAGE_FILE)
        (out / f"{IMAGE_FILE}.sha256").write_text(f"{sha}  {IMAGE_FILE}\n")
        meta = {"name": name, "build_id": build, "sha256": sha,
                "size": (out / IMAGE_FILE).stat().st_size, "raw_size": raw.stat().st_size,
                "root_uuid": fs_uuid, "kernel": kernel_files(rootfs)[0], "rootfs_image": ref}
        (out / "image.json").write_text(json.dumps(meta, indent=2) + "\n")
        os.replace(out, final)  # complete or absent: image.json is written last, inside out/
