"""InfiniBand HCAs and ports: ``ibstat``, ``ibv_devinfo`` and ``/sys/class/infiniband``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from racklift.facts.observed import HCAPortFacts
from racklift.facts.parsers.common import (
    ParseError,
    na,
    normalize_guid,
    shown,
    text_lines,
    to_float,
    to_int,
)

# Device ids of ConnectX virtual functions (SR-IOV), from the mlx5 driver's PCI table
# (drivers/net/ethernet/mellanox/mlx5/core/main.c, entries flagged MLX5_PCI_DEV_IS_VF).
# ibstat's "CA type" and ibv_devinfo's vendor_part_id are this id in decimal ("MT4126").
MLX_VF_DEVICE_IDS = {
    0x1012: "Connect-IB VF",
    0x1014: "ConnectX-4 VF",
    0x1016: "ConnectX-4 Lx VF",
    0x1018: "ConnectX-5 VF",
    0x101A: "ConnectX-5 Ex VF",
    0x101C: "ConnectX-6 VF",
    0x101E: "ConnectX family mlx5Gen VF (ConnectX-6 Dx/Lx, ConnectX-7, BlueField-2/3)",
    0xA2D3: "BlueField ConnectX-5 VF",
}

# IB PortInfo PortState / PortPhysicalState numbers, as ibstat names them.
_PORT_STATES = {1: "Down", 2: "Initializing", 3: "Armed", 4: "Active", 5: "ActiveDefer"}
_PHYS_STATES = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining",
                5: "LinkUp", 6: "LinkErrorRecovery", 7: "PhyTest"}


def _is_vf(ca_type: str | None) -> bool:
    if not ca_type:
        return False
    if "virtual function" in ca_type.lower():
        return True
    # A bounded number of ASCII digits: int() takes it as it is, and no longer one is a VF id.
    match = re.fullmatch(r"MT([0-9]{1,6})", ca_type.strip())
    return bool(match) and int(match.group(1)) in MLX_VF_DEVICE_IDS


def _state_name(value: str | None, names: dict[int, str]) -> str | None:
    """"4: ACTIVE" / "PORT_ACTIVE (4)" / "LINK_UP (5)" / "Active" -> the ibstat name."""
    text = na(value)
    if text is None:
        return None
    number = re.search(r"(?:^|\()([0-9]{1,3})(?:\)|:)", text)  # as in _is_vf
    if number and int(number.group(1)) in names:
        return names[int(number.group(1))]
    return text


class _PortBuilder:
    """Fields of one port as they are met; turned into HCAPortFacts at the end."""

    def __init__(self, ca: dict[str, Any], port: int) -> None:
        self.ca, self.port = ca, port
        self.fields: dict[str, Any] = {}

    def build(self) -> HCAPortFacts:
        f, ca = self.fields, self.ca
        return HCAPortFacts(
            ca=ca.get("name") or "",
            ca_type=ca.get("ca_type"),
            firmware=ca.get("firmware"),
            node_guid=normalize_guid(ca.get("node_guid")),
            port=self.port,
            state=_state_name(f.get("state"), _PORT_STATES),
            phys_state=_state_name(f.get("phys_state"), _PHYS_STATES),
            rate_gbps=f.get("rate"),
            link_layer=na(f.get("link_layer")),
            port_guid=normalize_guid(f.get("port_guid")),
            base_lid=f.get("base_lid"),
            is_vf=_is_vf(ca.get("ca_type")),
        )


_IBSTAT_CA = re.compile(r"^CA '([^']+)'\s*$")
_IBSTAT_PORT = re.compile(r"^Port ([0-9]+):\s*$")
_IBSTAT_CA_KEYS = {"CA type": "ca_type", "Firmware version": "firmware",
                   "Node GUID": "node_guid"}
_IBSTAT_PORT_KEYS = {"State": "state", "Physical state": "phys_state",
                     "Link layer": "link_layer", "Port GUID": "port_guid"}


def ibstat_failure(text: str) -> str | None:
    """ibstat's fatal error, when it printed one ("ibpanic: [pid] main: stat of IB device
    'mlx5_8' failed: No such file or directory"): it stops at the first CA it cannot read, after
    printing the ones before it."""
    return next((line.strip() for line in text_lines(text)
                 if line.strip().startswith("ibpanic:")), None)


def parse_ibstat(text: str, ca: str | None = None) -> list[HCAPortFacts]:
    """``ibstat`` (all CAs), ``ibstat CA`` or ``ibstat CA PORT`` (pass ``ca`` for the last).

    One :class:`HCAPortFacts` per port, Ethernet (RoCE) ports included; "Rate: 400" and
    "Rate: 400 (NDR)" both give 400. Output that ends in an ``ibpanic:`` (see
    :func:`ibstat_failure`) gives the ports printed before it; only a panic alone is an error.
    """
    current_ca: dict[str, Any] = {"name": ca}
    ports: list[_PortBuilder] = []
    port: _PortBuilder | None = None
    seen_ca = False
    for raw in text_lines(text):
        line = raw.strip()
        if line.startswith("ibpanic:"):
            if not ports and not seen_ca:
                raise ParseError("ibstat", line)
            break
        if m := _IBSTAT_CA.match(line):
            current_ca, port, seen_ca = {"name": m.group(1)}, None, True
            continue
        if m := _IBSTAT_PORT.match(line):
            port = _PortBuilder(current_ca, to_int(m.group(1), "ibstat", "port") or 0)
            ports.append(port)
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if port is None and key in _IBSTAT_CA_KEYS:
            current_ca[_IBSTAT_CA_KEYS[key]] = value
        elif port is not None and key in _IBSTAT_PORT_KEYS:
            port.fields[_IBSTAT_PORT_KEYS[key]] = value
        elif port is not None and key == "Rate":
            port.fields["rate"] = to_int(value, "ibstat", key)
        elif port is not None and key == "Base lid":
            port.fields["base_lid"] = to_int(value, "ibstat", key)
    if not ports and not seen_ca:
        raise ParseError("ibstat", "no \"CA '...'\" or \"Port N:\" lines")
    return [p.build() for p in ports]


_WIDTHS = {"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}
_KIND_IBV = "ibv_devinfo"


def _ibv_rate(fields: dict[str, str]) -> int | None:
    """``ibv_devinfo -v`` gives lanes and per-lane speed; plain ``ibv_devinfo`` gives neither."""
    width = re.match(r"\s*([0-9]+X)", fields.get("active_width", ""))
    speed = to_float(fields.get("active_speed"), _KIND_IBV, "active_speed")
    if width is None or speed is None or width.group(1) not in _WIDTHS:
        return None
    return round(_WIDTHS[width.group(1)] * speed)


def parse_ibv_devinfo(text: str) -> list[HCAPortFacts]:
    """``ibv_devinfo`` (or ``-v``): one :class:`HCAPortFacts` per port.

    "PORT_ACTIVE (4)" becomes "Active" as ibstat says it. Plain ibv_devinfo prints no rate
    and no port GUID (None); ``-v`` adds active_width/active_speed, and so a rate.
    """
    stripped = [ln.strip() for ln in text_lines(text)]
    if any(ln == "No IB devices found" for ln in stripped):
        return []
    cas: list[dict[str, Any]] = []
    ports: list[tuple[dict[str, Any], int, dict[str, str]]] = []
    for line in stripped:
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            cas.append({"name": value})
        elif not cas:
            continue
        elif key == "port":
            ports.append((cas[-1], to_int(value, _KIND_IBV, "port") or 0, {}))
        elif ports and ports[-1][0] is cas[-1]:
            ports[-1][2][key] = value
        elif key == "fw_ver":
            cas[-1]["firmware"] = value
        elif key == "node_guid":
            cas[-1]["node_guid"] = value
        elif key == "vendor_part_id" and re.fullmatch(r"[0-9]+", value):
            cas[-1]["ca_type"] = f"MT{value}"  # what ibstat calls "CA type"
    if not cas:
        raise ParseError(_KIND_IBV, "no \"hca_id:\" lines")
    result = []
    for ca, number, fields in ports:
        builder = _PortBuilder(ca, number)
        builder.fields = {
            "state": fields.get("state"),
            "phys_state": fields.get("phys_state"),
            "link_layer": fields.get("link_layer"),
            "rate": _ibv_rate(fields),
            "base_lid": to_int(fields.get("port_lid"), _KIND_IBV, "port_lid"),
        }
        result.append(builder.build())
    return result


_KIND_SYSFS = "sysfs-infiniband"


def _sysfs_rate(value: str | None) -> int | None:
    """"400 Gb/sec (4X NDR)" -> 400; "2.5 Gb/sec (1X SDR)" -> 2."""
    return to_int(value, _KIND_SYSFS, "rate")


def _sysfs_lid(value: str | None) -> int | None:
    """"0x1a" as sysfs prints it (a decimal also reads); a LID has 16 bits."""
    text = na(value)
    if text is None or not text.startswith("0x"):
        return to_int(text, _KIND_SYSFS, "lid")
    if not re.fullmatch(r"0x[0-9a-fA-F]{1,4}", text):
        raise ParseError(_KIND_SYSFS, f"lid: {shown(text)} is not a 16-bit LID")
    return int(text, 16)


def _gid_to_guid(gid: str | None) -> str | None:
    """The port GUID is the low 64 bits of GID 0 ("fe80:0000:0000:0000:946d:ae03:00cd:e72c")."""
    text = na(gid)
    if text is None:
        return None
    groups = text.split(":")
    return normalize_guid(":".join(groups[-4:])) if len(groups) == 8 else None


def parse_sysfs_infiniband(files: Mapping[str, str]) -> list[HCAPortFacts]:
    """Files under a sysfs root ("class/infiniband/mlx5_0/ports/1/state" -> "4: ACTIVE").

    Paths may carry any prefix before ``class/infiniband/`` ("/sys/...", a bundle dir).
    """
    cas: dict[str, dict[str, str]] = {}
    ports: dict[tuple[str, int], dict[str, str]] = {}
    for path, content in files.items():
        _, found, rel = path.replace("\\", "/").partition("class/infiniband/")
        if not found:
            continue
        parts, value = rel.strip("/").split("/"), content.strip()
        if len(parts) == 2:
            cas.setdefault(parts[0], {})[parts[1]] = value
        elif len(parts) >= 4 and parts[1] == "ports" and re.fullmatch(r"[0-9]+", parts[2]):
            attr = "/".join(parts[3:])
            number = to_int(parts[2], _KIND_SYSFS, f"{parts[0]} port") or 0
            ports.setdefault((parts[0], number), {})[attr] = value
    result = []
    for (name, number), attrs in sorted(ports.items()):
        ca_attrs = cas.get(name, {})
        ca = {"name": name, "ca_type": na(ca_attrs.get("hca_type")),
              "firmware": na(ca_attrs.get("fw_ver")), "node_guid": ca_attrs.get("node_guid")}
        builder = _PortBuilder(ca, number)
        builder.fields = {
            "state": attrs.get("state"),
            # "5: LinkUp": the name after the number is already ibstat's.
            "phys_state": (attrs.get("phys_state") or "").partition(":")[2].strip() or None,
            "link_layer": attrs.get("link_layer"),
            "rate": _sysfs_rate(attrs.get("rate")),
            "base_lid": _sysfs_lid(attrs.get("lid")),
            "port_guid": _gid_to_guid(attrs.get("gids/0")),
        }
        result.append(builder.build())
    return result
