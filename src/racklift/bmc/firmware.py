"""Firmware and BIOS as desired state: a device type's pins, checked against what its BMC
reports over Redfish (racklift.bmc.inventory).

The pins live in the config context assigned to the device type, beside `hardware`:

    racklift:
      firmware: {BMC: "6.00.30.00", BIOS: "1.8.2", MCX75310AAS-NEAT: "28.37.10.14"}
      bios: {SysProfile: PerfOptimized, ProcSMT: Enabled, AcPwrRcvryUserDelay: 120}

`read` checks them as racklift.netbox.desired checks the rest of the context (NetBox strings
are validated before use); `compare` judges a BmcInventory against them; `plan` says what
`--apply-firmware` would change to meet them (racklift.bmc.apply does it). Pure.

What brings a component to its pin, for `--apply-firmware`: an image file per component, named
relative to the controller's firmware directory (RACKLIFT_FIRMWARE_DIR), which the image stage
publishes on the site's boot server for the BMC to fetch (UpdateService.SimpleUpdate):

    racklift:
      firmware_images: {BIOS: "dell/r750/BIOS_1.8.2.EXE"}

A component is named as vendors name it:
- `BMC` and `BIOS` (or a vendor's own word for them: iDRAC, iLO, XCC, System ROM, UEFI): the
  image the BMC says its manager and its BIOS run (Links.ActiveSoftwareImage: Dell, Lenovo,
  Supermicro, OpenBMC), else the component each vendor's table below names;
- `GPU`: every GPU's firmware, by the vendors' tables;
- anything else: the component with that Id, else those with that Name, else those whose Name
  has it as a word: an HCA by its part number where the BMC names it (Supermicro's "NIC1 System
  Slot1 MCX75310AAS-NEAT").
Images a BMC keeps but does not run are never taken for the running one (NOT_RUNNING), but by
their exact Id. Every component the name covers must have the version wanted; a name that covers
none is a failure ("not reported"), never a pass. BIOS attributes are compared by name, value
and type (120 is not "120"); one the BMC does not report is a failure too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from racklift.bmc.inventory import BmcInventory, FirmwareComponent, Scalar
from racklift.netbox.desired import FIELD_PREFIX, Invalid
from racklift.text import printable

FIRMWARE = "firmware"  # the keys under racklift in the config context
BIOS = "bios"
IMAGES = "firmware_images"
MAX_PINS = 256  # entries of each mapping
MAX_NAME = 128  # characters of a component's name or a version
MAX_VALUE = 1024  # characters of a BIOS attribute's wanted text
NOT_REPORTED = "not reported"

# Printable ASCII, no space at either end: versions ("A42 v2.60 (08/11/2022)", "BIOS Date:
# 08/04/2023 Ver 1.4") and component names ("System ROM") as BMCs write them.
_TEXT = re.compile(rf"[!-~](?:[ -~]{{0,{MAX_NAME - 2}}}[!-~])?")
# Redfish's AttributeName (the Attribute Registry's pattern); every real tree's names fit it.
_ATTRIBUTE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")
_VALUE = re.compile(rf"[ -~]{{0,{MAX_VALUE}}}")
_INT_BOUND = 2 ** 63
# An image's path under the firmware directory: segments of safe characters, none starting with
# a dot (so no `..`, no hidden file), no absolute path; as a URL path it needs no quoting.
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*(/[A-Za-z0-9][A-Za-z0-9._+-]*)*")
MAX_IMAGE = 255

FIRMWARE_FIX = ("make it a mapping of component name to version as `racklift bmc.inventory` "
                "shows them, e.g. {\"BMC\": \"6.00.30.00\", \"BIOS\": \"1.8.2\"}, or remove it")
IMAGES_FIX = ("make it a mapping of component name (as racklift.firmware pins it) to the image "
              "file that brings it to its version, e.g. {\"BIOS\": \"dell/BIOS_1.8.2.EXE\"}, "
              "or remove it")
BIOS_FIX = ("make it a mapping of BIOS attribute name to value as `racklift bmc.inventory` "
            "shows them, e.g. {\"SysProfile\": \"PerfOptimized\", \"ProcSMT\": \"Enabled\"}, "
            "or remove it")


class Match(NamedTuple):
    """What one vendor calls a component: its Id or Name, as a full-match pattern, and the
    real trees (tests/fixtures/real/redfish) that call it so."""

    field: str  # "id" or "name"
    pattern: str
    seen_in: tuple[str, ...]

    def covers(self, component: FirmwareComponent) -> bool:
        value = component.id if self.field == "id" else component.name
        return value is not None and re.fullmatch(self.pattern, value) is not None


DELL = "dell-poweredge-r750_idrac9-6.00.30.00"
HPE = "hpe-proliant-dl385-gen10plus-v2_ilo5-2.72"
LENOVO = "lenovo-thinksystem-sr670-v2_xcc-2.83"
SUPERMICRO = "supermicro-sys-821ge-tnhr_bmc-11.01.01"
DGX = "nvidia-dgx-h100_ami-bmc-23.11.20"
GIGABYTE = "gigabyte-h262-z63_ami-megarac-12.84.13"

# The components racklift knows by role, per vendor. Where the BMC names the BMC's and the
# BIOS's image (Dell, Lenovo, Supermicro), that name is taken; the table says the same there
# (the tests hold it to it) and is what HPE, the DGX and Gigabyte are read by.
ALIASES: dict[str, tuple[Match, ...]] = {
    "BMC": (Match("name", "Integrated Dell Remote Access Controller", (DELL,)),
            Match("name", "iLO [0-9]+", (HPE,)),
            Match("id", "BMC-Primary", (LENOVO,)),
            Match("id", "BMC", (SUPERMICRO, GIGABYTE)),
            Match("id", "HostBMC_0", (DGX,))),  # HGX_FW_BMC_0 is the HGX board's own BMC
    "BIOS": (Match("name", "BIOS", (DELL, SUPERMICRO, GIGABYTE)),
             Match("name", "System ROM", (HPE,)),  # "Redundant System ROM" is the spare
             Match("id", "UEFI", (LENOVO,)),
             Match("id", "HostBIOS_0", (DGX,))),
    "GPU": (Match("id", "GPU[0-9]+", (LENOVO, SUPERMICRO)),
            Match("id", "HGX_FW_GPU_SXM_[0-9]+", (DGX, SUPERMICRO))),
    # NVIDIA (Mellanox) ConnectX adapters; BlueField DPUs and other vendors' NICs are not HCAs.
    "HCA": (Match("name", "Mellanox .*", (DELL,)),  # InfiniBand.Slot.7, NIC.Slot.5
            Match("name", "ConnectX-[0-9]+ .*", (HPE,)),  # "ConnectX-6 100GE 1P NIC"
            Match("name", "NIC[0-9]+ System Slot[0-9]+ MCX.*", (SUPERMICRO,))),
}
# The HCA pin is judged on the host too (the ofed role reads ibv_devinfo's fw_ver), so it is
# written as ibv_devinfo prints it, and a BMC that lists no HCA leaves it to the host.
HCA = "HCA"
_HCA_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
# Dell and Supermicro write a ConnectX firmware 28.37.1014 as 28.37.10.14 (HPE as the host
# does): the last two pairs are one field.
_HCA_SPLIT = re.compile(r"([0-9]+\.[0-9]+)\.([0-9]{2})\.([0-9]{2})")
MOVED = (("ofed", "hca_firmware_version", HCA),)  # (section, key, the firmware pin now)
# Vendors' own words for a component of ALIASES.
SYNONYMS = {"iDRAC": "BMC",  # Dell: iDRAC.Embedded.1
            "iLO": "BMC",  # HPE: "iLO 5"
            "XCC": "BMC",  # Lenovo: the XClarity Controller (host name XCC-7Z23-J105958B)
            "System ROM": "BIOS",  # HPE
            "UEFI": "BIOS"}  # Lenovo
# Images a BMC lists but does not run, by Id.
NOT_RUNNING = (
    # Dell: the rollback image, and the copy kept for reinstalling (Oem Status
    # "AvailableForInstallation"); the iDRAC's ActiveSoftwareImage is the Installed- one.
    Match("id", "(Previous|Current)-.*", (DELL,)),
    # Lenovo: the image staged for the next activation (often no Version), the other bank.
    Match("id", ".*-(Pending|Backup)", (LENOVO,)),
    # Supermicro: the spare, factory and staged images of the BMC, the BIOS and a CPLD.
    Match("id", "(Backup|Golden|Staging)_.*", (SUPERMICRO,)),
)


@dataclass(frozen=True)
class Pins:
    """The firmware versions and BIOS attributes wanted, in the context's order, and the image
    that brings each component to its version (component as the firmware pins name it → path
    under the firmware directory)."""

    firmware: tuple[tuple[str, str], ...] = ()
    bios: tuple[tuple[str, str | int | bool], ...] = ()
    images: tuple[tuple[str, str], ...] = ()

    @property
    def pinned(self) -> bool:
        """Whether anything is pinned: a device type without pins is not asked."""
        return bool(self.firmware or self.bios)


class Finding(NamedTuple):
    """A pin the BMC does not meet."""

    component: str  # "firmware BMC", "firmware GPU (GPU3)", "BIOS attribute ProcSMT"
    found: str  # as the BMC reports it, or NOT_REPORTED
    wanted: str

    def __str__(self) -> str:
        return f"{self.component}: found {self.found}, wanted {self.wanted}"


# ---------------------------------------------------------------------------------------------
# The pins, from the config context


def _shown(value: Any) -> str:
    """A value from NetBox as an error quotes it: JSON, printable, cut."""
    text = printable(json.dumps(value, default=repr, ensure_ascii=False))
    return text if len(text) <= 80 else text[:80] + "..."


def _is_version(value: Any) -> bool:
    return isinstance(value, str) and _TEXT.fullmatch(value) is not None


def is_bios_value(value: Any) -> bool:
    """A BIOS attribute's value racklift takes: true/false, a 64-bit integer, or at most
    MAX_VALUE printable ASCII characters."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -_INT_BOUND <= value < _INT_BOUND
    return isinstance(value, str) and _VALUE.fullmatch(value) is not None


