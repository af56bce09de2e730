"""The kernel's views as the lab emulates them (src/racklift/lab/hwemu/kernel.py): the sysfs tree
(InfiniBand ports and DMI ids) and writing it over a stale one, and dmesg in the real line
format with Xid 79 printed as the real driver prints it. One of the emulator's test files, one
per module of src/racklift/lab/hwemu, named test_hwemu_<module>.py."""

from __future__ import annotations

import re
from pathlib import Path

import hwemu_support
from hwemu_support import REAL, UUID_RE

from racklift.lab import hwemu

profile = hwemu_support.profile


DMESG_XID = REAL / "dmesg_xid79_hgx.txt"


# --------------------------------------------------------------------------- sysfs


def test_sysfs_tree_values(profile: hwemu.Profile) -> None:
    tree = hwemu.sysfs_tree(profile)
    port = "class/infiniband/mlx5_0/ports/1"
    assert tree[f"{port}/state"] == "4: ACTIVE\n"
    assert tree[f"{port}/phys_state"] == "5: LinkUp\n"
    assert tree[f"{port}/rate"] == "400 Gb/sec (4X NDR)\n"
    assert tree[f"{port}/link_layer"] == "InfiniBand\n"
    assert re.fullmatch(r"fe80(:0000){3}(:[0-9a-f]{4}){4}\n", tree[f"{port}/gids/0"])
    assert tree["class/infiniband/mlx5_0/fw_ver"] == "28.39.1002\n"
    assert tree["class/infiniband/mlx5_0/hca_type"] == "MT4129\n"
    guid = tree["class/infiniband/mlx5_0/node_guid"]
    assert re.fullmatch(r"([0-9a-f]{4}:){3}[0-9a-f]{4}\n", guid)
    assert tree["class/infiniband/mlx5_0/board_id"] == "MT_0000000838\n"
    dmi = "devices/virtual/dmi/id"
    assert tree[f"{dmi}/sys_vendor"] == "Supermicro\n"
    assert tree[f"{dmi}/product_name"] == "SYS-421GE-TNHR2-LCC\n"
    assert tree[f"{dmi}/product_serial"] == "S421GE0001X0001\n"
    assert re.fullmatch(r"[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}\n", tree[f"{dmi}/product_uuid"])
    for key in ("bios_version", "bios_vendor"):
        assert tree[f"{dmi}/{key}"].strip()


def test_write_sysfs_removes_stale_files(profile: hwemu.Profile, tmp_path: Path) -> None:
    stale = tmp_path / "class/infiniband/mlx5_9/ports/1/state"
    stale.parent.mkdir(parents=True)
    stale.write_text("4: ACTIVE\n")
    keep = tmp_path / "class/net/eth0/address"
    keep.parent.mkdir(parents=True)
    keep.write_text("aa:bb\n")
    hwemu.write_sysfs(profile, str(tmp_path))
    assert not stale.exists() and keep.exists()
    for rel, content in hwemu.sysfs_tree(profile).items():
        assert (tmp_path / rel).read_text() == content


# --------------------------------------------------------------------------- dmesg


def test_dmesg_format(profile: hwemu.Profile) -> None:
    lines = hwemu.dmesg(profile).splitlines()
    assert lines and all(re.match(r"\[ *\d+\.\d{6}\] \S", ln) for ln in lines)
    for line in DMESG_XID.read_text().splitlines():
        assert re.match(r"\[ *\d+\.\d{6}\] \S", line)  # the real format the regex encodes
    assert any(
        re.fullmatch(r"\[ *\d+\.\d{6}\] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  "
                     r"550\.127\.08  \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d UTC \d{4}", ln)
        for ln in lines
    )
    assert not any("Xid" in ln for ln in lines)


def test_xid_79_lines_follow_real_driver_output(profile: hwemu.Profile) -> None:
    p = hwemu.inject(profile, "xid-79")
    new = hwemu.dmesg(p).splitlines()[len(profile.kernel_log):]
    g = next(g for g in p.gpus if g.pci_bus_id == "00000000:9A:00.0")
    real = DMESG_XID.read_text().splitlines()[:5]
    real_uuid = re.search(UUID_RE, real[0]).group(0)
    expected = [
        re.sub(r"^\[[^]]*\] ", "", ln).replace("0000:91:00", "0000:9a:00")
        .replace("1653723052734", g.serial).replace(real_uuid, g.uuid)
        for ln in real
    ]
    assert [re.sub(r"^\[[^]]*\] ", "", ln) for ln in new] == expected
    assert re.fullmatch(r"\[ *\d+\.\d{6}\] NVRM: Xid \(PCI:0000:9a:00\): 79, pid=.*, "
                        r"GPU has fallen off the bus\.", new[2])
