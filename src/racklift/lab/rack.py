"""The lab rack as one thing: containers, their NetBox records and their emulated hardware."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

from racklift import podman
from racklift.lab import hardware, hosts, seed, tags
from racklift.lifecycle.result import RESULT_FIELD
from racklift.lifecycle.state import STAGE_FIELD, Transition, apply
from racklift.netbox.client import NetBox


@dataclass(frozen=True)
class RackUp:
    hosts: tuple[seed.HostPlan, ...]
    created: int
    seconds: float
    memory_mib: float


_UNITS = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 2**10, "MiB": 2**20,
          "GiB": 2**30}


def parse_size(text: str) -> float:
    """podman's '15.77MB' → bytes."""
    match = re.fullmatch(r"([\d.]+)\s*([kKMG]i?B|B)", text.strip())
    if not match:
        raise ValueError(f"not a size: {text!r}")
    return float(match[1]) * _UNITS[match[2]]


def containers_memory_mib(net: hosts.LabNet = hosts.LAB) -> float:
    """What the lab's containers use together, as podman's stats account it."""
    names = set(hosts.containers(net))
    out = podman.podman("stats", "--no-stream", "--format", "json", check=False)
    used = sum(parse_size(row["mem_usage"].split("/")[0].strip())
               for row in json.loads(out or "[]") if row["name"] in names)
    return used / 2**20


def up(netbox: NetBox, count: int, rack: str = "L01", site: str = "lab1",
       net: hosts.LabNet = hosts.LAB) -> RackUp:
    started = time.monotonic()
    result = hosts.up(netbox, count, rack, site, net)
    hardware.ensure_profiles(result.hosts, net)
    hardware.push([h.name for h in result.hosts], netbox.settings, net)
    return RackUp(result.hosts, result.created, time.monotonic() - started,
                  containers_memory_mib(net))


def down(netbox: NetBox | None, net: hosts.LabNet = hosts.LAB) -> hosts.DownResult:
    return hosts.down(netbox, net)


def replan(netbox: NetBox, names: list[str]) -> int:
    """Put lab hosts back to `planned` with no pipeline stage and no last result (lab only: a
    demo that starts over; the NetBox plugin then shows no verdict of the run before). Each
    gets a journal entry saying so. Returns how many changed."""
    devices = netbox.get_all("dcim/devices", {"name": names, "tag": tags.LAB},
                             fields=("id", "status", "custom_fields"))
    changed = [d for d in devices if d["status"]["value"] != "planned"
               or (d.get("custom_fields") or {}).get(STAGE_FIELD)
               or (d.get("custom_fields") or {}).get(RESULT_FIELD)]
    apply(netbox, [Transition(d["id"], "racklift lab: back to planned, to start over",
                              status="planned", stage=None, fields={RESULT_FIELD: None})
                   for d in changed])
    return len(changed)
