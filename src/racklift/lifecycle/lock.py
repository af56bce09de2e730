"""One run at a time per host, across operators and controllers: a lock per device, kept in
NetBox as one object that NetBox's database lets exist only once.

The lock on device 42 is the saved filter `racklift-lock-42`. Taking it is creating that
object. Its name and slug are unique in the database, so of any number of controllers creating
it at once exactly one commits; every other one gets an error (400 when NetBox's validation
already sees the winner, 500 when the unique index decides) and then reads who holds it.
Giving it back is deleting it by its id, and only the run that holds it does (a lock broken
and taken again since is another object, with another id). `unlock` breaks a lock whoever
holds it.

Why a saved filter: it is in every NetBox 4.x, without plugins; its name is unique in the
database; it holds a JSON object, where the holder is recorded (run, user@host, pid, verb; its
`created` says since when, on NetBox's clock); shared, every API user sees it (a lock another
controller's token could not see would lock nothing); disabled, NetBox never offers it as a
filter, and its own filter, `id=<device>`, lists the locked host for whoever opens it. Not
journal entries: their ids are drawn before commit, so two runs can each find their own entry
the oldest, and anyone may post a release. Not a tag: 200 characters for the holder, and every
tag picker would list the locks. Not a custom field on the device: NetBox's API has no
compare-and-set.

The journal keeps the audit trail, `racklift lock: taken|released|broken` entries on each host,
but holds no lock. A lock outlives a killed run on purpose: the host may be half done, and an
OS install the run started goes on without it. `racklift locks` says when the holder's process
is gone from this controller; `racklift unlock` breaks the lock, in the journal too."""

from __future__ import annotations

import getpass
import os
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from racklift.errors import NetBoxError, RackliftError
from racklift.lifecycle.state import STAGE_FIELD, Transition, apply
from racklift.netbox.client import NetBox

PREFIX = "racklift lock:"  # the journal entries of the audit trail
ENDPOINT = "extras/saved-filters"
NAME_PREFIX = "racklift-lock-"  # + the device id: each lock's name and slug
HOLDER = "racklift_lock"  # the holder record's key in the lock's parameters
_NAME = re.compile(r"racklift-lock-(?P<device>[0-9]+)")
FIELDS = ("id", "slug", "parameters", "created")

# (status, racklift_stage): what the pipeline plans a host's stages from.
State = tuple[str | None, str | None]
GONE: State = (None, None)


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
    """A lock as NetBox has it: its object's id, the device and who holds it since when."""

    lock_id: int
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


@dataclass(frozen=True)
class Moved:
    """A device whose state changed between the run's selection and its lock: the run's plan
    for it is stale, so the run leaves it."""

    device_id: int
    was: State
    now: State

    def describe(self) -> str:
        if self.now == GONE:
            return "no longer in NetBox since this run selected it"
        return (f"changed since this run selected it ({_shown(self.was)} → {_shown(self.now)}):"
                " left as it is; run again to plan it anew")


def _shown(state: State) -> str:
    status, stage = state
    return f"{status}, stage {stage}" if stage else f"{status}"


# ---------------------------------------------------------------------------------------------
# What NetBox stores (pure)


def lock_name(device_id: int) -> str:
    return f"{NAME_PREFIX}{device_id}"


def lock_object(device_id: int, run: str, owner: Owner, verb: str) -> dict[str, Any]:
    """The saved filter that is the device's lock, held by `run`."""
    name = lock_name(device_id)
    return {"name": name, "slug": name, "object_types": ["dcim.device"],
            "enabled": False, "shared": True,
            "description": f"racklift lock: {verb} run {run} by {owner}"[:200],
            "parameters": {"id": [device_id],
                           HOLDER: {"run": run, "owner": str(owner), "pid": owner.pid,
                                    "verb": verb}}}


def ticket(row: Mapping[str, Any]) -> Ticket | None:
    """The lock a saved filter is; None for any other saved filter. A holder record edited
    beyond reading still locks its device: the object's name is the lock."""
    match = _NAME.fullmatch(str(row.get("slug", "")))
    if not match:
        return None
    parameters = row.get("parameters")
    record = parameters.get(HOLDER) if isinstance(parameters, Mapping) else None
    holder: Mapping[str, Any] = record if isinstance(record, Mapping) else {}
    pid = holder.get("pid")
    return Ticket(row["id"], int(match["device"]), str(holder.get("run", "?")),
                  str(holder.get("owner", "?")), pid if isinstance(pid, int) else None,
                  str(holder.get("verb", "?")), str(row.get("created", "?")))


def holders(rows: Iterable[Mapping[str, Any]]) -> dict[int, Ticket]:
    """Each locked device's holder, from saved filters (pure)."""
    return {t.device_id: t for t in map(ticket, rows) if t is not None}


def moved(seen: Mapping[int, State], now: Mapping[int, State]) -> dict[int, Moved]:
    """The devices whose state is no longer the one they were selected in (pure)."""
    return {device: Moved(device, was, now.get(device, GONE))
            for device, was in seen.items() if now.get(device, GONE) != was}


