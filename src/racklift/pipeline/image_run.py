"""One image stage run over a rack's hosts (racklift.pipeline.image_stage): each host's error,
its notes, the playbooks it runs with the boot servers in their inventory, and what one step of
the stage hands the next (power-on times, boot server clocks, nonces and markers)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from racklift.ansible import HostEvent, PlaybookResult, run_playbook
from racklift.bmc.firmware import ApplyPlan, Pins
from racklift.lifecycle.stages import IMAGE
from racklift.netbox.client import NetBox
from racklift.pipeline.image_plan import (
    BOOT_SERVER_ROLE,
    NETBOX_INVENTORY,
    BootClock,
    ImagingOptions,
    Target,
)
from racklift.pipeline.progress import Progress


def with_boot_servers(directory: Path, extra: tuple[str, ...] = (),
                      base: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment of a playbook run whose inventory also holds the boot servers (the
    NetBox inventory takes GPU servers only): the sources `base` gives every playbook run
    (its ANSIBLE_INVENTORY, as a lab run sets it; else NetBox's), a second racklift_netbox
    source in `directory`, then `extra`."""
    boot_sources = directory / "boot-servers.racklift.yml"
    boot_sources.write_text(f"plugin: racklift_netbox\nroles: [{BOOT_SERVER_ROLE}]\n")
    sources = base.get("ANSIBLE_INVENTORY") or str(NETBOX_INVENTORY)
    return {"ANSIBLE_INVENTORY": ",".join([sources, str(boot_sources), *extra])}


class ImageRun:
    """One imaging run over a rack's hosts (the pipeline calls the stage per rack)."""

    def __init__(self, netbox: NetBox, run_dir: Path, progress: Progress,
                 options: ImagingOptions, secrets: Path) -> None:
        self.netbox, self.run_dir, self.progress = netbox, run_dir, progress
        self.options, self.secrets = options, secrets
        self.errors: dict[str, str | None] = {}
        self.started: dict[str, float] = {}  # power-on, per host (monotonic)
        self.clocks: dict[str, BootClock] = {}  # per boot server, read right before power-on
        self.disk_boot_set: set[str] = set()  # hosts whose BMC was told to boot the disk again
        # Per host given to its boot server (set before the role runs there): its deploy's
        # nonce and marker, which the SSH check reads back; these hosts' boot servers are
        # released.
        self.nonces: dict[str, str] = {}
        self.markers: dict[str, dict[str, str]] = {}
        # --apply-firmware: hosts off their pins racklift brings to them, with their plans.
        self.firmware_due: dict[str, tuple[Pins, ApplyPlan]] = {}
        self.env = with_boot_servers(secrets, options.inventory)

    def fail(self, name: str, why: str) -> None:
        if self.errors.get(name) is None:
            self.errors[name] = why
            self.progress.failed(name, IMAGE, why)

    def note(self, name: str, text: str) -> None:
        since = self.started.get(name)
        self.progress.note(f"{name}: {text}" + (f" ({time.monotonic() - since:.0f} s after "
                                                "power-on)" if since else ""))

    def playbook(self, name: str, hosts: list[str], ident: str,
                 extravars: Mapping[str, Any] | None = None, capture: tuple[str, ...] = (),
                 expected_to_fail: str = "",
                 received: dict[str, float] | None = None) -> PlaybookResult:
        """`received`: when each host's captured result came (monotonic), filled in."""
        def event(got: HostEvent) -> None:
            if received is not None and got.task in capture and got.kind == "ok":
                received[got.host] = time.monotonic()
            # A task that may fail (a host that does not run yet) is no failure to show.
            if not (got.task == expected_to_fail and got.kind in ("failed", "unreachable")):
                self.progress.event(got)
        return run_playbook(name, hosts, self.netbox.settings, self.env,
                            artifacts=self.run_dir / "ansible", ident=ident,
                            extravars={**self.options.extravars, **(extravars or {})},
                            on_event=event, capture=capture)

    def live(self, targets: list[Target]) -> list[Target]:
        return [t for t in targets if self.errors.get(t.name) is None]
