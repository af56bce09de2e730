"""A BMC's inventory over Redfish, read without trusting it: the system's manufacturer, model,
serial number and power state, the MAC address of each of its Ethernet interfaces, the boot
override (target, enabled and mode, and the values of each the BMC allows), the firmware
inventory (each component's Id, Name and Version), the BIOS version and attributes, the BMC's own
model and firmware version, and which firmware components the BMC and the BIOS say they run.

Pure: `read_inventory(get)` walks the tree from /redfish/v1 through its links (`@odata.id`)
and does nothing but call `get(path)`, which returns the JSON object at that path or raises.
The tests pass a function that reads a captured tree from disk; the Redfish client will pass
its HTTP GET (which should cap the size of an answer: this module bounds what it reads from
an object, not the object).

Tested against real trees (tests/fixtures/real/redfish, their sources in
tests/fixtures/real/SOURCES.md): Dell PowerEdge R750 (iDRAC 9 6.00.30.00), HPE ProLiant DL385
Gen10 Plus v2 (iLO 5 2.72), Lenovo ThinkSystem SR670 V2 (XClarity Controller 2.83),
Supermicro SYS-821GE-TNHR (HGX H100 8-GPU; BMC 11.01.01), NVIDIA DGX H100 (AMI BMC 23.11.20),
Gigabyte H262-Z63 (AMI MegaRAC 12.84.13) and a stock OpenBMC 2.15.0-dev build. What differs
among them, and why the reader reads as it does:
- System and manager ids: System.Embedded.1 / iDRAC.Embedded.1 (Dell), 1 / 1 (HPE, Lenovo,
  Supermicro), DGX / BMC (DGX), Self / Self (Gigabyte), system / bmc (OpenBMC): every id comes
  from a link, none is assumed. The DGX lists two systems (DGX, then HGX_Baseboard_0): the
  first is read, and `system` says which.
- iLO writes links with a trailing slash and not always in the case of the rest of the tree
  (the system's Bios is /redfish/v1/systems/1/bios): a link is followed as given, less a
  trailing slash, and a collection's members are matched to it ignoring case.
- MACs come upper-case (Dell, DGX, Gigabyte), lower-case (HPE) or both in one BMC (Lenovo,
  Supermicro), and some interfaces give only MACAddress (HPE, Supermicro, Gigabyte):
  MACAddress is read, else PermanentMACAddress, and written lower-case with colons. Lenovo and
  Supermicro list the host's USB link to the BMC (ToManager) with the NICs: it is reported like
  any interface. The Gigabyte reports one MAC for two interfaces (Lan2, Lan3): both are kept,
  and the duplicate is a problem.
- The DGX lists no allowable boot targets and a null BootSourceOverrideMode; Supermicro offers
  its own UsbCd; OpenBMC's system has no EthernetInterfaces, no Manufacturer, Model or
  SerialNumber, and a Bios without Attributes: each missing thing is a problem, not a guess.
- Firmware inventories run from 1 component (OpenBMC) to 106 (Supermicro with its HGX
  board). Dell lists Installed-, Current- and Previous- images of a component (Previous- is the
  rollback image, not what runs) and Lenovo pending slots without a Version: components are
  reported as listed, with their Id, and judged by the caller (racklift.bmc.firmware). Dell,
  Lenovo, Supermicro and OpenBMC name the image their BMC runs (the Manager's
  Links.ActiveSoftwareImage), all but OpenBMC the BIOS's too (the Bios's): its Id is kept.
- Lenovo allows the boot override Once or Disabled only (no Continuous); Gigabyte and OpenBMC
  list the allowable modes too: each list is kept as given, empty where the BMC gives none.

Untrusted input (racklift's rule: trust nothing a BMC says):
- A link is followed only if it is a path under /redfish/v1: no scheme or host, no `.` or
  `..` segment, no empty segment, no query or fragment, no backslash, only ASCII, no control
  character or space, no percent-escape of any of those (or a malformed one), at most
  MAX_LINK characters; a collection's member must lie under the collection. Anything else is
  refused and said in `problems`.
- At most `max_members` members of a collection are read, and at most `max_requests` GETs
  made in all (each path once); strings are stripped, non-printable characters escaped, and cut
  to MAX_TEXT (a BIOS attribute's text to MAX_ATTRIBUTE_VALUE: AMI BIOSes keep a boot order or
  a 5,841-character id map in one); at most MAX_ATTRIBUTES BIOS attributes, MAX_ALLOWABLE boot
  targets.
- A value of the wrong type, a MAC that does not parse, a GET that fails (`get` raising
  anything, or answering something else than a JSON object) and a missing resource leave the
  value unknown (None, or left out of a tuple) with the reason in `problems`; nothing raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from racklift.bmc.links import MAX_LINK, ROOT, check_link
from racklift.bmc.payloads import BOOT_KEYS, MAX_ALLOWABLE, BootOverride
from racklift.text import printable

MAX_MEMBERS = 256  # members read from one collection
MAX_REQUESTS = 1024  # GETs in one reading
MAX_TEXT = 256  # characters of a string kept
MAX_ATTRIBUTES = 4096  # BIOS attributes kept (a Dell R750 has 455)
MAX_ATTRIBUTE_NAME = 128
MAX_ATTRIBUTE_VALUE = 8192  # characters of a BIOS attribute's text (AMI's MAPIDS: 5,841)
MAX_PROBLEMS = 200

Scalar = str | int | float | bool | None
NO_BOOT = BootOverride(None, None, None)  # the boot override, unknown


class FirmwareComponent(NamedTuple):
    id: str  # the member's Id (else the last segment of its link)
    name: str | None
    version: str | None  # None: the BMC reports none


@dataclass(frozen=True)
class BmcInventory:
    system: str | None = None  # the path of the system read
    manufacturer: str | None = None
    model: str | None = None
    serial: str | None = None
    power_state: str | None = None
    bios_version: str | None = None
    macs: tuple[tuple[str, str], ...] = ()  # (interface id, aa:bb:cc:dd:ee:ff), as listed
    boot: BootOverride = NO_BOOT
    firmware: tuple[FirmwareComponent, ...] = ()
    bios_attributes: dict[str, Scalar] = field(default_factory=dict, hash=False)
    bmc_model: str | None = None
    bmc_firmware: str | None = None
    # The Ids of the firmware components the BMC and the BIOS run, where the BMC says
    # (Links.ActiveSoftwareImage of its Manager and of the Bios).
    bmc_image: str | None = None
    bios_image: str | None = None
    problems: tuple[str, ...] = ()  # why something is unknown or left out


def normalize_mac(value: str) -> str | None:
    """aa:bb:cc:dd:ee:ff from AA:BB:CC:DD:EE:FF, aa-bb-cc-dd-ee-ff, aabb.ccdd.eeff or
    aabbccddeeff; None for anything else."""
    text = value.strip()
    if re.fullmatch(r"[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2}){4}", text):
        digits = text.replace(":", "").replace("-", "")
    elif re.fullmatch(r"[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}", text):
        digits = text.replace(".", "")
    elif re.fullmatch(r"[0-9A-Fa-f]{12}", text):
        digits = text
    else:
        return None
    return ":".join(digits[i:i + 2] for i in range(0, 12, 2)).lower()


# ---------------------------------------------------------------------------------------------
# The walk


class _Walk:
    def __init__(self, get: Callable[[str], Any], max_members: int, max_requests: int) -> None:
        self._get = get
        self.max_members = max_members
        self.max_requests = max_requests
        self.requests = 0
        self._seen: dict[str, dict[str, Any] | None] = {}
        self.problems: list[str] = []

    def problem(self, text: str) -> None:
        self.problems.append(printable(text)[:2 * MAX_LINK])

    def fetch(self, path: str, what: str) -> dict[str, Any] | None:
        if path in self._seen:
            return self._seen[path]
        if self.requests >= self.max_requests:
            self.problem(f"{what} ({path}) not read: {self.max_requests} requests made")
            return None
        self.requests += 1
        try:
            payload = self._get(path)
        except Exception as exc:  # the BMC's (or the transport's) failure, whatever it is
            self.problem(f"{what} ({path}) unknown: reading it failed: {type(exc).__name__}: "
                         f"{printable(str(exc))[:MAX_TEXT]}")
            payload = None
        else:
            if not isinstance(payload, dict):
                self.problem(f"{what} ({path}) unknown: the answer is "
                             f"{type(payload).__name__}, not a JSON object")
                payload = None
        self._seen[path] = payload
        return payload

    def link(self, payload: Mapping[str, Any], key: str, what: str,
             owner: str) -> str | None:
        """The path in payload[key]["@odata.id"], checked."""
        ref = payload.get(key)
        if ref is None:
            self.problem(f"{what} unknown: {owner} has no {key} link")
            return None
        value = ref.get("@odata.id") if isinstance(ref, Mapping) else ref
        path, why = check_link(value)
        if path is None:
            self.problem(f"{what} unknown: {owner}'s {key} link refused: it {why}")
        return path

    def members(self, path: str, what: str) -> list[str]:
        """A collection's member paths: at most max_members, each under the collection."""
        payload = self.fetch(path, what)
        if payload is None:
            return []
        members = payload.get("Members")
        if not isinstance(members, list):
            self.problem(f"{what} ({path}) has no Members list")
            return []
        if len(members) > self.max_members:
            self.problem(f"{what} ({path}) lists {len(members)} members: the first "
                         f"{self.max_members} read")
            members = members[:self.max_members]
        if "Members@odata.nextLink" in payload:
            self.problem(f"{what} ({path}) is paged (Members@odata.nextLink): only its first "
                         "page read")
        paths: list[str] = []
        for index, member in enumerate(members):
            if not isinstance(member, Mapping):
                self.problem(f"{what} ({path}) member {index} refused: it is "
                             f"{type(member).__name__}, not an object with an @odata.id")
                continue
            found, why = check_link(member.get("@odata.id"), within=path)
            if found is None:
                self.problem(f"{what} ({path}) member {index} refused: it {why}")
            elif found not in paths:
                paths.append(found)
        return paths

    def text(self, payload: Mapping[str, Any], key: str, what: str,
             required: bool = True) -> str | None:
        """payload[key] as bounded printable text; None (and a problem) when absent, empty
        or not a string."""
        value = payload.get(key)
        if value is None:
            if required:
                self.problem(f"{what}: no {key}")
            return None
        if not isinstance(value, str):
            self.problem(f"{what}: {key} is {type(value).__name__}, not text")
            return None
        return self.clean(value, f"{what}: {key}", required)

    def clean(self, value: str, what: str, required: bool = True) -> str | None:
        text = printable(value.strip())
        if text != value.strip():
            self.problem(f"{what} had non-printable characters (escaped)")
        if len(text) > MAX_TEXT:
            self.problem(f"{what} is {len(text)} characters: cut to {MAX_TEXT}")
            text = text[:MAX_TEXT]
        if not text:
            if required:
                self.problem(f"{what} is empty")
            return None
        return text


