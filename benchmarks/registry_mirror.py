"""N lab hosts pulling the same image at once: straight from the upstream registry, then
through the registry mirror (cold cache, then warm). Prints wall times and ratios.

The upstream here is another container on the same machine, so without a limit it would be as
fast as the mirror; the upstream's outgoing bandwidth is limited with tc (tbf), shared by all
hosts like an internet uplink (say so in the output; --rate 0 for no limit). No NetBox needed:
its own podman network racklift-mirror-bench (10.89.4.0/24), removed at the end.

Usage: .venv/bin/python benchmarks/registry_mirror.py [--hosts 4] [--mib 64] [--rate 200mbit]
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import load, machine

from racklift.lab import registry

LAB = registry.MirrorLab("racklift-mirror-bench", ipaddress.ip_network("10.89.4.0/24"))
IMAGE = "library/rackbig:1.0"


def pull_all(clients: list[str], source: str, flags: str = "") -> float:
    """Every client pulls `source` at the same time into an empty directory; wall seconds."""
    for client in clients:
        registry.sh(client, "rm -rf /tmp/bench-pull")

    def pull(client: str) -> None:
        registry.sh(client, f"skopeo copy --quiet {flags} {source} dir:/tmp/bench-pull",
                    timeout=1800)

    started = time.monotonic()
    with ThreadPoolExecutor(len(clients)) as pool:
        list(pool.map(pull, clients))
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--mib", type=int, default=64, help="random MiB in the image's layer")
    parser.add_argument("--rate", default="200mbit", help="upstream egress limit (tc), 0: none")
    args = parser.parse_args()

    roles = ["upstream", "mirror", *(f"host-{i:02d}" for i in range(1, args.hosts + 1))]
    registry.down(LAB)
    try:
        started = time.monotonic()
        addresses = registry.up(LAB, roles)
        upstream = LAB.container("upstream")
        registry.start_upstream(upstream, 5000)
        manifest = registry.push_image(upstream, "127.0.0.1:5000", IMAGE, "racklift bench",
                                       pad_mib=args.mib)
        size_mib = sum(layer["size"] for layer in manifest["layers"]) / 2**20
        with tempfile.TemporaryDirectory() as tmp:
            inventory = registry.write_inventory(
                Path(tmp) / "inventory.yml", LAB,
                {"registry_mirror": {"mirror": addresses["mirror"]},
                 "mirror_clients": {r: addresses[r] for r in roles[2:]}},
                {"registry_mirror_upstreams": [
                    {"name": "dockerhub", "registry": "docker.io",
                     "url": f"http://{addresses['upstream']}:5000", "port": 5000}],
                 "registry_mirror_ca_dir": f"{tmp}/ca"})
            setup = registry.run_playbook(inventory, "registry_mirror", "mirror_clients",
                                          {"registry_mirror_clients_runtime": False})
        if setup.returncode != 0:
            sys.exit(f"mirror setup failed:\n{setup.stdout[-3000:]}")
        print(f"lab: {args.hosts} hosts + upstream + mirror up and set up in "
              f"{time.monotonic() - started:.0f} s; image layer {size_mib:.0f} MiB; {machine()}")
        if args.rate != "0":
            registry.limit_egress(upstream, args.rate)
            print(f"upstream egress limited to {args.rate} with tc tbf (shared by all hosts, "
                  "like an uplink); the mirror's side is not limited")
        clients = [LAB.container(r) for r in roles[2:]]
        direct = pull_all(clients, f"docker://{addresses['upstream']}:5000/{IMAGE}",
                          "--src-tls-verify=false")
        # Through registries.conf: a Docker Hub name, TLS verified with racklift's CA.
        cold = pull_all(clients, f"docker://docker.io/{IMAGE}")
        warm = pull_all(clients, f"docker://docker.io/{IMAGE}")
        total = size_mib * args.hosts
        for label, seconds in (("direct from the upstream", direct),
                               ("through the mirror, cold cache", cold),
                               ("through the mirror, warm cache", warm)):
            print(f"{args.hosts} hosts x {size_mib:.0f} MiB {label}: {seconds:.1f} s "
                  f"({total / seconds:.0f} MiB/s together)")
        print(f"ratio direct / warm mirror: {direct / warm:.1f}x; "
              f"direct / cold mirror: {direct / cold:.1f}x; {load()}")
    finally:
        registry.down(LAB)


if __name__ == "__main__":
    main()
