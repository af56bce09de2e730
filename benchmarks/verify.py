"""verify (the gate) on 8, 32 and 64 lab hosts, in one run: with racklift's direct collector
(one OpenSSH client per host from one asyncio loop, each host reached as Ansible's inventory and
ssh settings say), with playbooks/collect.yml under racklift's ansible.cfg (forks 50,
pipelining, persistent SSH connections), and with collect.yml under Ansible's defaults (linear
strategy, forks 5, no pipelining), the baseline.

Each run is the whole `verify` a user runs: select the hosts in NetBox, collect their facts
over SSH, parse, compare with NetBox and run the health checks on the controller. Runs are
read-only (`--check`: nothing is written to NetBox), so every run does the same work; each
starts with cold SSH connections (its own control-socket directory).

Needs the lab NetBox (`invoke netbox.up`). The hosts are lab containers on their own podman
network and rack (benchmarks/lab_up.py's: racklift-bench, 10.89.2.0/24, rack B01), started
once for the largest size and removed at the end with their NetBox records.

The hosts' emulated tools answer as slowly as real ones (`--latency realistic`, the default:
racklift.lab.hwemu.latency.REALISTIC, e.g. `nvidia-smi -q -x` 6 s, `ibnetdiscover` 3 s, each
figure with its source), sleeping meanwhile as a real tool waits on its driver; `--latency
none` is the lab's default, every tool at once, which measures CPU contention alone.

Usage: .venv/bin/python benchmarks/verify.py [--hosts 8,32,64] [--runs 1] [--latency realistic]
The last line reads `verify N hosts: racklift X s, ansible defaults Y s, ratio Z` (largest N).
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from common import LATENCY, connect, growth, lab, load, machine, median, set_latency
from lab_up import BENCH_NET

from racklift.lab import hosts
from racklift.lab import rack as lab_rack
from racklift.netbox.client import NetBox
from racklift.netbox.selection import Selection
from racklift.verify.gate import verify

RACK = "B01"
# What Ansible does when nothing is configured; racklift's ansible.cfg sets the rest.
ANSIBLE_DEFAULTS = {
    "ANSIBLE_STRATEGY": "linear",
    "ANSIBLE_FORKS": "5",
    "ANSIBLE_PIPELINING": "False",
    "ANSIBLE_SSH_ARGS": "-C -o ControlMaster=auto -o ControlPersist=60s",
}
# mode → (collector, environment). racklift: its direct collector (one ssh client per host,
# one asyncio loop); collect.yml with racklift's ansible.cfg, the collector before it; and
# collect.yml with Ansible's defaults, the baseline.
MODES: dict[str, tuple[str, Mapping[str, str]]] = {
    "racklift": ("direct", {}),
    "collect.yml, forks 50": ("ansible", {}),
    "ansible defaults": ("ansible", ANSIBLE_DEFAULTS),
}


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """verify runs ansible-playbook with this process's environment: set it for one run."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def hosts_cpu_seconds() -> float | None:
    """CPU time the bench hosts' containers have used (cgroup v1 accounting, as podman sets
    it up here); None where that accounting is elsewhere."""
    total = 0
    for info in hosts.containers(BENCH_NET).values():
        usage = next(CPUACCT.glob(f"**/libpod-{info['Id']}/cpuacct.usage"), None)
        if usage is None:
            return None
        total += int(usage.read_text())
    return total / 1e9