def _id(walk: _Walk, payload: Mapping[str, Any], path: str, what: str) -> str:
    """The resource's Id, else the last segment of its path."""
    found = walk.text(payload, "Id", what, required=False)
    return found or printable(path.rsplit("/", 1)[-1])


def _macs(walk: _Walk, system: Mapping[str, Any], system_path: str
          ) -> tuple[tuple[str, str], ...]:
    path = walk.link(system, "EthernetInterfaces", "MACs", system_path)
    if path is None:
        return ()
    found: list[tuple[str, str]] = []
    for member in walk.members(path, "EthernetInterfaces"):
        iface = walk.fetch(member, "Ethernet interface")
        if iface is None:
            continue
        name = _id(walk, iface, member, f"Ethernet interface {member}")
        mac = None
        for key in ("MACAddress", "PermanentMACAddress"):
            raw = iface.get(key)
            if raw is None:
                continue
            if not isinstance(raw, str):
                walk.problem(f"Ethernet interface {name}: {key} is {type(raw).__name__}, "
                             "not text")
                continue
            mac = normalize_mac(raw)
            if mac is None:
                walk.problem(f"Ethernet interface {name}: {key} '{printable(raw)[:64]}' is "
                             "not a MAC address")
            elif mac == "00:00:00:00:00:00":
                walk.problem(f"Ethernet interface {name}: {key} is 00:00:00:00:00:00 (none)")
                mac = None
            if mac:
                break
        if not mac:
            walk.problem(f"Ethernet interface {name}: no MAC address read")
            continue
        twin = next((other for other, seen in found if seen == mac), None)
        if twin is not None:
            walk.problem(f"Ethernet interfaces {twin} and {name} report the same MAC {mac}")
        found.append((name, mac))
    return tuple(found)


