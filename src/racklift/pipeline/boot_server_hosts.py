"""The hosts each boot server deploys now, whichever rack of the run deploys them
(racklift.pipeline.image_stage). The boot_server role's host list is the whole of what a boot
server serves (its DHCP reservations, iPXE scripts and deploy data: it removes what the list
leaves out), so a rack's role run lists its own hosts and those of every other rack still
deploying there: a site's racks deploy at once. Only their role runs and releases on one boot
server take turns (two Ansible runs writing one dnsmasq configuration would race). The whole
role runs once per boot server and run; a later rack whose settings and files are the same
(one image and ramdisk) runs the role's hosts' part alone (`tasks_from: deploys`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Entry = dict[str, Any]  # one host's boot_server_hosts entry (racklift.pipeline.image_stage)


class BootServerHosts:
    """What each boot server deploys now, for every rack of one run."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._listed: dict[str, dict[str, Entry]] = {}
        self._set_up: dict[str, str] = {}  # server → the settings its last whole run set up

    def _lock(self, server: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(server, threading.Lock())

    def serve(self, server: str, entries: list[Entry], settings: str,
              setup: Callable[[list[Entry], bool], str | None],
              waiting: Callable[[], None] = lambda: None) -> str | None:
        """`setup(listed, whole)`, the role run, with `entries` added to what `server` deploys,
        and its error (None: it serves them). `whole`: the whole role, where no earlier run
        here set up these `settings` (all but the host list: the files to publish, the
        subnet...); else its hosts' part. Entries whose setup failed are not listed again, and
        the next run there is whole. `waiting()` is called first when another rack's role run
        or release holds the server."""
        lock = self._lock(server)
        if not lock.acquire(blocking=False):
            waiting()
            lock.acquire()
        try:
            listed = self._listed.setdefault(server, {})
            listed.update((e["name"], e) for e in entries)
            whole = self._set_up.pop(server, None) != settings
            why: str | None = "its role run stopped"
            try:
                why = setup(list(listed.values()), whole)
            finally:
                if why is None:
                    self._set_up[server] = settings
                else:
                    for entry in entries:
                        listed.pop(entry["name"], None)
            return why
        finally:
            lock.release()

    def release[T](self, server: str, names: list[str], remove: Callable[[], T]) -> T:
        """`remove()`, the release run of the hosts `names`, once they are no longer listed:
        the next role run there leaves them out."""
        with self._lock(server):
            listed = self._listed.get(server, {})
            for name in names:
                listed.pop(name, None)
            return remove()
