"""A fleet through one controller: `provision` of 64, 512 and 4,096 simulated hosts
(racklift.lab.fleet: 8 GPUs and 8 HCAs each, cabled to their rack's leaf and their rail group's
InfiniBand leaves, over several sites) from `planned` to `active`, a few percent of them faulty;
`--no-image` unless `--image`.

The hosts cost the machine almost nothing of their own: one process answers SSH for all of them
from the fleet's namespace, each at its own address, with the document racklift's collector
would print there, after the real tools' time (`nvidia-smi -q -x` 6 s; --latency none: at
once), and the acceptance tests' tools in their real formats (DCGM level 2 its two minutes,
ib_write_bw its 5 s a pair). So the two cores are the controller's: what this measures is
racklift, NetBox and Ansible. With `--image` each site has a real boot server (a lab container
the image stage sets up), and each host's firmware, iPXE and deploy ramdisk are simulated on
the wire against it (DHCP, the scripts, the deploy data and report; the image's time on a link
of `--link-gbps`), after a POST of `--post` seconds at each boot. Configure runs no Ansible job
(simulated hosts get no roles).

Per size: wall time, each stage's time per host, hosts per hour, the controller's CPU per host
(this process and everything it ran: ansible-playbook, ssh clients), NetBox's API requests per
host (counted in NetBox's own access log), the controller's peak memory, and every faulty
host's refusal checked against its fault. Each size starts from an empty NetBox (a NetBox
instance of its own, `fleet`, on port 8021).

`--verify-after` then verifies each size's hosts in one batch (`racklift verify`, NetBox not
written: the old P2's run, the controller alone); `--compare-racks` provisions one rack of 8,
then 4 racks at once (the old P4's runs) and prints their ratio.

Usage: .venv/bin/python benchmarks/fleet.py [--sizes 64,512,4096] [--latency realistic]
       [--parallel-racks 16] [--racks-per-site 8] [--verify-after] [--compare-racks]
       [--image [--post 120] [--link-gbps 25]]
The last line reads `fleet N simulated hosts: planned to active X s, controller CPU Y s/host,
NetBox Z requests/host` (with --compare-racks: `provision 4 racks: racklift X s, one rack Y s,
ratio Z (simulated hosts)`).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import tempfile
import time
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from common import cpu_seconds, load, machine

from racklift.lab import netbox_server
from racklift.lab.fleet import lifecycle, server
from racklift.lab.fleet.plan import FleetPlan
from racklift.lab.hwemu.latency import REALISTIC
from racklift.lab.sources import use_lab_inventory
from racklift.netbox.client import NetBox, NetBoxSettings
from racklift.netbox.selection import Selection
from racklift.pipeline.image_plan import ImagingOptions
from racklift.pipeline.image_stage import image_hosts
from racklift.pipeline.outcome import JOINED
from racklift.pipeline.plan import Options
from racklift.pipeline.progress import QUIET, Progress
from racklift.pipeline.provision import run
from racklift.pipeline.racks import Limits
from racklift.verify.gate import verify

INSTANCE = netbox_server.NetBoxInstance(name="fleet", port=8021, redis_base=8)
# One host in FAULT_EVERY is faulty, its fault drawn in turn from FAULTS: each with the words
# its refusal must hold.
FAULT_EVERY = 33
FAULTS = {
    "xid-79": "kernel.gpu_errors",
    "ib-port-down": "ib.links",
    "wrong-system-serial": "system.serial",
    "unreachable": "unreachable",
    "garbage": "not JSON",
    "bmc-firmware-old": "firmware BMC: found",
    "bios-setting-off": "BIOS attribute",
    "bmc-unreachable": "its BMC could not be read",
    # Verify passes them; the acceptance tests refuse them.
    "hbm-fail": "accept.dcgm.GPU Memory",
    "rail-slow": "accept.rdma[mlx5_3]",
    "nvlink-slow": "accept.nccl.busbw",
}
# With --image, refused when imaged: these three, and the BMC faults (the image stage reads
# the firmware and BIOS before anything is served); a host that stops answering SSH is refused
# when its deployed OS does not answer.
IMAGE_FAULTS = {
    "deploy-disk-missing": "reported failure in phase disk",
    "disk-boot-old": "the SSH host key it presents is not the one racklift gave it",
    "provisioning-mac-wrong": "no DHCP request from",
}
IMAGED_REFUSALS = {**FAULTS, **IMAGE_FAULTS, "unreachable": "after the deploy, SSH",
                   "bmc-unreachable": "reading its firmware and BIOS"}
SITES = {64: 2, 512: 4, 4096: 8}


def faults_for(fleet: FleetPlan, imaged: bool = False) -> dict[str, list[str]]:
    kinds = list(FAULTS) + (list(IMAGE_FAULTS) if imaged else [])
    chosen = fleet.hosts[FAULT_EVERY // 2::FAULT_EVERY]
    return {h.name: [kinds[i % len(kinds)]] for i, h in enumerate(chosen)}


def process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def netbox_cpu() -> float:
    """NetBox's gunicorn workers' CPU so far (the workers live as long as the server)."""
    master = netbox_server.server_pid(INSTANCE)
    if master is None:
        return 0.0
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return sum(process_cpu(int(pid)) for pid in children)


@dataclass
class Requests:
    """NetBox's API requests: how many by method, and the seconds NetBox spent by endpoint
    (ids as N)."""

    count: Counter[str]
    seconds: Counter[str]

    @property
    def total(self) -> int:
        return sum(self.count.values())


def requests_since(offset: int) -> Requests:
    """NetBox's API requests in its access log after `offset` (lines in
    netbox_server.ACCESS_LOG's format: the request in quotes, milliseconds last)."""
    got = Requests(Counter(), Counter())
    with INSTANCE.log_file.open("rb") as log:
        log.seek(offset)
        for line in log:
            request = line.split(b'"')[1:2]
            words = request[0].split() if request else []
            if len(words) != 3 or not words[1].startswith((b"/api/", b"/graphql/")):
                continue
            method = words[0].decode()
            got.count[method] += 1
            path = re.sub(r"\d+", "N", words[1].decode().split("?")[0])
            with suppress(ValueError, IndexError):
                got.seconds[f"{method} {path}"] += int(line.split()[-1]) / 1000
    return got


