"""The direct collector: the collector script over one OpenSSH client per host, many hosts at
once from one asyncio loop, where Ansible forks a worker per host and task.

How each host is reached is Ansible's (racklift.verify.reach); what runs on it is the same
script collect.yml runs, and what comes back goes to the same `host_bundle`. A host's output is
its word: stdout is read up to a limit and the client killed past it, stderr is kept short, and
a host that does not finish in time fails alone.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from racklift.ansible import HostEvent, failure_text
from racklift.child_env import without_secrets
from racklift.imaging import host_keys

# collect.yml's task names: the direct collector's progress events and failures name the same.
COLLECT_TASK = "Run the collector on the host"
CONTAINER_CHECK_TASK = "Run the container check on the host"
# stdout past the caller's limit fails the host and its client is killed; stderr is kept up to
# this, the rest read and dropped.
STDERR_LIMIT = 64 * 1024
# Many ssh clients at once cost the controller little (a few MiB each): the limit keeps their
# pipes (three each) well inside the default of 1,024 open files.
CONCURRENCY = 128
# A host whose collection takes longer than this fails (nvidia-smi -q -x on 8 GPUs: seconds).
TIMEOUT = 600.0
# After a kill, how long the client's pipes are read to their end before they are let go.
CUT_TIMEOUT = 10.0
# ssh's exit status when the connection itself failed (as Ansible reads it: unreachable).
SSH_FAILED = 255


@dataclass(frozen=True)
class Ran:
    """One command's outcome on one host, as Ansible's `command` result would hold it."""

    cmd: list[str]
    rc: int
    stdout: str
    stderr: str

    def result(self) -> dict[str, Any]:
        return {"cmd": self.cmd, "rc": self.rc, "stdout": self.stdout, "stderr": self.stderr}


class HostFailed(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


def container_check_argv(mirror: Mapping[str, Any]) -> list[str]:
    """The container check's command line (collect.yml builds the same in Jinja)."""
    return (["python3", "-", "--mirror", str(mirror["url"]), "--image", str(mirror["check_image"])]
            + (["--gpus"] if mirror.get("check_gpus") else [])
            + ["--", *map(str, mirror.get("check_command") or [])])


