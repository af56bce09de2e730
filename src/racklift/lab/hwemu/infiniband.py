"""``ibstat`` and ``ibv_devinfo``: infiniband-diags / rdma-core layouts for ConnectX-7."""

from __future__ import annotations

import os

from .command import ToolExit
from .profile import HCAPort, Profile, _hca

_IB_STATE = {"Down": 1, "Initializing": 2, "Armed": 3, "Active": 4}


_IB_STATE_SYSFS = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE"}


_IBV_STATE = {1: "PORT_DOWN", 2: "PORT_INIT", 3: "PORT_ARMED", 4: "PORT_ACTIVE"}


_IB_PHYS = {"Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4,
            "LinkUp": 5, "LinkErrorRecovery": 6, "Phy Test": 7}


_IB_RATE_NAME = {10: "4X SDR", 20: "4X DDR", 40: "4X QDR", 56: "4X FDR", 100: "4X EDR",
                 200: "4X HDR", 400: "4X NDR", 800: "4X XDR"}


_MTU_ENUM = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}


def _ca_block(h: HCAPort) -> list[str]:
    return [
        f"CA '{h.ca}'",
        f"\tCA type: {h.ca_type}",
        "\tNumber of ports: 1",
        f"\tFirmware version: {h.fw_ver}",
        f"\tHardware version: {h.hw_ver}",
        f"\tNode GUID: {h.node_guid}",
        f"\tSystem image GUID: {h.sys_image_guid}",
    ]


def _port_block(h: HCAPort, alone: bool) -> list[str]:
    hdr, pre = ("", "") if alone else ("\t", "\t\t")
    return [
        f"{hdr}Port {h.port}:",
        f"{pre}State: {h.state}",
        f"{pre}Physical state: {h.phys_state}",
        f"{pre}Rate: {h.rate}",
        f"{pre}Base lid: {h.base_lid}",
        f"{pre}LMC: {h.lmc}",
        f"{pre}SM lid: {h.sm_lid}",
        f"{pre}Capability mask: {h.capability_mask}",
        f"{pre}Port GUID: {h.port_guid}",
        f"{pre}Link layer: {h.link_layer}",
    ]


def _sorted_hcas(p: Profile) -> list[HCAPort]:
    return sorted(p.hcas, key=lambda h: h.ca)  # ibstat lists CAs in name order


def _listed(p: Profile) -> list[str]:
    """The CA names ibstat lists before reading each, in name order: a vanishing one too."""
    return sorted([h.ca for h in p.hcas] + p.vanishing_cas)


def _unreadable(p: Profile) -> str | None:
    """The first CA ibstat lists and cannot read (it panics there), if any."""
    return next((ca for ca in _listed(p) if _hca(p, ca) is None), None)


def _ibpanic(ca: str) -> str:
    return (f"ibpanic: [{os.getpid()}] main: stat of IB device '{ca}' failed: No such file or "
            "directory\n")


def ibstat(p: Profile, ca: str | None = None, port: int | None = None) -> str:
    """``ibstat`` / ``ibstat CA`` / ``ibstat CA PORT``: what it prints on stdout (all CAs: those
    before one it cannot read, where cli_ibstat panics); unknown CA -> LookupError."""
    if ca is None:
        lines: list[str] = []
        for name in _listed(p):
            h = _hca(p, name)
            if h is None:
                break
            lines += _ca_block(h) + _port_block(h, alone=False)
        return "\n".join(lines) + "\n" if lines else ""
    h = _hca(p, ca)
    if h is None or (port is not None and port != h.port):
        raise LookupError(ca)
    if port is not None:
        return "\n".join(_port_block(h, alone=True)) + "\n"
    return "\n".join(_ca_block(h) + _port_block(h, alone=False)) + "\n"


def _guid_colon(guid: str) -> str:
    h = guid[2:] if guid.startswith("0x") else guid
    h = h.zfill(16)
    return ":".join(h[i : i + 4] for i in range(0, 16, 4))