def _allowable(walk: _Walk, boot: Mapping[str, Any], key: str, what: str) -> tuple[str, ...]:
    """boot[key], the list of values the BMC allows, as bounded text; () when not given."""
    raw = boot.get(key)
    if raw is None:
        return ()
    if not isinstance(raw, list):
        walk.problem(f"{what}: {key} is {type(raw).__name__}, not a list")
        return ()
    if len(raw) > MAX_ALLOWABLE:
        walk.problem(f"{what}: {key} lists {len(raw)} values: the first {MAX_ALLOWABLE} kept")
    allowed: list[str] = []
    for value in raw[:MAX_ALLOWABLE]:
        if not isinstance(value, str):
            walk.problem(f"{what}: a {key} value is {type(value).__name__}, not text: "
                         "left out")
            continue
        text = walk.clean(value, f"{what}: a {key} value")
        if text is not None and text not in allowed:
            allowed.append(text)
    return tuple(allowed)


def _boot(walk: _Walk, system: Mapping[str, Any], what: str) -> BootOverride:
    boot = system.get("Boot")
    if not isinstance(boot, Mapping):
        walk.problem(f"{what}: no Boot object (boot override unknown)")
        return NO_BOOT
    targets = "BootSourceOverrideTarget@Redfish.AllowableValues"
    if boot.get(targets) is None:
        walk.problem(f"{what}: no {targets} (the allowable boot targets are unknown)")
    # The allowable enabled values and modes are optional in Redfish, and most BMCs leave
    # them out: none given is no problem.
    return BootOverride(walk.text(boot, "BootSourceOverrideTarget", what),
                        walk.text(boot, "BootSourceOverrideEnabled", what),
                        walk.text(boot, "BootSourceOverrideMode", what),
                        *(_allowable(walk, boot, f"BootSourceOverride{key}@Redfish."
                                     "AllowableValues", what) for key in BOOT_KEYS))


