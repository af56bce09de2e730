"""How long N lab hosts take to come up on this machine, and what they cost in memory.

Needs the lab NetBox (`invoke netbox.up`). Uses its own podman network and rack (B01), and
removes everything it made at the end. Usage: .venv/bin/python benchmarks/lab_up.py [N ...]
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import time

from racklift.lab import hosts, netbox_server
from racklift.lab import rack as lab_rack
from racklift.netbox.client import NetBox, NetBoxSettings

BENCH_NET = hosts.LabNet("racklift-bench", ipaddress.ip_network("10.89.2.0/24"),
                         ipaddress.ip_network("10.33.2.0/24"), mac_base=0x6000)


def used_mib() -> float:
    with open("/proc/meminfo") as handle:
        info = dict(line.split(":", 1) for line in handle)
    kib = int(info["MemTotal"].split()[0]) - int(info["MemAvailable"].split()[0])
    return kib / 1024


def main(counts: list[int]) -> None:
    instance = netbox_server.NetBoxInstance.from_env()
    netbox = NetBox.connect(NetBoxSettings(instance.url, instance.token))
    lab_rack.down(netbox, BENCH_NET)
    for count in counts:
        before = used_mib()
        started = time.monotonic()
        result = lab_rack.up(netbox, count, "B01", net=BENCH_NET)
        seconds = time.monotonic() - started
        after = used_mib()
        ping = subprocess.run(
            [f"{sys.prefix}/bin/ansible", "rack_b01", "-m", "ansible.builtin.ping", "-o"],
            capture_output=True, text=True,
            env={**os.environ, "NETBOX_URL": instance.url, "NETBOX_TOKEN": instance.token,
                 "ANSIBLE_INVENTORY_CACHE": "false",
                 "PATH": f"{sys.prefix}/bin:{os.environ['PATH']}"})
        reached = ping.stdout.count("SUCCESS")
        print(f"{count} hosts: up in {seconds:.1f} s ({seconds / count:.2f} s/host), "
              f"containers {result.memory_mib:.0f} MiB, machine +{after - before:.0f} MiB, "
              f"ansible ping {reached}/{count}")
        lab_rack.down(netbox, BENCH_NET)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [4, 32])
