"""Racks at once: each rack's batch runs in its own thread, up to a limit for the whole run and
one per site (a site's boot server and registry mirror serve every rack there). Racks start in
the order given as room frees up; a rack that waits for its site never holds back a rack of
another site that has room."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from racklift.errors import RackliftError

DEFAULT_RACKS = 4
DEFAULT_RACKS_PER_SITE = 4


@dataclass(frozen=True)
class Limits:
    total: int = DEFAULT_RACKS  # racks at once in the whole run
    per_site: int = DEFAULT_RACKS_PER_SITE  # racks at once in one site

    def __post_init__(self) -> None:
        for flag, value in (("--parallel-racks", self.total),
                            ("--racks-per-site", self.per_site)):
            if not isinstance(value, int) or value < 1:
                raise RackliftError(f"{flag} takes a whole number of racks from 1, not "
                                    f"{value!r} (1: one rack after another)")


def next_ready[T](waiting: Sequence[T], running: Mapping[str, int], limits: Limits,
               site_of: Callable[[T], str]) -> T | None:
    """The first waiting item that may start now (None: none may, or none waits)."""
    if sum(running.values()) >= limits.total:
        return None
    return next((item for item in waiting if running.get(site_of(item), 0) < limits.per_site),
                None)


def run_all[T](items: Sequence[T], work: Callable[[T], None], site_of: Callable[[T], str],
            limits: Limits, name_of: Callable[[T], str] = str) -> None:
    """work(item) for every item, each in its own thread, within `limits`. `work` handles the
    errors of its own item (one rack's failure never stops another); anything else it raises
    is raised here once every started item has finished. Interrupted (Ctrl-C), no more items
    start, and the running ones are waited for: their hosts' NetBox records stay whole."""
    changed = threading.Condition()
    running: Counter[str] = Counter()
    raised: list[BaseException] = []
    threads: list[threading.Thread] = []

    def one(item: T, site: str) -> None:
        try:
            work(item)
        except BaseException as exc:  # a bug: kept, raised once the others have finished
            raised.append(exc)
        finally:
            with changed:
                running[site] -= 1
                changed.notify_all()

    waiting = list(items)
    try:
        with changed:
            while waiting:
                item = next_ready(waiting, running, limits, site_of)
                if item is None:
                    changed.wait()
                    continue
                waiting = [w for w in waiting if w is not item]
                site = site_of(item)
                running[site] += 1
                thread = threading.Thread(target=one, args=(item, site),
                                          name=f"rack {name_of(item)}")
                threads.append(thread)
                thread.start()
    finally:
        for thread in threads:
            thread.join()
    if raised:
        raise raised[0]
