"""ibstat and ibv_devinfo as the lab emulates them (src/racklift/lab/hwemu/infiniband.py): each
CA's and port's keys, indentation and values laid out as the real ConnectX-7 ibstat and
ConnectX-3 ibv_devinfo captures, one CA or port at a time, and an unknown CA. One of the
emulator's test files, one per module of src/racklift/lab/hwemu, named test_hwemu_<module>.py."""

from __future__ import annotations

import re

import hwemu_support
import pytest
from hwemu_support import REAL

from racklift.lab import hwemu

profile = hwemu_support.profile


IBSTAT = REAL / "ibstat_h100-node_cx7-ib_cx6-eth-down.txt"
IBV_DEVINFO = REAL / "ibv_devinfo_connectx3-mlx4_mlnx-ofed.txt"


def _ibstat_blocks(text: str) -> dict[str, list[str]]:
    blocks: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("CA '"):
            current = blocks.setdefault(line[4:-1], [])
            continue
        current.append(line.split(":")[0] + ":")  # indentation + key
    return blocks


def _ibv_blocks(text: str) -> dict[str, dict[str, list[str]]]:
    """hca_id -> {"hca": [keys], "port N": [keys]} with indentation kept."""
    out: dict[str, dict[str, list[str]]] = {}
    hca: dict[str, list[str]] = {}
    section: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        key = line.split(":")[0]
        if line.startswith("hca_id:"):
            hca = out.setdefault(line.split("\t")[-1], {})
            section = hca.setdefault("hca", [])
        elif key.strip() == "port":
            section = hca.setdefault("port " + line.split("\t")[-1], [])
        else:
            section.append(key)
    return out


# --------------------------------------------------------------------------- InfiniBand


def test_ibstat_structure_matches_real(profile: hwemu.Profile) -> None:
    real = _ibstat_blocks(IBSTAT.read_text())
    reference = real["mlx5_0"]  # a ConnectX-7 NDR InfiniBand port
    assert all(keys == reference for keys in real.values())
    mine_text = hwemu.ibstat(profile)
    mine = _ibstat_blocks(mine_text)
    assert list(mine) == [f"mlx5_{i}" for i in range(8)]
    assert all(keys == reference for keys in mine.values())
    real_ib = IBSTAT.read_text().split("CA 'mlx5_1'")[0]
    for text in (real_ib, mine_text):
        assert re.search(r"\tCA type: MT4129\n", text)
        assert re.search(r"\tNode GUID: 0x[0-9a-f]{16}\n", text)
        assert re.search(r"\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n", text)
        assert re.search(r"\t\tCapability mask: 0x[0-9a-f]{8}\n", text)
        assert re.search(r"\t\tLink layer: InfiniBand\n", text)
    single = hwemu.ibstat(profile, "mlx5_0")
    assert single == mine_text.split("CA 'mlx5_1'")[0]
    port_only = hwemu.ibstat(profile, "mlx5_0", 1).splitlines()
    assert port_only[0] == "Port 1:" and port_only[1] == "State: Active"
    with pytest.raises(LookupError):
        hwemu.ibstat(profile, "mlx5_9")


# "Device ports:" is printed by the MLNX_OFED ibv_devinfo of the capture; rdma-core's
# ibv_devinfo (Debian 12, current DOCA) does not print it - see SOURCES.md.
IBV_ONLY_IN_CAPTURE = {"\tDevice ports"}


def test_ibv_devinfo_structure_matches_real(profile: hwemu.Profile) -> None:
    real = _ibv_blocks(IBV_DEVINFO.read_text())
    ref_hca = [k for k in real["mlx4_1"]["hca"] if k not in IBV_ONLY_IN_CAPTURE]
    ref_port = real["mlx4_1"]["port 1"]
    assert real["mlx4_1"]["port 2"] == ref_port
    mine_text = hwemu.ibv_devinfo(profile)
    mine = _ibv_blocks(mine_text)
    assert list(mine) == [f"mlx5_{i}" for i in range(8)]
    for blocks in mine.values():
        assert blocks["hca"] == ref_hca
        assert blocks["port 1"] == ref_port
    assert re.search(r"\tnode_guid:\t\t\t946d:ae03:00[0-9a-f]{2}:[0-9a-f]{4}\n", mine_text)
    assert "\tvendor_part_id:\t\t\t4129\n" in mine_text
    assert "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tmax_mtu:\t\t4096 (5)\n" in mine_text
    assert "\t\t\tport_lmc:\t\t0x00\n\t\t\tlink_layer:\t\tInfiniBand\n\n" in mine_text