def taken_text(run: str, owner: Owner, verb: str) -> str:
    return (f"{PREFIX} taken run={run} by={owner} pid={owner.pid} verb={verb}\n"
            f"racklift {verb} works on this host until the run ends.")


def broken_text(held: Ticket, by: Owner, reason: str) -> str:
    return (f"{PREFIX} broken run={held.run} by={by}\n"
            f"Lock of {held.owner} ({held.verb} run {held.run}, pid {held.pid}, since "
            f"{held.created}) broken: {reason}")


# ---------------------------------------------------------------------------------------------
# Taking, giving back and breaking locks (I/O)


def current(netbox: NetBox, device_ids: Iterable[int]) -> dict[int, Ticket]:
    """Each of the devices that is locked, with its holder."""
    wanted = set(device_ids)
    if not wanted:
        return {}
    # Every lock at once: there are as many as hosts in runs right now, usually one request.
    rows = netbox.get_all(ENDPOINT, {"slug__isw": NAME_PREFIX}, fields=FIELDS)
    return {device: t for device, t in holders(rows).items() if device in wanted}


def _journal(netbox: NetBox, texts: Mapping[int, str], kind: str = "info") -> None:
    apply(netbox, [Transition(device_id, text, kind) for device_id, text in texts.items()])


def _states(netbox: NetBox, device_ids: Iterable[int]) -> dict[int, State]:
    rows = netbox.get_for_ids("dcim/devices", "id", device_ids, {},
                              fields=("id", "status", "custom_fields"))
    return {row["id"]: (row["status"]["value"],
                        (row.get("custom_fields") or {}).get(STAGE_FIELD) or None)
            for row in rows}


def _take(netbox: NetBox, ids: list[int], run: str, owner: Owner,
          verb: str) -> dict[int, Ticket]:
    """Every device's holder, once this run created the lock of each device that had none."""
    held = current(netbox, ids)
    free = [device for device in ids if device not in held]
    while free:
        try:
            created = netbox.create(ENDPOINT, [lock_object(d, run, owner, verb) for d in free])
        except NetBoxError:
            # Another run created some of them first (NetBox rolled the whole request back),
            # or the request committed and its answer was lost: NetBox's objects say which.
            # When none of them is there, NetBox refused for another reason.
            now = current(netbox, ids)
            if not any(device in now for device in free):
                raise
            held, free = now, [device for device in ids if device not in now]
        else:
            return held | holders(created)
    return held


def acquire(netbox: NetBox, device_ids: Iterable[int], run: str, verb: str,
            owner: Owner | None = None, *,
            seen: Mapping[int, State] | None = None) -> dict[int, Ticket | Moved]:
    """Lock the devices for this run. Returns the devices refused, each with why: the Ticket
    of the run holding it, or, given `seen` (the state each device was selected in), a Moved
    when NetBox, read once the lock is this run's, has it in another (its lock is given
    back). Every other device is now this run's. A NetBox error gives back what this run took
    before it is raised."""
    ids = sorted(set(device_ids))
    if not ids:
        return {}
    who = owner or Owner.current()
    try:
        held = _take(netbox, ids, run, who, verb)
        mine = [device for device in ids if held[device].run == run]
        _journal(netbox, dict.fromkeys(mine, taken_text(run, who, verb)))
        refused: dict[int, Ticket | Moved] = {d: t for d, t in held.items() if t.run != run}
        if seen is not None:
            changed = moved({device: seen[device] for device in mine}, _states(netbox, mine))
            release(netbox, list(changed), run)
            refused |= changed
    except RackliftError as exc:
        try:
            release(netbox, ids, run)
        except RackliftError:
            raise RackliftError(f"{exc}; the locks run {run} took could not be given back "
                                "either: once NetBox answers, `racklift locks` lists them and "
                                "`racklift unlock` breaks them") from None
        raise
    return refused


def _delete(netbox: NetBox, held: Mapping[int, Ticket]) -> None:
    """Delete these locks, by id: a lock broken and taken again since is never touched."""
    ids = sorted(t.lock_id for t in held.values())
    try:
        netbox.delete(ENDPOINT, ids)
    except NetBoxError:
        # NetBox refuses the whole request when one of them is gone (broken or given back
        # meanwhile): delete the others.
        left = sorted({t.lock_id for t in current(netbox, held).values()} & set(ids))
        if left == ids:
            raise
        netbox.delete(ENDPOINT, left)


def release(netbox: NetBox, device_ids: Iterable[int], run: str) -> None:
    """Give back this run's locks on the devices. A lock another run holds stays: a run only
    ever gives back its own."""
    mine = {device: t for device, t in current(netbox, device_ids).items() if t.run == run}
    _delete(netbox, mine)
    _journal(netbox, dict.fromkeys(mine, f"{PREFIX} released run={run}"))


def break_locks(netbox: NetBox, device_ids: Iterable[int], reason: str,
                owner: Owner | None = None) -> dict[int, Ticket]:
    """Break whatever lock each device has, whoever holds it, each with a journal entry naming
    the holder, who broke it and why. Returns what was broken."""
    held = current(netbox, device_ids)
    who = owner or Owner.current()
    _delete(netbox, held)
    _journal(netbox, {device: broken_text(t, who, reason) for device, t in held.items()},
             kind="warning")
    return held
