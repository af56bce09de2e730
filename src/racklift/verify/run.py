"""verify, end to end: select hosts in NetBox, collect their facts into a support bundle,
compare and check on the controller, record the verdicts."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from racklift.ansible import run_playbook
from racklift.facts import bundle as bundles
from racklift.facts.host import from_bundle
from racklift.netbox.client import NetBox
from racklift.netbox.model import ExpectedHost
from racklift.netbox.reader import Selection, read_hosts
from racklift.verify.adopt import adopt
from racklift.verify.verdict import (
    VERIFIED,
    HostVerdict,
    judge,
    not_verified,
    record,
    skipped,
)


def runs_dir() -> Path:
    return Path(os.environ.get("RACKLIFT_RUNS", "runs"))


def new_run_dir(kind: str) -> Path:
    path = runs_dir() / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{kind}"
    suffix = 1
    while path.exists():
        suffix += 1
        path = path.with_name(f"{path.name.split('.')[0]}.{suffix}")
    path.mkdir(parents=True)
    return path


def collect(netbox: NetBox, hosts: list[ExpectedHost],
            bundle_dir: Path) -> dict[str, bundles.Bundle | str]:
    """Each host's bundle (also written under `bundle_dir`), or why there is none."""
    out: dict[str, bundles.Bundle | str] = {}
    with tempfile.TemporaryDirectory(prefix="racklift-collect-") as tmp:
        result = run_playbook("collect.yml", [h.name for h in hosts], netbox.settings,
                              {"RACKLIFT_BUNDLE_DIR": tmp})
        for host in hosts:
            document = Path(tmp) / f"{host.name}.json"
            if host.name in result.failed or not document.exists():
                out[host.name] = result.failed.get(host.name, "no facts came back")
                continue
            bundle = bundles.from_collector(host.name, json.loads(document.read_text()))
            bundles.write(bundle, bundle_dir)
            out[host.name] = bundle
    return out


@dataclass(frozen=True)
class VerifyRun:
    verdicts: list[HostVerdict]
    run_dir: Path
    seconds: float


def verify(netbox: NetBox, selection: Selection, *, write: bool = True,
           mark_active_failed: bool = False, adopt_serials: bool = False,
           progress: Callable[[str], None] = lambda _: None) -> VerifyRun:
    started = time.monotonic()
    run_dir = new_run_dir("verify")
    hosts = read_hosts(netbox, selection)
    progress(f"{len(hosts)} hosts selected ({selection.describe()})")
    reachable = [h for h in hosts if not h.problems and h.address and h.status in VERIFIED]
    progress(f"collecting facts from {len(reachable)} hosts")
    collected = collect(netbox, reachable, run_dir / "bundles") if reachable else {}
    verdicts = []
    observed = []
    for host in hosts:
        got = collected.get(host.name)
        if host.status not in VERIFIED:
            verdicts.append(skipped(host))
        elif isinstance(got, bundles.Bundle):
            facts = from_bundle(got)
            observed.append((host, facts))
            verdicts.append(judge(host, facts))
        else:
            verdicts.append(not_verified(host, got))
    if write and adopt_serials:
        progress(f"adopted {adopt(netbox, observed)} first-seen GPU serials into NetBox")
    if write:
        verdicts = record(netbox, verdicts, mark_active_failed=mark_active_failed)
    return VerifyRun(verdicts, run_dir, time.monotonic() - started)
