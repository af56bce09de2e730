"""The image builders' pure parts: the disk image's build id is its recipe, the deploy
ramdisk's kernel modules load dependencies first, and its initramfs is a valid newc archive."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import yaml

from racklift.imaging import diskimage, ramdisk
from racklift.lab import images
from racklift.paths import REPO_ROOT


def test_build_id_is_the_recipe() -> None:
    assert diskimage.build_id() == diskimage.build_id(diskimage.PACKAGES)
    assert diskimage.build_id((*diskimage.PACKAGES, "jq")) != diskimage.build_id()
    assert re.fullmatch(r"[0-9a-f]{16}", diskimage.build_id())


def _role_yaml(role: str, name: str = "defaults/main.yml") -> dict:
    return yaml.safe_load((REPO_ROOT / "roles" / role / name).read_text())


def test_the_image_holds_what_the_node_roles_install_from_debian() -> None:
    """The golden part of the image is, per node role, exactly the Debian packages that role
    installs with its defaults on Debian 12 (chrony is the base_os task's own), so a role that
    gains a package cannot leave every host downloading it again unnoticed."""
    base, ofed = _role_yaml("base_os"), _role_yaml("ofed")
    runtime = _role_yaml("container_runtime")
    engine = _role_yaml("container_runtime", "vars/Debian-12.yml")[
        "__container_runtime_engine_packages"][runtime["container_runtime_engine"]]
    assert ofed["ofed_source"] == "inbox" and base["base_os_lldp"] is True
    installed = {
        "base_os": {"chrony", "lldpd", *base["base_os_packages"]},
        "ofed": {*ofed["ofed_inbox_packages"], *ofed["ofed_firmware_tools"]},
        "container_runtime": {*runtime["container_runtime_apparmor_packages"], *engine}}
    assert "chrony" in (REPO_ROOT / "roles/base_os/tasks/Debian.yml").read_text()
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
    for unit in ("lldpd", "containerd", "docker"):
        assert re.search(rf"name: {unit}\n\s+enabled: true", tasks) or \
            re.search(rf"{unit} enabled and running", tasks), unit


def test_the_lab_hosts_hold_their_roles_share() -> None:
    group_vars = yaml.safe_load(
        (REPO_ROOT / "inventory/group_vars/tag_racklift_lab_host.yml").read_text())
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
