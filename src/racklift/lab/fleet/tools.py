"""What a simulated host runs besides the collector (lab only): the acceptance tests' tools
(`dcgmi`, `all_reduce_perf`, `ib_write_bw`) by the lab's emulator, in their real output formats
and with the host's faults, and the two scripts racklift's acceptance stage sends to `sh -s`
(racklift.pipeline.accept_run): starting a round's ib_write_bw servers and stopping those whose
client never came. One process answers for every host, so a server is an entry in `Servers`, and
a client is answered from both ends' emulated ports (racklift.lab.hwemu.perftest.client_of).

A tool takes its real time when the fleet has a latency table: DCGM's level by the table, a
`-D` ib_write_bw run its seconds.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from racklift.lab import hwemu
from racklift.lab.hwemu.command import ToolExit
from racklift.lab.hwemu.dcgm import dcgmi
from racklift.lab.hwemu.latency import delay
from racklift.lab.hwemu.nccl_tests import all_reduce_perf
from racklift.lab.hwemu.perftest import DEFAULT_PORT, client_of

START = ("setsid", "-f", "ib_write_bw")  # a server's start, as the stage's script words it
NOT_FOUND = 127
TOOLS = ("dcgmi", "all_reduce_perf", "ib_write_bw")  # what a simulated host has of them


@dataclass(frozen=True)
class Answer:
    rc: int
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0  # how long the real tool would take


@dataclass
class Servers:
    """The ib_write_bw servers listening: (address, TCP port) → (its host's address, its
    arguments). A server takes one client, then ends."""

    listening: dict[tuple[str, int], tuple[str, list[str]]] = field(default_factory=dict)


def _port_of(args: list[str]) -> int:
    try:
        return int(args[args.index("-p") + 1]) if "-p" in args else DEFAULT_PORT
    except (IndexError, ValueError):
        return -1  # no server listens there: the tool itself says what is wrong


def _script(address: str, script: str, servers: Servers) -> Answer:
    """The stage's server start or stop script: its ib_write_bw lines, nothing else of it run
    (the start's wait for listening is over at once: a server here listens when started)."""
    known = False
    for line in script.splitlines():
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if tuple(words[:3]) == START:
            args = words[3:words.index(">/dev/null")] if ">/dev/null" in words else words[3:]
            servers.listening[(address, _port_of(args))] = (address, args)
            known = True
        elif words[:2] == ["pkill", "-f"] and len(words) > 2:
            args = shlex.split(words[2])[1:]
            servers.listening.pop((address, _port_of(args)), None)
            known = True
    if not known:
        return Answer(2, stderr="sh: the simulated host runs only racklift's acceptance scripts\n")
    return Answer(0)


def answer(address: str, words: list[str], stdin: bytes,
           profile_at: Callable[[str], hwemu.Profile | None], servers: Servers,
           latency: Mapping[str, float]) -> Answer:
    """What the host at `address` prints for the command `words` (the collector's is not
    here), and how long it takes. `profile_at`: a simulated host's emulated hardware, made
    only for a tool that reads it."""
    if words == ["sh", "-s"]:
        return _script(address, stdin.decode(errors="replace"), servers)
    tool, args = (words[0], words[1:]) if words else ("", [])
    profile = profile_at(address) if tool in TOOLS else None
    if profile is None:
        return Answer(NOT_FOUND, stderr=f"sh: 1: {tool}: not found\n")
    seconds = delay(latency, tool, args)
    try:
        if tool == "dcgmi":
            return Answer(0, dcgmi(profile, args), seconds=seconds)
        if tool == "all_reduce_perf":
            return Answer(0, all_reduce_perf(profile, args), seconds=seconds)
        at = servers.listening.pop((args[-1] if args else "", _port_of(args)), None)
        out = client_of(profile, args, profile_at(at[0]) if at else None, at[1] if at else [])
        if latency and "-D" in args:
            seconds = float(args[args.index("-D") + 1])
        return Answer(0, out, seconds=seconds)  # ib_write_bw
    except ToolExit as exc:
        return Answer(exc.code, exc.stdout, exc.stderr, seconds)
