"""What an existing NetBox lacks for racklift to take its devices: the adoption report. Pure:
the expected model's hosts (each with every problem its record has) in, counts per device type
and per field, and each device's problems, out. Nothing here writes; `racklift netbox.adopt
--apply` creates only what needs no guess (racklift.tasks.netbox)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from racklift.netbox.expected import ExpectedHost
from racklift.netbox.identity import has_identity

# interfaces.eno1.primary_mac_address and interfaces.ens1f0.primary_mac_address are one gap.
_PORT = re.compile(r"^interfaces\.[^.]+")


def gap(field_name: str) -> str:
    """A problem's field as the report counts it: per kind, not per port."""
    return _PORT.sub("interfaces.<port>", field_name)


@dataclass(frozen=True)
class DeviceTypeGaps:
    model: str
    devices: int
    ready: int  # devices with nothing missing
    gaps: dict[str, int] = field(default_factory=dict)  # field → devices lacking it


@dataclass(frozen=True)
class AdoptionReport:
    devices: int
    ready: tuple[str, ...]  # names of the devices racklift can take as they are
    refused: tuple[str, ...]  # names racklift cannot use as an identity (see identity.py)
    types: tuple[DeviceTypeGaps, ...]
    by_device: dict[str, list[str]]  # device → its problems, one line each
    hints: dict[str, str]  # field → what to do (the first device's message)

    @property
    def gaps(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for t in self.types:
            total.update(t.gaps)
        return dict(total.most_common())

    def to_dict(self) -> dict[str, Any]:
        return {"devices": self.devices, "ready": list(self.ready),
                "refused": list(self.refused), "gaps": self.gaps, "hints": self.hints,
                "device_types": [vars(t) for t in self.types], "by_device": self.by_device}


def adoption_report(hosts: Iterable[ExpectedHost]) -> AdoptionReport:
    hosts = list(hosts)
    by_type: dict[str, list[ExpectedHost]] = defaultdict(list)
    for host in hosts:
        by_type[host.device_type.model].append(host)
    hints: dict[str, str] = {}
    for host in hosts:
        for p in host.problems:
            hints.setdefault(gap(p.field), p.message)
    types = tuple(DeviceTypeGaps(
        model, len(members), sum(1 for h in members if not h.problems),
        dict(Counter(g for h in members for g in {gap(p.field) for p in h.problems})
             .most_common()))
        for model, members in sorted(by_type.items()))
    return AdoptionReport(
        devices=len(hosts),
        ready=tuple(sorted(h.name for h in hosts if not h.problems)),
        refused=tuple(sorted(h.name for h in hosts if not has_identity(h.problems))),
        types=types,
        by_device={h.name if has_identity(h.problems) else f"{h.name} (device {h.netbox_id})":
                   [f"{p.field}: {p.message}" for p in h.problems] for h in hosts if h.problems},
        hints=hints)
