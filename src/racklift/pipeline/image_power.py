"""What the image stage asks each host's BMC over Redfish (racklift.pipeline.image_stage, the
end of step 1, steps 3 to 5): its firmware and BIOS against their pins, network boot and
power-on, the disk boot again, and an installed host's power state until its installer powers
it off."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from racklift.bmc import apply, firmware
from racklift.bmc.inventory import BmcInventory
from racklift.bmc.reading import whole
from racklift.bmc.redfish import BmcError, client_for
from racklift.lifecycle import state
from racklift.lifecycle.state import Transition
from racklift.netbox.desired import FIELD_PREFIX
from racklift.pipeline.image_plan import BootServer, Target, install_error
from racklift.pipeline.image_run import ImageRun

INSTALL_POLL = 10.0  # seconds between power state reads of hosts being installed
INSTALL_NOTE = 300.0  # seconds between progress notes of an install
FIRMWARE_AREA = "firmware"  # where the boot server serves firmware images, under its HTTP root


def _bmc(run: ImageRun, t: Target, operation: str, action: Callable[[Any], None]) -> None:
    try:
        with client_for(t.name, t.host.oob_ip, t.hostvars) as bmc:
            action(bmc)
    except BmcError as exc:
        run.fail(t.name, f"{operation}: {exc}")


def _parallel(targets: list[Target], work: Callable[[Target], None]) -> None:
    if targets:
        with ThreadPoolExecutor(max_workers=min(32, len(targets))) as pool:
            list(pool.map(work, targets))


def check_firmware(run: ImageRun, targets: list[Target]) -> None:
    """Before anything is served or powered on: each host's firmware and BIOS against its
    device type's pins, read over Redfish, so wrong firmware fails in seconds, not after an
    image and a configure. A host without pins is not asked. With --apply-firmware, a host off
    its pins that racklift can bring to them is due (run.firmware_due) instead: its images go
    to its boot server, then apply_firmware."""
    def one(t: Target) -> None:
        pins = firmware.read(t.host.config)[0]  # the reader refused hosts whose pins are wrong
        if not pins.pinned:
            return
        read: list[BmcInventory] = []
        _bmc(run, t, "reading its firmware and BIOS", lambda bmc: read.append(whole(bmc)))
        if not read:
            return  # failed, saying why
        findings = firmware.compare(pins, read[0])
        if not findings:
            run.note(t.name, firmware.met(pins))
        elif not run.options.apply_firmware:
            run.fail(t.name, firmware.failure(findings, read[0].problems))
        elif why := _cannot_apply(run, plan := firmware.plan(pins, read[0])):
            run.fail(t.name, f"{firmware.failure(findings, read[0].problems)}; --apply-firmware "
                             f"cannot: {why}")
        else:
            run.firmware_due[t.name] = (pins, plan)
            run.note(t.name, f"off its pins ({'; '.join(map(str, findings))}): applying them")
    _parallel(targets, one)


def _cannot_apply(run: ImageRun, plan: firmware.ApplyPlan) -> str:
    directory = firmware_dir(run)
    missing = [f"firmware {u.name}: its image {u.image} is not in {directory} (put it there, or "
               f"fix {FIELD_PREFIX}.{firmware.IMAGES}.{u.name})"
               for u in plan.updates if not (directory / u.image).is_file()]
    return "; ".join([*plan.cannot, *missing])


def firmware_dir(run: ImageRun) -> Path:
    return run.options.firmware_dir or apply.firmware_dir()


def firmware_files(run: ImageRun, targets: list[Target]) -> list[dict[str, str]]:
    """The boot_server role's files for the images the due hosts among `targets` need."""
    images = sorted({u.image for t in targets if t.name in run.firmware_due
                     for u in run.firmware_due[t.name][1].updates})
    return [{"src": str(firmware_dir(run) / image), "dest": f"{FIRMWARE_AREA}/{image}"}
            for image in images]


