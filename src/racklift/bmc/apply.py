"""`--apply-firmware` on one BMC: bring a host's firmware and BIOS to its pins over Redfish.

The plan is racklift.bmc.firmware.plan's (what differs and can be changed); this does it:

1. Each firmware update through UpdateService.SimpleUpdate, the BMC fetching the image from
   the URL given (the site's boot server), one at a time (BMCs run one update at a time), its
   task followed to its end. A task that ends in Exception, Killed or Cancelled, or Completed
   with a Critical status, fails the host with the BMC's own messages.
2. The BIOS attributes in one PATCH of the Bios resource's settings object
   (`@Redfish.Settings`, else `<Bios>/Settings`), applied at the next boot ("OnReset" where the
   BMC lists apply times).
3. The host rebooted where a change needs it: a BIOS setting, or an update of anything but the
   BMC (a BMC restarts itself onto its new image). A host that was off is powered on for this
   and off again after.
4. Read back: the BMC's inventory again until every pin is met (a restarting BMC's errors are
   waited out), or the deadline, which fails the host naming what is still off.

What the BMC says (task links, messages) is untrusted: links are checked as the inventory
reader checks them, messages are made printable and cut.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from racklift.bmc import firmware
from racklift.bmc.links import as_given, check_link
from racklift.bmc.payloads import allowable
from racklift.bmc.reading import whole
from racklift.bmc.redfish import BmcError, RedfishClient
from racklift.errors import RackliftError
from racklift.paths import state_dir
from racklift.text import printable

UPDATE_SERVICE = "/redfish/v1/UpdateService"
SIMPLE_UPDATE = "#UpdateService.SimpleUpdate"
# Redfish's TaskState values after which a task does nothing more.
TASK_FAILED = ("Exception", "Killed", "Cancelled")
TASK_DONE = "Completed"
MAX_MESSAGES = 3
MAX_MESSAGE = 300
POLL = 5.0  # seconds between reads of a task, and of the inventory after a reboot
REBOOT_NOT_NEEDED = ("BMC",)  # components that restart themselves onto a new image


def firmware_dir() -> Path:
    """The controller's firmware images, which racklift.firmware_images paths name."""
    return Path(os.environ.get("RACKLIFT_FIRMWARE_DIR") or state_dir() / "firmware")


class ApplyError(RackliftError):
    """Applying a host's pins failed: what failed, and the changes made before it."""

    def __init__(self, message: str, done: list[Change]) -> None:
        super().__init__(message)
        self.done = done


@dataclass(frozen=True)
class Change:
    """One change made on the host, for its journal."""

    what: str  # "firmware BMC", "BIOS attribute ProcTurboMode"
    found: str
    wanted: str
    how: str  # the image and its task, or the settings object

    def __str__(self) -> str:
        return f"{self.what}: {self.found} → {self.wanted} ({self.how})"


def _messages(payload: Mapping[str, Any]) -> str:
    found = payload.get("Messages")
    texts = [printable(str(m.get("Message")))[:MAX_MESSAGE]
             for m in (found if isinstance(found, list) else [])[:MAX_MESSAGES]
             if isinstance(m, dict) and m.get("Message")]
    return "; ".join(texts) or "the BMC gave no message"


def task_outcome(status: int, payload: Mapping[str, Any] | None) -> str | None:
    """None while the task runs; "" when it completed well; else why it failed. A task monitor
    answers 202 while its task runs, and the task resource says TaskState."""
    state = payload.get("TaskState") if payload else None
    if state is None:
        return None if status == 202 else ""  # a monitor's final answer that is no task
    if state == TASK_DONE:
        health = payload.get("TaskStatus") if payload else None
        if health == "Critical":
            return f"completed with status Critical: {_messages(payload or {})}"
        return ""
    if state in TASK_FAILED:
        return f"ended {state}: {_messages(payload or {})}"
    return None


