"""The Ansible inventory of 1,000 and 10,000 GPU hosts from a real NetBox: racklift's inventory
plugin against netbox.netbox.nb_inventory, through the same `ansible-inventory --list`.

nb_inventory is configured as a user who needs each host's MACs and IPs would configure it:
interfaces on (which also fetches IP addresses), config contexts on, `fetch_all` on (its
default, and its faster mode for a whole site), grouped like racklift's inventory. Both
select the seeded site. Runs alternate between the two; each is a fresh `ansible-inventory`
process with the inventory cache off, writing the whole inventory (host vars included) to a
file. The first output of each is checked: the same hosts, with the same MAC and IP
addresses on the same interfaces (those holding either: racklift lists only those), and the
same `ansible_host`.

Data: the lab NetBox (`invoke netbox.up`) is filled with N hosts by racklift's seed generator
(N/8 racks of the seed device type: interfaces, MAC objects, primary and OOB IPs, config
contexts), seeded once inside NetBox and kept as a snapshot database plus a pg_dump under
~/.cache/racklift/bench, keyed by the seed's recipe; later runs restore it in seconds. The lab
NetBox's own data is put back at the end.

Usage:
    .venv/bin/python benchmarks/inventory.py [--hosts 1000,10000] [--runs 3] [--nb-runs 3,1]

nb_inventory at 10,000 hosts takes minutes per run, so it runs fewer times there by default;
the output says how many runs each median is of. The last line reads
`inventory N hosts: racklift X s, nb_inventory Y s, ratio Z` (medians, largest N).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from common import BIN, Timed, growth, lab, load, machine, median, run_timed

from racklift.ansible_inventory import build_inventory, without_unsafe
from racklift.lab import netbox_server, services
from racklift.lab import seed as seeding
from racklift.netbox.bootstrap import ROLE_GPU_SERVER
from racklift.netbox.client import NetBox, NetBoxSettings
from racklift.netbox.inventory_hosts import build_inventory_hosts, fetch_inventory
from racklift.netbox.selection import Selection
from racklift.paths import REPO_ROOT, cache_dir

SITE = "lab1"
# A snapshot holds the seed's output: re-seed when the seed, the ORM loader or NetBox change.
RECIPE_FILES = (Path(seeding.__file__), seeding.ORM_SCRIPT)

# GPU servers only, in both: the seed's racks hold their leaf switches too.
RACKLIFT_SOURCE = {"plugin": "racklift_netbox", "sites": [SITE], "roles": [ROLE_GPU_SERVER]}
NB_SOURCE = {
    "plugin": "netbox.netbox.nb_inventory",
    "validate_certs": False,
    "config_context": True,
    "interfaces": True,  # each interface with its MAC, and its IP addresses
    "fetch_all": True,
    "group_by": ["sites", "racks", "device_roles", "status", "platforms", "tags"],
    "device_query_filters": [{"site": SITE}, {"role": ROLE_GPU_SERVER}],
}
TOOLS = ("racklift", "nb_inventory")


# ---------------------------------------------------------------------------------------------
# The data: seeded once, kept as a snapshot and a dump


def snapshot_name(hosts: int) -> str:
    digest = hashlib.sha256()
    for path in RECIPE_FILES:
        digest.update(path.read_bytes())
    digest.update(f"{netbox_server.NETBOX_VERSION}/{netbox_server.DUMP_RECIPE}".encode())
    return f"bench-{hosts}-{digest.hexdigest()[:10]}"


def bench_dir() -> Path:
    return cache_dir() / "bench"


def ensure_data(instance: netbox_server.NetBoxInstance, settings: NetBoxSettings,
                hosts: int) -> str:
    """Put N seeded hosts into the lab NetBox: from the snapshot, else from the dump, else seed
    them (and keep both). Returns how."""
    pg = services.ensure_postgres()
    name = snapshot_name(hosts)
    database = instance.snapshot_database(name)
    dump = bench_dir() / f"{name}.dump"
    how = "restored from the snapshot"
    if not pg.database_exists(database) and dump.exists():
        pg.restore(dump, database)
        how = f"restored from {dump}"
    if pg.database_exists(database):
        started = time.monotonic()
        netbox_server.reset(instance, name)
        return f"{how} in {time.monotonic() - started:.1f} s"
    started = time.monotonic()
    netbox_server.reset(instance)
    plan = seeding.plan(hosts // seeding.HOSTS_PER_RACK, site=SITE)
    seeding.apply(NetBox.connect(settings), plan,
                  host_loader=partial(netbox_server.run_in_netbox, instance, seeding.ORM_SCRIPT))
    seconds = time.monotonic() - started
    netbox_server.snapshot(instance, name)
    dump.parent.mkdir(parents=True, exist_ok=True)
    pg.dump(database, dump)
    return f"seeded in {seconds:.0f} s (kept as snapshot {name} and {dump})"


class KeepLabData:
    """The lab NetBox's data before the benchmark, put back after it."""

    NAME = "bench-saved"

    def __init__(self, instance: netbox_server.NetBoxInstance) -> None:
        self.instance = instance

    def __enter__(self) -> KeepLabData:
        netbox_server.snapshot(self.instance, self.NAME)
        return self

    def __exit__(self, *exc: object) -> None:
        netbox_server.reset(self.instance, self.NAME)
        services.ensure_postgres().drop_database(self.instance.snapshot_database(self.NAME))


