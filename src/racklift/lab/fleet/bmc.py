"""The simulated hosts' BMCs (lab only): one HTTPS server, in the fleet's namespace, answers
Redfish at every host's BMC address (its NetBox OOB IP), each address one BMC with one system,
as racklift expects of a real one. The tree is a Supermicro's (the fleet's hosts are the lab's
SYS-421GE-TNHR2-LCC): /redfish/v1/Systems/1, /Managers/1, the firmware inventory with the BMC's
and the BIOS's images (Links.ActiveSoftwareImage names them, as Supermicro's BMC does), the
BIOS's attributes, the reset action with its ActionInfo. A reset changes the power state after
the spec's power latency, drawn per BMC.

Faults per host: `bmc-firmware-old` (the BMC runs the version before the pinned one),
`bios-setting-off` (one pinned BIOS attribute is not as pinned), `bmc-unreachable` (the
connection is closed at once).

What a request carries is untrusted: the head and body are bounded, a path is only looked up.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import random
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from racklift.lab import seed

BMC_FIRMWARE_OLD = "bmc-firmware-old"
BIOS_SETTING_OFF = "bios-setting-off"
BMC_UNREACHABLE = "bmc-unreachable"
BMC_FAULTS = frozenset({BMC_FIRMWARE_OLD, BIOS_SETTING_OFF, BMC_UNREACHABLE})

BMC_VERSION = "01.03.12"
OLD_BMC_VERSION = "01.02.07"
BIOS_VERSION = "2.1"  # what the lab's emulated hosts report (racklift.lab.hwemu.profile.System)
BIOS_ATTRIBUTES: dict[str, Any] = {"SMTControl": "Enabled", "PCIeACSControl": "Disabled",
                                   "PowerPerformanceTuning": "OS Controls EPB"}
# What the fleet's hosts pin (the fleet's config context: racklift.lab.fleet.plan.SOFTWARE).
PINS: dict[str, Any] = {"firmware": {"BMC": BMC_VERSION, "BIOS": BIOS_VERSION},
                        "bios": {"SMTControl": "Enabled", "PCIeACSControl": "Disabled"}}
RESET_TYPES = ("On", "ForceOff", "GracefulShutdown", "ForceRestart", "GracefulRestart")
HEAD_LIMIT = 16 * 1024
BODY_LIMIT = 64 * 1024

SYSTEM = "/redfish/v1/Systems/1"
MANAGER = "/redfish/v1/Managers/1"
INVENTORY = "/redfish/v1/UpdateService/FirmwareInventory"
RESET = f"{SYSTEM}/Actions/ComputerSystem.Reset"


def _link(path: str) -> dict[str, str]:
    return {"@odata.id": path}


def _collection(path: str, members: list[str]) -> dict[str, Any]:
    return {"@odata.id": path, "Members": [_link(m) for m in members],
            "Members@odata.count": len(members)}


@dataclass
class SimBmc:
    """One simulated BMC: what it reports, and its power state."""

    host: seed.HostPlan
    faults: frozenset[str]
    power_seconds: float = 0.0
    power_state: str = "Off"
    boot: dict[str, str] = field(default_factory=lambda: {
        "BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None",
        "BootSourceOverrideMode": "UEFI"})
    # The host as a machine (racklift.lab.fleet.machine): told when the power goes off (False)
    # or on, a restart included (True).
    on_power: Callable[[bool], None] | None = None

    @property
    def bmc_version(self) -> str:
        return OLD_BMC_VERSION if BMC_FIRMWARE_OLD in self.faults else BMC_VERSION

    def attributes(self) -> dict[str, Any]:
        if BIOS_SETTING_OFF in self.faults:
            return {**BIOS_ATTRIBUTES, "SMTControl": "Disabled"}
        return dict(BIOS_ATTRIBUTES)

    def resources(self) -> dict[str, dict[str, Any]]:
        """The tree, path → object (made when asked: a few hundred microseconds)."""
        nics = [(n, self.host.macs[n]) for n in (seed.PROVISIONING, seed.INBAND)
                if n in self.host.macs]
        tree: dict[str, dict[str, Any]] = {
            "/redfish/v1": {
                "@odata.id": "/redfish/v1", "Id": "RootService", "RedfishVersion": "1.11.0",
                "Systems": _link("/redfish/v1/Systems"),
                "Managers": _link("/redfish/v1/Managers"),
                "UpdateService": _link("/redfish/v1/UpdateService"),
                "SessionService": _link("/redfish/v1/SessionService")},
            "/redfish/v1/Systems": _collection("/redfish/v1/Systems", [SYSTEM]),
            SYSTEM: {
                "@odata.id": SYSTEM, "Id": "1", "Name": "System",
                "Manufacturer": "Supermicro", "Model": "SYS-421GE-TNHR2-LCC",
                "SerialNumber": self.host.serial, "PowerState": self.power_state,
                "BiosVersion": BIOS_VERSION,
                "Boot": {**self.boot, "BootSourceOverrideTarget@Redfish.AllowableValues": [
                    "None", "Pxe", "Hdd", "Cd", "BiosSetup", "UsbCd"]},
                "EthernetInterfaces": _link(f"{SYSTEM}/EthernetInterfaces"),
                "Bios": _link(f"{SYSTEM}/Bios"),
                "Actions": {"#ComputerSystem.Reset": {
                    "target": RESET, "@Redfish.ActionInfo": f"{SYSTEM}/ResetActionInfo"}}},
            f"{SYSTEM}/ResetActionInfo": {
                "@odata.id": f"{SYSTEM}/ResetActionInfo", "Id": "ResetActionInfo",
                "Parameters": [{"Name": "ResetType", "Required": True, "DataType": "String",
                                "AllowableValues": list(RESET_TYPES)}]},
            f"{SYSTEM}/EthernetInterfaces": _collection(
                f"{SYSTEM}/EthernetInterfaces",
                [f"{SYSTEM}/EthernetInterfaces/{n}" for n, _ in nics]),
            f"{SYSTEM}/Bios": {
                "@odata.id": f"{SYSTEM}/Bios", "Id": "Bios", "Attributes": self.attributes(),
                "Links": {"ActiveSoftwareImage": _link(f"{INVENTORY}/BIOS")}},
            "/redfish/v1/Managers": _collection("/redfish/v1/Managers", [MANAGER]),
            MANAGER: {
                "@odata.id": MANAGER, "Id": "1", "Name": "Manager", "ManagerType": "BMC",
                "Model": "ASPEED", "FirmwareVersion": self.bmc_version,
                "Links": {"ActiveSoftwareImage": _link(f"{INVENTORY}/BMC")}},
            "/redfish/v1/UpdateService": {
                "@odata.id": "/redfish/v1/UpdateService", "Id": "UpdateService",
                "FirmwareInventory": _link(INVENTORY)},
            INVENTORY: _collection(INVENTORY, [f"{INVENTORY}/BMC", f"{INVENTORY}/BIOS"]),
            f"{INVENTORY}/BMC": {"@odata.id": f"{INVENTORY}/BMC", "Id": "BMC", "Name": "BMC",
                                 "Version": self.bmc_version, "Updateable": True},
            f"{INVENTORY}/BIOS": {"@odata.id": f"{INVENTORY}/BIOS", "Id": "BIOS",
                                  "Name": "BIOS", "Version": BIOS_VERSION, "Updateable": True},
        }
        for name, mac in nics:
            path = f"{SYSTEM}/EthernetInterfaces/{name}"
            tree[path] = {"@odata.id": path, "Id": name, "MACAddress": mac}
        return tree

    def reset(self, kind: str, later: Callable[[float, Callable[[], None]], Any]) -> bool:
        """Start a reset; the power state follows after the BMC's latency."""
        if kind not in RESET_TYPES:
            return False
        state = "Off" if kind in ("ForceOff", "GracefulShutdown") else "On"

        def done() -> None:
            acts = kind != "On" or self.power_state != "On"  # On when on does nothing
            self.power_state = state
            if acts and self.on_power is not None:
                self.on_power(state == "On")
        later(self.power_seconds, done)
        return True


