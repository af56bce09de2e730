"""``ibstat`` and ``ibv_devinfo``: infiniband-diags / rdma-core layouts for ConnectX-7."""

from __future__ import annotations

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


def ibstat(p: Profile, ca: str | None = None, port: int | None = None) -> str:
    """``ibstat`` / ``ibstat CA`` / ``ibstat CA PORT``; unknown CA -> LookupError."""
    if ca is None:
        lines: list[str] = []
        for h in _sorted_hcas(p):
            lines += _ca_block(h) + _port_block(h, alone=False)
        return "\n".join(lines) + "\n"
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