def _entries(data: Any, path: str, fix: str, problems: list[Invalid]) -> list[tuple[Any, Any]]:
    if data is None:
        return []
    if not isinstance(data, dict):
        problems.append(Invalid(path, f"is {_shown(data)}: {fix}"))
        return []
    if len(data) > MAX_PINS:
        problems.append(Invalid(path, f"has {len(data)} entries: pin at most {MAX_PINS}"))
        return []
    return list(data.items())


def _firmware(data: Any, problems: list[Invalid]) -> tuple[tuple[str, str], ...]:
    path = f"{FIELD_PREFIX}.{FIRMWARE}"
    pins: list[tuple[str, str]] = []
    named: dict[str, str] = {}  # component -> the key that pins it
    for name, version in _entries(data, path, FIRMWARE_FIX, problems):
        if not (isinstance(name, str) and _TEXT.fullmatch(name)):
            problems.append(Invalid(f"{path}.{_shown(name)}", (
                f"is not a component name: name it as `racklift bmc.inventory` shows it, 1 to "
                f"{MAX_NAME} printable ASCII characters with no space at either end")))
        elif not _is_version(version):
            problems.append(Invalid(f"{path}.{name}", (
                f"is {_shown(version)}: set it to the version as `racklift bmc.inventory` "
                f"shows it, a string of 1 to {MAX_NAME} printable ASCII characters with no "
                "space at either end, e.g. \"6.00.30.00\"")))
        elif name == HCA and not _HCA_VERSION.fullmatch(version):
            problems.append(Invalid(f"{path}.{name}", (
                f"is {_shown(version)}: set it to the firmware as ibv_devinfo prints it "
                "(fw_ver), e.g. \"28.39.1002\": the host is checked against it too")))
        elif (component := SYNONYMS.get(name, name)) in named:
            problems.append(Invalid(f"{path}.{name}", (
                f"names the same component as {named[component]}: keep one of them")))
        else:
            named[component] = name
            pins.append((name, version))
    return tuple(pins)


