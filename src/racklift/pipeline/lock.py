"""One run at a time per host, across operators and controllers, kept in NetBox's journal.

Taking a lock appends a `racklift lock: taken` entry to each host's journal; the holder is the
oldest taken entry (lowest id: NetBox's database orders them) not yet released or broken. A run
that is not the holder withdraws its entry and reports who holds the host and since when. The
entries are the audit trail too. A lock outlives a killed run on purpose (the host may be half
done); `unlock` breaks it explicitly, and says when the holder's process is gone."""

from __future__ import annotations

import getpass
import os
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from racklift.netbox.client import NetBox

PREFIX = "racklift lock:"
_LINE = re.compile(r"^racklift lock: (?P<action>taken|released|broken) run=(?P<run>\S+)"
                   r"(?: by=(?P<owner>\S+))?(?: pid=(?P<pid>\d+))?(?: verb=(?P<verb>\S+))?")


@dataclass(frozen=True)
class Owner:
    user: str
    host: str
    pid: int

    @classmethod
    def current(cls) -> Owner:
        return cls(getpass.getuser(), socket.gethostname(), os.getpid())

    def __str__(self) -> str:
        return f"{self.user}@{self.host}"


@dataclass(frozen=True)
class Ticket:
    entry_id: int
    device_id: int
    run: str
    owner: str
    pid: int | None
    verb: str
    created: str

    def alive(self, here: str | None = None) -> bool | None:
        """Whether the holder's process still runs: known only on the controller it ran on."""
        here = here or socket.gethostname()
        if self.pid is None or self.owner.split("@")[-1] != here:
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def describe(self, here: str | None = None) -> str:
        alive = self.alive(here)
        state = {None: "", True: "", False: "; its process is gone: the lock is stale"}[alive]
        return (f"locked by {self.owner} ({self.verb} run {self.run}, pid {self.pid}) since "
                f"{self.created}{state}")


def taken_text(run: str, owner: Owner, verb: str) -> str:
    return (f"{PREFIX} taken run={run} by={owner} pid={owner.pid} verb={verb}\n"
            f"racklift {verb} works on this host until the run ends.")


def holders(entries: Iterable[Mapping[str, Any]]) -> dict[int, Ticket]:
    """Each device's current holder, from its lock journal entries (pure)."""
    open_: dict[tuple[int, str], Ticket] = {}
    for entry in sorted(entries, key=lambda e: e["id"]):
        match = _LINE.match(entry["comments"])
        if not match:
            continue
        key = (entry["assigned_object_id"], match["run"])
        if match["action"] == "taken":
            open_.setdefault(key, Ticket(entry["id"], key[0], match["run"],
                                         match["owner"] or "?",
                                         int(match["pid"]) if match["pid"] else None,
                                         match["verb"] or "?", entry["created"]))
        else:
            open_.pop(key, None)
    result: dict[int, Ticket] = {}
    for ticket in sorted(open_.values(), key=lambda t: t.entry_id):
        result.setdefault(ticket.device_id, ticket)
    return result


def _entries(netbox: NetBox, device_ids: list[int]) -> list[dict[str, Any]]:
    return netbox.get_for_ids("extras/journal-entries", "assigned_object_id", device_ids,
                              {"assigned_object_type": "dcim.device", "q": PREFIX},
                              fields=("id", "assigned_object_id", "comments", "created"))


def current(netbox: NetBox, device_ids: Iterable[int]) -> dict[int, Ticket]:
    return holders(_entries(netbox, list(device_ids)))


def _append(netbox: NetBox, device_ids: Iterable[int], text: str, kind: str = "info") -> None:
    netbox.create("extras/journal-entries", [
        {"assigned_object_type": "dcim.device", "assigned_object_id": device_id,
         "kind": kind, "comments": text} for device_id in device_ids])


def acquire(netbox: NetBox, device_ids: Iterable[int], run: str, verb: str,
            owner: Owner | None = None) -> dict[int, Ticket]:
    """Lock the devices for this run. Returns the devices held by others, with their holder;
    every other device is now this run's."""
    ids = list(device_ids)
    if not ids:
        return {}
    _append(netbox, ids, taken_text(run, owner or Owner.current(), verb))
    refused = {device: ticket for device, ticket in current(netbox, ids).items()
               if ticket.run != run}
    if refused:
        release(netbox, refused, run)
    return refused


def release(netbox: NetBox, device_ids: Iterable[int], run: str) -> None:
    _append(netbox, device_ids, f"{PREFIX} released run={run}")


def break_locks(netbox: NetBox, device_ids: Iterable[int], reason: str,
                owner: Owner | None = None) -> dict[int, Ticket]:
    """Break whatever lock each device has; returns what was broken."""
    held = current(netbox, device_ids)
    who = owner or Owner.current()
    for device, ticket in held.items():
        _append(netbox, [device], f"{PREFIX} broken run={ticket.run} by={who}\n"
                                  f"Lock of {ticket.owner} broken: {reason}", kind="warning")
    return held
