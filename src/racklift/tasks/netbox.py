"""NetBox tasks: the lab server's lifecycle, bootstrap, seed data and the expected model."""

from __future__ import annotations

import time
from functools import partial

from invoke import task

from racklift.console import console, expected_table, print_json
from racklift.errors import RackliftError
from racklift.inventory import build_inventory
from racklift.lab import netbox_server
from racklift.lab import seed as seeding
from racklift.netbox.bootstrap import bootstrap as bootstrap_netbox
from racklift.netbox.inventory_reader import read_inventory_hosts
from racklift.netbox.reader import read_hosts
from racklift.tasks.common import (
    SELECTION_HELP,
    connect,
    lab_instance,
    operator_errors,
    selection,
)


@task(help={"port": "port for the lab NetBox (default 8001, or RACKLIFT_LAB_NETBOX_PORT)"})
def up(c, port=None):
    """Start the lab NetBox (PostgreSQL, Redis, NetBox 4.7 from PyPI); a no-op when it runs.

    The first start installs NetBox and migrates once (~6 min); later starts restore the
    cached database in seconds."""
    instance = lab_instance()
    if port:
        instance = netbox_server.NetBoxInstance("lab", int(port), instance.redis_port)
    with operator_errors():
        result = netbox_server.up(instance)
    state = "already running" if result.already_running else f"up in {result.seconds:.1f} s"
    console.print(f"lab NetBox {result.version} at {result.url}: {state}")
    console.print(f"[dim]log: {instance.log_file}; API token for the lab admin: "
                  "see racklift.lab.netbox_server.LAB_TOKEN[/]")


@task
def down(c):
    """Stop the lab NetBox (its database stays for the next `up`)."""
    stopped = netbox_server.down(lab_instance())
    console.print("lab NetBox stopped" if stopped else "lab NetBox was not running")


@task(help={"snapshot": "restore this snapshot instead of the empty migrated database"})
def reset(c, snapshot=None):
    """Replace the lab NetBox's data with a fresh migrated database (or a snapshot)."""
    with operator_errors():
        seconds = netbox_server.reset(lab_instance(), snapshot)
    console.print(f"lab NetBox reset in {seconds:.2f} s")


@task(help={"name": "snapshot name"})
def snapshot(c, name):
    """Keep the lab NetBox's current data as a snapshot that `reset --snapshot` restores."""
    with operator_errors():
        seconds = netbox_server.snapshot(lab_instance(), name)
    console.print(f"snapshot '{name}' taken in {seconds:.2f} s")


@task
def status(c):
    """Is the lab NetBox up, where, which version."""
    instance = lab_instance()
    version = netbox_server.answers(instance)
    if version:
        console.print(f"lab NetBox {version} at {instance.url} (database {instance.database})")
    else:
        console.print(f"lab NetBox is not running (would listen on {instance.url})")


@task
def bootstrap(c):
    """Create the tags, roles and custom fields racklift relies on (idempotent)."""
    with operator_errors():
        results = bootstrap_netbox(connect())
    for r in results:
        console.print(f"{'created' if r.created else 'exists '}  {r.endpoint} {r.key}")


@task(help={"racks": "number of racks (8 hosts each)", "site": "site slug",
            "first_rack": "number of the first rack (R01 is 1)",
            "hosts_per_rack": "hosts per rack",
            "in_netbox": "load the hosts inside the lab NetBox's own shell, in one transaction "
                         "(lab only; for thousands of hosts)"})
def seed(c, racks=1, site="lab1", first_rack=1, hosts_per_rack=seeding.HOSTS_PER_RACK,
         in_netbox=False):
    """Seed racks of 8-GPU servers, modelled the NetBox way (converges when re-run)."""
    plan = seeding.plan(int(racks), int(hosts_per_rack), site, int(first_rack))
    started = time.monotonic()
    with operator_errors():
        netbox = connect()
        loader = None
        if in_netbox:
            instance = lab_instance()
            if netbox.url != instance.url:
                raise RackliftError(f"--in-netbox works on the lab NetBox ({instance.url}) "
                                    f"only, not {netbox.url}")
            loader = partial(netbox_server.run_in_netbox, instance, seeding.ORM_SCRIPT)
        report = seeding.apply(netbox, plan, progress=lambda m: console.print(f"  {m}"),
                               host_loader=loader)
    console.print(f"seeded {len(plan.hosts)} hosts in {len(plan.racks)} racks at {site} "
                  f"in {time.monotonic() - started:.1f} s "
                  f"({', '.join(f'{k}: {v}' for k, v in report.created.items())} created)")


@task(help={**SELECTION_HELP, "json": "print JSON on stdout instead of a table"})
def expected(c, site=None, rack=None, role=None, status=None, host=None, json=False):
    """Show what NetBox expects of the selected hosts, and what their records lack."""
    chosen = selection(site, rack, role, status, host)
    with operator_errors():
        hosts = read_hosts(connect(), chosen)
    if json:
        print_json([h.to_dict() for h in hosts])
    else:
        console.print(expected_table(hosts, f"expected state: {chosen.describe()}"))
    incomplete = sum(1 for h in hosts if h.problems)
    console.print(f"{len(hosts)} hosts, {incomplete} with incomplete NetBox records")


@task(help=SELECTION_HELP)
def inventory(c, site=None, rack=None, role=None, status=None, host=None):
    """Print the Ansible inventory racklift builds from NetBox (ansible-inventory --list form)."""
    with operator_errors():
        hosts = read_inventory_hosts(connect(), selection(site, rack, role, status, host))
    print_json(build_inventory(hosts))