class SimpleUpdate(NamedTuple):
    target: str  # the action's path, as the BMC gives it
    protocols: tuple[str, ...]  # TransferProtocol's allowable values; empty: not said inline
    action_info: str | None  # where the BMC lists its parameters instead (checked)


def simple_update_target(service: Mapping[str, Any]) -> SimpleUpdate:
    """UpdateService's SimpleUpdate action: where to POST, and what it says of its parameters."""
    action = (service.get("Actions") or {}).get(SIMPLE_UPDATE)
    if not isinstance(action, dict):
        raise ValueError("offers no UpdateService.SimpleUpdate action")
    path, why = as_given(action.get("target"))
    if path is None:
        raise ValueError(f"names a SimpleUpdate target that is not followed: it {why}")
    return SimpleUpdate(path, allowable(action.get("TransferProtocol@Redfish.AllowableValues")),
                        check_link(action.get("@Redfish.ActionInfo"))[0])


def update_body(url: str, protocols: tuple[str, ...]) -> dict[str, str]:
    """SimpleUpdate's body: the image's URL, and TransferProtocol HTTP where the BMC lists the
    protocols it takes (Dell, HPE, Lenovo); a BMC that lists them without HTTP is refused."""
    if protocols and "HTTP" not in protocols:
        raise ValueError(f"takes images by {', '.join(protocols[:8])}, not HTTP")
    return {"ImageURI": url, **({"TransferProtocol": "HTTP"} if protocols else {})}


