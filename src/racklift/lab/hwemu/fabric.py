"""``ibnetdiscover``: the InfiniBand fabric map as this host's ports see it: each leaf switch
its HCAs are cabled to (with those ports), then each CA, in the layout of the real NDR
Quantum-2 capture in tests/fixtures/real. The rest of the fabric is not emulated."""

from __future__ import annotations

import hashlib

from .command import ToolExit
from .profile import HCAPort, Profile

SWITCH_LID_BASE = 70


def switch_guid(name: str) -> str:
    """A switch's node GUID, made from its name so every lab host agrees on it."""
    return "0x2c5eab03" + hashlib.sha256(name.encode()).hexdigest()[:8]


def switch_desc(name: str) -> str:
    return f"MF0;{name}:MQM9700/U1"


def _hex(guid: str) -> str:
    return guid.removeprefix("0x")


def ibnetdiscover(p: Profile, generated: str = "Tue Dec  1 09:00:00 2026") -> str:
    cabled = [h for h in sorted(p.hcas, key=lambda h: h.ca) if h.peer_switch]
    switches = sorted({h.peer_switch for h in cabled})
    lid = {name: SWITCH_LID_BASE + n for n, name in enumerate(switches)}
    first = _hex(sorted(p.hcas, key=lambda h: h.ca)[0].port_guid) if p.hcas else "0" * 16
    lines = ["#", f"# Topology file: generated on {generated}", "#",
             f"# Initiated from node {first} port {first}", ""]
    for name in switches:
        guid = switch_guid(name)
        lines += ["vendid=0x2c9", "devid=0xd2f2", f"sysimgguid={guid}",
                  f"switchguid={guid}({_hex(guid)})",
                  f'Switch\t65 "S-{_hex(guid)}"\t\t# "{switch_desc(name)}" enhanced port 0 '
                  f"lid {lid[name]} lmc 0"]
        for h in sorted((h for h in cabled if h.peer_switch == name), key=lambda h: h.peer_port):
            lines.append(f'[{h.peer_port}]\t"H-{_hex(h.node_guid)}"[{h.port}]'
                         f'({_hex(h.port_guid)}) \t\t# "{p.hostname} {h.ca}" lid {h.base_lid} '
                         f"{h.link_width}{h.link_speed}")
        lines.append("")
    for h in sorted(p.hcas, key=lambda h: h.ca):
        lines += ["vendid=0x2c9", "devid=0x1021", f"sysimgguid={h.sys_image_guid}",
                  f"caguid={h.node_guid}", f'Ca\t1 "H-{_hex(h.node_guid)}"\t\t# "{p.hostname} '
                  f'{h.ca}"']
        if h.peer_switch:
            lines.append(_ca_port(h, lid[h.peer_switch]))
        lines.append("")
    return "\n".join(lines) + "\n"


def _ca_port(h: HCAPort, switch_lid: int) -> str:
    return (f'[{h.port}]({_hex(h.port_guid)}) \t"S-{_hex(switch_guid(h.peer_switch))}"'
            f'[{h.peer_port}]\t\t# lid {h.base_lid} lmc {h.lmc} "{switch_desc(h.peer_switch)}" '
            f"lid {switch_lid} {h.link_width}{h.link_speed}")


def cli_ibnetdiscover(p: Profile, args: list[str]) -> str:
    if args:
        raise ToolExit(1, "", "ibnetdiscover: the lab emulates the plain map only, not "
                              f"{args[0]}\n")
    return ibnetdiscover(p)