def verify_pool(netbox: NetBox, fleet: FleetPlan) -> None:
    """`racklift verify` of every host just provisioned (one batch, NetBox not written), as an
    operator re-checks the pool: the old P2 figure's run, with the controller alone."""
    cpu = cpu_seconds()
    with tempfile.TemporaryDirectory(prefix="racklift-bench-fleet-") as runs:
        os.environ["RACKLIFT_RUNS"] = runs
        got = verify(netbox, Selection(sites=tuple(s.site for s in fleet.sites),
                                       roles=("gpu-server",)), write=False)
    cpu = cpu_seconds() - cpu
    passed = sum(v.passed for v in got.verdicts)
    print(f"  verify {len(got.verdicts)} hosts: racklift {got.seconds:.1f} s, controller CPU "
          f"{cpu / len(got.verdicts):.3f} s/host, {passed} passed ({load()})", flush=True)


@dataclass
class Measured:
    hosts: int
    seconds: float
    cpu: float
    server_cpu: float
    netbox_cpu: float
    requests: Requests
    peak_mib: float
    stages: dict[str, float]
    outcome: Counter[str]
    wrong: list[str]


@dataclass(frozen=True)
class Imaging:
    """--image: each site's boot server, a POST of `post` seconds at each boot, a link of
    `link_gbps`."""

    post: float
    link_gbps: float


