"""The simulated fleet's tasks (lab only): thousands of hosts that answer racklift's collector
over SSH from one process, to measure one controller against them (benchmarks/fleet.py).
Each imports the lab when it runs (racklift.tasks.lab_netbox says why)."""

from __future__ import annotations

from invoke import task

from racklift.console import console
from racklift.errors import RackliftError
from racklift.tasks.common import operator_errors
from racklift.tasks.lab_netbox import lab_connect, lab_instance


def parse_faults(text: str) -> dict[str, list[str]]:
    """`host=kind[+kind],...` → host → kinds."""
    faults: dict[str, list[str]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, kinds = item.partition("=")
        if not sep or not host or not kinds:
            raise RackliftError(f"--faults: {item!r} is not HOST=KIND[+KIND]")
        faults.setdefault(host, []).extend(kinds.split("+"))
    return faults


@task(help={"hosts": "simulated hosts (default 64)", "sites": "sites they are spread over",
            "faults": "HOST=KIND[+KIND],...: hwemu's fault kinds, or unreachable, garbage",
            "latency": "realistic (the real tools' time) or none (default)",
            "boot_servers": "a real boot server per site, so `provision` images the hosts "
                            "(their DHCP, iPXE, deploy data and report go there)",
            "post": "seconds a host's firmware takes from power-on to its network boot "
                    "(default 0)",
            "link_gbps": "the provisioning link's rate: the ramdisk's and the image's time on "
                         "it (default 10)"})
def up(c, hosts=64, sites=1, faults="", latency="none", boot_servers=False, post=0.0,
       link_gbps=10.0):
    """Seed N simulated hosts in the lab NetBox (planned, racks at sites sim1..) and start the
    one SSH server that answers for all of them; then `racklift provision --site sim1
    --no-image` (or, with --boot-servers, without --no-image). Re-running converges."""
    from racklift.lab.fleet import lifecycle, server
    from racklift.lab.hwemu.latency import REALISTIC
    if latency not in ("none", "realistic"):
        raise RackliftError(f"--latency {latency!r}: realistic or none")
    with operator_errors():
        try:
            spec = server.Spec(int(hosts), int(sites), faults=parse_faults(faults),
                               latency=REALISTIC if latency != "none" else {},
                               boot_servers=bool(boot_servers), post_seconds=float(post),
                               link_gbps=float(link_gbps))
        except ValueError as exc:
            raise RackliftError(f"--faults: {exc}") from None
        got = lifecycle.up(lab_connect(), spec, lab_instance(),
                           progress=lambda m: console.print(f"  {m}"))
    console.print(f"{len(got.plan.hosts)} simulated hosts at "
                  f"{', '.join(s.site for s in got.plan.sites)} "
                  f"({', '.join(f'{k}: {v}' for k, v in got.created.items())} created)")


@task
def down(c):
    """Stop the fleet's server and boot servers, remove their namespaces (the NetBox records
    stay)."""
    from racklift.lab.fleet import lifecycle
    with operator_errors():
        lifecycle.down()
    console.print("the simulated fleet is down")
