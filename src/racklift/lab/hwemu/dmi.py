"""``dmidecode`` 3.4: types, keywords and ``-s`` strings."""

from __future__ import annotations

from .command import ToolExit
from .profile import Profile

DMIDECODE_VERSION = "3.4"


_DMI_TYPE_KEYWORDS = {
    "bios": (0, 13), "system": (1, 12, 15, 23, 32), "baseboard": (2, 10, 41),
    "chassis": (3,), "processor": (4,), "memory": (5, 6, 16, 17), "cache": (7,),
    "connector": (8,), "slot": (9,),
}


_DMI_STRING_KEYWORDS = (
    "bios-vendor", "bios-version", "bios-release-date", "bios-revision", "firmware-revision",
    "system-manufacturer", "system-product-name", "system-version", "system-serial-number",
    "system-uuid", "system-sku-number", "system-family", "baseboard-manufacturer",
    "baseboard-product-name", "baseboard-version", "baseboard-serial-number",
    "baseboard-asset-tag", "chassis-manufacturer", "chassis-type", "chassis-version",
    "chassis-serial-number", "chassis-asset-tag", "processor-family", "processor-manufacturer",
    "processor-version", "processor-frequency",
)


_SEL_DESCRIPTORS = (
    ("Single-bit ECC memory error", "Multiple-event handle"),
    ("Multi-bit ECC memory error", "Multiple-event handle"),
    ("Parity memory error", "None"), ("Bus timeout", "None"), ("I/O channel block", "None"),
    ("Software NMI", "None"), ("POST memory resize", "None"),
    ("POST error", "POST results bitmap"), ("PCI parity error", "Multiple-event handle"),
    ("PCI system error", "Multiple-event handle"), ("CPU failure", "None"),
    ("EISA failsafe timer timeout", "None"), ("Correctable memory log disabled", "None"),
    ("Logging disabled", "None"), ("System limit exceeded", "None"),
    ("Asynchronous hardware timer expired", "None"),
    ("System configuration information", "None"), ("Hard disk information", "None"),
    ("System reconfigured", "None"), ("Uncorrectable CPU-complex error", "None"),
    ("Log area reset/cleared", "None"), ("System boot", "None"), ("End of log", "None"),
    ("OEM-specific", "OEM-specific"), ("OEM-specific", "OEM-specific"),
)


def _dmi_records(p: Profile) -> dict[int, list[str]]:
    s = p.system
    sel = [
        "Handle 0x0044, DMI type 15, 73 bytes",
        "System Event Log",
        "\tArea Length: 65535 bytes",
        "\tHeader Start Offset: 0x0000",
        "\tHeader Length: 16 bytes",
        "\tData Start Offset: 0x0010",
        "\tAccess Method: Memory-mapped physical 32-bit address",
        "\tAccess Address: 0xFF540000",
        "\tStatus: Valid, Not Full",
        "\tChange Token: 0x00000001",
        "\tHeader Format: Type 1",
        f"\tSupported Log Type Descriptors: {len(_SEL_DESCRIPTORS)}",
    ]
    for i, (desc, fmt) in enumerate(_SEL_DESCRIPTORS, 1):
        sel += [f"\tDescriptor {i}: {desc}", f"\tData Format {i}: {fmt}"]
    return {
        0: [
            "Handle 0x0000, DMI type 0, 26 bytes",
            "BIOS Information",
            f"\tVendor: {s.bios_vendor}",
            f"\tVersion: {s.bios_version}",
            f"\tRelease Date: {s.bios_date}",
            "\tAddress: 0xF0000",
            "\tRuntime Size: 64 kB",
            "\tROM Size: 64 MB",
            "\tCharacteristics:",
            "\t\tPCI is supported",
            "\t\tBIOS is upgradeable",
            "\t\tBIOS shadowing is allowed",
            "\t\tBoot from CD is supported",
            "\t\tSelectable boot is supported",
            "\t\tBIOS ROM is socketed",
            "\t\tEDD is supported",
            "\t\tACPI is supported",
            "\t\tUSB legacy is supported",
            "\t\tBIOS boot specification is supported",
            "\t\tTargeted content distribution is supported",
            "\t\tUEFI is supported",
            "\tBIOS Revision: 5.32",
        ],
        1: [
            "Handle 0x0001, DMI type 1, 27 bytes",
            "System Information",
            f"\tManufacturer: {s.vendor}",
            f"\tProduct Name: {s.product}",
            f"\tVersion: {s.version}",
            f"\tSerial Number: {s.serial}",
            f"\tUUID: {s.uuid}",
            "\tWake-up Type: Power Switch",
            f"\tSKU Number: {s.sku}",
            f"\tFamily: {s.family}",
        ],
        2: [
            "Handle 0x0002, DMI type 2, 15 bytes",
            "Base Board Information",
            f"\tManufacturer: {s.board_vendor}",
            f"\tProduct Name: {s.board_name}",
            f"\tVersion: {s.board_version}",
            f"\tSerial Number: {s.board_serial}",
            "\tAsset Tag: To be filled by O.E.M.",
            "\tFeatures:",
            "\t\tBoard is a hosting board",
            "\t\tBoard is replaceable",
            "\tLocation In Chassis: To be filled by O.E.M.",
            "\tChassis Handle: 0x0003",
            "\tType: Motherboard",
            "\tContained Object Handles: 0",
        ],
        # The record the baseboard's Chassis Handle names, its keys in the order of the real
        # type 3 capture (dmidecode-t3_lenovo-yoga-300_chassis-record.txt).
        3: [
            "Handle 0x0003, DMI type 3, 22 bytes",
            "Chassis Information",
            f"\tManufacturer: {s.vendor}",
            "\tType: Other",
            "\tLock: Not Present",
            f"\tVersion: {s.version}",
            f"\tSerial Number: {s.chassis_serial}",
            "\tAsset Tag: To be filled by O.E.M.",
            "\tBoot-up State: Safe",
            "\tPower Supply State: Safe",
            "\tThermal State: Safe",
            "\tSecurity Status: None",
            "\tOEM Information: 0x00000000",
            "\tHeight: Unspecified",
            "\tNumber Of Power Cords: 1",
            "\tContained Elements: 0",
            f"\tSKU Number: {s.sku}",
        ],
        32: ["Handle 0x0041, DMI type 32, 20 bytes", "System Boot Information",
             "\tStatus: No errors detected"],
        15: sel,
    }


