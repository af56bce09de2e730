"""The lab NetBox's tasks (they appear as `netbox.up`, `netbox.seed`, ...): its server's
lifecycle and seed data. Also what every lab task does first (`lab_session`): offer the lab
NetBox for when NETBOX_URL is not set, and give its Ansible runs the lab's inventory source.
Production's tasks do neither, and the command line loads no racklift.lab module until a lab
task runs (the imports are in the tasks)."""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING

from invoke import task

from racklift.console import console
from racklift.errors import RackliftError
from racklift.netbox.client import NetBox, NetBoxSettings
from racklift.tasks.common import connect, offer_netbox, operator_errors

if TYPE_CHECKING:
    from racklift.lab.netbox_server import NetBoxInstance


def lab_instance() -> NetBoxInstance:
    from racklift.lab import netbox_server
    return netbox_server.NetBoxInstance.from_env("lab")


def running_lab() -> tuple[NetBoxSettings, str] | None:
    """The lab NetBox when it is running: the server `netbox.up` started, never merely whatever
    answers on the lab's port (that is refused, saying what to set). With what to tell the
    operator about the choice."""
    from racklift.lab import netbox_server
    from racklift.lab.services import port_open
    lab = lab_instance()
    pid = netbox_server.server_pid(lab)
    if pid and netbox_server.answers(lab):
        return (NetBoxSettings(lab.url, lab.token),
                f"using the lab NetBox at {lab.url}, started by racklift (pid {pid}, "
                f"{lab.root}): NETBOX_URL is not set")
    if port_open(lab.port):
        raise RackliftError(f"NETBOX_URL is not set, and what answers on the lab NetBox's port "
                            f"({lab.url}) is not the lab NetBox racklift started: export "
                            "NETBOX_URL and NETBOX_TOKEN for your NetBox, or `racklift "
                            "netbox.up` for the lab's")
    return None


def lab_session() -> None:
    """Before a lab task talks to NetBox or runs Ansible: the lab NetBox is the one to use when
    NETBOX_URL is not set, and Ansible gets the lab's inventory source (racklift.lab.sources)."""
    from racklift.lab.sources import use_lab_inventory
    offer_netbox(running_lab)
    use_lab_inventory()


def lab_connect() -> NetBox:
    lab_session()
    return connect()


@task(help={"port": "port for the lab NetBox (default 8001, or RACKLIFT_LAB_NETBOX_PORT)"})
def up(c, port=None):
    """Start the lab NetBox (PostgreSQL, Redis, NetBox 4.7 from PyPI); a no-op when it runs.

    The first start installs NetBox and migrates once (~6 min); later starts restore the
    cached database in seconds."""
    from racklift.lab import netbox_server
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
def login(c):
    """A fresh password for the lab admin in NetBox's web UI (where racklift's plugin shows
    each device's results and each rack's bring-up), written to a file only root can read."""
    from racklift.lab import netbox_server
    instance = lab_instance()
    with operator_errors():
        if not netbox_server.answers(instance):
            raise RackliftError("the lab NetBox is not running: start it with netbox.up")
        password = netbox_server.admin_password(instance)
    path = instance.root / "admin-password"
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(password + "\n")
    console.print(f"log in to {instance.url}/login/ as admin with the password in {path}")


@task
def down(c):
    """Stop the lab NetBox (its database stays for the next `up`)."""
    from racklift.lab import netbox_server
    stopped = netbox_server.down(lab_instance())
    console.print("lab NetBox stopped" if stopped else "lab NetBox was not running")


@task(help={"snapshot": "restore this snapshot instead of the empty migrated database"})
def reset(c, snapshot=None):
    """Replace the lab NetBox's data with a fresh migrated database (or a snapshot)."""
    from racklift.lab import netbox_server
    with operator_errors():
        seconds = netbox_server.reset(lab_instance(), snapshot)
    console.print(f"lab NetBox reset in {seconds:.2f} s")


@task(help={"name": "snapshot name"})
def snapshot(c, name):
    """Keep the lab NetBox's current data as a snapshot that `reset --snapshot` restores."""
    from racklift.lab import netbox_server
    with operator_errors():
        seconds = netbox_server.snapshot(lab_instance(), name)
    console.print(f"snapshot '{name}' taken in {seconds:.2f} s")


@task
def status(c):
    """Is the lab NetBox up, where, which version."""
    from racklift.lab import netbox_server
    instance = lab_instance()
    version = netbox_server.answers(instance)
    if version:
        console.print(f"lab NetBox {version} at {instance.url} (database {instance.database})")
    else:
        console.print(f"lab NetBox is not running (would listen on {instance.url})")



@task(help={"racks": "number of racks (8 hosts each)", "site": "site slug",
            "first_rack": "number of the first rack (R01 is 1)",
            "hosts_per_rack": "hosts per rack (default 8, as R01)",
            "in_netbox": "load the hosts inside the lab NetBox's own shell, in one transaction "
                         "(lab only; for thousands of hosts)"})
def seed(c, racks=1, site="lab1", first_rack=1, hosts_per_rack=None,
         in_netbox=False):
    """Seed racks of 8-GPU servers, modelled the NetBox way (converges when re-run)."""
    from racklift.lab import netbox_server
    from racklift.lab import seed as seeding
    per_rack = seeding.HOSTS_PER_RACK if hosts_per_rack is None else int(hosts_per_rack)
    plan = seeding.plan(int(racks), per_rack, site, int(first_rack))
    started = time.monotonic()
    with operator_errors():
        netbox = lab_connect()
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
