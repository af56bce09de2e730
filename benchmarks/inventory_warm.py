"""The warm inventory: `ansible-inventory --list` of 10,000 GPU hosts re-run after 100 changes
in NetBox, side by side with the cold read of the same NetBox, in one run
(racklift.netbox.warm_inventory).

Data as benchmarks/inventory.py's (the seeded hosts restored from their snapshot into the lab
NetBox, the lab's own data put back at the end). A first warm run reads in full and keeps the
model. Then each round makes 100 changes through NetBox's API (40 device serials, 30 IP
addresses, 30 MAC addresses, on random hosts; one bulk request per kind, each object logged
as its own change) and times both, in alternating order:

- cold: the inventory cache off, every host read from NetBox (what benchmarks/inventory.py
  times);
- warm: the cache on (`cache: true`, as racklift's ansible.cfg sets it), the kept model and
  the changes since.

Both are whole `ansible-inventory --list` runs writing the inventory to a file, Ansible's part
included; each round checks that both wrote the same inventory.

Usage: .venv/bin/python benchmarks/inventory_warm.py [--hosts 10000] [--runs 3] [--changes 100]
The last line reads `inventory N hosts warm (C changed): racklift X s` (median).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

from common import BIN, Timed, lab, load, machine, median, run_timed
from inventory import RACKLIFT_SOURCE, KeepLabData, ensure_data, environment

from racklift.ansible_inventory import build_inventory, without_unsafe
from racklift.lab import netbox_server
from racklift.netbox import warm_inventory
from racklift.netbox.client import NetBox, NetBoxSettings
from racklift.netbox.inventory_hosts import build_inventory_hosts
from racklift.netbox.selection import Selection
from racklift.paths import REPO_ROOT

MODES = ("cold", "warm")


def warm_env(workdir: Path) -> dict[str, str]:
    return {"ANSIBLE_INVENTORY_CACHE": "true", "ANSIBLE_INVENTORY_CACHE_TIMEOUT": "3600",
            "ANSIBLE_INVENTORY_CACHE_CONNECTION": str(workdir / "kept")}


def change(netbox: NetBox, count: int, round_: int, rng: random.Random) -> str:
    """`count` changes through the API: 40 % device serials, 30 % IPs, 30 % MACs."""
    devices = count * 4 // 10
    ips = (count - devices) // 2
    macs = count - devices - ips
    picked = {endpoint: rng.sample(netbox.get_all(endpoint, fields=("id",)), n)
              for endpoint, n in (("dcim/devices", devices), ("ipam/ip-addresses", ips),
                                  ("dcim/mac-addresses", macs))}
    netbox.update("dcim/devices", [{"id": d["id"], "serial": f"W{round_}-{i}"}
                                   for i, d in enumerate(picked["dcim/devices"])])
    # NetBox refuses a duplicate address, or a network's own: each round its own /16.
    netbox.update("ipam/ip-addresses", [
        {"id": ip["id"], "address": f"172.{16 + round_}.1.{i + 1}/16"}
        for i, ip in enumerate(picked["ipam/ip-addresses"])])
    netbox.update("dcim/mac-addresses", [
        {"id": m["id"], "mac_address": "02:" + ":".join(f"{rng.randrange(256):02X}"
                                                        for _ in range(5))}
        for m in picked["dcim/mac-addresses"]])
    return f"{devices} device serials, {ips} IP addresses, {macs} MAC addresses"


def listed(settings: NetBoxSettings, workdir: Path, mode: str, tag: str) -> tuple[Timed, Path]:
    env = environment(settings)
    if mode == "warm":
        env.update(warm_env(workdir))
    output, errors = workdir / f"{tag}.json", workdir / f"{tag}.err"
    timed = run_timed([str(BIN / "ansible-inventory"), "-v", "-i",
                       str(workdir / "bench.racklift.yml"), "--list", "--output", str(output)],
                      env, REPO_ROOT, stdout=workdir / f"{tag}.out", stderr=errors)
    if timed.returncode != 0:
        raise SystemExit(f"{mode}: ansible-inventory failed (exit {timed.returncode}):\n"
                         f"{errors.read_text()[-2000:]}")
    return timed, output


def how(workdir: Path, tag: str) -> str:
    """What the plugin said of how it read (`-v`, to stdout: the inventory went to a file)."""
    for line in (workdir / f"{tag}.out").read_text().splitlines():
        if line.startswith("racklift_netbox: "):
            return line.removeprefix("racklift_netbox: ")
    return "?"


def breakdown(settings: NetBoxSettings, workdir: Path) -> str:
    """Where a warm run's time goes, in this process: the sync (the kept model read and
    written, the change log and the touched devices read from NetBox), then the model."""
    kept = next((workdir / "kept").glob("racklift-inventory-*.json"))
    selection = Selection.of(sites=RACKLIFT_SOURCE["sites"], roles=RACKLIFT_SOURCE["roles"])
    netbox = NetBox.connect(settings)
    started = time.monotonic()
    kept_model = warm_inventory.load(kept)
    loaded = time.monotonic() - started
    synced = warm_inventory.sync(netbox, selection, kept)
    synced_s = time.monotonic() - started - loaded
    build_inventory(build_inventory_hosts(synced.raw))
    built = time.monotonic() - started - loaded - synced_s
    assert kept_model is not None
    return (f"the kept model ({kept.stat().st_size / 2**20:.0f} MiB) loaded in {loaded:.1f} s; "
            f"a sync (that load again, the change log, the touched devices, the model saved) "
            f"{synced_s:.1f} s: {synced.how}; hosts and inventory built {built:.1f} s")


def same(first: Path, second: Path) -> bool:
    return without_unsafe(json.loads(first.read_text())) == without_unsafe(
        json.loads(second.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10000, help="hosts (a multiple of 8)")
    parser.add_argument("--runs", type=int, default=3, help="rounds of changes, cold and warm")
    parser.add_argument("--changes", type=int, default=100, help="changes per round")
    args = parser.parse_args()
    rng = random.Random(20261202)

    instance, settings = lab()
    print(f"machine: {machine()}; NetBox {netbox_server.NETBOX_VERSION} on the same machine; "
          f"{load()}")
    seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
    with KeepLabData(instance), tempfile.TemporaryDirectory(prefix="racklift-bench-") as tmp:
        workdir = Path(tmp)
        (workdir / "bench.racklift.yml").write_text(json.dumps(RACKLIFT_SOURCE))
        print(f"{args.hosts} hosts: {ensure_data(instance, settings, args.hosts)}", flush=True)
        netbox = NetBox.connect(settings)
        first, _ = listed(settings, workdir, "warm", "first")
        print(f"  first warm run: {first.seconds:.1f} s, {how(workdir, 'first')}", flush=True)
        for round_ in range(args.runs):
            made = change(netbox, args.changes, round_, rng)
            outputs = {}
            for mode in MODES if round_ % 2 == 0 else reversed(MODES):
                tag = f"{mode}-{round_}"
                timed, outputs[mode] = listed(settings, workdir, mode, tag)
                seconds[mode].append(timed.seconds)
                print(f"  round {round_ + 1} ({made}): {mode} {timed.seconds:.1f} s, peak "
                      f"{timed.peak_mib:.0f} MiB; {how(workdir, tag)} ({load()})", flush=True)
            if not same(outputs["cold"], outputs["warm"]):
                raise SystemExit(f"round {round_ + 1}: the warm inventory differs from the cold "
                                 "one")
            print(f"  round {round_ + 1}: the warm and the cold inventory are the same: yes")
        made = change(netbox, args.changes, args.runs, rng)
        print(f"  in this process, after {made}: {breakdown(settings, workdir)}")
        graph = run_timed([str(BIN / "ansible-inventory"), "-i",
                           str(workdir / "bench.racklift.yml"), "--graph"],
                          {**environment(settings), **warm_env(workdir)}, REPO_ROOT)
        print(f"  warm, nothing changed, ansible-inventory --graph (what a playbook run pays; "
              f"no --list writer): {graph.seconds:.1f} s ({load()})", flush=True)
    cold, warm = median(seconds["cold"]), median(seconds["warm"])
    print(f"\n{load()} at the end")
    print(f"inventory {args.hosts} hosts cold: racklift {cold:.1f} s (median of "
          f"{len(seconds['cold'])}); warm, ratio {cold / warm:.1f}")
    print(f"inventory {args.hosts} hosts warm ({args.changes} changed): racklift {warm:.1f} s")


if __name__ == "__main__":
    main()