def _active_image(walk: _Walk, payload: Mapping[str, Any], what: str) -> str | None:
    """The Id (the link's last segment) of the firmware component that `payload` (a Manager
    or a Bios) says it runs: Links.ActiveSoftwareImage, optional in Redfish. Not followed: the
    caller finds it among the firmware inventory's components."""
    links = payload.get("Links")
    ref = links.get("ActiveSoftwareImage") if isinstance(links, Mapping) else None
    if ref is None:
        return None
    path, why = check_link(ref.get("@odata.id") if isinstance(ref, Mapping) else ref)
    if path is None:
        walk.problem(f"{what}'s ActiveSoftwareImage link refused: it {why}")
        return None
    return path.rsplit("/", 1)[-1]


def _bios(walk: _Walk, system: Mapping[str, Any], system_path: str
          ) -> tuple[dict[str, Scalar], str | None]:
    """The BIOS attributes, and the Id of the BIOS image the Bios says it runs."""
    path = walk.link(system, "Bios", "BIOS attributes", system_path)
    if path is None:
        return {}, None
    bios = walk.fetch(path, "Bios")
    if bios is None:
        return {}, None
    image = _active_image(walk, bios, f"Bios ({path})")
    raw = bios.get("Attributes")
    if not isinstance(raw, Mapping):
        walk.problem(f"BIOS attributes unknown: Bios ({path}) has no Attributes object")
        return {}, image
    if len(raw) > MAX_ATTRIBUTES:
        walk.problem(f"Bios ({path}) has {len(raw)} attributes: the first {MAX_ATTRIBUTES} "
                     "kept")
    attributes: dict[str, Scalar] = {}
    left_out = changed = 0
    for name, value in list(raw.items())[:MAX_ATTRIBUTES]:
        key = printable(str(name))[:MAX_ATTRIBUTE_NAME]
        if isinstance(value, str):
            text = printable(value)[:MAX_ATTRIBUTE_VALUE]
            changed += (key != name) or (text != value)
            attributes[key] = text
        elif value is None or isinstance(value, bool | int | float):
            changed += key != name
            attributes[key] = value
        else:
            left_out += 1
    if left_out:
        walk.problem(f"Bios ({path}): {left_out} attributes with a value that is not a "
                     "string, number, boolean or null left out")
    if changed:
        walk.problem(f"Bios ({path}): {changed} attribute names or values had non-printable "
                     f"characters (escaped) or were too long (names cut to "
                     f"{MAX_ATTRIBUTE_NAME} characters, values to {MAX_ATTRIBUTE_VALUE})")
    return attributes, image