def _bios(data: Any, problems: list[Invalid]) -> tuple[tuple[str, str | int | bool], ...]:
    path = f"{FIELD_PREFIX}.{BIOS}"
    pins: list[tuple[str, str | int | bool]] = []
    for name, value in _entries(data, path, BIOS_FIX, problems):
        if not (isinstance(name, str) and _ATTRIBUTE.fullmatch(name)):
            problems.append(Invalid(f"{path}.{_shown(name)}", (
                "is not a BIOS attribute name: name it as the BMC's Bios Attributes do "
                "(letters, digits and _, a letter first, at most 128)")))
        elif not is_bios_value(value):
            problems.append(Invalid(f"{path}.{name}", (
                f"is {_shown(value)}: set it to the value as `racklift bmc.inventory` shows "
                f"it: a string of at most {MAX_VALUE} printable ASCII characters, an integer "
                "or true/false")))
        else:
            pins.append((name, value))
    return tuple(pins)


def _images(data: Any, pinned: tuple[tuple[str, str], ...],
            problems: list[Invalid]) -> tuple[tuple[str, str], ...]:
    path = f"{FIELD_PREFIX}.{IMAGES}"
    names = {name for name, _ in pinned}
    images: list[tuple[str, str]] = []
    for name, image in _entries(data, path, IMAGES_FIX, problems):
        if name not in names:
            problems.append(Invalid(f"{path}.{_shown(name)}", (
                f"names no component of {FIELD_PREFIX}.{FIRMWARE}: an image is the one that "
                "brings a pinned component to its version; use the pin's name, or remove it")))
        elif not (isinstance(image, str) and len(image) <= MAX_IMAGE
                  and _IMAGE.fullmatch(image)):
            problems.append(Invalid(f"{path}.{name}", (
                f"is {_shown(image)}: set it to the image file's path under the controller's "
                f"firmware directory, e.g. \"dell/BIOS_1.8.2.EXE\" (letters, digits, . _ + - "
                f"and /, no part starting with a dot, at most {MAX_IMAGE} characters)")))
        else:
            images.append((name, image))
    return tuple(images)


