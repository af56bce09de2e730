"""What the racks of one site share: its boot servers, whose host lists name every rack's hosts
deploying there (racklift.pipeline.boot_server_hosts: the racks deploy at once) and, with
--pair-with-active, its active hosts as RDMA partners, held by one rack at a time while it runs
acceptance tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from racklift.lifecycle.stages import ACCEPT
from racklift.pipeline.boot_server_hosts import BootServerHosts
from racklift.pipeline.progress import Progress

# What a rack's stage shares with the other racks of its site, as the wait names it.
SHARED = {ACCEPT: "its active hosts as RDMA partners"}


class SiteShare:
    """One site's shared resources."""

    def __init__(self, site: str) -> None:
        self.site = site
        self.boot_servers = BootServerHosts()
        self._lock = threading.Lock()

    @contextmanager
    def held(self, stage: str, rack: str, progress: Progress, *, needed: bool) -> Iterator[None]:
        """The site's resources for `rack`'s `stage` (where the stage `needed` them), one rack
        at a time: waiting, and saying so, while another rack of the site holds them."""
        if not needed:
            yield
            return
        if not self._lock.acquire(blocking=False):
            progress.note(f"rack {rack}: {stage} waits for another rack of site {self.site} "
                          f"({SHARED[stage]})")
            self._lock.acquire()
        try:
            yield
        finally:
            self._lock.release()
