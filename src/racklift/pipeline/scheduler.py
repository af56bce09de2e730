"""The workload scheduler hook: take hosts out of service before racklift reimages them, put
them back when they join the pool. Slurm first, through `scontrol`.

racklift only returns to service the nodes it drained itself: a node an operator drained for
a reason of their own stays drained, whatever racklift did to the host meanwhile (draining it
again keeps that reason). A node that is only DOWN gets racklift's drain, and reason, when
racklift reimages it; one it did not reimage stays down.

Every call answers per host: what was done, or a message naming the host, the scheduler, the
command and what to do. Host names are the scheduler's node names (the NetBox device names).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from racklift.child_env import without_secrets
from racklift.errors import RackliftError

SCHEDULER_VAR = "RACKLIFT_SCHEDULER"
SCHEDULERS = ("slurm", "none")
DEFAULT_TIMEOUT = 60.0


class SchedulerError(RackliftError):
    """The scheduler could not be asked at all: its command is missing, hung or failed."""


@dataclass(frozen=True)
class HookResult:
    ok: dict[str, str]  # host → what was done ("drained", "resumed", "already drained", ...)
    errors: dict[str, str]  # host → message naming host, scheduler, command and what to do
    # Hosts in `errors` that the scheduler does not know. On resume the caller may report them
    # as warnings: a brand-new host may not be in the scheduler's configuration yet.
    unknown: frozenset[str] = frozenset()


class Scheduler(Protocol):
    name: str

    def drain(self, hosts: Sequence[str], reason: str) -> HookResult: ...

    def resume(self, hosts: Sequence[str], reason: str) -> HookResult: ...

    def state(self, hosts: Sequence[str]) -> dict[str, str]: ...


def scheduler_from_env(environ: Mapping[str, str] = os.environ) -> Scheduler | None:
    """RACKLIFT_SCHEDULER=slurm → the Slurm hook, with RACKLIFT_SLURM_SCONTROL (scontrol's path;
    default: `scontrol` on PATH), RACKLIFT_SLURM_CONF (the slurm.conf scontrol reads; default:
    its own) and RACKLIFT_SLURM_TIMEOUT (seconds per scontrol call; default 60).
    Unset, empty or `none` → None: racklift drains and resumes nothing."""
    kind = environ.get(SCHEDULER_VAR, "").strip().lower()
    if kind in ("", "none"):
        return None
    if kind != "slurm":
        raise RackliftError(f"{SCHEDULER_VAR}={environ[SCHEDULER_VAR]!r} is not a scheduler "
                            f"racklift knows: set it to one of {', '.join(SCHEDULERS)}, "
                            "or leave it unset")
    conf = environ.get("RACKLIFT_SLURM_CONF") or None
    if conf and not Path(conf).is_file():
        raise RackliftError(f"RACKLIFT_SLURM_CONF={conf!r}: no such file; point it at the "
                            "slurm.conf of the cluster, or unset it to use scontrol's default")
    raw_timeout = environ.get("RACKLIFT_SLURM_TIMEOUT") or str(DEFAULT_TIMEOUT)
    try:
        timeout = float(raw_timeout)
    except ValueError:
        timeout = 0.0
    if timeout <= 0:
        raise RackliftError(f"RACKLIFT_SLURM_TIMEOUT={raw_timeout!r} is not a number of seconds "
                            "above 0: set it to e.g. 60, or unset it")
    return Slurm(scontrol=environ.get("RACKLIFT_SLURM_SCONTROL") or "scontrol",
                 conf=Path(conf) if conf else None, timeout=timeout)


# ---------------------------------------------------------------------------------------------
# Slurm: reading and judging what scontrol shows (pure)

# Base states in which jobs still run on the node (COMPLETING is a flag).
BUSY_STATES = frozenset({"ALLOCATED", "MIXED"})
# No character Slurm's hostlist syntax gives a meaning to ("[", "]", ",") or no node name has.
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Slurm appends " [user@time]" to the reason it shows.
_REASON_STAMP = re.compile(r" \[[^\]@]*@[^\]]*\]$")
_CONTROLLER_DOWN = "Unable to contact slurm controller"
# Every drain reason racklift sets starts with this word. Slurm keeps one reason per node and
# no owner that tells racklift from an operator (both are often root): the reason is how
# resume knows a drain is racklift's to undo.
DRAIN_MARK = "racklift"
_MARKED = re.compile(rf"{DRAIN_MARK}[ :]")


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str  # as scontrol shows it: BASE[+FLAG...], e.g. "IDLE+DRAIN"
    reason: str  # without Slurm's " [user@time]"; "" when none

    @property
    def flags(self) -> frozenset[str]:
        return frozenset(self.state.split("+")[1:])


def parse_show_node(text: str) -> dict[str, SlurmNode]:
    """Nodes from `scontrol show node`. The multi-line form, not `-o`: there the free-text
    Reason, Comment and Extra share one line with no delimiter; here each has its own line."""
    nodes: dict[str, SlurmNode] = {}
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = [line.strip() for line in block.splitlines()]
        if not lines or not lines[0].startswith("NodeName="):
            continue  # "No nodes in the system"
        name = lines[0].split()[0].removeprefix("NodeName=")
        state = next((line.split()[0].removeprefix("State=") for line in lines
                      if line.startswith("State=")), "")
        reason = next((_REASON_STAMP.sub("", line.removeprefix("Reason=")) for line in lines
                       if line.startswith("Reason=")), "")
        if not state:
            raise SchedulerError(f"Slurm: `scontrol show node` printed no State= for {name}; "
                                 "this scontrol's output format is not one racklift reads")
        nodes[name] = SlurmNode(name, state, reason)
    return nodes


def is_drained(state: str) -> bool:
    """True when Slurm starts no new job on the node and none runs there: safe to reimage.
    After a drain, a node still running jobs is DRAINING (e.g. MIXED+DRAIN): poll `state()`
    until this holds."""
    base, *flags = state.split("+")
    return (("DRAIN" in flags or base == "DOWN") and base not in BUSY_STATES
            and "COMPLETING" not in flags)


def ours(reason: str) -> bool:
    """Whether racklift set this drain reason (Slurm's " [user@time]" already cut off)."""
    return _MARKED.match(reason) is not None


def marked(reason: str) -> str:
    """The drain reason as racklift sets it: starting with DRAIN_MARK, so resume knows it."""
    return reason if ours(reason) else f"{DRAIN_MARK}: {reason}"


def needs_resume(state: str) -> bool:
    """True when Slurm keeps the node out of service: drained, down or failing."""
    base, *flags = state.split("+")
    return "DRAIN" in flags or "FAIL" in flags or base in ("DOWN", "FAIL")


def drain_outcome(node: SlurmNode, changed: bool) -> tuple[bool, str]:
    """(ok, message) for a node as Slurm shows it after racklift drained it (`changed`) or
    found it drained already."""
    if "DRAIN" not in node.flags:
        return False, (f"{node.name}: Slurm still shows {node.state} after `scontrol update "
                       f"nodename={node.name} state=drain`; drain it by hand and retry")
    done = "drained" if changed else "already drained"
    if is_drained(node.state):
        return True, done
    return True, (f"{done} (jobs still running: {node.state}; wait until Slurm shows it "
                  "DRAINED, with no jobs, before reimaging)")


def resume_outcome(node: SlurmNode, changed: bool) -> tuple[bool, str]:
    """(ok, message) for a node as Slurm shows it after racklift resumed it (`changed`), found
    it in service already, or left it out of service for someone else's reason."""
    if needs_resume(node.state) and not ours(node.reason):
        why = f"reason {node.reason!r}" if node.reason else "no reason"
        return False, (f"{node.name}: Slurm shows {node.state} with {why}, which racklift did "
                       "not set: left as it is; once that is dealt with, `scontrol update "
                       f"nodename={node.name} state=resume` returns it to service")
    if needs_resume(node.state):
        return False, (f"{node.name}: Slurm still shows {node.state} after `scontrol update "
                       f"nodename={node.name} state=resume`; see slurmctld's log for why, "
                       "fix it and retry")
    # No word on NOT_RESPONDING: Slurm sets it on every resume until its next ping (~1 s).
    return True, "resumed" if changed else "not drained"


def unknown_node(host: str, done: str) -> str:
    message = (f"{host}: Slurm does not know this node (`scontrol show node` does not list it), "
               f"so it was not {done}; ")
    if done == "resumed":
        return message + ("a brand-new host may not be in slurm.conf yet: add it there "
                          "(and reconfigure slurmctld) for it to run jobs")
    return message + "check that its Slurm node name is its NetBox device name"


def bad_node_names(hosts: Sequence[str]) -> dict[str, str]:
    return {host: (f"{host!r}: not a Slurm node name (letters, digits, '.', '_', '-' only); "
                   "fix the NetBox device name")
            for host in hosts if not _NODE_NAME.fullmatch(host)}


def failure(command: Sequence[str], returncode: int, stderr: str) -> str:
    """What to tell the operator about a failed scontrol call."""
    said = stderr.strip().replace("\n", "; ") or f"exit status {returncode}"
    todo = ("check that slurmctld is running and reachable from this controller "
            "(`scontrol ping`), then retry" if _CONTROLLER_DOWN in said
            else "fix what it says and retry")
    return f"Slurm: `{shlex.join(command)}` failed: {said}; {todo}"


def one_line(reason: str) -> str:
    reason = reason.strip()
    if not reason or any(ord(char) < 32 for char in reason):
        raise RackliftError(f"scheduler hook: reason {reason!r} must be one non-empty line of "
                            "text (Slurm shows it with the node and needs one to drain)")
    return reason


# ---------------------------------------------------------------------------------------------
# Slurm: the hook (I/O)


@dataclass(frozen=True)
class Slurm:
    """Drain and resume Slurm nodes with `scontrol update`, one call for all hosts; when that
    call fails, one call per host finds which host it was."""

    scontrol: str = "scontrol"
    conf: Path | None = None  # SLURM_CONF for scontrol; None: scontrol's own default
    timeout: float = DEFAULT_TIMEOUT
    name: str = field(default="slurm", init=False)

    def state(self, hosts: Sequence[str]) -> dict[str, str]:
        """host → Slurm's state (e.g. "IDLE+DRAIN"); hosts Slurm does not know are left out.
        Raises SchedulerError when scontrol cannot be asked."""
        nodes = self._nodes()
        return {host: nodes[host].state for host in hosts if host in nodes}

    def drain(self, hosts: Sequence[str], reason: str) -> HookResult:
        """Drain the hosts with `reason`. A host already drained keeps the reason it has (an
        operator's, maybe, which then keeps resume away). `reason` is set starting with
        DRAIN_MARK. ok says "drained" or "already drained", plus "(jobs still running ...)"
        while jobs run there: wait until is_drained(state) before reimaging."""
        reason = marked(one_line(reason))
        return self._change(hosts, "drained", lambda node: "DRAIN" not in node.flags,
                            ("state=drain", f"reason={reason}"), drain_outcome)

    def resume(self, hosts: Sequence[str], reason: str) -> HookResult:
        """Return to service the hosts racklift drained: drained or down with a reason that
        starts with DRAIN_MARK. A host out of service for another reason stays so, and is an
        error that shows the reason. Slurm drops a node's reason on resume, so `reason` is for
        the caller's journal; it is checked like drain's. ok says "resumed" or "not drained"
        (Slurm already had it in service)."""
        one_line(reason)
        return self._change(hosts, "resumed",
                            lambda node: needs_resume(node.state) and ours(node.reason),
                            ("state=resume",), resume_outcome)

    def _change(self, hosts: Sequence[str], done: str, needed: Callable[[SlurmNode], bool],
                settings: tuple[str, ...],
                outcome: Callable[[SlurmNode, bool], tuple[bool, str]]) -> HookResult:
        """Read every node, update those that need it in one call, read again and judge each
        host by what Slurm shows now."""
        hosts = list(dict.fromkeys(hosts))
        errors = bad_node_names(hosts)
        try:
            before = self._nodes()
            todo = [host for host in hosts
                    if host not in errors and host in before and needed(before[host])]
            errors |= self._update(todo, *settings)
            after = self._nodes() if todo else before
        except SchedulerError as exc:
            return HookResult(ok={}, errors={host: f"{host}: {exc}" for host in hosts})
        unknown = frozenset(host for host in hosts if host not in errors and host not in after)
        ok: dict[str, str] = {}
        for host in hosts:
            if host in unknown:
                errors[host] = unknown_node(host, done)
            elif host not in errors:
                fine, message = outcome(after[host], host in todo)
                (ok if fine else errors)[host] = message
        return HookResult(ok=ok, errors={host: errors[host] for host in hosts if host in errors},
                          unknown=unknown)

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [self.scontrol, *args]
        # The NetBox token and a BMC password are racklift's, not scontrol's (nor a wrapper's
        # that reaches the head node): what Ansible gets.
        env = without_secrets({**os.environ, **({"SLURM_CONF": str(self.conf)} if self.conf
                                                else {})})
        try:
            return subprocess.run(command, capture_output=True, text=True, env=env,
                                  timeout=self.timeout, stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise SchedulerError(
                f"Slurm: cannot run '{self.scontrol}' ({exc.strerror}): install Debian's "
                "slurm-client on this controller, or set RACKLIFT_SLURM_SCONTROL to "
                "scontrol's path") from None
        except subprocess.TimeoutExpired:
            raise SchedulerError(
                f"Slurm: `{shlex.join(command)}` did not finish within {self.timeout:g} s: "
                "check that slurmctld answers (`scontrol ping`), or raise "
                "RACKLIFT_SLURM_TIMEOUT") from None

    def _nodes(self) -> dict[str, SlurmNode]:
        result = self._run("show", "node")
        if result.returncode != 0:
            raise SchedulerError(failure(["scontrol", "show", "node"], result.returncode,
                                         result.stderr))
        return parse_show_node(result.stdout)

    def _update(self, hosts: list[str], *settings: str) -> dict[str, str]:
        """host → error; {} when Slurm updated every host."""
        if not hosts:
            return {}
        args = ["update", f"nodename={','.join(hosts)}", *settings]
        result = self._run(*args)
        if result.returncode == 0:
            return {}
        message = failure(["scontrol", *args], result.returncode, result.stderr)
        if _CONTROLLER_DOWN in result.stderr:
            raise SchedulerError(message)
        if len(hosts) == 1:
            return {hosts[0]: f"{hosts[0]}: {message}"}
        errors: dict[str, str] = {}
        for host in hosts:
            errors |= self._update([host], *settings)
        return errors