def _firmware(walk: _Walk, root: Mapping[str, Any]) -> tuple[FirmwareComponent, ...]:
    service = walk.link(root, "UpdateService", "firmware inventory", "the service root")
    if service is None:
        return ()
    update = walk.fetch(service, "UpdateService")
    if update is None:
        return ()
    path = walk.link(update, "FirmwareInventory", "firmware inventory", "UpdateService")
    if path is None:
        return ()
    found: list[FirmwareComponent] = []
    for member in walk.members(path, "FirmwareInventory"):
        item = walk.fetch(member, "firmware component")
        if item is None:
            continue
        what = f"firmware component {member}"
        found.append(FirmwareComponent(_id(walk, item, member, what),
                                       walk.text(item, "Name", what, required=False),
                                       walk.text(item, "Version", what, required=False)))
    return tuple(found)


def _manager(walk: _Walk, root: Mapping[str, Any], system: Mapping[str, Any] | None
             ) -> tuple[str | None, str | None, str | None]:
    """The BMC's Model, FirmwareVersion and active image's Id: the manager the system is
    ManagedBy, else the first of the Managers collection."""
    path = None
    links = system.get("Links") if system else None
    managed = links.get("ManagedBy") if isinstance(links, Mapping) else None
    if isinstance(managed, list) and managed:
        first = managed[0]
        path, why = check_link(first.get("@odata.id") if isinstance(first, Mapping) else first)
        if path is None:
            walk.problem(f"the system's ManagedBy link refused: it {why}")
    if path is None:
        collection = walk.link(root, "Managers", "the BMC's model and firmware",
                               "the service root")
        members = walk.members(collection, "Managers") if collection else []
        path = members[0] if members else None
    manager = walk.fetch(path, "Manager") if path else None
    if manager is None:
        return None, None, None
    what = f"Manager {path}"
    return (walk.text(manager, "Model", what, required=False),
            walk.text(manager, "FirmwareVersion", what), _active_image(walk, manager, what))


def read_inventory(get: Callable[[str], Any], max_members: int = MAX_MEMBERS,
                   max_requests: int = MAX_REQUESTS) -> BmcInventory:
    """The inventory of the BMC behind `get` (path -> the JSON object there; raises when it
    cannot). Never raises itself: what cannot be read is unknown, and `problems` say why."""
    walk = _Walk(get, max_members, max_requests)
    root = walk.fetch(ROOT, "the service root")
    if root is None:
        return BmcInventory(problems=tuple(walk.problems))
    system_path = system = None
    systems = walk.link(root, "Systems", "the system", "the service root")
    if systems is not None:
        members = walk.members(systems, "Systems")
        if members:
            system_path = members[0]
            system = walk.fetch(system_path, "the system")
        else:
            walk.problem(f"the system unknown: Systems ({systems}) gives none to read")
    fields: dict[str, Any] = {}
    if system is not None and system_path is not None:
        what = f"the system ({system_path})"
        fields = {
            "system": system_path,
            "manufacturer": walk.text(system, "Manufacturer", what),
            "model": walk.text(system, "Model", what),
            "serial": walk.text(system, "SerialNumber", what),
            "power_state": walk.text(system, "PowerState", what),
            "bios_version": walk.text(system, "BiosVersion", what),
            "boot": _boot(walk, system, what),
            "macs": _macs(walk, system, system_path),
        }
        fields["bios_attributes"], fields["bios_image"] = _bios(walk, system, system_path)
    fields["bmc_model"], fields["bmc_firmware"], fields["bmc_image"] = _manager(walk, root,
                                                                               system)
    fields["firmware"] = _firmware(walk, root)
    problems = walk.problems
    if len(problems) > MAX_PROBLEMS:
        problems = [*problems[:MAX_PROBLEMS], f"... and {len(problems) - MAX_PROBLEMS} more"]
    return BmcInventory(**fields, problems=tuple(problems))
