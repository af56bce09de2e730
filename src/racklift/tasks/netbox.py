"""NetBox tasks for any NetBox: bootstrap, the expected model, the Ansible inventory. The lab
NetBox's own tasks (up, down, reset, snapshot, seed) are racklift.tasks.lab_netbox."""

from __future__ import annotations

from invoke import task

from racklift.console import console, expected_table, print_json
from racklift.inventory import build_inventory
from racklift.netbox.bootstrap import bootstrap as bootstrap_netbox
from racklift.netbox.inventory_reader import read_inventory_hosts
from racklift.netbox.reader import read_hosts
from racklift.tasks.common import SELECTION_HELP, connect, operator_errors, selection


@task
def bootstrap(c):
    """Create the tags, roles and custom fields racklift relies on (idempotent)."""
    with operator_errors():
        results = bootstrap_netbox(connect())
    for r in results:
        console.print(f"{'created' if r.created else 'exists '}  {r.endpoint} {r.key}")


@task(help={**SELECTION_HELP, "json": "print JSON on stdout instead of a table"})
def expected(c, site=None, rack=None, role="gpu-server", status=None, host=None, json=False):
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
def inventory(c, site=None, rack=None, role="gpu-server", status=None, host=None):
    """Print the Ansible inventory racklift builds from NetBox (ansible-inventory --list form)."""
    with operator_errors():
        hosts = read_inventory_hosts(connect(), selection(site, rack, role, status, host))
    print_json(build_inventory(hosts))
