"""The image builders' pure parts: the disk image's build id is its recipe, the image is zstd,
the deploy ramdisk's kernel modules load dependencies first, its initramfs is a valid newc
archive and carries zstd with the libraries it loads."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from racklift.imaging import deploy_data, diskimage, ramdisk
from racklift.lab import images
from racklift.lab.sources import LAB_SOURCE
from racklift.paths import REPO_ROOT


def test_build_id_is_the_recipe() -> None:
    assert diskimage.build_id() == diskimage.build_id(diskimage.PACKAGES)
    assert diskimage.build_id((*diskimage.PACKAGES, "jq")) != diskimage.build_id()
    assert re.fullmatch(r"[0-9a-f]{16}", diskimage.build_id())


def _role_yaml(role: str, name: str = "defaults/main.yml") -> dict:
    return yaml.safe_load((REPO_ROOT / "roles" / role / name).read_text())


def test_the_image_holds_what_the_node_roles_install_from_debian() -> None:
    """The golden part of the image is, per node role, exactly the Debian packages that role
    installs with its defaults on Debian 12 (chrony and python3-apt are base_os's own), so a
    role that gains a package cannot leave every host downloading it again unnoticed."""
    base, ofed = _role_yaml("base_os"), _role_yaml("ofed")
    runtime = _role_yaml("container_runtime")
    engine = _role_yaml("container_runtime", "vars/Debian-12.yml")[
        "__container_runtime_engine_packages"][runtime["container_runtime_engine"]]
    assert ofed["ofed_source"] == "inbox" and base["base_os_lldp"] is True
    installed = {
        "base_os": {"chrony", "python3-apt", "lldpd", *base["base_os_packages"]},
        "ofed": {*ofed["ofed_inbox_packages"], *ofed["ofed_firmware_tools"]},
        "container_runtime": {*runtime["container_runtime_apparmor_packages"], *engine}}
    assert "['chrony', 'python3-apt']" in (REPO_ROOT / "roles/base_os/vars/main.yml").read_text()
    golden = {role: set(packages) for role, packages in diskimage.NODE_ROLE_PACKAGES.items()}
    assert golden == {role: names - set(diskimage.BASE_PACKAGES)
                      for role, names in installed.items()}
    assert set(diskimage.PACKAGES) >= set().union(*installed.values())
    assert f"install -y -qq --no-install-recommends {' '.join(diskimage.PACKAGES)} " in \
        diskimage.containerfile()
    assert "/var/lib/apt/lists" not in diskimage.containerfile()  # the lists stay


def test_the_node_roles_services_stay_off_until_configured() -> None:
    """The roles enable and start each (base_os: chrony, lldpd; container_runtime: containerd,
    docker, whose unit requires its socket); an image without them disables nothing."""
    assert " && systemctl disable chrony.service lldpd.service containerd.service " \
           "docker.service docker.socket \\\n" in diskimage.containerfile()
    assert "systemctl disable" not in diskimage.containerfile(diskimage.BASE_PACKAGES)
    tasks = "\n".join(path.read_text() for path in (REPO_ROOT / "roles").glob(
        "*/tasks/*.yml"))
    for unit in ("containerd", "docker"):
        assert re.search(rf"{unit} enabled and running", tasks, re.IGNORECASE), unit
    # base_os enables and starts its services in one run, lldpd among them where asked.
    assert "systemctl enable --quiet \"$unit\"" in tasks
    assert "for unit in {{ __base_os_services | join(' ') }}" in tasks
    assert "(['lldpd'] if base_os_lldp | bool else [])" in \
        (REPO_ROOT / "roles/base_os/vars/main.yml").read_text()


def test_the_lab_hosts_hold_their_roles_share() -> None:
    group_vars = yaml.safe_load(
        (LAB_SOURCE.parent / "group_vars/tag_racklift_lab_host.yml").read_text())
    assert tuple(group_vars["racklift_roles"]) == images.LAB_HOST_ROLES
    text = images.node_containerfile()
    assert "docker.io" not in text  # the lab's containers run no container runtime role
    assert " ".join(diskimage.node_role_packages(("base_os", "ofed"))) in text


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


MIB = 1024 * 1024
ZSTD = shutil.which("zstd")
needs_zstd = pytest.mark.skipif(not ZSTD, reason="needs zstd (scripts/bootstrap installs it)")
LDD = """\
\tlinux-vdso.so.1 (0x00007ffd0b5f2000)
\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f97548b0000)
\tliblzma.so.5 => /lib/x86_64-linux-gnu/liblzma.so.5 (0x00007f9754881000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f9754679000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f9754a1b000)
"""


def test_the_deploy_data_names_the_file_the_image_build_writes() -> None:
    image = diskimage.DiskImage("debian12", "0123456789abcdef", Path("/cache/x"), "ab" * 32,
                                size=1, raw_size=2, seconds=0, cached=True)
    artifact = deploy_data.ImageArtifact(image.name, image.build_id, image.sha256)
    assert artifact.url("http://10.90.0.1/") == f"http://10.90.0.1/{image.url_path}"
    assert image.path == Path("/cache/x/disk.raw.zst")
    assert image.url_path == "images/debian12/0123456789abcdef/disk.raw.zst"
    assert deploy_data.IMAGE_FORMAT == "raw.zst"


@needs_zstd
def test_the_image_is_zstd_and_the_same_for_the_same_disk(tmp_path) -> None:
    raw = tmp_path / "disk.raw"
    raw.write_bytes(bytes(range(256)) * 4096 + b"\0" * (4 * MIB) + b"racklift\n" * 100000)
    first, second = tmp_path / "a.zst", tmp_path / "b.zst"
    digest = diskimage.compress(raw, first)
    assert digest == diskimage.compress(raw, second)
    assert first.read_bytes() == second.read_bytes()
    assert digest == hashlib.sha256(first.read_bytes()).hexdigest()  # of the compressed bytes
    assert first.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"  # a zstd frame
    assert first.stat().st_size < raw.stat().st_size // 10
    back = subprocess.run(["zstd", "-d", "-c", "-q", str(first)], capture_output=True,
                          check=True).stdout
    assert back == raw.read_bytes()
    # The level is the one chosen; another level gives other bytes (so the test could fail).
    assert diskimage.compress(raw, tmp_path / "c.zst", level=1) != digest


def test_a_build_host_without_zstd_is_told_its_package(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(diskimage.ImageBuildError, match="install the Debian package zstd"):
        ramdisk.zstd_path()
    raw = tmp_path / "disk.raw"
    raw.write_bytes(b"\0" * 4096)
    with pytest.raises(diskimage.ImageBuildError, match="install the Debian package zstd"):
        diskimage.compress(raw, tmp_path / "disk.raw.zst")


def test_ldd_output_names_the_libraries_and_the_loader() -> None:
    assert ramdisk.parse_ldd(LDD) == ["/lib/x86_64-linux-gnu/libz.so.1",
                                      "/lib/x86_64-linux-gnu/liblzma.so.5",
                                      "/lib/x86_64-linux-gnu/libc.so.6",
                                      "/lib64/ld-linux-x86-64.so.2"]
    # Older glibc prints the vDSO with an empty target: no file to carry.
    assert ramdisk.parse_ldd("\tlinux-vdso.so.1 =>  (0x00007ffd0b5f2000)\n"
                             "\tlibc.so.6 => /lib/libc.so.6 (0x00007f9754679000)\n") == \
        ["/lib/libc.so.6"]
    # ld.so --list names the loader with where it found it: carried at the path programs ask.
    assert ramdisk.parse_ldd("\t/lib64/ld-linux-x86-64.so.2 => "
                             "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 (0x00007f9754a1b000)") \
        == ["/lib64/ld-linux-x86-64.so.2"]
    assert ramdisk.parse_ldd("\tnot a dynamic executable\n") == []
    assert ramdisk.parse_ldd("\tstatically linked\n") == []
    with pytest.raises(diskimage.ImageBuildError, match=r"/usr/bin/zstd needs liblz4\.so\.1"):
        ramdisk.parse_ldd(LDD + "\tliblz4.so.1 => not found\n", "/usr/bin/zstd")


def test_carried_libraries_keep_their_paths_and_their_targets_content(tmp_path,
                                                                      monkeypatch) -> None:
    real = tmp_path / "libz.so.1.2.13"
    real.write_bytes(b"\x7fELF libz")
    link = tmp_path / "lib" / "x86_64-linux-gnu" / "libz.so.1"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    binary = tmp_path / "zstd"
    binary.write_bytes(b"\x7fELF zstd")
    monkeypatch.setattr(ramdisk, "shared_libraries", lambda _: [str(link)])
    assert ramdisk.executable_entries(binary, "bin/zstd") == [
        ("bin/zstd", 0o100755, b"\x7fELF zstd"),
        (str(link).lstrip("/"), 0o100755, b"\x7fELF libz")]  # a file, not the link
    # The ramdisk's build id is its recipe: a changed library is a new ramdisk.
    monkeypatch.setattr(ramdisk, "zstd_path", lambda: binary)
    if ramdisk.BUSYBOX.exists():
        ids = [ramdisk.build_id("0123456789abcdef")]
        real.write_bytes(b"\x7fELF libz 1.3")
        ids.append(ramdisk.build_id("0123456789abcdef"))
        binary.write_bytes(b"\x7fELF zstd 1.5.6")
        ids.append(ramdisk.build_id("0123456789abcdef"))
        assert len(set(ids)) == 3


@needs_zstd
@pytest.mark.skipif(not ramdisk.BUSYBOX.exists(), reason="needs busybox-static")
def test_the_initramfs_carries_a_zstd_that_runs(tmp_path) -> None:
    """The archive's zstd loads only libraries from the archive (its own loader, with the
    directories the libraries are in and no ld.so.cache), and decompresses the image's format."""
    entries = ramdisk.initramfs_entries(tmp_path / "modules", [])
    names = [name for name, _, _ in entries]
    for index, name in enumerate(names):  # the kernel unpacks in order: directories first
        parent = name.rpartition("/")[0]
        assert not parent or parent in names[:index], name
    libraries = ramdisk.shared_libraries(ramdisk.zstd_path())
    assert libraries and all(path.lstrip("/") in names for path in libraries)
    root = tmp_path / "root"
    root.mkdir()
    subprocess.run(["cpio", "-idm", "--quiet"], input=ramdisk.cpio_newc(entries), cwd=root,
                   check=True)
    (loader,) = [p for p in libraries if Path(p).name.startswith("ld-")]
    directories = sorted({str(root / Path(p).parent.relative_to("/")) for p in libraries})
    run = [str(root / loader.lstrip("/")), "--inhibit-cache", "--library-path",
           ":".join(directories)]
    listed = subprocess.run([*run, "--list", str(root / "bin" / "zstd")], capture_output=True,
                            text=True, check=True).stdout
    loaded = [p for p in ramdisk.parse_ldd(listed) if p != loader]
    assert loaded and all(p.startswith(f"{root}/") for p in loaded), listed
    raw = tmp_path / "disk.raw"
    raw.write_bytes(b"racklift\n" * 100000)
    diskimage.compress(raw, tmp_path / "disk.raw.zst")
    back = subprocess.run([*run, str(root / "bin" / "zstd"), "-d", "-c", "-q",
                           str(tmp_path / "disk.raw.zst")], capture_output=True, check=True)
    assert back.stdout == raw.read_bytes()