def one_size(hosts: int, latency: str, parallel: int, per_site: int,
             verify_after: bool = False, imaging: Imaging | None = None) -> Measured:
    print(f"{hosts} hosts: an empty NetBox ...", flush=True)
    netbox_server.switch_data(INSTANCE, None)
    netbox = NetBox.connect(NetBoxSettings(INSTANCE.url, INSTANCE.token))
    sites = SITES.get(hosts, max(1, hosts // 512))
    fleet = server.Spec(hosts, sites).fleet()
    spec = server.Spec(hosts, sites, faults=faults_for(fleet, imaging is not None),
                       latency=REALISTIC if latency == "realistic" else {},
                       boot_servers=imaging is not None,
                       post_seconds=imaging.post if imaging else 0.0,
                       link_gbps=imaging.link_gbps if imaging else 10.0)
    refusals = IMAGED_REFUSALS if imaging else FAULTS
    started = time.monotonic()
    lifecycle.up(netbox, spec, INSTANCE)
    print(f"  seeded and served in {time.monotonic() - started:.0f} s ({load()})", flush=True)
    pid = int((lifecycle.fleet_dir() / "server.pid").read_text())
    server_before = process_cpu(pid)
    offset = INSTANCE.log_file.stat().st_size
    cpu, netbox_before = cpu_seconds(), netbox_cpu()
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="racklift-bench-fleet-") as runs:
        os.environ["RACKLIFT_RUNS"] = runs
        result = run(netbox, Selection(sites=tuple(s.site for s in fleet.sites),
                                       roles=("gpu-server",)),
                     Options(image=imaging is not None,
                             limits=Limits(total=parallel, per_site=per_site)),
                     progress=Progress(lines.append, QUIET),
                     image=partial(image_hosts, options=ImagingOptions()) if imaging else None)
    cpu, netbox_used = cpu_seconds() - cpu, netbox_cpu() - netbox_before
    requests = requests_since(offset)
    server_cpu = process_cpu(pid) - server_before
    if verify_after:
        verify_pool(netbox, fleet)
    stages: Counter[str] = Counter()
    for h in result.hosts:
        stages.update(h.timings)
    wrong = []
    for h in result.hosts:
        kinds = spec.faults.get(h.name)
        if kinds is None and h.result != JOINED:
            wrong.append(f"{h.name} (healthy) {h.result}: {h.error}")
        elif kinds and (h.result == JOINED or refusals[kinds[0]] not in (h.error or "")):
            wrong.append(f"{h.name} ({kinds[0]}) {h.result}: {h.error}")
    lifecycle.down()
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return Measured(hosts, result.seconds, cpu, server_cpu, netbox_used, requests, peak,
                    {k: v / len(result.hosts) for k, v in stages.items()},
                    Counter(h.result for h in result.hosts), wrong)


def report(m: Measured) -> None:
    per_host = m.requests.total / m.hosts
    print(f"  planned to active {m.seconds:.1f} s, {m.hosts / m.seconds * 3600:.0f} hosts/hour; "
          f"{', '.join(f'{n} {r}' for r, n in sorted(m.outcome.items()))}", flush=True)
    print(f"  stage time per host: "
          f"{', '.join(f'{s} {v:.1f} s' for s, v in m.stages.items())}")
    print(f"  controller CPU {m.cpu:.0f} s ({m.cpu / m.hosts:.3f} s/host), NetBox's "
          f"{m.netbox_cpu:.0f} s ({m.netbox_cpu / m.hosts:.3f} s/host), the simulator's "
          f"{m.server_cpu:.0f} s; peak memory {m.peak_mib:.0f} MiB (one process)")
    print(f"  NetBox API requests {m.requests.total} ({per_host:.1f}/host: "
          f"{', '.join(f'{k} {v}' for k, v in sorted(m.requests.count.items()))}); NetBox's "
          f"time {sum(m.requests.seconds.values()):.0f} s, most in: "
          f"{', '.join(f'{k} {v:.0f} s' for k, v in m.requests.seconds.most_common(4))}")
    for line in m.wrong[:10]:
        print(f"  WRONG: {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="64,512,4096")
    parser.add_argument("--latency", choices=("realistic", "none"), default="realistic")
    parser.add_argument("--parallel-racks", type=int, default=16)
    parser.add_argument("--racks-per-site", type=int, default=8)
    parser.add_argument("--verify-after", action="store_true",
                        help="then verify each size's hosts in one batch (the old P2's run)")
    parser.add_argument("--compare-racks", action="store_true",
                        help="one rack of 8, then 4 racks at once (the old P4's runs)")
    parser.add_argument("--image", action="store_true",
                        help="image the hosts first, through a real boot server per site")
    parser.add_argument("--post", type=float, default=0.0,
                        help="with --image: seconds from power-on to the network boot, at "
                             "every boot (real HGX servers: 2-5 minutes)")
    parser.add_argument("--link-gbps", type=float, default=25.0,
                        help="with --image: the provisioning link's rate")
    args = parser.parse_args()
    imaging = Imaging(args.post, args.link_gbps) if args.image else None
    if args.compare_racks:
        args.sizes, args.parallel_racks, args.racks_per_site = "8,32", 4, 4
    use_lab_inventory()
    netbox_server.up(INSTANCE)
    print(f"machine: {machine()}; {load()}; tool latency: {args.latency}; racks at once "
          f"{args.parallel_racks} ({args.racks_per_site} per site); "
          + (f"imaged: POST {args.post:.0f} s, link {args.link_gbps:g} Gb/s" if imaging
             else "not imaged"), flush=True)
    measured = []
    for size in (int(s) for s in args.sizes.split(",")):
        measured.append(one_size(size, args.latency, args.parallel_racks, args.racks_per_site,
                                 args.verify_after, imaging))
        report(measured[-1])
    if args.compare_racks:
        one, four = measured
        print(f"provision 4 racks: racklift {four.seconds:.1f} s, one rack {one.seconds:.1f} s, "
              f"ratio {four.seconds / one.seconds:.2f} (simulated hosts)")
    elif measured:
        last = measured[-1]
        print(f"fleet {last.hosts} simulated hosts: planned to active {last.seconds:.0f} s, "
              f"controller CPU {last.cpu / last.hosts:.3f} s/host, NetBox "
              f"{last.requests.total / last.hosts:.1f} requests/host")


if __name__ == "__main__":
    main()