def _dmi_header(full_dump: bool) -> list[str]:
    # dmidecode prints the table address only when dumping everything (no -t).
    table = ["Table at 0x6CC53000."] if full_dump else []
    return [f"# dmidecode {DMIDECODE_VERSION}", "Getting SMBIOS data from sysfs.",
            "SMBIOS 3.3.0 present.", *table, ""]


def dmidecode(p: Profile, type_: str | int | None = None) -> str:
    """``dmidecode [-t TYPE[,TYPE...]]``; TYPE a keyword (``system``) or a number.

    Unknown keywords raise ValueError.
    """
    records = _dmi_records(p)
    wanted: set[int] = set()
    if type_ is None:
        wanted = set(records)
    elif isinstance(type_, int):
        wanted = {type_}
    else:
        for item in str(type_).split(","):
            item = item.strip()
            if item.isdigit():
                wanted.add(int(item))
            elif item in _DMI_TYPE_KEYWORDS:
                wanted.update(_DMI_TYPE_KEYWORDS[item])
            else:
                raise ValueError(item)
    out = _dmi_header(full_dump=type_ is None)
    # Records come out in table (handle) order, as dmidecode walks the table.
    for t in sorted((t for t in wanted if t in records), key=lambda t: records[t][0]):
        out += [*records[t], ""]
    return "\n".join(out) + "\n"


def dmidecode_string(p: Profile, keyword: str) -> str:
    """``dmidecode -s KEYWORD``. Bad keyword -> ValueError."""
    s = p.system
    values = {
        "bios-vendor": s.bios_vendor, "bios-version": s.bios_version,
        "bios-release-date": s.bios_date, "bios-revision": "5.32",
        "system-manufacturer": s.vendor, "system-product-name": s.product,
        "system-version": s.version, "system-serial-number": s.serial,
        "system-uuid": s.uuid, "system-sku-number": s.sku, "system-family": s.family,
        "baseboard-manufacturer": s.board_vendor, "baseboard-product-name": s.board_name,
        "baseboard-version": s.board_version, "baseboard-serial-number": s.board_serial,
        "baseboard-asset-tag": "To be filled by O.E.M.",
        "chassis-manufacturer": s.vendor, "chassis-type": "Other", "chassis-version": s.version,
        "chassis-serial-number": s.chassis_serial,
        "chassis-asset-tag": "To be filled by O.E.M.",
    }
    if keyword not in _DMI_STRING_KEYWORDS:
        raise ValueError(keyword)
    return values.get(keyword, "Not Specified") + "\n"


def _dmi_usage_error(kind: str, bad: str, valid: list[str]) -> ToolExit:
    return ToolExit(2, "", f"Invalid {kind} keyword: {bad}\nValid {kind} keywords are:\n"
                        + "".join(f"  {v}\n" for v in valid))


def cli_dmidecode(p: Profile, args: list[str]) -> str:
    if not args:
        return dmidecode(p)
    a = args[0]
    value = args[1] if len(args) > 1 else None
    if a.startswith("--type=") or a.startswith("--string="):
        a, value = a.split("=", 1)
    if a in ("-t", "--type"):
        if value is None:
            raise ToolExit(2, "", "dmidecode: option requires an argument -- 't'\n")
        try:
            return dmidecode(p, value)
        except ValueError:
            raise _dmi_usage_error("type", value, list(_DMI_TYPE_KEYWORDS)) from None
    if a in ("-s", "--string"):
        if value is None:
            raise ToolExit(2, "", "dmidecode: option requires an argument -- 's'\n")
        try:
            return dmidecode_string(p, value)
        except ValueError:
            raise _dmi_usage_error("string", value, list(_DMI_STRING_KEYWORDS)) from None
    if a in ("-V", "--version"):
        return DMIDECODE_VERSION + "\n"
    raise ToolExit(2, "", f"dmidecode: unrecognized option '{a}'\n")