def settings_request(bios_path: str, bios: Mapping[str, Any],
                     attributes: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """Where the BIOS settings go, and the PATCH body."""
    settings = bios.get("@Redfish.Settings")
    settings = settings if isinstance(settings, dict) else {}
    link = (settings.get("SettingsObject") or {}).get("@odata.id") \
        if isinstance(settings.get("SettingsObject"), dict) else None
    path, why = as_given(link) if link is not None else (f"{bios_path}/Settings", "")
    if path is None:
        raise ValueError(f"names a BIOS settings object that is not followed: it {why}")
    body: dict[str, Any] = {"Attributes": dict(attributes)}
    times = settings.get("SupportedApplyTimes")
    if isinstance(times, list) and "OnReset" in times:
        body["@Redfish.SettingsApplyTime"] = {"ApplyTime": "OnReset"}
    return path, body


def needs_reboot(plan: firmware.ApplyPlan) -> bool:
    return bool(plan.settings) or any(
        firmware.SYNONYMS.get(u.name, u.name) not in REBOOT_NOT_NEEDED for u in plan.updates)


class _Apply:
    def __init__(self, bmc: RedfishClient, deadline: float, poll: float,
                 sleep: Callable[[float], None], clock: Callable[[], float]) -> None:
        self.bmc, self.poll, self.sleep, self.clock = bmc, poll, sleep, clock
        self.deadline = clock() + deadline
        self.done: list[Change] = []
        # SimpleUpdate's path and the transfer protocols it takes, read once per host.
        self._update: tuple[str, tuple[str, ...]] | None = None

    def update_request(self, what: str, url: str) -> tuple[str, dict[str, str]]:
        """Where to POST the update of `what` from `url`, and the body."""
        try:
            if self._update is None:
                action = simple_update_target(self.bmc.get(UPDATE_SERVICE))
                self._update = action.target, action.protocols or self.bmc.action_info(
                    action.action_info, "TransferProtocol")
            target, protocols = self._update
            return target, update_body(url, protocols)
        except ValueError as exc:
            raise self.fail(f"{what}: the BMC {exc}: update it with the vendor's tool, or "
                            "remove its image from the pins") from None

    def fail(self, why: str) -> ApplyError:
        return ApplyError(why, list(self.done))

    def update(self, update: firmware.Update, url: str) -> None:
        what = f"firmware {update.name}"
        target, body = self.update_request(what, url)
        answer = self.bmc.send("POST", target, body, f"starting the update of {what}",
                               repeatable=False)
        task = answer.payload or {}
        link = answer.location or (task.get("@odata.id") if task.get("TaskState") else None)
        how = f"image {url}"
        if link is not None:
            monitor, why = as_given(link)
            if monitor is None:
                raise self.fail(f"{what}: the BMC's task link {why}; the update may run: see "
                                "the BMC's task list")
            self.follow(what, monitor, answer.status, answer.payload)
            how += f", task {monitor}"
        self.done.append(Change(what, update.found, update.wanted, how))

    def follow(self, what: str, monitor: str, status: int,
               payload: Mapping[str, Any] | None) -> None:
        while (outcome := task_outcome(status, payload)) is None:
            if self.clock() >= self.deadline:
                raise self.fail(f"{what}: the BMC's update task {monitor} did not end in time "
                                f"(state {printable(str((payload or {}).get('TaskState')))})")
            self.sleep(self.poll)
            answer = self.bmc.poll(monitor, f"following the update of {what}")
            status, payload = answer.status, answer.payload
        if outcome:
            raise self.fail(f"{what}: the BMC's update task {monitor} {outcome}")

    def settings(self, settings: tuple[tuple[str, Any, Any], ...]) -> None:
        system = self.bmc.system()
        bios_path, why = check_link((system.get("Bios") or {}).get("@odata.id")
                                    if isinstance(system.get("Bios"), dict) else None)
        if bios_path is None:
            raise self.fail(f"BIOS attributes: the system's Bios link {why}")
        try:
            path, body = settings_request(bios_path, self.bmc.get(bios_path),
                                          {name: wanted for name, wanted, _ in settings})
        except ValueError as exc:
            raise self.fail(f"BIOS attributes: the BMC {exc}") from None
        self.bmc.send("PATCH", path, body, "setting BIOS attributes")
        self.done.extend(Change(f"BIOS attribute {name}", firmware.shown_value(found),
                                firmware.shown_value(wanted), f"{path}, at the next boot")
                         for name, wanted, found in settings)

    def read_back(self, pins: firmware.Pins) -> list[firmware.Finding]:
        """The findings left, read until none are or the deadline; a BMC that does not answer
        meanwhile (restarting onto a new image) is waited for."""
        while True:
            try:
                findings = firmware.compare(pins, whole(self.bmc))
                problem = ""
            except BmcError as exc:
                findings, problem = [], str(exc)
            if not findings and not problem:
                return []
            if self.clock() >= self.deadline:
                if problem:
                    raise self.fail(f"reading the pins back: {problem}")
                return findings
            self.sleep(self.poll)


def apply(bmc: RedfishClient, pins: firmware.Pins, plan: firmware.ApplyPlan,
          image_url: Callable[[str], str], deadline: float = 1800.0, poll: float = POLL,
          sleep: Callable[[float], None] = time.sleep,
          clock: Callable[[], float] = time.monotonic) -> list[Change]:
    """Make the plan's changes, reboot where they need it, read back: the changes made, or
    ApplyError (with the changes made before it). `image_url`: an image's path under the
    firmware directory → the URL the BMC fetches it from. `deadline`: seconds for all of it."""
    run = _Apply(bmc, deadline, poll, sleep, clock)
    was_on = None
    try:
        for update in plan.updates:
            run.update(update, image_url(update.image))
        if plan.settings:
            run.settings(plan.settings)
        if needs_reboot(plan):
            was_on = bmc.power_state() == "On"
            bmc.reset("ForceRestart" if was_on else "On")
        left = run.read_back(pins)
    except BmcError as exc:
        raise run.fail(str(exc)) from None
    finally:
        if was_on is False:  # powered on for the changes alone: off again, as it was
            # Best effort: the stage powers off hosts that failed; this host's error says more.
            with contextlib.suppress(BmcError):
                bmc.power_off()
    if left:
        raise run.fail("after the changes" + (" and a reboot" if was_on is not None else "")
                       + f", the BMC still reports {'; '.join(map(str, left))}")
    return run.done