def bmcs(hosts: list[seed.HostPlan], faults: Mapping[str, list[str]],
         power_seconds: float, spread: float = 0.3) -> dict[str, SimBmc]:
    """OOB address → its BMC; each BMC's power latency drawn around `power_seconds`."""
    out = {}
    for h in hosts:
        rng = random.Random(f"bmc:{h.name}")
        out[h.oob_ip.split("/")[0]] = SimBmc(
            h, frozenset(faults.get(h.name, ())) & BMC_FAULTS,
            power_seconds * rng.lognormvariate(0, spread) if power_seconds else 0.0)
    return out


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any] | None = None


def _error(status: HTTPStatus, message: str) -> Answer:
    return Answer(status, {"error": {"code": "Base.1.8.GeneralError", "message": message}})


def answer(bmc: SimBmc, method: str, path: str, body: bytes,
           later: Callable[[float, Callable[[], None]], Any]) -> Answer:
    """What the BMC answers to an authenticated request."""
    path = path.split("?", 1)[0].rstrip("/") or "/"
    if method == "GET":
        found = bmc.resources().get(path)
        return Answer(200, found) if found else _error(HTTPStatus.NOT_FOUND, f"{path}: none")
    try:
        sent = json.loads(body or b"{}")
    except ValueError:
        return _error(HTTPStatus.BAD_REQUEST, "the body is not JSON")
    if not isinstance(sent, dict):
        return _error(HTTPStatus.BAD_REQUEST, "the body is not an object")
    if method == "POST" and path == RESET:
        if bmc.reset(str(sent.get("ResetType")), later):
            return Answer(204)
        return _error(HTTPStatus.BAD_REQUEST, f"ResetType must be one of {RESET_TYPES}")
    if method == "PATCH" and path == SYSTEM and isinstance(sent.get("Boot"), dict):
        for key in ("BootSourceOverrideEnabled", "BootSourceOverrideTarget",
                    "BootSourceOverrideMode"):
            if isinstance(sent["Boot"].get(key), str):
                bmc.boot[key] = sent["Boot"][key][:32]
        return Answer(200, bmc.resources()[SYSTEM])
    return _error(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} {path}: not allowed")