def apply_firmware(run: ImageRun, targets: list[Target], servers: Mapping[str, BootServer]) -> None:
    """The due hosts brought to their pins (racklift.bmc.apply), their boot servers serving the
    images; a journal entry per change, made or failed with."""
    changes: dict[str, list[apply.Change]] = {}

    def one(t: Target) -> None:
        pins, plan = run.firmware_due[t.name]
        base = f"{servers[t.boot_server].url}/{FIRMWARE_AREA}/"

        def act(bmc: Any) -> None:
            try:
                changes[t.name] = apply.apply(bmc, pins, plan, base.__add__,
                                              run.options.timeouts.firmware)
            except apply.ApplyError as exc:
                changes[t.name] = exc.done
                run.fail(t.name, f"applying its firmware and BIOS pins: {exc}")
        _bmc(run, t, "applying its firmware and BIOS pins", act)
        if run.errors.get(t.name) is None:
            run.note(t.name, f"firmware and BIOS brought to their pins ({len(changes[t.name])} "
                             "changes)")
    due = [t for t in targets if t.name in run.firmware_due]
    _parallel(due, one)
    state.apply(run.netbox, [
        Transition(t.host.netbox_id, f"racklift firmware: {change}",
                   kind="info" if run.errors.get(t.name) is None else "warning")
        for t in due for change in changes.get(t.name, [])])


def power_on(run: ImageRun, targets: list[Target]) -> None:
    def one(t: Target) -> None:
        _bmc(run, t, "network boot", lambda bmc: bmc.network_boot_once())
        if run.errors.get(t.name) is None:
            run.note(t.name, "network boot once, powered on through Redfish")
            run.started[t.name] = time.monotonic()
    _parallel(targets, one)


def boot_disk(run: ImageRun, targets: list[Target], succeeded: set[str]) -> None:
    """Boot from disk again, always; cycle power where the BMC kept the network boot
    (sushy-tools), power on installed hosts (their installer powered them off); power off hosts
    that failed, so they stop network-booting."""
    def one(t: Target) -> None:
        def act(bmc: Any) -> None:
            before = bmc.boot_override()
            bmc.boot_from_disk()
            if t.name not in succeeded:
                bmc.power_off()
            elif t.installer:  # the installer powered it off
                bmc.power_on()
            elif before.target == "Pxe" and before.enabled == "Continuous":
                bmc.reset("ForceRestart")
        ok = run.errors.get(t.name) is None
        run.disk_boot_set.add(t.name)
        _bmc(run, t, "setting the boot device back to the disk", act)
        if ok and run.errors.get(t.name) is None:
            run.note(t.name, "boots from its disk again")
    _parallel(targets, one)


def _power_state(run: ImageRun, t: Target, operation: str) -> str | None:
    found: list[str] = []
    _bmc(run, t, operation, lambda bmc: found.append(bmc.power_state()))
    return found[0] if found else None


def wait_installs(run: ImageRun, targets: list[Target], deadline: float) -> None:
    """Until each installed host is powered off (its installer's end) or `deadline`
    (monotonic) passed: every host's power state read each round, at once; a BMC that stops
    answering fails its host alone."""
    pending, noted = list(targets), time.monotonic()
    states: dict[str, str | None] = {}

    def read(t: Target) -> None:
        states[t.name] = _power_state(run, t, "reading the power state during the install")
    while pending:
        states.clear()
        _parallel(pending, read)
        now, left = time.monotonic(), []
        for t in pending:
            if run.errors.get(t.name) is not None:
                continue
            if states.get(t.name) == "Off":
                run.note(t.name, f"the {t.installer} installer finished and powered it off")
            elif now >= deadline:
                run.fail(t.name, install_error(t, run.options.timeouts.install))
            else:
                left.append(t)
        pending = left
        if pending and now - noted >= INSTALL_NOTE:
            run.progress.note(f"installing: {', '.join(t.name for t in pending)}")
            noted = now
        if pending:
            time.sleep(min(INSTALL_POLL, max(deadline - now, 0.1)))
