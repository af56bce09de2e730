"""``dmidecode``: the system's identity (vendor, product, serial, BIOS, board)."""

from __future__ import annotations

import re

from racklift.facts.observed import SystemFacts
from racklift.facts.parsers.common import ParseError, na, text_lines, to_int

# What OEMs leave in DMI strings they did not fill in; none of them identifies a machine.
_DMI_PLACEHOLDERS = frozenset(s.lower() for s in (
    "To Be Filled By O.E.M.", "To be filled by O.E.M.", "Not Specified", "Not Available",
    "Not Applicable", "Not Present", "Not Settable", "Default string", "Default String",
    "0123456789", "1234567890", "123456789", "System Serial Number", "System Product Name",
    "System manufacturer", "System Version", "Type1ProductConfigId", "OEM", "O.E.M.",
    "None", "N/A", "NA", "Unknown", "Invalid", "XXXXXXXXXX", "0", "00000000", "No Asset Tag",
    "00000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
))

_DMI_HANDLE = re.compile(r"^Handle 0x[0-9A-Fa-f]+, DMI type ([0-9]+),")
_DMI_TITLES = {"BIOS Information": 0, "System Information": 1, "Base Board Information": 2,
               "Chassis Information": 3}


def _dmi_value(value: str | None) -> str | None:
    text = na(value)
    if text is None or text.lower() in _DMI_PLACEHOLDERS:
        return None
    return text


def _dmi_records(text: str) -> list[tuple[int | None, str, dict[str, str]]]:
    """(type, title, top-level "Key: value" pairs) per record; nested lists are skipped."""
    records: list[tuple[int | None, str, dict[str, str]]] = []
    pending_type: int | None = None
    current: dict[str, str] | None = None
    key_indent: int | None = None
    for line in text_lines(text):
        if not line.strip():
            current, pending_type = None, None
            continue
        if m := _DMI_HANDLE.match(line):
            pending_type, current = to_int(m.group(1), "dmidecode", "DMI type"), None
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            title = line.strip()
            if title.startswith("#") or current is not None:
                continue
            if pending_type is not None or title in _DMI_TITLES:
                current, key_indent = {}, None
                records.append((pending_type if pending_type is not None
                                else _DMI_TITLES[title], title, current))
            continue
        if current is None:
            continue
        if key_indent is None:
            key_indent = indent
        if indent != key_indent:
            continue  # items of a list such as "Characteristics:"
        key, sep, value = line.strip().partition(":")
        if sep:
            current[key.strip()] = value.strip()
    return records


def parse_dmidecode(text: str) -> SystemFacts:
    """``dmidecode`` / ``-t system`` / ``-t bios,system`` / ``-t 3``: DMI types 0 to 3 (a
    chassis record alone gives the chassis serial and asset tag, the rest None).

    OEM placeholders ("To Be Filled By O.E.M.", "Default string", "0123456789", ...) are
    None. The UUID is lower-cased, as the kernel shows it in sysfs.
    """
    records = _dmi_records(text)
    if not records:
        if any(ln.startswith("# dmidecode") for ln in text_lines(text)):
            # dmidecode ran but found no table, or was asked for other types.
            return SystemFacts(None, None, None, None, None, None)
        first = next((ln.strip() for ln in text_lines(text) if ln.strip()), "empty output")
        raise ParseError("dmidecode", f"no DMI records: {first[:200]}")
    by_type: dict[int, dict[str, str]] = {}
    for dmi_type, _title, fields in records:
        if dmi_type is not None:
            by_type.setdefault(dmi_type, fields)  # the first record of each type
    system, bios, board = by_type.get(1, {}), by_type.get(0, {}), by_type.get(2, {})
    chassis = by_type.get(3, {})
    uuid = _dmi_value(system.get("UUID"))
    return SystemFacts(
        vendor=_dmi_value(system.get("Manufacturer")),
        product=_dmi_value(system.get("Product Name")),
        serial=_dmi_value(system.get("Serial Number")),
        bios_vendor=_dmi_value(bios.get("Vendor")),
        bios_version=_dmi_value(bios.get("Version")),
        uuid=uuid.lower() if uuid else None,
        version=_dmi_value(system.get("Version")),
        sku=_dmi_value(system.get("SKU Number")),
        family=_dmi_value(system.get("Family")),
        bios_date=_dmi_value(bios.get("Release Date")),
        board_vendor=_dmi_value(board.get("Manufacturer")),
        board_product=_dmi_value(board.get("Product Name")),
        board_serial=_dmi_value(board.get("Serial Number")),
        chassis_serial=_dmi_value(chassis.get("Serial Number")),
        chassis_asset_tag=_dmi_value(chassis.get("Asset Tag")),
    )


def parse_dmidecode_string(text: str) -> str | None:
    """``dmidecode -s KEYWORD``: the one value, or None for an OEM placeholder."""
    for line in text_lines(text):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue  # dmidecode may print "# SMBIOS implementations newer than ..." first
        if stripped.startswith(("Invalid string keyword", "dmidecode:", "Valid string keywords")):
            raise ParseError("dmidecode-string", stripped)
        return _dmi_value(stripped)
    return None