def authorized(headers: Mapping[str, str], username: str, password: str) -> bool:
    got = headers.get("authorization", "")
    want = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
    return hmac.compare_digest(got.encode(), want.encode())


async def _read_request(reader: asyncio.StreamReader
                        ) -> tuple[str, str, dict[str, str], bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    words = lines[0].split()
    if len(words) != 3:
        return None
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        return None
    if not 0 <= length <= BODY_LIMIT:
        return None
    try:
        body = await reader.readexactly(length)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return words[0], words[1], headers, body


def _response(got: Answer, close: bool) -> bytes:
    body = json.dumps(got.body).encode() if got.body is not None else b""
    head = [f"HTTP/1.1 {got.status} {HTTPStatus(got.status).phrase}",
            f"Content-Length: {len(body)}", "OData-Version: 4.0",
            f"Connection: {'close' if close else 'keep-alive'}"]
    if body:
        head.append("Content-Type: application/json")
    if got.status == 401:
        head.append('WWW-Authenticate: Basic realm="Redfish"')
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def serve(bmcs_by_address: Mapping[str, SimBmc], context: ssl.SSLContext,
                username: str, password: str, port: int = 443) -> asyncio.Server:
    loop = asyncio.get_running_loop()

    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        bmc = bmcs_by_address.get(writer.get_extra_info("sockname")[0])
        try:
            if bmc is None or BMC_UNREACHABLE in bmc.faults:
                return
            while request := await _read_request(reader):
                method, path, headers, body = request
                got = (answer(bmc, method, path, body, loop.call_later)
                       if authorized(headers, username, password)
                       else _error(HTTPStatus.UNAUTHORIZED, "credentials refused"))
                close = headers.get("connection", "").lower() == "close"
                writer.write(_response(got, close))
                await writer.drain()
                if close:
                    return
        except (ConnectionError, ssl.SSLError):
            return
        finally:
            writer.close()

    return await asyncio.start_server(one, "", port, ssl=context, backlog=4096,
                                      limit=HEAD_LIMIT)
