"""``lldpctl``: the neighbours lldpd heard, per local interface, from ``-f json``, ``-f json0``
or ``-f keyvalue`` (what netbox-agent and many runbooks capture), the same facts from each.

json0 keeps one layout (every value a list of ``{"value": ...}``, interfaces a list with a
``name``). json collapses it (lldpd 0.9.7 and later): a one-element list becomes its element, an
object holding only ``value`` becomes the bare string, and an object with a ``name`` is keyed by
it, so interfaces are a list of one-key objects, or one object when there is one interface, and
a chassis with a system name is ``{"leaf01": {...}}``. keyvalue prints the same tree a value a
line, ``lldp.<interface>.<path>=<value>``: an id's type is the last part of its path
(``chassis.mac=``, ``port.ifname=``), a field that repeats (``chassis.mgmt-ip``) is a line each,
a value's line breaks are printed as they are (its next lines have no key), and each neighbour
of an interface begins at its ``via``. Formats follow the real captures in tests/fixtures/real
(Cumulus, SONiC, H3C, Palo Alto, Ubuntu lldpd, Cisco and Juniper neighbours) and lldpd's
writers (src/client/kv_writer.c).
"""

from __future__ import annotations

import re
from typing import Any

from racklift.facts.observed import LldpNeighbor
from racklift.facts.parsers.common import ParseError, load_json, shown, text_lines

KIND = "lldpctl -f json"
KEYVALUE = "lldpctl -f keyvalue"
MAX_NEIGHBORS = 1024
_SHORT = 256  # names and ids
_LONG = 4096  # descriptions (a Cisco IOS one is several lines)
_CHASSIS_FIELDS = frozenset({"id", "name", "descr", "mgmt-ip", "mgmt-iface", "capability",
                             "ttl"})
# keyvalue: what follows the interface in a key (lldpd's display.c), and the id types that end
# an id's path (lib/atoms: chassis_id_subtype_map, port_id_subtype_map).
_SECTIONS = ("via", "rid", "age", "chassis", "port", "vlan", "ppvid", "pi", "lldp-med",
             "unknown-tlvs")
_KEY = re.compile(rf"lldp\.([^=]{{1,{_SHORT}}}?)\.({'|'.join(_SECTIONS)})"
                  rf"((?:\.[^=]{{0,{_SHORT}}})?)=(.*)")
_ID_TYPES = frozenset({"ifname", "ifalias", "local", "mac", "ip", "unhandled"})
_KEPT = frozenset({"chassis.name", "chassis.descr", "chassis.mgmt-ip", "port.descr",
                   *(f"{part}.{kind}" for part in ("chassis", "port") for kind in _ID_TYPES)})


def _values(node: Any, field: str, limit: int) -> list[str]:
    """The strings of a field in either form: "x", ["x"], [{"value": "x"}], {"value": "x"}."""
    items = node if isinstance(node, list) else [node]
    out = []
    for item in items:
        value = item.get("value") if isinstance(item, dict) else item
        if not isinstance(value, str) or len(value) > limit:
            raise ParseError(KIND, f"{field}: {shown(str(value))} is no lldpd value")
        out.append(value)
    return out


def _one(node: Any, field: str, limit: int = _SHORT) -> str | None:
    if node is None:
        return None
    values = _values(node, field, limit)
    return values[0] if values else None


def _id(node: Any, field: str) -> tuple[str | None, str | None]:
    """An id, {"type", "value"} (json) or [{"type", "value"}] (json0)."""
    if node is None:
        return None, None
    item = node[0] if isinstance(node, list) and node else node
    if not isinstance(item, dict):
        raise ParseError(KIND, f"{field}: no type and value")
    kind, value = item.get("type"), item.get("value")
    if not all(isinstance(v, str | None) and len(v or "") <= _SHORT for v in (kind, value)):
        raise ParseError(KIND, f"{field}: {shown(str(value))} is no lldpd id")
    return kind, value


def _single(node: Any, field: str) -> dict[str, Any]:
    item = node[0] if isinstance(node, list) and len(node) == 1 else node
    if not isinstance(item, dict):
        raise ParseError(KIND, f"{field}: not an object")
    return item


def _chassis(node: Any) -> tuple[str | None, dict[str, Any]]:
    """The chassis's name and fields: json0's list, or json's object keyed by the name."""
    chassis = _single(node, "chassis")
    if "name" in chassis or set(chassis) <= _CHASSIS_FIELDS:
        return _one(chassis.get("name"), "chassis.name"), chassis
    if len(chassis) != 1:
        raise ParseError(KIND, "chassis: neither fields nor one system name")
    ((name, fields),) = chassis.items()
    if len(name) > _SHORT:
        raise ParseError(KIND, f"chassis: {shown(name)} is too long for a system name")
    return name, _single(fields, f"chassis {shown(name)}")