def ibv_devinfo(p: Profile, device: str | None = None) -> str:
    """``ibv_devinfo`` / ``ibv_devinfo -d DEV``; unknown device -> LookupError."""
    hcas = _sorted_hcas(p)
    if device is not None:
        hcas = [h for h in hcas if h.ca == device]
        if not hcas:
            raise LookupError(device)
    lines: list[str] = []
    for h in hcas:
        state = _IB_STATE.get(h.state, 1)
        lines += [
            f"hca_id:\t{h.ca}",
            "\ttransport:\t\t\tInfiniBand (0)",
            f"\tfw_ver:\t\t\t\t{h.fw_ver}",
            f"\tnode_guid:\t\t\t{_guid_colon(h.node_guid)}",
            f"\tsys_image_guid:\t\t\t{_guid_colon(h.sys_image_guid)}",
            f"\tvendor_id:\t\t\t{h.vendor_id}",
            f"\tvendor_part_id:\t\t\t{h.vendor_part_id}",
            f"\thw_ver:\t\t\t\t0x{int(h.hw_ver, 0):X}",
            f"\tboard_id:\t\t\t{h.board_id}",
            "\tphys_port_cnt:\t\t\t1",
            f"\t\tport:\t{h.port}",
            f"\t\t\tstate:\t\t\t{_IBV_STATE[state]} ({state})",
            f"\t\t\tmax_mtu:\t\t{h.max_mtu} ({_MTU_ENUM[h.max_mtu]})",
            f"\t\t\tactive_mtu:\t\t{h.active_mtu} ({_MTU_ENUM[h.active_mtu]})",
            f"\t\t\tsm_lid:\t\t\t{h.sm_lid}",
            f"\t\t\tport_lid:\t\t{h.base_lid}",
            f"\t\t\tport_lmc:\t\t0x{h.lmc:02x}",
            f"\t\t\tlink_layer:\t\t{h.link_layer}",
            "",
        ]
    return "\n".join(lines) + "\n"


def _ib_rate_sysfs(rate: int) -> str:
    name = _IB_RATE_NAME.get(rate)
    return f"{rate} Gb/sec ({name})" if name else f"{rate} Gb/sec"


def cli_ibstat(p: Profile, args: list[str]) -> str:
    if args and args[0] in ("-l", "--list_of_cas"):
        return "".join(ca + "\n" for ca in _listed(p))
    if args and args[0] in ("-p", "--port_list"):
        return "".join(h.port_guid + "\n" for h in _sorted_hcas(p))
    if any(a.startswith("-") for a in args) or len(args) > 2:
        raise ToolExit(255, "", "Usage: ibstat [-d(ebug) -l(ist_of_cas) -s(hort) -p(ort_list) "
                            "-V(ersion)] <ca_name> [portnum]\n")
    ca = args[0] if args else None
    port = int(args[1]) if len(args) > 1 and args[1].isdigit() else None
    try:
        output = ibstat(p, ca, port)
    except LookupError as exc:
        raise ToolExit(255, "", _ibpanic(exc.args[0])) from None
    # The real capture (ibstat_a100-azure_8-cas_ibpanic-mlx5_8_exit-255.txt): the CAs it read,
    # then the panic on the one it could not.
    if ca is None and (gone := _unreadable(p)) is not None:
        raise ToolExit(255, output, _ibpanic(gone))
    return output


def cli_ibv_devinfo(p: Profile, args: list[str]) -> str:
    device: str | None = None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-l", "--list"):
            names = [h.ca for h in _sorted_hcas(p)]
            return f"{len(names)} HCAs found:\n" + "".join(f"\t{n}\n" for n in names)
        if a in ("-d", "--ib-dev") or a.startswith("--ib-dev="):
            if "=" in a:
                device, i = a.split("=", 1)[1], i + 1
            elif i + 1 < len(args):
                device, i = args[i + 1], i + 2
            else:
                raise ToolExit(1, "", "ibv_devinfo: option requires an argument -- 'd'\n")
        else:
            raise ToolExit(1, "", f"ibv_devinfo: unrecognized option '{a}'\n")
    try:
        return ibv_devinfo(p, device)
    except LookupError:
        raise ToolExit(255, "", f"IB device '{device}' wasn't found\n") from None
