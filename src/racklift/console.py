"""Terminal output shared by the tasks: one console, the expected-model table."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from racklift.netbox.expected import ExpectedHost
from racklift.text import printable

# Progress and tables go to stderr, so stdout stays clean for JSON. Logs and CI get a width
# that fits the tables instead of rich's 80-column default.
console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


def terminal(text: object) -> str:
    """`text` as the operator's terminal may show it: characters but newline and tab that are
    not printable written out (\\x1b): a host's or a record's text could otherwise move the
    cursor, retitle the terminal or write the operator's clipboard (OSC 52) through an escape
    sequence. For what is not rich (an error a command stops with); rich output takes plain."""
    return printable(str(text), keep="\n\t")


def plain(text: object, style: str = "") -> Text:
    """`text` as rich shows it: never markup (a "[/]" from a host would end the table with an
    error), made `terminal` text."""
    return Text(terminal(text), style=style)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


def expected_table(hosts: Iterable[ExpectedHost], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("host", "status", "rack/U", "serial", "primary IP", "OOB IP",
                   "prov. MAC", "GPUs", "IB ports", "driver", "problems"):
        table.add_column(column, overflow="fold")
    for h in hosts:
        gpu_models = sorted({g.part_id.removeprefix("NVIDIA ") for g in h.gpus})
        rates = sorted({p.type.removeprefix("infiniband-").upper() for p in h.ib_ports})
        driver = (h.desired.nvidia_driver.version if h.desired else None) or "-"
        problems = Text("\n").join(plain(p.field, "red") + plain(f": {p.message}")
                                    for p in h.problems)
        table.add_row(
            plain(h.name), h.status,
            plain(f"{h.rack or '-'}/{h.position:g}" if h.position is not None
                  else (h.rack or "-")),
            plain(h.serial) if h.serial else "[red]missing[/]",
            plain(f"{h.primary_ip} ({h.primary_ip_interface})") if h.primary_ip
            else "[red]missing[/]",
            plain(h.oob_ip) if h.oob_ip else "[red]missing[/]",
            h.provisioning_mac or "[red]missing[/]",
            plain(f"{len(h.gpus)}x {', '.join(gpu_models)}") if h.gpus else "[red]none[/]",
            f"{len(h.ib_ports)}x {', '.join(rates)}" if h.ib_ports else "[red]none[/]",
            plain(driver),
            problems if h.problems else "[green]none[/]",
        )
    return table
