"""provision of 1 and of 4 lab racks of 4 container hosts each (`--no-image`: configure with
the node roles, verify, the acceptance tests the lab's context asks for), side by side in one
run: how much longer four racks take than one now that racks run at once.

Each rack is new: fresh containers, `planned` in NetBox, on a podman network of its own
(10.89.11-14.0/24, clear of the lab's and the tests'), all in site lab1 (so --racks-per-site
is the limit that counts). Everything is removed at the end, NetBox records included.

`--latency realistic` makes the hosts' emulated tools as slow as real ones (DCGM's level 2
diagnostics about two minutes, `nvidia-smi -q -x` 6 s; racklift.lab.hwemu.latency): time a
rack spends waiting, which other racks' work can fill. The default, `none`, answers at once.

The image stage is left out: the virtual rack's VMs run under TCG here (one VM's configure
takes about 13 minutes), so four racks of them do not fit this machine.

Needs the lab NetBox (`invoke netbox.up`).
Usage: .venv/bin/python benchmarks/provision.py [--hosts 4] [--racks 4] [--latency none]
The last line reads `provision 4 racks: racklift X s, one rack Y s, ratio Z` (X/Y).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import tempfile
from collections import Counter

from common import LATENCY, connect, cpu_seconds, lab, load, machine, set_latency

from racklift.lab import hosts
from racklift.lab import rack as lab_rack
from racklift.netbox.client import NetBox, NetBoxSettings
from racklift.netbox.selection import Selection
from racklift.pipeline.plan import Options
from racklift.pipeline.progress import QUIET, Progress
from racklift.pipeline.provision import run
from racklift.pipeline.racks import Limits


def bench_net(index: int) -> hosts.LabNet:
    return hosts.LabNet(f"racklift-bench-r{index}",
                        ipaddress.ip_network(f"10.89.{10 + index}.0/24"),
                        ipaddress.ip_network(f"10.33.{10 + index}.0/24"),
                        mac_base=0x7000 + 0x100 * index)


def provision(netbox: NetBox, settings: NetBoxSettings, racks: list[str], count: int,
              latency: str) -> float:
    """Bring up `racks` (fresh), provision them in one run, take them down: the run's seconds."""
    nets = [bench_net(i + 1) for i in range(len(racks))]
    try:
        names = []
        for rack, net in zip(racks, nets, strict=True):
            up = lab_rack.up(netbox, count, rack, net=net)
            names += [h.name for h in up.hosts]
            if LATENCY[latency]:
                set_latency([h.name for h in up.hosts], LATENCY[latency], settings, net)
        lab_rack.replan(netbox, names)
        cpu = cpu_seconds()
        lines: list[str] = []
        with tempfile.TemporaryDirectory(prefix="racklift-bench-provision-") as runs:
            os.environ["RACKLIFT_RUNS"] = runs
            result = run(netbox, Selection(racks=tuple(racks), roles=("gpu-server",)),
                         Options(image=False, limits=Limits(total=len(racks),
                                                            per_site=len(racks))),
                         progress=Progress(lines.append, QUIET))
        outcome = Counter(h.result for h in result.hosts)
        stages = Counter()
        for h in result.hosts:
            stages.update(h.timings)
        per_stage = ", ".join(f"{stage} {seconds / len(result.hosts):.0f} s"
                              for stage, seconds in stages.items())
        print(f"  {len(racks)} rack(s) of {count}: {result.seconds:.1f} s, "
              f"{', '.join(f'{n} {r}' for r, n in sorted(outcome.items()))}; stage time per "
              f"host {per_stage}; controller CPU {cpu_seconds() - cpu:.0f} s ({load()})",
              flush=True)
        for line in lines:  # failures (progress is quiet): a broken run is told from a slow one
            print(f"    {line}")
        return result.seconds
    finally:
        for net in nets:
            lab_rack.down(netbox, net)
        os.environ.pop("RACKLIFT_RUNS", None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=4, help="hosts per rack")
    parser.add_argument("--racks", type=int, default=4, help="racks in the parallel run")
    parser.add_argument("--latency", choices=sorted(LATENCY), default="none",
                        help="how long the hosts' emulated tools take (default: at once)")
    args = parser.parse_args()
    _, settings = lab()
    netbox = connect(settings)
    print(f"machine: {machine()}; {load()}; tool latency: {args.latency}", flush=True)
    for i in range(args.racks):
        lab_rack.down(netbox, bench_net(i + 1))  # leftovers of an interrupted run
    one = provision(netbox, settings, ["B11"], args.hosts, args.latency)
    many = provision(netbox, settings, [f"B2{i + 1}" for i in range(args.racks)], args.hosts,
                     args.latency)
    print(f"{load()} at the end")
    print(f"provision {args.racks} racks: racklift {many:.1f} s, one rack {one:.1f} s, "
          f"ratio {many / one:.2f}")


if __name__ == "__main__":
    main()
