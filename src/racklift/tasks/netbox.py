"""NetBox tasks for any NetBox: bootstrap, the expected model, the Ansible inventory. The lab
NetBox's own tasks (up, down, reset, snapshot, seed) are racklift.tasks.lab_netbox."""

from __future__ import annotations

from invoke import task
from invoke.exceptions import Exit
from rich.table import Table

from racklift.ansible_inventory import build_inventory
from racklift.console import console, expected_table, plain, print_json
from racklift.netbox.adoption import AdoptionReport, adoption_report
from racklift.netbox.bootstrap import bootstrap as bootstrap_netbox
from racklift.netbox.bootstrap import create_role_context, plan_role_context, refuse_overrides
from racklift.netbox.inventory_hosts import read_inventory_hosts
from racklift.netbox.reader import Selection, read_hosts
from racklift.tasks.common import SELECTION_HELP, connect, operator_errors, selection


@task
def bootstrap(c):
    """Create the tags, roles and custom fields racklift relies on (idempotent)."""
    with operator_errors():
        results = bootstrap_netbox(connect())
    for r in results:
        console.print(f"{'created' if r.created else 'exists '}  {r.endpoint} {r.key}")


@task(help={**SELECTION_HELP, "json": "print JSON on stdout instead of a table: all the gate "
                                      "judges a host against, what `facts --expected` reads"})
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


def _adoption_table(report: AdoptionReport, title: str) -> Table:
    out = Table(title=title, title_justify="left")
    for column in ("device type", "devices", "ready", "what is missing (devices)"):
        out.add_column(column, overflow="fold")
    for t in report.types:
        out.add_row(plain(t.model), str(t.devices), str(t.ready),
                    plain(", ".join(f"{g} ({n})" for g, n in t.gaps.items()) or "-"))
    return out


@task(help={"site": "site slug(s), comma-separated", "rack": SELECTION_HELP["rack"],
            "role": "device role slug(s) (default: every role at the site)",
            "apply": "create what needs no guess and change nothing else: racklift's tags, "
                     "roles and custom fields (bootstrap), and for each --role with no racklift "
                     "config context, one scoped to it that manages nothing yet, unless it "
                     "would override a key an existing context sets for the role's devices",
            "force": "with --apply, create each role's context even where it overrides keys "
                     "existing contexts set (the output names them)",
            "json": "print the whole report as JSON on stdout"})
def adopt(c, site=None, rack=None, role=None, apply=False, force=False, json=False):
    """What an existing NetBox lacks for racklift to take its devices: per device type and
    field, how many devices lack it (with what to do), and each device's problems; the
    devices racklift can take as they are; names it cannot use. Reports only, unless
    --apply."""
    if not site:
        raise Exit("error: --site is required: adoption is looked at one site at a time",
                   code=2)
    chosen = Selection.of(sites=site, racks=rack, roles=role)
    with operator_errors():
        netbox = connect()
        if apply:
            # Every role's context is planned and checked before anything is written.
            plans = [plan_role_context(netbox, r) for r in chosen.roles]
            for plan in plans:
                refuse_overrides(plan, force)
            created = [r for r in bootstrap_netbox(netbox) if r.created]
            created += [r for r in (create_role_context(netbox, p, force) for p in plans)
                        if r.created]
            for r in created:
                console.print(f"created  {r.endpoint} {r.key}")
                for o in r.overrides:
                    console.print(plain(f"  overriding {o}"))
            overridden = [o for r in created for o in r.overrides]
            console.print(f"{len(created)} objects created; " + (
                f"{len(overridden)} keys of existing config contexts overridden (--force)"
                if overridden else "nothing existing was changed or overridden"))
        report = adoption_report(read_hosts(netbox, chosen))
    if json:
        print_json(report.to_dict())
        return
    console.print(_adoption_table(report, f"adoption: {chosen.describe()}"))
    for gap, n in report.gaps.items():
        console.print(plain(f"- {gap} ({n} devices): {report.hints[gap]}"))
    console.print(f"{report.devices} devices: {len(report.ready)} ready for racklift, "
                  f"{report.devices - len(report.ready)} with something missing, "
                  f"{len(report.refused)} without a name racklift can use"
                  + ("" if apply else "; nothing was written (--apply creates what needs no "
                     "guess)"))
