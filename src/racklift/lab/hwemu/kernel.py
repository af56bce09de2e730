"""``dmesg``, and the sysfs tree (``/sys/class/infiniband``) a profile renders."""

from __future__ import annotations

import os
import shutil

from .command import ToolExit
from .infiniband import _IB_PHYS, _IB_STATE, _IB_STATE_SYSFS, _guid_colon, _ib_rate_sysfs
from .profile import Profile


def _record(entry: str) -> str:
    """One kernel message as dmesg prints it: ``[%5d.%06d] message``; the lines of a message
    printed with line breaks under its first, indented past the timestamp (the real
    three-line NVRM message, dmesg_nvrm-fallen-off-bus-3-lines_open-570.158.01.txt)."""
    first, *more = entry.split("\n")
    indent = " " * len(first.partition("] ")[0] + "] ")
    return "".join(line + "\n" for line in (first, *(indent + line for line in more)))


def dmesg(p: Profile) -> str:
    """``dmesg``: the kernel ring buffer, one record each."""
    return "".join(map(_record, p.kernel_log))


def sysfs_tree(p: Profile) -> dict[str, str]:
    """Relative path under a sysfs root -> file content (real sysfs value formats)."""
    tree: dict[str, str] = {}
    for h in p.hcas:
        base = f"class/infiniband/{h.ca}"
        state = _IB_STATE.get(h.state, 1)
        phys = _IB_PHYS.get(h.phys_state, 3)
        port = f"{base}/ports/{h.port}"
        tree.update({
            f"{base}/fw_ver": h.fw_ver,
            f"{base}/node_guid": _guid_colon(h.node_guid),
            f"{base}/sys_image_guid": _guid_colon(h.sys_image_guid),
            f"{base}/hca_type": h.ca_type,
            f"{base}/board_id": h.board_id,
            f"{base}/hw_rev": f"0x{int(h.hw_ver, 0):x}",
            f"{base}/node_type": "1: CA",
            f"{port}/state": f"{state}: {_IB_STATE_SYSFS[state]}",
            f"{port}/phys_state": f"{phys}: {h.phys_state}",
            f"{port}/rate": _ib_rate_sysfs(h.rate),
            f"{port}/link_layer": h.link_layer,
            f"{port}/lid": f"0x{h.base_lid:x}",
            f"{port}/sm_lid": f"0x{h.sm_lid:x}",
            f"{port}/lid_mask_count": str(h.lmc),
            f"{port}/cap_mask": h.capability_mask,
            f"{port}/gids/0": "fe80:0000:0000:0000:" + _guid_colon(h.port_guid),
        })
    s = p.system
    dmi = "devices/virtual/dmi/id"
    tree.update({
        f"{dmi}/sys_vendor": s.vendor,
        f"{dmi}/product_name": s.product,
        f"{dmi}/product_version": s.version,
        f"{dmi}/product_serial": s.serial,
        f"{dmi}/product_uuid": s.uuid,
        f"{dmi}/product_sku": s.sku,
        f"{dmi}/product_family": s.family,
        f"{dmi}/bios_vendor": s.bios_vendor,
        f"{dmi}/bios_version": s.bios_version,
        f"{dmi}/bios_date": s.bios_date,
        f"{dmi}/board_vendor": s.board_vendor,
        f"{dmi}/board_name": s.board_name,
        f"{dmi}/board_version": s.board_version,
        f"{dmi}/board_serial": s.board_serial,
    })
    return {path: value + "\n" for path, value in tree.items()}


SYSFS_MANAGED_DIRS = ("class/infiniband", "devices/virtual/dmi/id")


def write_sysfs(p: Profile, root: str) -> list[str]:
    """Write :func:`sysfs_tree` under ``root``; stale files in the managed dirs go first."""
    for rel in SYSFS_MANAGED_DIRS:
        target = os.path.join(root, rel)
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        elif os.path.lexists(target):
            os.unlink(target)
    written = []
    for rel, content in sorted(sysfs_tree(p).items()):
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(content)
        written.append(path)
    return written


def cli_dmesg(p: Profile, args: list[str]) -> str:
    for a in args:
        if a in ("--nopager", "-P"):
            continue
        if a.startswith("--"):
            msg = f"dmesg: unrecognized option '{a}'\n"
        else:
            msg = f"dmesg: invalid option -- '{a.lstrip('-')[:1]}'\n"
        raise ToolExit(1, "", msg + "Try 'dmesg --help' for more information.\n")
    return dmesg(p)
