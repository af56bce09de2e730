"""What every task needs: the NetBox to talk to, host selection flags, operator errors."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from invoke.exceptions import Exit

from racklift import metrics
from racklift.console import console, plain, terminal
from racklift.errors import RackliftError
from racklift.netbox.client import NetBox, NetBoxSettings
from racklift.netbox.selection import Selection

SELECTION_HELP = {
    "site": "site slug(s), comma-separated",
    "rack": "rack name(s), comma-separated",
    "role": "device role slug(s), comma-separated (GPU servers: gpu-server, the default of "
            "the commands that act on them)",
    "status": "device status(es), comma-separated (planned, staged, active, failed, offline)",
    "host": "device name(s), comma-separated",
}


# Where a command looks for a NetBox when NETBOX_URL is not set: production offers none; the
# command line registers the lab's (racklift.tasks.lab_netbox.running_lab). Each returns the
# settings and a line telling the operator which NetBox it chose, or None.
_fallbacks: list[Callable[[], tuple[NetBoxSettings, str] | None]] = []


def offer_netbox(fallback: Callable[[], tuple[NetBoxSettings, str] | None]) -> None:
    """Register a NetBox for commands to use when NETBOX_URL is not set."""
    if fallback not in _fallbacks:
        _fallbacks.append(fallback)


@cache  # one process, one NetBox: decide (and say) it once
def netbox_settings() -> NetBoxSettings:
    """NETBOX_URL / NETBOX_TOKEN; without them, a registered fallback's NetBox."""
    if not os.environ.get("NETBOX_URL"):
        for fallback in _fallbacks:
            if found := fallback():
                settings = NetBoxSettings.from_env(default=found[0])  # NETBOX_TOKEN alone: error
                console.print(f"[dim]{found[1]}[/]")
                return settings
    return NetBoxSettings.from_env()


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
        raise Exit(terminal(f"error: {exc}"), code=1) from None


METRICS_HELP = ("also write the run as Prometheus metrics to PATH, for node_exporter's "
                "textfile collector (a *.prom file in its directory; one file per verb and "
                "selection), replaced atomically")


def saved_report(path: Path) -> dict[str, Any]:
    """The report.json a run wrote: what --json prints and the metrics are rendered from, so
    neither can say anything else."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RackliftError(f"cannot read the run's report {path}: {exc}") from None


def publish_metrics(metrics_file: str | None, report: Mapping[str, Any]) -> None:
    """Write the metrics file when --metrics-file asked for one."""
    if metrics_file:
        metrics.write(Path(metrics_file), metrics.render(report))
        console.print(plain(f"metrics {metrics_file}"), highlight=False)
