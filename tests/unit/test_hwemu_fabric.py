"""ibnetdiscover as the lab emulates it (src/racklift/lab/hwemu/fabric.py): the fabric map, read by
racklift's parser, shows each of the host's cabled links from both ends, at NDR. One of the
emulator's test files, one per module of src/racklift/lab/hwemu, named test_hwemu_<module>.py."""

from __future__ import annotations

import hwemu_support

from racklift.facts.parsers.ibnetdiscover import parse_ibnetdiscover
from racklift.lab import hwemu

profile = hwemu_support.profile


def test_the_fabric_map_shows_each_link_from_both_ends(profile: hwemu.Profile) -> None:
    links = parse_ibnetdiscover(hwemu.ibnetdiscover(profile))
    ca_side = {(link.node_guid, link.peer_desc, link.peer_port) for link in links
               if link.node_type == "ca"}
    switch_side = {(link.peer_guid, link.node_desc, link.port) for link in links
                   if link.node_type == "switch"}
    assert ca_side == switch_side
    assert len(ca_side) == 8 and {link.width + link.speed for link in links} == {"4xNDR"}
    assert {link.peer_desc for link in links if link.node_type == "switch"} == {
        f"gpu-a01 mlx5_{i}" for i in range(8)}