def read(context: Any) -> tuple[Pins, list[Invalid]]:
    """The pins in a rendered config context's `racklift` value (None: no context; anything
    but a mapping is racklift.netbox.desired's to report), and every entry that is wrong in
    them, each left out."""
    context = context if isinstance(context, dict) else {}
    problems: list[Invalid] = []
    for section, key, pin in MOVED:
        if isinstance(context.get(section), dict) and key in context[section]:
            problems.append(Invalid(f"{FIELD_PREFIX}.{section}.{key}", (
                f"has moved to {FIELD_PREFIX}.{FIRMWARE}.{pin} (firmware is pinned in one "
                f"place, for the BMC and the host): set it there and remove it here")))
    firmware = _firmware(context.get(FIRMWARE), problems)
    pins = Pins(firmware, _bios(context.get(BIOS), problems),
                _images(context.get(IMAGES), firmware, problems))
    return pins, problems


def parse(context: Any) -> Pins | list[Invalid]:
    """The pins, or what is wrong in them (see `read`)."""
    pins, problems = read(context)
    return problems or pins


# ---------------------------------------------------------------------------------------------
# The pins against a BMC's inventory


def running(component: FirmwareComponent) -> bool:
    return not any(m.covers(component) for m in NOT_RUNNING)


def components(inventory: BmcInventory, name: str) -> list[FirmwareComponent]:
    """The firmware components `name` covers in the inventory (see the module's rules)."""
    role = SYNONYMS.get(name, name)
    active = {"BMC": inventory.bmc_image, "BIOS": inventory.bios_image}.get(role)
    if active is not None:
        return [c for c in inventory.firmware if c.id == active]
    if role in ALIASES:
        return by_alias(inventory, role)
    exact = [c for c in inventory.firmware if c.id == name]
    if exact:
        return exact
    named = [c for c in inventory.firmware if running(c) and c.name == name]
    return named or [c for c in inventory.firmware
                     if running(c) and name in (c.name or "").split()]


def by_alias(inventory: BmcInventory, role: str) -> list[FirmwareComponent]:
    """The running components the vendors' tables name for `role` (BMC, BIOS, GPU)."""
    return [c for c in inventory.firmware
            if running(c) and any(m.covers(c) for m in ALIASES[role])]


def shown_value(value: Scalar) -> str:
    """A BIOS value as findings and journals show it: JSON ("Enabled", 120, true), cut."""
    text = json.dumps(value)
    return text if len(text) <= 120 else text[:120] + "..."


def _same(found: Scalar, wanted: str | int | bool) -> bool:
    """Equal in value and kind: a BMC that reports "120" for an integer is not believed."""
    if isinstance(found, bool) or isinstance(wanted, bool):
        return found is wanted
    return type(found) is type(wanted) and found == wanted


def version_of(name: str, component: FirmwareComponent) -> str | None:
    """A component's version as its pin is written (an HCA's as ibv_devinfo prints it)."""
    if name == HCA and component.version and (split := _HCA_SPLIT.fullmatch(component.version)):
        return f"{split[1]}.{split[2]}{split[3]}"
    return component.version


