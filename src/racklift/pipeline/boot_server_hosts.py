"""The hosts each boot server deploys now, whichever rack of the run deploys them
(racklift.pipeline.image_stage). The boot_server role's host list is the whole of what a boot
server serves (its DHCP reservations, iPXE scripts and deploy data: it removes what the list
leaves out), so a rack's role run lists its own hosts and those of every other rack still
deploying there: a site's racks deploy at once.

Role runs and releases on one boot server take turns (two Ansible runs writing one dnsmasq
configuration would race), and what waits meanwhile is done together: when a turn ends, the
next one serves every rack waiting with the same settings in one role run, or releases every
rack waiting to release in one run, and each of them gets that run's answer. Sixteen racks
arriving at once cost two role runs, not sixteen. The whole role runs once per boot server and
run; later runs with the same settings and files (one image and ramdisk) run the role's hosts'
part alone (`tasks_from: deploys`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from racklift.errors import RackliftError

Entry = dict[str, Any]  # one host's boot_server_hosts entry, or {name, mac} to release
RELEASE = "release"
_PENDING, _STOPPED = object(), object()


@dataclass
class _Ask:
    """One rack's change to a boot server's list, waiting for its turn or another's run."""

    kind: str  # the settings it is served with (JSON), or RELEASE
    entries: list[Entry]
    answer: Any = _PENDING


@dataclass
class _Server:
    listed: dict[str, Entry] = field(default_factory=dict)
    set_up: str | None = None  # the settings the last whole run set up; None: run it whole
    busy: bool = False
    queue: list[_Ask] = field(default_factory=list)


class BootServerHosts:
    """What each boot server deploys now, for every rack of one run."""

    def __init__(self) -> None:
        self._turns = threading.Condition()
        self._servers: dict[str, _Server] = {}

    def serve(self, server: str, entries: list[Entry], settings: str,
              setup: Callable[[list[Entry], bool], tuple[str | None, Any]],
              waiting: Callable[[], None] = lambda: None) -> tuple[str | None, Any]:
        """`entries` added to what `server` deploys by a role run, `setup(listed, whole)` (this
        rack's or, where it waited, another's that served it too); that run's (error, what it
        found): error None when it serves them. `whole`: the whole role, where no earlier run
        here set up these `settings` (all but the host list: the files to publish, the
        subnet...); else its hosts' part. Entries whose run failed are not listed again, and
        the next run there is whole. `waiting()` is called first when the server is busy."""
        return self._turn(server, _Ask(settings, entries), setup, waiting)

    def release[T](self, server: str, hosts: list[Entry], remove: Callable[[list[Entry]], T],
                   waiting: Callable[[], None] = lambda: None) -> T:
        """`hosts` ({name, mac}) no longer listed on `server`, and removed there by
        `remove(hosts)` (this rack's run or, where it waited, another's that removed them
        too); that run's answer."""
        return self._turn(server, _Ask(RELEASE, hosts), remove, waiting)

    def _turn(self, server: str, ask: _Ask, run: Callable[..., Any],
              waiting: Callable[[], None]) -> Any:
        with self._turns:
            state = self._servers.setdefault(server, _Server())
            state.queue.append(ask)
            if state.busy:
                waiting()
            while state.busy and ask.answer is _PENDING:
                self._turns.wait()
            if ask.answer is _STOPPED:
                raise RackliftError(f"boot server {server}: the run that was to serve this "
                                    "rack's hosts too stopped (see the run's log)")
            if ask.answer is not _PENDING:  # another rack's run served it
                return ask.answer
            batch = [a for a in state.queue if a.kind == ask.kind]
            state.queue = [a for a in state.queue if a.kind != ask.kind]
            state.busy = True
            entries = [e for a in batch for e in a.entries]
            if ask.kind == RELEASE:
                for entry in entries:
                    state.listed.pop(entry["name"], None)
            else:
                state.listed.update((e["name"], e) for e in entries)
                whole, state.set_up = state.set_up != ask.kind, None
        answer: Any = _STOPPED
        try:
            if ask.kind == RELEASE:
                answer = run(entries)
            else:
                answer = run(list(state.listed.values()), whole)
            return answer
        finally:
            with self._turns:
                if ask.kind != RELEASE:
                    if answer is not _STOPPED and answer[0] is None:
                        state.set_up = ask.kind
                    else:
                        for entry in entries:
                            state.listed.pop(entry["name"], None)
                for other in batch:
                    other.answer = answer
                state.busy = False
                self._turns.notify_all()
