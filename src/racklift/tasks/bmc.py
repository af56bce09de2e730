"""BMC tasks: what a BMC reports over Redfish, read as the gate reads it
(racklift.bmc.inventory): at a URL, or a NetBox device's BMC as the image stage and verify
reach it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from invoke import task
from invoke.exceptions import Exit
from rich.table import Table
from rich.text import Text

from racklift.bmc import firmware
from racklift.bmc.firmware import ALIASES
from racklift.bmc.inventory import BmcInventory
from racklift.bmc.reading import read_bmcs, read_whole
from racklift.bmc.redfish import (
    ENV_CA_BUNDLE,
    ENV_PASSWORD,
    ENV_USERNAME,
    NO_OOB_IP,
    VAR_CA_BUNDLE,
    VAR_PASSWORD,
    VAR_USERNAME,
    BmcError,
    RedfishClient,
    credentials_for,
    endpoint_from_url,
)
from racklift.console import console, plain, print_json
from racklift.hostvars import read_hostvars
from racklift.netbox.client import NetBox
from racklift.netbox.reader import Selection, read_hosts
from racklift.tasks.common import connect, operator_errors


def inventory_json(found: BmcInventory) -> dict[str, Any]:
    """The inventory as `bmc.inventory --json` prints it."""
    boot = found.boot
    return {
        "system": found.system, "manufacturer": found.manufacturer, "model": found.model,
        "serial": found.serial, "power_state": found.power_state,
        "macs": [{"interface": name, "mac": mac} for name, mac in found.macs],
        "boot": {"target": boot.target, "enabled": boot.enabled, "mode": boot.mode,
                 "allowed_targets": list(boot.allowed_targets),
                 "allowed_enabled": list(boot.allowed_enabled),
                 "allowed_modes": list(boot.allowed_modes)},
        "firmware": [c._asdict() for c in found.firmware],
        "bmc": {"model": found.bmc_model, "firmware": found.bmc_firmware,
                "image": found.bmc_image},
        "bios": {"version": found.bios_version, "image": found.bios_image,
                 "attributes": found.bios_attributes},
        "problems": list(found.problems),
    }


def _table(title: str | Text, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        # What the BMC said is text from an untrusted source: never markup, never escapes.
        table.add_row(*(plain("-" if v is None else v) for v in row))
    return table


def _allowed(values: tuple[str, ...]) -> str:
    return ", ".join(values) or "not listed"


def inventory_tables(found: BmcInventory, where: str) -> list[Table]:
    boot = found.boot
    # Which component racklift.firmware takes for each role: what a pin of BMC, BIOS or GPU
    # is held to.
    roles = {c.id: role for role in ALIASES for c in firmware.components(found, role)}
    return [
        _table(plain(f"BMC at {where}"), ("", ""), [
            ("system", found.system), ("manufacturer", found.manufacturer),
            ("model", found.model), ("serial", found.serial),
            ("power state", found.power_state), ("BIOS version", found.bios_version),
            ("BMC", f"{found.bmc_model or '-'}, firmware {found.bmc_firmware or '-'}"),
            ("boot override", f"target {boot.target}, {boot.enabled}, mode {boot.mode}"),
            ("allowed targets", _allowed(boot.allowed_targets)),
            ("allowed enabled", _allowed(boot.allowed_enabled)),
            ("allowed modes", _allowed(boot.allowed_modes))]),
        _table("network interfaces", ("interface", "MAC"), list(found.macs)),
        _table("firmware inventory", ("id", "name", "version", "pinned as"), [
            (c.id, c.name, c.version, roles.get(c.id, "")) for c in found.firmware]),
        _table("BIOS attributes", ("attribute", "value"),
               [(k, str(v)) for k, v in found.bios_attributes.items()]),
    ]


def read_bmc(url: str, ca: str | None = None,
             environ: Mapping[str, str] = os.environ) -> BmcInventory:
    """The inventory of the BMC at `url`, with the credentials in the environment."""
    endpoint = endpoint_from_url(url, ca)
    return read_whole(RedfishClient(endpoint, credentials_for(endpoint.host, None, environ)))


def read_host_bmc(netbox: NetBox, host: str,
                  environ: Mapping[str, str] = os.environ) -> BmcInventory:
    """The inventory of a NetBox device's BMC, reached as the image stage and verify reach it:
    at its OOB IP in NetBox, with the port, CA and credentials its Ansible vars give (vault;
    the environment's where they give none)."""
    found = read_hosts(netbox, Selection(names=(host,)))
    if not found:
        raise BmcError(f"{host}: no device of that name in NetBox (field name): give the name "
                       "of a device NetBox has")
    oob_ip = found[0].oob_ip
    if not oob_ip:
        raise BmcError(f"{host}: {NO_OOB_IP}")
    got = read_bmcs({host: oob_ip}, read_hostvars([host], netbox.settings), environ)[host]
    if isinstance(got, str):
        raise BmcError(got)
    return got


@task(help={"url": "the BMC as http(s)://host[:port]; its credentials from "
                   f"{ENV_USERNAME} and {ENV_PASSWORD} (give --url or --host)",
            "host": "a device's name in NetBox: its BMC at the device's OOB IP, with the "
                    f"port, CA and credentials ({VAR_USERNAME}/{VAR_PASSWORD}, vault) from "
                    f"its Ansible vars, else {ENV_USERNAME}/{ENV_PASSWORD}: as the image "
                    "stage and verify reach it (give --url or --host)",
            "json": "print JSON on stdout instead of tables",
            "ca": "the BMC's own CA certificate (PEM) for an https --url (default: the "
                  f"system's trust store); --host takes the host's {VAR_CA_BUNDLE} or "
                  f"{ENV_CA_BUNDLE}"})
def inventory(c, url=None, host=None, json=False, ca=None):
    """Show what a BMC reports over Redfish: the system's manufacturer, model, serial and power
    state, its network interfaces' MACs, the boot override and the values the BMC allows, the
    firmware inventory (each component's id, name and version, and which a pin of BMC, BIOS or
    GPU is held to) and the BIOS attributes; what could not be read, and why, last.

    The BMC at --url, or the BMC of the NetBox device --host, reached as the image stage and
    verify reach it. Credentials never on the command line, never printed."""
    if bool(url) == bool(host):
        raise Exit("error: give the BMC as --url http(s)://host[:port], or a NetBox device as "
                   "--host NAME: one of them", code=2)
    if host and ca:
        raise Exit(f"error: --ca is for --url: with --host the BMC's CA comes from the host's "
                   f"vars ({VAR_CA_BUNDLE}) or {ENV_CA_BUNDLE}", code=2)
    with operator_errors():
        found = read_bmc(url, ca) if url else read_host_bmc(connect(), host)
    if json:
        print_json(inventory_json(found))
        return
    for table in inventory_tables(found, url or host):
        console.print(table)
    for problem in found.problems:
        console.print(plain(f"not read: {problem}", style="yellow"))
    if not found.problems:
        console.print("everything read")