def controller_cpu_seconds() -> tuple[float, float]:
    """This process (NetBox reads, the direct collector's loop, parsing, comparison: one
    core's work) and what it ran (ssh clients, racklift.verify.reach, ansible-playbook and
    its workers: spread over the cores)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@dataclass(frozen=True)
class Run:
    seconds: float
    outcome: str
    controller_cpu: float
    own_cpu: float  # of controller_cpu, this process's
    hosts_cpu: float | None


def one_run(netbox: NetBox, names: list[str], collector: str,
            settings: Mapping[str, str]) -> Run:
    controller, host = controller_cpu_seconds(), hosts_cpu_seconds()
    with tempfile.TemporaryDirectory(prefix="racklift-bench-verify-") as tmp:
        # Fresh control sockets and run directories: no run reuses another's connections.
        env = {**settings, "ANSIBLE_SSH_CONTROL_PATH_DIR": f"{tmp}/cp", "RACKLIFT_RUNS": tmp}
        with environment(env):
            run = verify(netbox, Selection(names=tuple(names)), write=False,
                         collector=collector)
    host_after = hosts_cpu_seconds()
    collected = sum(1 for v in run.verdicts if v.error is None and v.checks)
    passed = sum(1 for v in run.verdicts if v.passed)
    # The first reason of each failing host, so a broken run is told from a slow one.
    reasons = sorted({v.failures[0] for v in run.verdicts if v.failures})
    outcome = (f"collected {collected}/{len(names)}, passed {passed}"
               + (f" (e.g. {'; '.join(reasons)[:300]})" if reasons else ""))
    own, children = controller_cpu_seconds()
    return Run(run.seconds, outcome, own + children - sum(controller), own - controller[0],
               None if host is None or host_after is None else host_after - host)


def cpu_note(run: Run, count: int) -> str:
    hosts_cpu = "n/a" if run.hosts_cpu is None else f"{run.hosts_cpu:.0f} s"
    return (f"CPU: controller {run.controller_cpu:.0f} s ({run.controller_cpu / count:.3f} s "
            f"per host, of which racklift's process {run.own_cpu / count:.3f} s), "
            f"hosts {hosts_cpu}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", default="8,32,64", help="host counts, comma-separated")
    parser.add_argument("--runs", type=int, default=1, help="runs per size and mode")
    parser.add_argument("--latency", choices=sorted(LATENCY), default="realistic",
                        help="how long the hosts' emulated tools take (default: realistic)")
    args = parser.parse_args()
    sizes = sorted(int(n) for n in args.hosts.split(","))

    _, settings = lab()
    netbox = connect(settings)
    print(f"machine: {machine()}; {load()}")
    lab_rack.down(netbox, BENCH_NET)
    medians: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        rack = lab_rack.up(netbox, sizes[-1], RACK, net=BENCH_NET)
        print(f"{sizes[-1]} lab hosts up in {rack.seconds:.0f} s ({load()})", flush=True)
        names = sorted(h.name for h in rack.hosts)
        set_latency(names, LATENCY[args.latency], settings, BENCH_NET)
        print(f"tool latency: {args.latency}", flush=True)
        for size in sizes:
            print(f"\n{size} hosts:", flush=True)
            seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
            for round_ in range(args.runs):
                for mode, (collector, values) in MODES.items():
                    run = one_run(netbox, names[:size], collector, values)
                    seconds[mode].append(run.seconds)
                    print(f"  {mode} run {round_ + 1}: {run.seconds:.1f} s, {run.outcome}; "
                          f"{cpu_note(run, size)} ({load()})", flush=True)
            for mode in MODES:
                value = median(seconds[mode])
                medians[mode].append(value)
                print(f"  {mode}: {value:.1f} s, {size / value * 60:.0f} hosts/minute")
            ratio = median(seconds["ansible defaults"]) / median(seconds["racklift"])
            print(f"  ratio {ratio:.1f} (against collect.yml, forks 50: "
                  f"{median(seconds['collect.yml, forks 50']) / median(seconds['racklift']):.1f})")
    finally:
        lab_rack.down(netbox, BENCH_NET)
    print()
    if len(sizes) > 1:
        for mode in MODES:
            print(f"growth, {mode}: {growth(sizes, medians[mode])}")
    print(f"{load()} at the end")
    ours, theirs = medians["racklift"][-1], medians["ansible defaults"][-1]
    print(f"verify {sizes[-1]} hosts: racklift {ours:.1f} s, ansible defaults {theirs:.1f} s, "
          f"ratio {theirs / ours:.1f}")


if __name__ == "__main__":
    main()