async def run_on(ssh: list[str], argv: list[str], script: bytes, *, limit: int,
                 timeout: float) -> Ran:
    """Run `argv` on the host with `script` on its stdin. Raises HostFailed."""
    proc = await asyncio.create_subprocess_exec(
        *ssh, shlex.join(argv), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        # The NetBox token and a BMC password are racklift's, not ssh's: what Ansible gets.
        env=without_secrets(os.environ),
        # Its own process group: a kill reaches what ssh started too (a ProxyCommand), which
        # would otherwise hold the pipes open, and asyncio waits for them to close.
        start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr

    async def feed() -> None:
        try:
            stdin.write(script)
            await stdin.drain()
            stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the host closed it: its exit status says why

    errors = asyncio.ensure_future(_read(stderr, STDERR_LIMIT))
    fed = asyncio.ensure_future(feed())
    err = b""
    try:
        async with asyncio.timeout(timeout):
            # One byte over the limit is enough to refuse the document: the client is killed
            # rather than the rest read, and what it wrote to stderr no longer waited for.
            out = await _read(stdout, limit + 1, keep_reading=False)
            if len(out) <= limit:
                err, _ = await asyncio.gather(errors, fed)
                await proc.wait()
    except TimeoutError:
        await _cut(proc, stdout, stderr, errors, fed)
        raise HostFailed("failed", f"no answer within {timeout:.0f} s: killed") from None
    if len(out) > limit:
        await _cut(proc, stdout, stderr, errors, fed)
        raise HostFailed("failed", f"its output went past racklift's limit of "
                                   f"{limit / 2**20:g} MiB: refused, the connection cut")
    text = err.decode(errors="replace")
    if proc.returncode == SSH_FAILED:
        raise HostFailed("unreachable", host_keys.described(" ".join(text.split())[:300])
                         or "ssh failed")
    return Ran(argv, proc.returncode or 0, out.decode(errors="replace"), text)


async def _cut(proc: asyncio.subprocess.Process, stdout: asyncio.StreamReader,
               stderr: asyncio.StreamReader, *tasks: asyncio.Future[Any]) -> None:
    """Kill the client and read its pipes to their end. A pipe whose reader stopped with a
    full buffer is paused: it never sees the end the kill makes, and asyncio's wait() waits
    for the pipes too (a host writing fast past the limit hung here until the timeout)."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    # Bounded: a process outside the client's group could hold a pipe open.
    with suppress(TimeoutError):
        async with asyncio.timeout(CUT_TIMEOUT):
            await asyncio.gather(_read(stdout, 0), _read(stderr, 0))
            await proc.wait()


async def _read(stream: asyncio.StreamReader, limit: int, *, keep_reading: bool = True) -> bytes:
    """Up to `limit` bytes of the stream. Past them, either stop, or read the rest and drop it
    (so the host is not blocked on a full pipe while its exit status is awaited)."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(65536):
        if size < limit:
            chunks.append(chunk[:limit - size])
            size += len(chunks[-1])
        if size >= limit and not keep_reading:
            break
    return b"".join(chunks)


@dataclass(frozen=True)
class Collected:
    stdout: str
    container_check: dict[str, Any] | None


async def _collect_one(host: str, target: Mapping[str, Any], collector: bytes,
                       container_check: bytes | None, *, limit: int, timeout: float,
                       gate: asyncio.Semaphore,
                       on_event: Callable[[HostEvent], None]) -> Collected | str:
    async with gate:
        task = COLLECT_TASK
        try:
            on_event(HostEvent(host, "start", task))
            ran = await run_on(list(target["ssh"]),
                               ["python3", "-", "--sysfs-root", str(target["sysfs_root"])],
                               collector, limit=limit, timeout=timeout)
            if ran.rc != 0:
                raise HostFailed("failed", " ".join((ran.stderr or ran.stdout).split())[:300]
                                 or f"exit status {ran.rc}")
            on_event(HostEvent(host, "ok", task))
            checked = None
            if container_check is not None and target.get("mirror"):
                task = CONTAINER_CHECK_TASK
                on_event(HostEvent(host, "start", task))
                # Its document says what failed; the controller judges it.
                checked = (await run_on(list(target["ssh"]),
                                        container_check_argv(target["mirror"]),
                                        container_check, limit=limit, timeout=timeout)).result()
                on_event(HostEvent(host, "ok", task))
            return Collected(ran.stdout, checked)
        except HostFailed as exc:
            event = HostEvent(host, exc.kind, task, exc.message)
            on_event(event)
            return failure_text(event)


def collect_direct(targets: Mapping[str, Mapping[str, Any]], collector: bytes,
                   container_check: bytes | None, *, limit: int,
                   on_event: Callable[[HostEvent], None] | None = None,
                   concurrency: int = CONCURRENCY,
                   timeout: float = TIMEOUT) -> dict[str, Collected | str]:
    """Each host's collector output and container check result (when `container_check` is
    the script and the host has a mirror), or why there is none, in Ansible's words."""
    if not targets:
        return {}
    emit = on_event or (lambda _: None)

    async def main() -> dict[str, Collected | str]:
        gate = asyncio.Semaphore(concurrency)
        names = sorted(targets)
        got = await asyncio.gather(*(
            _collect_one(name, targets[name], collector, container_check, limit=limit,
                         timeout=timeout, gate=gate, on_event=emit) for name in names))
        return dict(zip(names, got, strict=True))

    return asyncio.run(main())


@dataclass(frozen=True)
class Step:
    """One command of a host's sequence: `argv` with `script` on its stdin, named `task` in
    progress events (as the playbook it stands for names its task)."""

    task: str
    argv: list[str]
    script: bytes = b""
    timeout: float = TIMEOUT


def run_steps(ssh: Mapping[str, list[str]], steps: Mapping[str, Sequence[Step]], *, limit: int,
              concurrency: int = CONCURRENCY,
              on_event: Callable[[HostEvent], None] | None = None,
              ) -> dict[str, list[Ran | HostFailed]]:
    """Each host's steps in order (`ssh`: host → its ssh argv up to the destination), many hosts
    at once: each step's outcome, or why it has none. A host that cannot be reached stops
    there: the steps after it have no outcome."""
    emit = on_event or (lambda _: None)

    async def one(name: str, gate: asyncio.Semaphore) -> list[Ran | HostFailed]:
        done: list[Ran | HostFailed] = []
        async with gate:
            for step in steps[name]:
                emit(HostEvent(name, "start", step.task))
                try:
                    done.append(await run_on(list(ssh[name]), step.argv, step.script,
                                             limit=limit, timeout=step.timeout))
                except HostFailed as exc:
                    emit(HostEvent(name, exc.kind, step.task, exc.message))
                    done.append(exc)
                    if exc.kind == "unreachable":
                        break
                    continue
                emit(HostEvent(name, "ok", step.task))
        return done

    async def main() -> dict[str, list[Ran | HostFailed]]:
        gate = asyncio.Semaphore(concurrency)
        names = sorted(n for n in steps if steps[n])
        got = await asyncio.gather(*(one(name, gate) for name in names))
        return dict(zip(names, got, strict=True))

    return asyncio.run(main()) if any(steps.values()) else {}


def run_everywhere(ssh: Mapping[str, list[str]], argv: list[str], script: bytes, *,
                   limit: int, timeout: float, concurrency: int = CONCURRENCY,
                   on_event: Callable[[HostEvent], None] | None = None,
                   task: str = "") -> dict[str, Ran | HostFailed]:
    """`argv` with `script` on its stdin on every host (`ssh`: host → its ssh argv up to the
    destination), many at once: each host's outcome, or why it has none."""
    ran = run_steps(ssh, {name: [Step(task, argv, script, timeout)] for name in ssh},
                    limit=limit, concurrency=concurrency, on_event=on_event)
    return {name: got[0] for name, got in ran.items()}