# ---------------------------------------------------------------------------------------------
# What both inventories say about each host (pure)

# host → (ansible_host, {interface: (MAC, IP addresses)}), for the interfaces holding either
HostAddresses = dict[str, tuple[str | None, dict[str, tuple[str | None, tuple[str, ...]]]]]


def racklift_addresses(inventory: dict[str, Any]) -> HostAddresses:
    out: HostAddresses = {}
    for host, hostvars in inventory["_meta"]["hostvars"].items():
        expected = without_unsafe(hostvars["racklift_expected"])
        names = set(expected["macs"]) | set(expected["ips"])
        out[host] = (without_unsafe(hostvars.get("ansible_host")), {
            name: (expected["macs"].get(name), tuple(sorted(expected["ips"].get(name, ()))))
            for name in names})
    return out


def nb_addresses(inventory: dict[str, Any]) -> HostAddresses:
    out: HostAddresses = {}
    for host, hostvars in inventory["_meta"]["hostvars"].items():
        interfaces = without_unsafe(hostvars.get("interfaces") or [])
        addresses = {
            i["name"]: ((i.get("primary_mac_address") or {}).get("mac_address"),
                        tuple(sorted(ip["address"] for ip in i.get("ip_addresses") or [])))
            for i in interfaces}
        out[host] = (without_unsafe(hostvars.get("ansible_host")),
                     {name: found for name, found in addresses.items() if any(found)})
    return out


def differences(ours: HostAddresses, theirs: HostAddresses, limit: int = 5) -> list[str]:
    """Where the two inventories disagree, the first few; empty when they agree."""
    found = []
    for host in sorted(set(ours) ^ set(theirs)):
        found.append(f"{host}: only in {'racklift' if host in ours else 'nb_inventory'}")
    for host in sorted(set(ours) & set(theirs)):
        if ours[host] != theirs[host]:
            found.append(f"{host}: racklift {ours[host]} / nb_inventory {theirs[host]}")
    return found[:limit] + ([f"... {len(found) - limit} more"] if len(found) > limit else [])


def count_addresses(hosts: HostAddresses) -> tuple[int, int]:
    macs = sum(1 for _, ifaces in hosts.values() for mac, _ in ifaces.values() if mac)
    ips = sum(len(ips) for _, ifaces in hosts.values() for _, ips in ifaces.values())
    return macs, ips


# ---------------------------------------------------------------------------------------------
# Timing


@dataclass
class Runs:
    timed: dict[str, list[Timed]] = field(default_factory=lambda: {t: [] for t in TOOLS})

    def seconds(self, tool: str) -> list[float]:
        return [t.seconds for t in self.timed[tool]]

    def median(self, tool: str) -> float:
        return median(self.seconds(tool))

    def peak_mib(self, tool: str) -> float:
        return max(t.peak_mib for t in self.timed[tool])


