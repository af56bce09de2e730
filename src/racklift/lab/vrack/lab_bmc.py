"""The lab's BMC (LAB ONLY): sushy-tools' sushy-emulator with a stand-in for what real BMCs do
and sushy-tools 2.2 lacks, so racklift's firmware and BIOS apply path runs end to end against
the virtual rack. Nothing here is used against real hardware.

`python -m racklift.lab.vrack.lab_bmc --config bmc.conf` runs sushy-emulator's own Flask app
(its `main`, the same arguments and configuration file) with the additions below installed as
Flask hooks: `before_request` answers the paths the stand-in owns, `after_request` amends a few
of sushy-tools' JSON answers. Every other path is sushy-tools' unchanged.

What sushy-tools lacks, and what the stand-in does instead, as a real BMC does:
- FirmwareInventory (sushy-tools: 404): /redfish/v1/UpdateService/FirmwareInventory lists BMC
  (the stand-in's own version, RACKLIFT_LAB_BMC_FIRMWARE, default "1.00" as sushy-tools'
  Manager says) and BIOS (the system's BiosVersion, as sushy-tools' driver keeps it). The
  Manager's FirmwareVersion is the BMC's version, and the Manager and the system's Bios name
  their image with Links.ActiveSoftwareImage (as Dell, Lenovo, Supermicro and OpenBMC do).
- SimpleUpdate (sushy-tools: bumps the BIOS version's minor number, fetches nothing, 204 with a
  Location to a task that does not exist): 202 and a Task that really fetches ImageURI (http or
  https, a timeout, at most MAX_IMAGE bytes) in a background thread and stays Running at least
  RACKLIFT_LAB_BMC_TASK_SECONDS, so a client must poll. A lab image is JSON:
      {"racklift_lab_firmware_image": 1, "component": "BMC" | "BIOS", "version": "2.00",
       "fail": "optional: the task ends in Exception with this message"}
  A BMC image takes effect when the task completes (the BMC restarts itself); a BIOS image is
  staged, and the system runs it from its next boot, as servers that stage BIOS updates do.
  Anything else (unreachable, not a lab image, too big) ends the task in Exception, saying why.
- BIOS settings (sushy-tools: a PATCH of /BIOS/Settings applies at once): a PATCH is validated
  (names the system has, scalar values) and kept pending; /BIOS/Settings shows them over the
  current attributes, /BIOS the current ones until the system boots. A reset that boots the
  system (On or ForceOn while it is off; ForceRestart, GracefulRestart or PowerCycle while it is
  on) applies the pending attributes and a staged BIOS version once sushy-tools' reset succeeds.
  (sushy-tools' libvirt driver accepts PowerCycle and does nothing with it: the stand-in still
  counts it as a boot, as it would be on a real server.)

State (the BMC's version, pending attributes, staged BIOS versions, tasks) is kept in the JSON
file the configuration names (RACKLIFT_LAB_BMC_STATE), written atomically: a restarted emulator
keeps it (a task it was running ends in Exception, interrupted). Without one, state lives in
memory only. The file wins over RACKLIFT_LAB_BMC_FIRMWARE, which is the version a new BMC starts
at. Everything read from a request or an image is untrusted: sizes are bounded, no path is
taken from input, ImageURI must be http(s). The images' format and their fetch are
racklift.lab.vrack.lab_firmware's.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import flask
from sushy_tools import error as sushy_error
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule

from racklift.bmc.firmware import MAX_VALUE, is_bios_value
from racklift.lab.vrack.bmc import FIRMWARE_KEY, NETNS_KEY, STATE_KEY, TASK_SECONDS_KEY
from racklift.lab.vrack.lab_bmc_state import DEFAULT_BMC_FIRMWARE, State, TaskBody, now
from racklift.lab.vrack.lab_firmware import (
    COMPONENTS,
    MAX_IMAGE,
    NETNS_NAME,
    VERSION,
    ImageError,
    cut,
    enter_netns,
    fetch_image,
    parse_image,
)
from racklift.paths import write_atomically

EXTENSION = "racklift_lab_bmc"  # app.extensions key of the installed LabBmc
DEFAULT_TASK_SECONDS = 1.5
MAX_TASK_SECONDS = 600.0
MAX_BODY = 64 * 1024  # bytes of a request body the stand-in reads
MAX_URI = 2048
MAX_TARGETS = 8
MAX_ATTRIBUTES = 256  # attributes in one PATCH
MAX_TASKS = 64  # kept; the oldest finished go first
MAX_RUNNING = 4  # updates at once

BOOTS_WHEN_OFF = ("On", "ForceOn")
BOOTS_WHEN_ON = ("ForceRestart", "GracefulRestart", "PowerCycle")

UPDATE_SERVICE = "/redfish/v1/UpdateService"
INVENTORY = f"{UPDATE_SERVICE}/FirmwareInventory"
SIMPLE_UPDATE = f"{UPDATE_SERVICE}/Actions/UpdateService.SimpleUpdate"
TASKS = "/redfish/v1/TaskService/Tasks"


# The paths the stand-in answers itself (before sushy-tools' routes see the request).
_OWNED = Map([
    Rule(INVENTORY, endpoint="inventory", methods=["GET"]),
    Rule(f"{INVENTORY}/<component>", endpoint="component", methods=["GET"]),
    Rule(SIMPLE_UPDATE, endpoint="simple_update", methods=["POST"]),
    Rule(TASKS, endpoint="tasks", methods=["GET"]),
    Rule(f"{TASKS}/<task>", endpoint="task", methods=["GET"]),
    Rule("/redfish/v1/Systems/<identity>/BIOS/Settings", endpoint="bios_settings",
         methods=["GET", "PATCH"]),
])


class Refused(Exception):
    """A request the stand-in answers with a Redfish error."""

    def __init__(self, status: int, message: str, message_id: str = "Base.1.8.GeneralError"):
        super().__init__(message)
        self.status = status
        self.message_id = message_id


# ---------------------------------------------------------------------------------------------
# Requests


def check_image_uri(uri: Any) -> str:
    """The ImageURI, if it is an http(s) URL with a host and of a bounded length."""
    if not isinstance(uri, str) or not uri:
        raise Refused(400, "SimpleUpdate needs ImageURI, a string",
                      "Base.1.8.ActionParameterMissing")
    if len(uri) > MAX_URI:
        raise Refused(400, f"ImageURI is {len(uri)} characters: at most {MAX_URI}",
                      "Base.1.8.ActionParameterValueFormatError")
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 (raises ValueError for a port that does not parse)
    except ValueError:
        parts = None
    if (parts is None or parts.scheme not in ("http", "https") or not parts.hostname
            or not uri.isprintable() or " " in uri):
        raise Refused(400, f"ImageURI {cut(uri, 120)!r} is not an http:// or https:// URL",
                      "Base.1.8.ActionParameterValueFormatError")
    return uri


# ---------------------------------------------------------------------------------------------
# The stand-in


def _json(body: Any, status: int = 200, headers: Mapping[str, str] | None = None
          ) -> flask.Response:
    return flask.Response(json.dumps(body, indent=4), status=status,
                          content_type="application/json", headers=dict(headers or {}))


def _error(status: int, message: str, message_id: str = "Base.1.8.GeneralError"
           ) -> flask.Response:
    """A Redfish error body (sushy-tools' shape, with the message in the extended info too)."""
    return _json({"error": {"code": message_id, "message": message,
                            "@Message.ExtendedInfo": [{
                                "@odata.type": "#Message.v1_1_1.Message",
                                "MessageId": message_id, "Message": message,
                                "Severity": "Warning", "MessageSeverity": "Warning"}]}}, status)


def _request_json() -> dict[str, Any]:
    """The request's JSON object, read at most MAX_BODY bytes of it."""
    length = flask.request.content_length
    if length is not None and length > MAX_BODY:
        raise Refused(413, f"the request body is {length} bytes: at most {MAX_BODY}")
    data = flask.request.stream.read(MAX_BODY + 1)
    if len(data) > MAX_BODY:
        raise Refused(413, f"the request body is over {MAX_BODY} bytes")
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        body = None
    if not isinstance(body, dict):
        raise Refused(400, "the request body is not a JSON object",
                      "Base.1.8.MalformedJSON")
    return body


def _target_component(target: str) -> str | None:
    path = target.rstrip("/")
    if path == f"{INVENTORY}/BMC" or path.startswith("/redfish/v1/Managers/"):
        return "BMC"
    if path == f"{INVENTORY}/BIOS" or path.startswith("/redfish/v1/Systems/"):
        return "BIOS"
    return None


class LabBmc:
    """The stand-in installed on sushy-tools' app (`install`)."""

    def __init__(self, app: Any, state_file: Path | None = None,
                 bmc_firmware: str = DEFAULT_BMC_FIRMWARE,
                 task_seconds: float = DEFAULT_TASK_SECONDS, netns: str | None = None) -> None:
        # app: sushy-tools' Application (untyped): .systems (its driver), .managers, .config
        self.app = app
        self.state_file = state_file
        self.task_seconds = task_seconds
        self.netns = netns
        self.lock = threading.RLock()
        self.state = self._load(bmc_firmware)

    # State

    def _load(self, bmc_firmware: str) -> State:
        if self.state_file is None or not self.state_file.exists():
            return State(bmc_firmware=bmc_firmware)
        try:
            state = State.from_json(json.loads(self.state_file.read_text()))
        except (OSError, ValueError, RecursionError) as exc:
            self.app.logger.error("lab BMC state %s unreadable (%s): starting afresh",
                                  self.state_file, exc)
            return State(bmc_firmware=bmc_firmware)
        interrupted = False
        for task in state.tasks.values():
            if task.get("TaskState") in ("New", "Running"):
                self._end(task, "Exception", "Critical",
                          "interrupted: the BMC restarted before the update finished")
                interrupted = True
        if interrupted:
            self._save(state)
        return state

    def _save(self, state: State | None = None) -> None:
        if self.state_file is not None:
            write_atomically(self.state_file, json.dumps((state or self.state).to_json(),
                                                         indent=1, sort_keys=True))

    # The system this BMC manages, and its driver

    def system(self) -> str | None:
        """The UUID of the system whose BIOS is this BMC's BIOS component: the first one the
        configuration allows (the lab's emulators each allow one)."""
        allowed = self.app.config.get("SUSHY_EMULATOR_ALLOWED_INSTANCES")
        for uuid in self.app.systems.systems:
            if allowed is None or uuid in allowed:
                return str(uuid)
        return None

    def bios_version(self, uuid: str) -> str | None:
        try:
            version = self.app.systems.get_versions(uuid).get("BiosVersion")
        except sushy_error.NotSupportedError:
            return None
        return version if isinstance(version, str) else None

    def _uuid(self, identity: str) -> str:
        """The system's UUID; a name raises sushy-tools' AliasAccessError, which its error
        handler answers with a redirect to the UUID's path, as sushy-tools' own routes do."""
        if self.app.config.get("SUSHY_EMULATOR_ALLOWED_INSTANCES") is not None and \
                identity not in self.app.config["SUSHY_EMULATOR_ALLOWED_INSTANCES"]:
            raise Refused(404, f"no system {cut(identity, 80)}",
                          "Base.1.8.ResourceMissingAtURI")
        return str(self.app.systems.uuid(identity))

    # Hooks

    def before(self) -> flask.Response | None:
        """The answer to a path the stand-in owns; None lets sushy-tools answer."""
        request = flask.request
        if request.endpoint == "system_reset_action" and request.method == "POST":
            self._note_boot()
            return None
        path = request.path.rstrip("/") or "/"
        try:
            endpoint, args = _OWNED.bind("bmc").match(path, request.method)
        except NotFound:
            return None
        except MethodNotAllowed as exc:
            return _error(405, f"{request.method} is not allowed on {cut(path, 120)}: "
                          f"{', '.join(exc.valid_methods or ())}", "Base.1.8.OperationNotAllowed")
        except HTTPException:
            return None
        try:
            handler: Callable[..., flask.Response | None] = getattr(self, f"_{endpoint}")
            return handler(**args)
        except Refused as exc:
            return _error(exc.status, str(exc), exc.message_id)

    def after(self, response: flask.Response) -> flask.Response:
        """sushy-tools' answers amended: the Manager's and the Bios's image links, the BMC's
        version, the update service's size limit; a booting reset applies what is pending."""
        request = flask.request
        boot = flask.g.pop("racklift_lab_boot", None)
        if boot is not None and 200 <= response.status_code < 300:
            try:
                self._apply_at_boot(boot)
            except Exception as exc:  # the driver's failure: the reset was done, say so
                self.app.logger.exception("applying pending BIOS changes at boot failed")
                return _error(500, f"the system was reset, but applying its pending BIOS "
                              f"changes failed: {type(exc).__name__}: {cut(str(exc))}")
        if request.method not in ("GET", "HEAD") or response.status_code != 200 \
                or not response.is_json:
            return response
        amend = {"manager_resource": self._amend_manager, "bios": self._amend_bios,
                 "UpdateService.update_service_resource": self._amend_update_service,
                 }.get(request.endpoint or "")
        body = response.get_json(silent=True) if amend else None
        if amend is None or not isinstance(body, dict):
            return response
        amend(body, **(request.view_args or {}))
        response.set_data(json.dumps(body, indent=4))
        return response

    # FirmwareInventory

    def _versions(self) -> dict[str, str]:
        found = {"BMC": self.state.bmc_firmware}
        uuid = self.system()
        bios = self.bios_version(uuid) if uuid else None
        if bios is not None:
            found["BIOS"] = bios
        return found

    def _inventory(self) -> flask.Response:
        members = [{"@odata.id": f"{INVENTORY}/{c}"} for c in self._versions()]
        return _json({"@odata.type": "#SoftwareInventoryCollection."
                                     "SoftwareInventoryCollection",
                      "@odata.id": INVENTORY, "Name": "Firmware Inventory Collection",
                      "Members": members, "Members@odata.count": len(members)})

    def _component(self, component: str) -> flask.Response:
        version = self._versions().get(component)
        if version is None:
            raise Refused(404, f"no firmware component {cut(component, 80)}: this BMC has "
                          f"{' and '.join(self._versions())}", "Base.1.8.ResourceMissingAtURI")
        return _json({"@odata.type": "#SoftwareInventory.v1_2_0.SoftwareInventory",
                      "@odata.id": f"{INVENTORY}/{component}", "Id": component,
                      "Name": COMPONENTS[component], "Version": version, "Updateable": True,
                      "Status": {"State": "Enabled", "Health": "OK"}})

    # SimpleUpdate and its tasks

    def _simple_update(self) -> flask.Response:
        body = _request_json()
        uri = check_image_uri(body.get("ImageURI"))
        protocol = body.get("TransferProtocol")
        if protocol is not None and protocol != urlsplit(uri).scheme.upper():
            raise Refused(400, f"TransferProtocol {cut(repr(protocol), 40)} does not fit "
                          f"ImageURI: give {urlsplit(uri).scheme.upper()!r} or leave it out",
                          "Base.1.8.ActionParameterValueNotInList")
        targets = body.get("Targets") or []
        if not (isinstance(targets, list) and len(targets) <= MAX_TARGETS
                and all(isinstance(t, str) and len(t) <= 256 for t in targets)):
            raise Refused(400, f"Targets is not a list of at most {MAX_TARGETS} paths",
                          "Base.1.8.ActionParameterValueFormatError")
        wanted = {_target_component(t) for t in targets}
        if None in wanted:
            raise Refused(400, "Targets names something this BMC cannot update: give "
                          f"{INVENTORY}/BMC or /BIOS, a Manager or the System",
                          "Base.1.8.ActionParameterValueNotInList")
        system = self.system()
        with self.lock:
            running = [t for t in self.state.tasks.values() if t.get("TaskState") == "Running"]
            if len(running) >= MAX_RUNNING:
                return _error(503, f"{MAX_RUNNING} updates are running: try again later",
                              "Base.1.8.ServiceTemporarilyUnavailable")
            number = str(self.state.next_task)
            self.state.next_task += 1
            task: TaskBody = {
                "@odata.type": "#Task.v1_4_3.Task", "@odata.id": f"{TASKS}/{number}",
                "Id": number, "Name": f"Firmware update {number}",
                "Description": f"SimpleUpdate from {cut(uri, 200)}",
                "TaskState": "Running", "TaskStatus": "OK", "PercentComplete": 0,
                "StartTime": now(), "Messages": []}
            self.state.tasks[number] = task
            self._forget_old_tasks()
            self._save()
            answer = _json(task, 202, {"Location": f"{TASKS}/{number}"})
        threading.Thread(target=self._update, args=(number, uri, wanted, system),
                         name=f"lab-bmc-update-{number}", daemon=True).start()
        return answer

    def _forget_old_tasks(self) -> None:
        finished = [k for k, t in self.state.tasks.items() if t.get("TaskState") != "Running"]
        for number in finished[:max(0, len(self.state.tasks) - MAX_TASKS)]:
            del self.state.tasks[number]

    def _update(self, number: str, uri: str, targets: set[str | None],
                system: str | None) -> None:
        """The task's work: fetch, check, install (BMC) or stage (BIOS)."""
        done_at = time.monotonic() + self.task_seconds
        try:
            if self.netns is not None:
                enter_netns(self.netns)  # this task's thread alone
            image = parse_image(fetch_image(uri))
            if targets and image.component not in targets:
                raise ImageError(f"the image is {image.component} firmware; Targets name "
                                 f"{' and '.join(sorted(str(t) for t in targets))}")
            if image.fail is not None:
                raise ImageError(image.fail)
            if image.component == "BIOS" and system is None:
                raise ImageError("this BMC manages no system to stage a BIOS image for")
            with self.lock:
                self.state.tasks[number]["PercentComplete"] = 50
            time.sleep(max(0.0, done_at - time.monotonic()))
            with self.lock:
                if image.component == "BMC":
                    self.state.bmc_firmware = image.version
                    message = (f"BMC firmware {image.version} installed; the BMC restarted "
                               "to run it")
                else:
                    assert system is not None
                    self.state.pending_bios_version[system] = image.version
                    message = (f"BIOS {image.version} staged: the system runs it from its "
                               "next boot")
                self._end(self.state.tasks[number], "Completed", "OK", message)
                self._save()
        except Exception as exc:
            why = str(exc) if isinstance(exc, ImageError) else \
                f"internal error: {type(exc).__name__}: {cut(str(exc))}"
            time.sleep(max(0.0, done_at - time.monotonic()))
            with self.lock:
                self._end(self.state.tasks[number], "Exception", "Critical", why)
                self._save()

    @staticmethod
    def _end(task: TaskBody, state: str, status: str, message: str) -> None:
        ok = status == "OK"
        task.update({"TaskState": state, "TaskStatus": status, "EndTime": now(),
                     "Messages": [{
                         "@odata.type": "#Message.v1_1_1.Message",
                         "MessageId": ("TaskEvent.1.0.TaskCompletedOK" if ok
                                       else "TaskEvent.1.0.TaskAborted"),
                         "Message": message, "Severity": status, "MessageSeverity": status}]})
        if ok:
            task["PercentComplete"] = 100

    def _tasks(self) -> flask.Response:
        with self.lock:
            members = [{"@odata.id": f"{TASKS}/{number}"} for number in self.state.tasks]
        return _json({"@odata.type": "#TaskCollection.TaskCollection", "@odata.id": TASKS,
                      "Name": "Task Collection", "Members": members,
                      "Members@odata.count": len(members)})

    def _task(self, task: str) -> flask.Response:
        with self.lock:
            found = self.state.tasks.get(task)
            body = json.loads(json.dumps(found)) if found else None
        if body is None:
            raise Refused(404, f"no task {cut(task, 40)}", "Base.1.8.ResourceMissingAtURI")
        return _json(body)

    # BIOS settings

    def _bios_settings(self, identity: str) -> flask.Response | None:
        if self.app.feature_set != "full":
            return None  # sushy-tools refuses BIOS in its smaller feature sets
        uuid = self._uuid(identity)
        if flask.request.method == "PATCH":
            return self._patch_bios(uuid)
        with self.lock:
            attributes = {**self.app.systems.get_bios(uuid),
                          **self.state.pending_bios.get(uuid, {})}
        return _json(json.loads(self.app.render_template(
            "bios_settings.json", identity=identity,
            bios_pending_attributes=json.dumps(attributes, sort_keys=True))))

    def _patch_bios(self, uuid: str) -> flask.Response:
        attributes = _request_json().get("Attributes")
        if not isinstance(attributes, dict) or not attributes:
            raise Refused(400, "PATCH of BIOS settings needs Attributes, an object of the "
                          "attributes to change", "Base.1.8.PropertyMissing")
        if len(attributes) > MAX_ATTRIBUTES:
            raise Refused(400, f"{len(attributes)} attributes: at most {MAX_ATTRIBUTES} at once",
                          "Base.1.8.PropertyValueFormatError")
        current = self.app.systems.get_bios(uuid)
        unknown = sorted(name for name in attributes if name not in current)
        if unknown:
            raise Refused(400, f"BIOS attribute {cut(unknown[0], 80)} is not one of this "
                          f"system's ({len(current)} attributes)" +
                          (f", nor {len(unknown) - 1} more" if len(unknown) > 1 else ""),
                          "Base.1.8.PropertyUnknown")
        wrong = sorted(name for name, value in attributes.items() if not is_bios_value(value))
        if wrong:
            raise Refused(400, f"BIOS attribute {wrong[0]}'s value is not a string of at most "
                          f"{MAX_VALUE} printable ASCII characters, an integer or true/false",
                          "Base.1.8.PropertyValueTypeError")
        with self.lock:
            self.state.pending_bios.setdefault(uuid, {}).update(attributes)
            self._save()
        return flask.Response(status=204)

    # A reset that boots the system

    def _note_boot(self) -> None:
        """Before sushy-tools resets the system: remember whether this reset boots it."""
        request = flask.request
        identity = (request.view_args or {}).get("identity")
        length = request.content_length
        if identity is None or (length is not None and length > MAX_BODY):
            return
        # Cached: sushy-tools' route reads it again (and would read it all anyway).
        body = request.get_json(silent=True)
        reset = body.get("ResetType") if isinstance(body, dict) else None
        try:
            uuid = self._uuid(identity)
            power = self.app.systems.get_power_state(uuid)
        except Exception:  # sushy-tools answers it: a redirect, an unknown system
            return
        if (reset in BOOTS_WHEN_OFF and power == "Off") or \
                (reset in BOOTS_WHEN_ON and power == "On"):
            flask.g.racklift_lab_boot = uuid

    def _apply_at_boot(self, uuid: str) -> None:
        with self.lock:
            attributes = self.state.pending_bios.get(uuid)
            version = self.state.pending_bios_version.get(uuid)
            if attributes:
                self.app.systems.set_bios(uuid, attributes)
            if version is not None:
                self.app.systems.set_versions(uuid, {"BiosVersion": version})
            if attributes is not None or version is not None:
                self.state.pending_bios.pop(uuid, None)
                self.state.pending_bios_version.pop(uuid, None)
                self._save()
                self.app.logger.info("system %s booted: applied %d pending BIOS attributes%s",
                                     uuid, len(attributes or {}),
                                     f" and BIOS {version}" if version else "")

    # Amendments of sushy-tools' answers

    def _amend_manager(self, body: dict[str, Any], **_: Any) -> None:
        image = {"@odata.id": f"{INVENTORY}/BMC"}
        body["FirmwareVersion"] = self.state.bmc_firmware
        links = body.setdefault("Links", {})
        if isinstance(links, dict):
            links["ActiveSoftwareImage"] = image
            links["SoftwareImages"] = [image]

    def _amend_bios(self, body: dict[str, Any], identity: str = "", **_: Any) -> None:
        body.setdefault("@Redfish.Settings", {
            "@odata.type": "#Settings.v1_0_0.Settings",
            "SettingsObject": {"@odata.id": f"/redfish/v1/Systems/{identity}/BIOS/Settings"}})
        if identity != self.system():
            return
        image = {"@odata.id": f"{INVENTORY}/BIOS"}
        links = body.setdefault("Links", {})
        if isinstance(links, dict):
            links["ActiveSoftwareImage"] = image
            links["SoftwareImages"] = [image]

    def _amend_update_service(self, body: dict[str, Any], **_: Any) -> None:
        body["MaxImageSizeBytes"] = MAX_IMAGE
        body.pop("HttpPushUri", None)  # no push updates here: SimpleUpdate only


def _hook_before() -> flask.Response | None:
    lab = flask.current_app.extensions.get(EXTENSION)
    return lab.before() if lab is not None else None


def _hook_after(response: flask.Response) -> flask.Response:
    lab = flask.current_app.extensions.get(EXTENSION)
    return lab.after(response) if lab is not None else response


def install(app: Any) -> LabBmc:
    """The stand-in, configured from app.config (sushy-tools' configuration file), installed
    on sushy-tools' app. Installing again replaces the stand-in (its hooks are added once)."""
    config = app.config
    state = config.get(STATE_KEY)
    firmware = config.get(FIRMWARE_KEY, DEFAULT_BMC_FIRMWARE)
    seconds = config.get(TASK_SECONDS_KEY, DEFAULT_TASK_SECONDS)
    if state is not None and not isinstance(state, str | Path):
        raise ValueError(f"{STATE_KEY} is {state!r}: give a file's path")
    if not (isinstance(firmware, str) and VERSION.fullmatch(firmware)):
        raise ValueError(f"{FIRMWARE_KEY} is {firmware!r}: give a version, 1 to 64 printable "
                         "ASCII characters with no space at either end")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
            or not 0 <= seconds <= MAX_TASK_SECONDS:
        raise ValueError(f"{TASK_SECONDS_KEY} is {seconds!r}: give 0 to {MAX_TASK_SECONDS:.0f} "
                         "seconds")
    netns = config.get(NETNS_KEY)
    if netns is not None and not (isinstance(netns, str) and NETNS_NAME.fullmatch(netns)):
        raise ValueError(f"{NETNS_KEY} is {netns!r}: give a network namespace's name")
    lab = LabBmc(app, Path(state) if state is not None else None, firmware, float(seconds),
                 netns)
    if EXTENSION not in app.extensions:
        app.before_request(_hook_before)
        app.after_request(_hook_after)
    app.extensions[EXTENSION] = lab
    return lab


def main() -> int:
    """sushy-emulator's main, its arguments and configuration, with the stand-in installed."""
    from sushy_tools.emulator import main as sushy  # builds sushy-tools' app

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--config")
    args, _ = parser.parse_known_args()
    sushy.app.configure(config_file=args.config)  # sushy's main reads it again: same values
    install(sushy.app)
    return int(sushy.main())


if __name__ == "__main__":
    raise SystemExit(main())
