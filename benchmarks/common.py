"""What the benchmarks share: the lab NetBox, timing a child process, the machine's load.

Figures are printed, never asserted: they depend on the machine and on what else runs on it,
so every benchmark prints the load average next to them.
"""

from __future__ import annotations

import itertools
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from racklift.lab import hardware, hosts, netbox_server
from racklift.lab.hwemu.latency import REALISTIC
from racklift.lab.sources import use_lab_inventory
from racklift.netbox.client import NetBox, NetBoxSettings

BIN = Path(sys.prefix) / "bin"


def lab() -> tuple[netbox_server.NetBoxInstance, NetBoxSettings]:
    """The running lab NetBox, or exit with what to do; the benchmark's Ansible runs get the
    lab's inventory source."""
    use_lab_inventory()
    instance = netbox_server.NetBoxInstance.from_env()
    if not netbox_server.answers(instance):
        sys.exit(f"the lab NetBox does not answer on {instance.url}: run "
                 "`.venv/bin/invoke netbox.up` first")
    return instance, NetBoxSettings(instance.url, instance.token)


def connect(settings: NetBoxSettings) -> NetBox:
    return NetBox.connect(settings)


# How long the lab hosts' emulated tools take: as real ones (each figure with its source), or
# at once (the lab's default: the run then measures CPU contention alone).
LATENCY: dict[str, Mapping[str, float]] = {"realistic": REALISTIC, "none": {}}


def set_latency(names: Sequence[str], table: Mapping[str, float], settings: NetBoxSettings,
                net: hosts.LabNet) -> None:
    """The lab hosts' emulated tools take `table`'s time (their profiles, pushed)."""
    for name in names:
        hardware.save(replace(hardware.load(name, net), latency=dict(table)), net)
    hardware.push(names, settings, net)


def cpu_seconds() -> float:
    """This process and what it ran (ansible-playbook, its workers, their ssh clients)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (5 min {five:.2f}) on {os.cpu_count()} cores"


def machine() -> str:
    with open("/proc/meminfo") as handle:
        total_kib = int(handle.readline().split()[1])
    with open("/proc/cpuinfo") as handle:
        model = next((line.split(":", 1)[1].strip() for line in handle
                      if line.startswith("model name")), "unknown CPU")
    return f"{os.cpu_count()} cores ({model}), {total_kib / 2**20:.0f} GiB"


@dataclass(frozen=True)
class Timed:
    seconds: float
    peak_mib: float  # the child's peak resident memory
    returncode: int


def run_timed(command: Sequence[str], env: Mapping[str, str], cwd: Path,
              stdout: Path | None = None, stderr: Path | None = None) -> Timed:
    """Run `command` to completion: its wall time and peak memory (from wait4's rusage)."""
    out = stdout.open("wb") if stdout else subprocess.DEVNULL
    err = stderr.open("wb") if stderr else subprocess.DEVNULL
    try:
        started = time.monotonic()
        process = subprocess.Popen(list(command), env=dict(env), cwd=cwd, stdout=out,
                                   stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.monotonic() - started
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    finally:
        for handle in (out, err):
            if handle is not subprocess.DEVNULL:
                handle.close()
    return Timed(seconds, usage.ru_maxrss / 1024, process.returncode)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def growth(sizes: Sequence[int], seconds: Sequence[float]) -> str:
    """How time grows between consecutive sizes: size and time factors, and the exponent k
    of time ~ size^k (1.0 is linear, below 1 sub-linear)."""
    parts = []
    points = list(zip(sizes, seconds, strict=True))
    for (n1, t1), (n2, t2) in itertools.pairwise(points):
        exponent = math.log(t2 / t1) / math.log(n2 / n1)
        parts.append(f"{n1}->{n2} hosts (x{n2 / n1:.0f}): time x{t2 / t1:.2f}, "
                     f"exponent {exponent:.2f}")
    return "; ".join(parts)
