"""What the racks of one site share: its boot servers, whose host lists name every rack's hosts
deploying there (racklift.pipeline.boot_server_hosts: the racks deploy at once) and, with
--pair-with-active, its active hosts as RDMA partners, held by one rack at a time while it runs
acceptance tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from racklift.pipeline.boot_server_hosts import BootServerHosts
from racklift.pipeline.progress import Progress


class SiteShare:
    """One site's shared resources."""

    def __init__(self, site: str) -> None:
        self.site = site
        self.boot_servers = BootServerHosts()
        self._partners = threading.Lock()

    @contextmanager
    def partners(self, rack: str, progress: Progress, *, needed: bool) -> Iterator[None]:
        """The site's active hosts as `rack`'s RDMA partners (where its acceptance tests
        `needed` them), one rack at a time: waiting, and saying so, while another rack of the
        site tests against them."""
        if not needed:
            yield
            return
        if not self._partners.acquire(blocking=False):
            progress.note(f"rack {rack}: accept waits for another rack of site {self.site} "
                          "(its active hosts as RDMA partners)")
            self._partners.acquire()
        try:
            yield
        finally:
            self._partners.release()
