"""The simulated fleet as one thing (lab only): its NetBox records, its namespace, the server
that answers for its hosts and, where the spec asks, a boot server per site. `up` converges (a
re-run seeds only what is missing and restarts the server on the new spec); `down` stops the
server and the boot servers and removes the namespaces."""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from racklift.lab import hosts, netbox_server, seed
from racklift.lab.fleet import boot_servers, network, server
from racklift.lab.fleet.plan import FleetPlan
from racklift.lab.vrack.bmc import issue_cert, lab_password
from racklift.lab.vrack.commands import _spawn, _terminate
from racklift.netbox.client import NetBox

MARKER = b"racklift.lab.fleet.server"
BMC_USERNAME = "racklift"  # as the sim group vars say


def fleet_dir() -> Path:
    return hosts.lab_dir() / "fleet"


def _pid_file() -> Path:
    return fleet_dir() / "server.pid"


def _host_key() -> Path:
    key = fleet_dir() / "host_key"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "racklift-fleet",
                        "-f", str(key)], check=True)
    return key


def answers(address: str, port: int = 22, timeout: float = 1.0) -> bool:
    """Whether `address` greets as an SSH server does."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as conn:
            return conn.recv(4).startswith(b"SSH-")
    except OSError:
        return False


@dataclass(frozen=True)
class FleetUp:
    plan: FleetPlan
    created: dict[str, int]


def seed_fleet(netbox: NetBox, fleet: FleetPlan, instance: netbox_server.NetBoxInstance | None,
               progress: Callable[[str], None] = lambda _: None) -> dict[str, int]:
    """The fleet's records; inside NetBox's own shell (one transaction a site) when given the
    lab instance, which thousands of hosts need."""
    loader = (partial(netbox_server.run_in_netbox, instance, seed.ORM_SCRIPT)
              if instance is not None else None)
    created: dict[str, int] = {}
    for site in fleet.sites:
        report = seed.apply(netbox, site, progress=progress, host_loader=loader)
        for what, count in report.created.items():
            created[what] = created.get(what, 0) + count
    return created


def bmc_password_file() -> Path:
    """The simulated BMCs' password (the sim group vars read it; made once, 0600)."""
    path = fleet_dir() / "bmc-password"
    lab_password(path)
    return path


def _bmc_cert(fleet: FleetPlan) -> tuple[Path, Path]:
    """The BMCs' certificate from the lab BMC CA, for every OOB address of this fleet."""
    addresses = [h.oob_ip.split("/")[0] for h in fleet.hosts]
    digest = hashlib.sha256(" ".join(addresses).encode()).hexdigest()[:16]
    return issue_cert(fleet_dir() / "tls" / digest, "racklift fleet BMCs", addresses)


def start(spec: server.Spec, net: network.FleetNet = network.NET) -> None:
    """The server on `spec` (restarted), answering once the fleet's first host does."""
    stop()
    fleet_dir().mkdir(parents=True, exist_ok=True)
    spec_file = fleet_dir() / "spec.json"
    server.write_spec(spec, spec_file)
    fleet = spec.fleet()
    cert, key = _bmc_cert(fleet)
    first = fleet.hosts[0].primary_ip.split("/")[0]
    _spawn("the simulated fleet's server",
           ["ip", "netns", "exec", net.netns, sys.executable, "-m", MARKER.decode(),
            str(spec_file), "--host-key", str(_host_key()), "--bmc-cert", str(cert),
            "--bmc-key", str(key), "--bmc-username", BMC_USERNAME,
            "--bmc-password-file", str(bmc_password_file())],
           _pid_file(), lambda: answers(first, timeout=0.3))


def stop() -> None:
    _terminate("the simulated fleet's server", _pid_file(), MARKER)


def up(netbox: NetBox, spec: server.Spec, instance: netbox_server.NetBoxInstance | None = None,
       progress: Callable[[str], None] = lambda _: None) -> FleetUp:
    fleet = spec.fleet()
    created = seed_fleet(netbox, fleet, instance, progress)
    network.up()
    if spec.boot_servers:
        progress("boot servers: " + ", ".join(
            s.name for s in boot_servers.up(netbox, fleet, fleet_dir(), answers)))
    key = hosts.ssh_key()
    start(replace(spec, authorized_key=key.with_name(f"{key.name}.pub").read_text()))
    return FleetUp(fleet, created)


def down() -> None:
    stop()
    boot_servers.down(fleet_dir())
    network.down()
