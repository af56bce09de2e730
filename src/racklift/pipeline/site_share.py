"""What the racks of one site share, held by one rack at a time: the site's boot servers while
they serve a rack's deploys (their DHCP configuration lists the hosts being deployed; the image
stage holds them from its role run to the release) and, with
--pair-with-active, its active hosts as RDMA partners while a rack runs acceptance tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from racklift.lifecycle.stages import ACCEPT, IMAGE
from racklift.pipeline.progress import Progress

# What a rack's stage shares with the other racks of its site, as the wait names it.
SHARED = {IMAGE: "its boot server", ACCEPT: "its active hosts as RDMA partners"}


class SiteShare:
    """One site's shared resources: one rack of the site holds them at a time."""

    def __init__(self, site: str) -> None:
        self.site = site
        self._lock = threading.Lock()

    @contextmanager
    def held(self, stage: str, rack: str, progress: Progress, *, needed: bool) -> Iterator[None]:
        """The site's shared resources for `rack`'s `stage` (where the stage `needed` them),
        waiting, and saying so, while another rack of the site holds them."""
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
