"""What every task needs: the NetBox to talk to, host selection flags, operator errors."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

from invoke.exceptions import Exit

from racklift.console import console
from racklift.errors import RackliftError
from racklift.lab.netbox_server import NetBoxInstance, answers, server_pid
from racklift.lab.services import port_open
from racklift.netbox.client import NetBox, NetBoxSettings
from racklift.netbox.reader import Selection

SELECTION_HELP = {
    "site": "site slug(s), comma-separated",
    "rack": "rack name(s), comma-separated",
    "role": "device role slug(s), comma-separated",
    "status": "device status(es), comma-separated (planned, staged, active, failed, offline)",
    "host": "device name(s), comma-separated",
}


def lab_instance() -> NetBoxInstance:
    return NetBoxInstance.from_env("lab")


@cache  # one process, one NetBox: decide (and say) it once
def netbox_settings() -> NetBoxSettings:
    """NETBOX_URL / NETBOX_TOKEN; without them, the lab NetBox when it is running: the server
    `netbox.up` started, never merely whatever answers on the lab's port."""
    lab = lab_instance()
    pid = server_pid(lab)
    default = NetBoxSettings(lab.url, lab.token) if pid and answers(lab) else None
    if default is None and port_open(lab.port) and not os.environ.get("NETBOX_URL"):
        raise RackliftError(f"NETBOX_URL is not set, and what answers on the lab NetBox's port "
                            f"({lab.url}) is not the lab NetBox racklift started: export "
                            "NETBOX_URL and NETBOX_TOKEN for your NetBox, or `racklift "
                            "netbox.up` for the lab's")
    settings = NetBoxSettings.from_env(default=default)
    if settings is default:
        console.print(f"[dim]using the lab NetBox at {lab.url}, started by racklift (pid {pid}, "
                      f"{lab.root}): NETBOX_URL is not set[/]")
    return settings


def connect() -> NetBox:
    return NetBox.connect(netbox_settings())


def selection(site: str | None = None, rack: str | None = None, role: str | None = None,
              status: str | None = None, host: str | None = None) -> Selection:
    return Selection.of(sites=site, racks=rack, roles=role, statuses=status, names=host)


@contextmanager
def operator_errors() -> Iterator[None]:
    """A RackliftError ends the command with its one-line message and exit code 1."""
    try:
        yield
    except RackliftError as exc:
        raise Exit(f"error: {exc}", code=1) from None