def _neighbor(interface: str, body: Any) -> LldpNeighbor:
    if not isinstance(body, dict) or len(interface) > _SHORT or not interface:
        raise ParseError(KIND, f"interface {shown(interface)}: not an lldpd interface")
    name, chassis = _chassis(body.get("chassis", {}))
    port = _single(body.get("port", {}), "port")
    chassis_type, chassis_id = _id(chassis.get("id"), "chassis.id")
    port_type, port_id = _id(port.get("id"), "port.id")
    return LldpNeighbor(
        interface=interface, chassis_name=name, chassis_id=chassis_id,
        chassis_id_type=chassis_type, port_id=port_id, port_id_type=port_type,
        port_descr=_one(port.get("descr"), "port.descr", _LONG),
        system_descr=_one(chassis.get("descr"), "chassis.descr", _LONG),
        mgmt_ips=tuple(_values(chassis.get("mgmt-ip", []), "chassis.mgmt-ip", _SHORT)))


def _interfaces(lldp: Any) -> list[tuple[str, Any]]:
    """(local interface, its body) in the order printed, from either form."""
    blocks = lldp if isinstance(lldp, list) else [lldp]  # json0: a list of {"interface": [...]}
    out: list[tuple[str, Any]] = []
    for block in blocks:
        if not isinstance(block, dict):
            raise ParseError(KIND, "lldp: not an object")
        interfaces = block.get("interface", [])
        if isinstance(interfaces, dict):  # json, one interface: {"eth0": {...}}
            interfaces = [interfaces]
        if not isinstance(interfaces, list):
            raise ParseError(KIND, "interface: neither a list nor an object")
        for entry in interfaces:
            if not isinstance(entry, dict):
                raise ParseError(KIND, "interface: an entry is not an object")
            if isinstance(entry.get("name"), str):  # json0
                out.append((entry["name"], entry))
            else:  # json: {"eth0": {...}}
                out += list(entry.items())
    return out


def parse_lldpctl_json(text: str) -> tuple[LldpNeighbor, ...]:
    document = load_json(text, KIND)
    if not isinstance(document, dict) or "lldp" not in document:
        raise ParseError(KIND, "no top-level \"lldp\" (not lldpctl's JSON)")
    interfaces = _interfaces(document["lldp"])
    if len(interfaces) > MAX_NEIGHBORS:
        raise ParseError(KIND, f"more than {MAX_NEIGHBORS} neighbours")
    return tuple(_neighbor(name, body) for name, body in interfaces)


def parse_lldpctl(text: str) -> tuple[LldpNeighbor, ...]:
    """Either format, told apart by its first character: JSON's is a bracket."""
    if text.lstrip()[:1] in ("{", "["):
        return parse_lldpctl_json(text)
    return parse_lldpctl_keyvalue(text)


def parse_lldpctl_keyvalue(text: str) -> tuple[LldpNeighbor, ...]:
    lines = text_lines(text.strip("\n"))
    if not lines[0].startswith("lldp.") or "=" not in lines[0]:
        # lldpctl prints nothing where it heard no one, and so does a capture that failed.
        raise ParseError(KEYVALUE, f"{shown(lines[0])} is no lldpctl keyvalue line")
    heard: list[tuple[str, dict[str, list[list[str]]]]] = []  # (interface, path → values)
    latest: dict[str, dict[str, list[list[str]]]] = {}  # each interface's latest neighbour
    value: list[str] | None = None  # the lines of the value that a keyless line goes on
    for line in lines:
        if not (line.startswith("lldp.") and "=" in line):
            if value is not None:
                value.append(line)
            continue
        value = None
        if not (match := _KEY.fullmatch(line)):
            continue  # a section lldpd added since: no field racklift reads
        interface, path = match[1], f"{match[2]}{match[3]}"
        if interface not in latest or path == "via":
            latest[interface] = {}
            heard.append((interface, latest[interface]))
            if len(heard) > MAX_NEIGHBORS:
                raise ParseError(KEYVALUE, f"more than {MAX_NEIGHBORS} neighbours")
        if path in _KEPT:
            value = [match[4]]
            latest[interface].setdefault(path, []).append(value)
    return tuple(_keyvalue_neighbor(interface, fields) for interface, fields in heard)


def _keyvalue_neighbor(interface: str, fields: dict[str, list[list[str]]]) -> LldpNeighbor:
    def values(path: str, limit: int = _SHORT) -> list[str]:
        out = ["\n".join(lines) for lines in fields.get(path, [])]
        if any(len(v) > limit for v in out):
            raise ParseError(KEYVALUE, f"{interface}: {path} is too long for an lldpd value")
        return out

    def one(path: str, limit: int = _SHORT) -> str | None:
        return next(iter(values(path, limit)), None)

    def id_of(part: str) -> tuple[str | None, str | None]:
        kind = next((p.split(".")[1] for p in fields if p.startswith(f"{part}.")
                     and p.split(".")[1] in _ID_TYPES), None)
        return kind, one(f"{part}.{kind}") if kind else None

    chassis_type, chassis_id = id_of("chassis")
    port_type, port_id = id_of("port")
    return LldpNeighbor(
        interface=interface, chassis_name=one("chassis.name"), chassis_id=chassis_id,
        chassis_id_type=chassis_type, port_id=port_id, port_id_type=port_type,
        port_descr=one("port.descr", _LONG), system_descr=one("chassis.descr", _LONG),
        mgmt_ips=tuple(values("chassis.mgmt-ip")))