def host_version(pins: Pins, name: str = HCA) -> str | None:
    """The version pinned for a component the host itself is checked against (the ofed role:
    every HCA's fw_ver); None where it is not pinned."""
    return dict(pins.firmware).get(name)


def compare(pins: Pins, inventory: BmcInventory) -> list[Finding]:
    """Every pin the BMC does not meet, in the pins' order: a firmware component whose version
    differs, or that the BMC does not report (but HCAs: the host is checked for those), and a
    BIOS attribute likewise."""
    findings: list[Finding] = []
    for name, version in pins.firmware:
        found = components(inventory, name)
        if not found and name != HCA:
            findings.append(Finding(f"firmware {name}", NOT_REPORTED, version))
        for c in found:
            if version_of(name, c) != version:
                what = f"firmware {name}" if c.id == name else f"firmware {name} ({c.id})"
                findings.append(Finding(what, c.version or NOT_REPORTED, version))
    for attribute, wanted in pins.bios:
        if attribute not in inventory.bios_attributes:
            findings.append(Finding(f"BIOS attribute {attribute}", NOT_REPORTED,
                                    shown_value(wanted)))
        elif not _same(have := inventory.bios_attributes[attribute], wanted):
            findings.append(Finding(f"BIOS attribute {attribute}", shown_value(have),
                                    shown_value(wanted)))
    return findings


# ---------------------------------------------------------------------------------------------
# What --apply-firmware changes


@dataclass(frozen=True)
class Update:
    """A firmware component to update: its pin's name, the version found and wanted, and the
    image (path under the firmware directory) that brings it there."""

    name: str
    found: str
    wanted: str
    image: str


@dataclass(frozen=True)
class ApplyPlan:
    """What brings a host to its pins: updates, then BIOS settings (name → value wanted, with
    the value found), and what racklift cannot change (the finding and why)."""

    updates: tuple[Update, ...] = ()
    settings: tuple[tuple[str, str | int | bool, Scalar], ...] = ()  # name, wanted, found
    cannot: tuple[str, ...] = ()


def plan(pins: Pins, inventory: BmcInventory) -> ApplyPlan:
    """The updates and BIOS settings that meet the pins the BMC does not meet. A component or
    attribute the BMC does not report cannot be changed (nothing could read it back), nor a
    component without an image."""
    images = dict(pins.images)
    updates: list[Update] = []
    cannot: list[str] = []
    for name, version in pins.firmware:
        found = components(inventory, name)
        off = [c for c in found if version_of(name, c) != version]
        if not found and name == HCA:
            continue  # the host is checked (ofed); the BMC cannot read an update back
        if not found:
            cannot.append(f"firmware {name}: {NOT_REPORTED} by the BMC, so no update could be "
                          "read back")
        elif off and name not in images:
            cannot.append(f"firmware {name}: found {off[0].version or NOT_REPORTED}, wanted "
                          f"{version}, and no image brings it there ({FIELD_PREFIX}.{IMAGES}."
                          f"{name})")
        elif off:
            updates.append(Update(name, off[0].version or NOT_REPORTED, version, images[name]))
    settings: list[tuple[str, str | int | bool, Scalar]] = []
    for attribute, wanted in pins.bios:
        if attribute not in inventory.bios_attributes:
            cannot.append(f"BIOS attribute {attribute}: {NOT_REPORTED} by the BMC, so it "
                          "cannot be set")
        elif not _same(have := inventory.bios_attributes[attribute], wanted):
            settings.append((attribute, wanted, have))
    return ApplyPlan(tuple(updates), tuple(settings), tuple(cannot))


# ---------------------------------------------------------------------------------------------
# The judgement in words, as the image stage and verify give it


def failure(findings: list[Finding], problems: tuple[str, ...]) -> str:
    """Why a host's firmware or BIOS fails its pins: each finding, and what kept the BMC's
    inventory from being read, if anything did (a pin it then cannot show is 'not reported')."""
    why = ("its firmware and BIOS are not as its device type pins them: "
           + "; ".join(map(str, findings)))
    if problems:
        why += f" (reading the BMC's inventory: {'; '.join(problems[:3])})"
    return why + ": update them, or change the pins (racklift.firmware, racklift.bios) in NetBox"


def met(pins: Pins) -> str:
    """A host's firmware and BIOS meeting all its pins."""
    return (f"firmware and BIOS as pinned ({len(pins.firmware)} components, "
            f"{len(pins.bios)} BIOS attributes)")
