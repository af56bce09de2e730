"""Live progress of a run: each host's stage and elapsed time, the task Ansible is running on
it, failures the moment they happen, and a heartbeat line while a long stage runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from racklift.ansible import HostEvent, failure_text

QUIET, NORMAL, VERBOSE = 0, 1, 2


@dataclass
class HostProgress:
    stage: str = ""  # empty: a helper host of the stage (e.g. the boot server)
    task: str = ""
    stage_started: float = field(default_factory=time.monotonic)


def _prefix(stage: str) -> str:
    return f"{stage} " if stage else ""


class Progress:
    """Feeds on stage changes and ansible-runner events; writes lines through `emit`. Racks
    run in threads of their own: every method holds the lock."""

    def __init__(self, emit: Callable[[str], None], level: int = NORMAL,
                 heartbeat: float = 15.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.emit = emit
        self.level = level
        self.heartbeat = heartbeat
        self.clock = clock
        self.started = clock()
        self.hosts: dict[str, HostProgress] = {}
        self._last_beat = self.started
        self._failed: set[tuple[str, str]] = set()
        self._lock = threading.RLock()

    def _line(self, text: str) -> None:
        self.emit(f"[{self.clock() - self.started:6.1f}s] {text}")

    def note(self, text: str) -> None:
        with self._lock:
            if self.level >= NORMAL:
                self._line(text)

    def stage(self, hosts: list[str], stage: str) -> None:
        with self._lock:
            now = self.clock()
            # The last stage's helper hosts (the boot server) are done: no stale task in the beat.
            self.hosts = {h: s for h, s in self.hosts.items() if s.stage}
            for host in hosts:
                self.hosts[host] = HostProgress(stage, "", now)
            if hosts and self.level >= NORMAL:
                self._line(f"{stage}: {', '.join(hosts)}")

    def failed(self, host: str, stage: str, why: str) -> None:
        with self._lock:
            state = self.hosts.get(host)
            if state is not None:
                state.task = ""  # it runs nothing more: out of the heartbeat
            if (host, stage) not in self._failed:  # the first reason; the report has them all
                self._failed.add((host, stage))
                self._line(f"{host}: {_prefix(stage)}FAILED: {why}")  # shown even when quiet

    def done(self, hosts: list[str]) -> None:
        """Hosts whose rack has finished: out of the heartbeat of the racks still running."""
        with self._lock:
            for host in hosts:
                self.hosts.pop(host, None)

    def event(self, event: HostEvent) -> None:
        with self._lock:
            state = self.hosts.get(event.host)
            if state is None:  # a host the stage uses without working on it (the boot server)
                state = self.hosts[event.host] = HostProgress(stage_started=self.clock())
            if event.kind == "start":
                state.task = event.task
                if self.level >= VERBOSE:
                    self._line(f"{event.host}: {_prefix(state.stage)}{event.task}")
            elif event.kind in ("failed", "unreachable"):
                self.failed(event.host, state.stage, failure_text(event))
            elif event.kind == "changed" and self.level >= VERBOSE:
                self._line(f"{event.host}: changed: {event.task}")
            self.beat()

    def beat(self) -> None:
        with self._lock:
            now = self.clock()
            if self.level < NORMAL or now - self._last_beat < self.heartbeat:
                return
            self._last_beat = now
            busy = [(h, s) for h, s in sorted(self.hosts.items()) if s.task]
            if not busy:
                return
            groups: dict[tuple[str, str], list[tuple[str, HostProgress]]] = {}
            for host, state in busy:
                groups.setdefault((state.stage, state.task), []).append((host, state))
            parts = []
            for (stage, task), members in list(groups.items())[:6]:
                elapsed = now - min(s.stage_started for _, s in members)
                who = members[0][0] if len(members) == 1 else f"{len(members)} hosts"
                parts.append(f"{who}: {_prefix(stage)}{elapsed:.0f}s, {task}")
            more = f"; and {len(groups) - 6} other tasks" if len(groups) > 6 else ""
            self._line("; ".join(parts) + more)
