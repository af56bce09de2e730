"""What the plugin shows, worked out from plain values: the device's `racklift_result` field
read defensively, hosts counted per state, failures grouped by cause, racks drawn unit by unit.
No Django here (racklift's unit tests import this file on its own); views.py hands it plain
values read from NetBox and templates escape whatever it returns.

`racklift_result` is written by racklift (racklift.lifecycle.result) and only shown here: its
failures already carry their cause (the check id without its port), so nothing is re-judged."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# NetBox status → how the bring-up view calls and colours it (Bootstrap's text-bg-*).
STATES: dict[str, tuple[str, str]] = {
    "active": ("in the pool", "success"),
    "failed": ("refused", "danger"),
    "staged": ("in progress", "info"),
    "planned": ("planned", "secondary"),
    "offline": ("offline", "warning"),
}
OTHER = ("other", "light")
NOT_OURS = ("not a racklift host", "light")
RUN = re.compile(r"^racklift \w+ \(run (?P<run>[^)\s]+)\)")  # a pipeline journal entry's header


def state(status: str | None) -> tuple[str, str]:
    return STATES.get(status or "", OTHER)


def _text(value: Any) -> str:
    return "-" if value is None else value if isinstance(value, str) else str(value)


def _rows(value: Any, keys: Sequence[str]) -> list[dict[str, Any]]:
    """A list of objects with `keys` as text (booleans kept); anything else dropped."""
    if not isinstance(value, list):
        return []
    return [{k: row.get(k) if isinstance(row.get(k), bool) else _text(row.get(k))
             for k in keys} for row in value if isinstance(row, Mapping)]


FAILURE = ("check", "cause", "found", "wanted", "todo")
MISMATCH = ("field", "observed", "expected", "severity", "hint")
CHECK = ("name", "status", "detail")
ACCEPTANCE = ("test", "figure", "threshold", "passed")


@dataclass(frozen=True)
class Result:
    """The device's racklift_result, each section None where racklift has not written it
    (or wrote something this version cannot read)."""

    last: dict[str, Any] | None = None
    verdict: dict[str, Any] | None = None
    acceptance: dict[str, Any] | None = None

    @property
    def failures(self) -> list[dict[str, Any]]:
        return self.last["failures"] if self.last else []


def _section(value: Any, scalars: Sequence[str],
             lists: Mapping[str, Sequence[str]]) -> dict[str, Any] | None:
    if not isinstance(value, Mapping):
        return None
    out: dict[str, Any] = {k: value.get(k) if isinstance(value.get(k), bool | None)
                           else _text(value.get(k)) for k in scalars}
    out.update({name: _rows(value.get(name), keys) for name, keys in lists.items()})
    return out


def result(value: Any) -> Result:
    """racklift_result as NetBox holds it (a dict, or None on a host racklift never judged)."""
    if not isinstance(value, Mapping):
        return Result()
    return Result(
        _section(value.get("last"), ("at", "run", "stage", "result"), {"failures": FAILURE}),
        _section(value.get("verdict"), ("at", "run", "passed"),
                 {"mismatches": MISMATCH, "checks": CHECK}),
        _section(value.get("acceptance"), ("at", "run", "passed", "summary"),
                 {"rows": ACCEPTANCE}))


def port_findings(verdict: Mapping[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    """The verdict's cable mismatches by port: `cable.wrong_peer[eth0]` is eth0's."""
    out: dict[str, list[dict[str, Any]]] = {}
    for m in (verdict or {}).get("mismatches", []):
        found = re.fullmatch(r"cable\.\w+\[(?P<port>[^\]]+)\]", m["field"])
        if found:
            out.setdefault(found["port"], []).append(m)
    return out


def last_run(journal: Iterable[str]) -> str | None:
    """The run named by the newest pipeline entry of a journal given newest first."""
    for comments in journal:
        if found := RUN.match(comments):
            return found["run"]
    return None


# ---------------------------------------------------------------------------------------------
# The bring-up view


@dataclass(frozen=True)
class Host:
    """A device of a site or rack, as the bring-up view needs it."""

    name: str
    url: str
    rack: str | None
    position: float | None  # its lowest unit; None: not racked
    height: int  # units
    status: str | None
    stage: str | None
    ours: bool  # one of racklift's hosts (its role), not a switch or a PDU
    result: Result = field(default_factory=Result)


@dataclass(frozen=True)
class Unit:
    """One row of a drawn rack: a unit (or the top unit of a device spanning several)."""

    number: int
    host: Host | None = None
    span: int = 1  # rows the device covers (rowspan)
    covered: bool = False  # a lower unit of a device drawn above
    label: str = ""
    colour: str = ""


@dataclass(frozen=True)
class Cause:
    cause: str
    hosts: list[Host]


@dataclass(frozen=True)
class Drawn:
    name: str
    units: list[Unit]
    unracked: list[Host]


def counts(hosts: Iterable[Host]) -> list[tuple[str, str, int]]:
    """(state, colour, hosts) in the lifecycle's order, states with none left out."""
    tally: dict[tuple[str, str], int] = {}
    for h in hosts:
        if h.ours:
            key = state(h.status)
            tally[key] = tally.get(key, 0) + 1
    order = [*STATES.values(), OTHER]
    return [(label, colour, tally[(label, colour)]) for label, colour in order
            if (label, colour) in tally]


def causes(hosts: Iterable[Host]) -> list[Cause]:
    """Failed hosts grouped by the cause of each failure, most hosts first: a host with two
    wrong cables counts once under cable.wrong_peer."""
    groups: dict[str, list[Host]] = {}
    for h in hosts:
        if not h.ours or h.status != "failed":
            continue
        for cause in dict.fromkeys(f["cause"] for f in h.result.failures):
            groups.setdefault(cause, []).append(h)
    return [Cause(c, sorted(hs, key=lambda h: h.name))
            for c, hs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]


def draw(name: str, height: int, hosts: Iterable[Host]) -> Drawn:
    """The rack from its top unit down, each host in the units NetBox positions it at."""
    top: dict[int, Host] = {}
    covered: set[int] = set()
    unracked = []
    for h in sorted(hosts, key=lambda h: h.name):
        if h.position is None or not 1 <= int(h.position) <= height:
            unracked.append(h)
            continue
        low = int(h.position)
        high = min(height, low + max(h.height, 1) - 1)
        top[high] = h
        covered.update(range(low, high))
    units = []
    for number in range(height, 0, -1):
        h = top.get(number)
        if h is not None:
            span = number - int(h.position or number) + 1
            label, colour = state(h.status) if h.ours else NOT_OURS
            units.append(Unit(number, h, span, label=label, colour=colour))
        else:
            units.append(Unit(number, covered=number in covered))
    return Drawn(name, units, unracked)
