"""Registry mirror tasks: set up the pull-through mirror and point hosts at it; check it."""

from __future__ import annotations

from invoke import task
from invoke.exceptions import Exit

from racklift.ansible import run_playbook
from racklift.console import console, plain
from racklift.netbox.reader import Selection, read_hosts
from racklift.registry.mirror import check_endpoint
from racklift.tasks.common import SELECTION_HELP, connect, operator_errors, selection


def _names(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


@task(help={"servers": "mirror server host name(s) in NetBox, comma-separated",
            **SELECTION_HELP})
def setup(c, servers, site=None, rack=None, role=None, status=None, host=None):
    """Set up the registry mirror on the servers (one Distribution per upstream, TLS, GC), then
    point the selected hosts at it (CA, registries.conf, Docker and containerd)."""
    server_names = _names(servers)
    if not server_names:
        raise Exit("error: name the mirror server(s) with --servers", code=1)
    chosen = selection(site, rack, role, status, host)
    with operator_errors():
        netbox = connect()
        # No selection means no clients (not every host in NetBox): say which hosts to point.
        clients = sorted(h.name for h in read_hosts(netbox, chosen)
                         if h.name not in server_names) if chosen != Selection() else []
        result = run_playbook(
            "registry_mirror.yml", [*server_names, *clients], netbox.settings,
            env={"RACKLIFT_MIRROR_SERVERS": ",".join(server_names),
                 # An empty pattern would fall back to the playbook's default group.
                 "RACKLIFT_MIRROR_CLIENTS": ",".join(clients) or "none"})
    for name, why in sorted(result.failed.items()):
        console.print(plain(name, "red") + plain(f": {why}"))
    if result.rc != 0:
        raise Exit(f"error: registry mirror setup failed on {len(result.failed)} host(s)", code=1)
    console.print(f"registry mirror on {', '.join(server_names)}; {len(clients)} hosts use it")


@task(help={"url": "mirror instance URL(s), comma-separated, e.g. https://head-01:5000",
            "ca": "CA file to verify TLS with (default: the system trust store)"})
def check(c, url, ca=None):
    """Ask each mirror instance for the registry API; exit 1 when one is not healthy."""
    unhealthy = 0
    for one in _names(url):
        health = check_endpoint(one, ca)
        unhealthy += not health.ok
        console.print(plain("OK", "green") if health.ok else plain("FAIL", "red"),
                      plain(f" {one}  {health.detail}"))
    if unhealthy:
        raise Exit(f"error: {unhealthy} mirror endpoint(s) not healthy", code=1)
