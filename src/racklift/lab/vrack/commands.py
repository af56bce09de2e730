"""Commands on this machine for the virtual rack: in its namespace, virsh, and the daemons it
starts (pid files, readiness waits)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

from racklift.errors import LabError
from racklift.lab.vrack.layout import LIBVIRT_URI, Vrack


def _run(*cmd: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise LabError(f"{cmd[0]} not found: run scripts/bootstrap (it installs the virtual "
                       "rack's packages)") from None
    if check and result.returncode != 0:
        raise LabError(f"{' '.join(cmd[:6])}: {(result.stderr or result.stdout).strip()[-600:]}")
    return result


def _in_ns(rack: Vrack, *cmd: str, timeout: float = 60,
           check: bool = True) -> subprocess.CompletedProcess:
    return _run("ip", "netns", "exec", rack.netns, *cmd, timeout=timeout, check=check)


def virsh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return _run("virsh", "-q", "-c", LIBVIRT_URI, *args, check=check)


# Namespace and libvirtd


def _netns_path(rack: Vrack) -> Path:
    return Path("/run/netns") / rack.netns


def _alive_pid(pid_file: Path, comm: str) -> int | None:
    """The pid in `pid_file` when that process is alive and is `comm`."""
    try:
        pid = int(pid_file.read_text().split()[0])
        if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
            return pid
    except (OSError, ValueError, IndexError):
        pass
    return None


def _netns_inode(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def _in_our_ns(rack: Vrack, pid: int) -> bool:
    return _netns_path(rack).exists() and _netns_inode(pid) == _netns_path(rack).stat().st_ino


def _wait(what: str, ready: Callable[[], bool], seconds: float, hint: str) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            raise LabError(f"{what} not ready after {seconds:.0f} s: {hint}")
        time.sleep(0.3)


def _stop(pid_file: Path, comm: str, rack: Vrack) -> None:
    pid = _alive_pid(pid_file, comm)
    if pid is None or not _in_our_ns(rack, pid):
        return
    os.kill(pid, 15)
    _wait(comm, lambda: _alive_pid(pid_file, comm) is None, 20, f"kill -9 {pid}")


# TLS and the BMC password


def _process_pid(pid_file: Path, marker: bytes) -> int | None:
    """The pid in `pid_file` while that process lives and its command line has `marker`."""
    try:
        pid = int(pid_file.read_text())
        if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
            return pid
    except (OSError, ValueError):
        pass
    return None


def _spawn(what: str, command: list[str], pid_file: Path, ready: Callable[[], bool]) -> None:
    """Start `command` in the background (log next to the pid file), wait until `ready`."""
    log_file = pid_file.with_suffix(".log")
    with open(log_file, "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    pid_file.write_text(str(process.pid))
    _wait(what, lambda: ready() or process.poll() is not None, 30, f"see {log_file}")
    if process.poll() is not None:
        raise LabError(f"{what} exited at start: see {log_file}")


def _terminate(what: str, pid_file: Path, marker: bytes) -> None:
    pid = _process_pid(pid_file, marker)
    if pid is None:
        return
    os.kill(pid, 15)

    def gone() -> bool:
        # A process this one started stays a zombie until collected; init reaps the others.
        with suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return _process_pid(pid_file, marker) is None

    _wait(f"{what} (pid {pid}) to stop", gone, 10, f"kill -9 {pid}")