def environment(settings: NetBoxSettings) -> dict[str, str]:
    return {
        **os.environ,
        "NETBOX_URL": settings.url, "NETBOX_API": settings.url, "NETBOX_TOKEN": settings.token,
        "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
        "ANSIBLE_INVENTORY_ENABLED": "racklift_netbox,netbox.netbox.nb_inventory",
        "ANSIBLE_INVENTORY_CACHE": "false",
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true",
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def time_inventories(settings: NetBoxSettings, workdir: Path, runs: int,
                     nb_runs: int) -> tuple[Runs, dict[str, Path]]:
    """Alternate the two inventories; returns the timings and each tool's first output."""
    # Sources outside inventory/, so neither gets racklift's group_vars.
    sources = {"racklift": workdir / "bench.racklift.yml",
               "nb_inventory": workdir / "bench.netbox.yml"}
    sources["racklift"].write_text(json.dumps(RACKLIFT_SOURCE))
    sources["nb_inventory"].write_text(json.dumps(NB_SOURCE))
    env = environment(settings)
    result = Runs()
    first: dict[str, Path] = {}
    wanted = {"racklift": runs, "nb_inventory": nb_runs}
    for round_ in range(max(runs, nb_runs)):
        for tool in TOOLS:
            if round_ >= wanted[tool]:
                continue
            output = workdir / f"{tool}-{round_}.json"
            errors = workdir / f"{tool}-{round_}.err"
            timed = run_timed([str(BIN / "ansible-inventory"), "-i", str(sources[tool]),
                               "--list", "--output", str(output)], env, REPO_ROOT,
                              stderr=errors)
            if timed.returncode != 0:
                raise SystemExit(f"{tool}: ansible-inventory failed (exit {timed.returncode}):\n"
                                 f"{errors.read_text()[-2000:]}")
            result.timed[tool].append(timed)
            print(f"  {tool} run {round_ + 1}: {timed.seconds:.1f} s, peak "
                  f"{timed.peak_mib:.0f} MiB, output {output.stat().st_size / 2**20:.0f} MiB "
                  f"({load()})", flush=True)
            if tool in first:
                output.unlink()
            else:
                first[tool] = output
    return result, first


def check(outputs: dict[str, Path], hosts: int) -> str:
    ours = racklift_addresses(json.loads(outputs["racklift"].read_text()))
    theirs = nb_addresses(json.loads(outputs["nb_inventory"].read_text()))
    problems = differences(ours, theirs)
    if problems:
        return "MISMATCH between the two inventories:\n    " + "\n    ".join(problems)
    macs, ips = count_addresses(ours)
    if len(ours) != hosts:
        return f"MISMATCH: both list {len(ours)} hosts, {hosts} were seeded"
    return (f"same {len(ours)} hosts, {macs} MACs and {ips} IP addresses on the same "
            "interfaces, same ansible_host: yes")


def racklift_breakdown(settings: NetBoxSettings) -> tuple[float, str]:
    """racklift's own share of a run, in this process: NetBox reads, then the model."""
    started = time.monotonic()
    raw = fetch_inventory(NetBox.connect(settings),
                          Selection(sites=(SITE,), roles=(ROLE_GPU_SERVER,)))
    read = time.monotonic() - started
    hosts = build_inventory_hosts(raw)
    model = time.monotonic() - started - read
    build_inventory(hosts)
    inventory = time.monotonic() - started - read - model
    return read + model + inventory, (
        f"NetBox reads {read:.1f} s ({len(raw.devices)} devices, {len(raw.interfaces)} "
        f"interfaces with a MAC or an IP, {len(raw.ip_addresses)} IPs), model {model:.1f} s, "
        f"inventory {inventory:.1f} s")


def racklift_graph(settings: NetBoxSettings, workdir: Path) -> Timed:
    """What every ansible / ansible-playbook run pays for the inventory: parse it and hold its
    host vars, without writing them out as --list does (`ansible-inventory --graph`)."""
    return run_timed([str(BIN / "ansible-inventory"), "-i",
                      str(workdir / "bench.racklift.yml"), "--graph"],
                     environment(settings), REPO_ROOT)


def unchanged_rerun(settings: NetBoxSettings, workdir: Path) -> tuple[Timed, Timed]:
    """A re-run with nothing changed in NetBox: `--list` (to a file) and `--graph` with the
    inventory cache on, after a first run kept the model (racklift.netbox.warm_inventory):
    Ansible's own share, and NetBox asked only what changed."""
    source = workdir / "cached.racklift.yml"
    source.write_text(json.dumps({**RACKLIFT_SOURCE, "cache": True,
                                  "cache_connection": str(workdir / "cache"),
                                  "cache_timeout": 3600}))
    output = workdir / "cached.json"
    command = [str(BIN / "ansible-inventory"), "-i", str(source)]
    env = environment(settings)
    run_timed([*command, "--graph"], env, REPO_ROOT)
    listed = run_timed([*command, "--list", "--output", str(output)], env, REPO_ROOT)
    output.unlink(missing_ok=True)
    return listed, run_timed([*command, "--graph"], env, REPO_ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", default="1000,10000",
                        help="host counts, comma-separated (multiples of 8)")
    parser.add_argument("--runs", type=int, default=3, help="racklift runs per size")
    parser.add_argument("--nb-runs", default="3,1",
                        help="nb_inventory runs per size, comma-separated (the last repeats; "
                             "0 times racklift alone)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.hosts.split(",")]
    nb_runs = [int(n) for n in args.nb_runs.split(",")]
    nb_runs += [nb_runs[-1]] * (len(sizes) - len(nb_runs))

    instance, settings = lab()
    print(f"machine: {machine()}; NetBox {netbox_server.NETBOX_VERSION} (gunicorn, 2 workers) "
          f"on the same machine; {load()}")
    medians: dict[str, list[float]] = {t: [] for t in TOOLS}
    with KeepLabData(instance), tempfile.TemporaryDirectory(prefix="racklift-bench-") as tmp:
        for hosts, nb_count in zip(sizes, nb_runs, strict=True):
            print(f"\n{hosts} hosts: {ensure_data(instance, settings, hosts)}", flush=True)
            print(f"  timing racklift {args.runs}x and nb_inventory {nb_count}x, alternating",
                  flush=True)
            workdir = Path(tmp) / str(hosts)
            workdir.mkdir()
            runs, outputs = time_inventories(settings, workdir, args.runs, nb_count)
            own, breakdown = racklift_breakdown(settings)
            print(f"  racklift, one run in-process: {breakdown}; the rest of a run is "
                  f"Ansible's: about {runs.median('racklift') - own:.0f} s of the median "
                  "(start, taking in the host vars, writing --list)")
            graph = racklift_graph(settings, workdir)
            print(f"  racklift without writing --list (ansible-inventory --graph, what a "
                  f"playbook run pays): {graph.seconds:.1f} s, peak {graph.peak_mib:.0f} MiB")
            listed, graphed = unchanged_rerun(settings, workdir)
            print(f"  re-run with nothing changed (the kept model, NetBox asked what changed; "
                  f"benchmarks/inventory_warm.py): --list {listed.seconds:.1f} s, --graph "
                  f"{graphed.seconds:.1f} s ({load()})")
            for tool in (t for t in TOOLS if runs.timed[t]):
                medians[tool].append(runs.median(tool))
                print(f"  {tool}: median {runs.median(tool):.1f} s of {len(runs.timed[tool])} "
                      f"({', '.join(f'{s:.1f}' for s in runs.seconds(tool))}), peak "
                      f"{runs.peak_mib(tool):.0f} MiB")
            if all(runs.timed.values()):
                print(f"  ratio {runs.median('nb_inventory') / runs.median('racklift'):.1f}")
            # Last: loading both outputs grows this process, and a child forked after that
            # reports this process's memory as its own peak.
            if len(outputs) == len(TOOLS):
                print(f"  check: {check(outputs, hosts)}")
            for output in outputs.values():
                output.unlink()
    print()
    for tool in TOOLS:
        if len(medians[tool]) == len(sizes) > 1:
            print(f"growth, {tool}: {growth(sizes, medians[tool])}")
    print(f"{load()} at the end")
    ours = medians["racklift"][-1]
    if not nb_runs[-1]:
        print(f"inventory {sizes[-1]} hosts: racklift {ours:.1f} s (nb_inventory not run)")
        return
    theirs = medians["nb_inventory"][-1]
    print(f"inventory {sizes[-1]} hosts: racklift {ours:.1f} s, nb_inventory {theirs:.1f} s, "
          f"ratio {theirs / ours:.1f}")


if __name__ == "__main__":
    main()
