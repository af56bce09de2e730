"""verify, end to end: select hosts in NetBox, collect their facts into a support bundle, read
the BMCs of hosts whose device type pins firmware or BIOS, compare and check on the controller,
record the verdicts.

What a host sends is its word, and a pool host may be compromised: from its collector's output
to its verdict, nothing it sent may end the run for the other hosts. Each host's document is
read by `host_bundle` and judged by `judge_bundle`, which turn any failure into that host's
error, naming it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from racklift.ansible import HostEvent, run_playbook, script
from racklift.bmc.inventory import BmcInventory
from racklift.bmc.reading import read_bmcs
from racklift.errors import RackliftError
from racklift.facts import bundle as bundles
from racklift.facts.host import HostFacts, from_bundle
from racklift.hostvars import read_hostvars
from racklift.netbox.bootstrap import bootstrap
from racklift.netbox.client import NetBox
from racklift.netbox.expected import ExpectedHost
from racklift.netbox.reader import Selection, read_hosts
from racklift.runs import new_run_dir
from racklift.verify.acceptance import asks_acceptance
from racklift.verify.check import CheckResult
from racklift.verify.direct_collect import COLLECT_TASK, CONTAINER_CHECK_TASK, collect_direct
from racklift.verify.firmware_pins import asks_bmc, firmware_pins
from racklift.verify.reach import Reached
from racklift.verify.record_cables import record_cables
from racklift.verify.record_serials import record_serials
from racklift.verify.record_verdicts import (
    InNetBox,
    busy,
    read_now,
    record,
    recorded,
    with_holds,
)
from racklift.verify.verdict import VERIFIED, HostVerdict, judge, not_verified, skipped

# "direct": racklift's own ssh clients where a host's connection is plain ssh (the default);
# "ansible": collect.yml for every host, as before the direct collector (and for comparing).
COLLECTORS = ("direct", "ansible")
# The most of a collector's document that is decoded. The collector sends 8 MiB of each output
# at most (playbooks/files/collect.py), a real host's document is a few MiB; a larger one is
# refused before json.loads makes many times its size in objects.
MAX_DOCUMENT = 128 * 2**20


def host_bundle(host: str, stdout: Any,
                container_check: Mapping[str, Any] | None = None) -> bundles.Bundle | str:
    """The host's bundle from its collector's stdout, with the container check's task result
    where it ran; or why there is none (naming the host). Never raises: all of it is the
    host's word."""
    text = stdout if isinstance(stdout, str) else ""
    if len(text) > MAX_DOCUMENT:
        return (f"{host}: the collector's output is {len(text) // 2**20} MiB, over racklift's "
                f"limit of {MAX_DOCUMENT // 2**20} MiB: refused, not read")
    try:
        document = json.loads(text)
        # A "\ud800" escape decodes to a lone surrogate, which no file or parser takes as text.
        json.dumps(document, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return f"{host}: the collector's output holds text that is not UTF-8 (a lone surrogate)"
    except (ValueError, RecursionError):
        return f"{host}: the collector's output is not JSON: {text[:200]}"
    outputs = document.setdefault("outputs", {}) if isinstance(document, dict) else None
    # It ran when it has stdout (a skipped task has none); a document whose outputs are not an
    # object is refused below all the same.
    if container_check is not None and "stdout" in container_check and isinstance(outputs, dict):
        outputs[bundles.CONTAINER_CHECK] = {
            "command": " ".join(map(str, container_check.get("cmd") or []))[:200],
            "rc": container_check.get("rc", 0), "stdout": container_check.get("stdout", ""),
            "stderr": container_check.get("stderr", "")}
    try:
        return bundles.from_collector(host, document)
    except RackliftError as exc:  # it names the host and what was wrong
        return str(exc)
    except Exception as exc:
        return f"{host}: the collector's document could not be read: {type(exc).__name__}: {exc}"


def judge_bundle(expected: ExpectedHost, bundle: bundles.Bundle,
                 controller_checks: tuple[CheckResult, ...] = (),
                 ) -> tuple[HostVerdict, HostFacts | None]:
    """The host's verdict from its bundle and what the controller checked of it itself
    (`controller_checks`), and its facts (None when they could not be judged). Never raises: an
    exception fails this host alone, with an error naming it and, where a parser failed, the
    output."""
    try:
        facts = from_bundle(bundle)
        return judge(expected, facts, controller_checks), facts
    except Exception as exc:
        # racklift's own errors are written for the operator (host.py's names the output);
        # anything else is a racklift bug meeting the host's data, told by its type.
        why = str(exc) if isinstance(exc, RackliftError) else f"{type(exc).__name__}: {exc}"
        error = f"{expected.name}: its facts could not be judged: {why}"
        return not_verified(expected, error, controller_checks), None


def collect(netbox: NetBox, hosts: list[ExpectedHost], bundle_dir: Path, *,
            artifacts: Path | None = None, ident: str = "collect",
            on_event: Callable[[HostEvent], None] | None = None,
            container_check: bool = False, collector: str = "direct",
            extravars: Mapping[str, Any] | None = None,
            reached: Reached | None = None) -> dict[str, bundles.Bundle | str]:
    """Each host's bundle (also written under `bundle_dir`), or why there is none.
    `container_check`: also pull and run the GPU container through the host's registry mirror
    (the gate does; support bundles stay read-only). `collector`: "direct" (racklift's ssh
    clients, one per host, for every host whose Ansible connection is plain ssh; Ansible
    collects the others with collect.yml) or "ansible" (collect.yml for all). `reached`: how
    hosts are reached, kept for the batch's later stages."""
    if collector not in COLLECTORS:
        raise RackliftError(f"collector {collector!r}: use one of {', '.join(COLLECTORS)}")
    names = [h.name for h in hosts]
    raw: dict[str, tuple[Any, Mapping[str, Any] | None] | str] = {}
    through_ansible = names
    if collector == "direct" and names:
        targets = (reached or Reached()).get(names, netbox.settings, extravars)
        direct = {n: t for n, t in targets.items() if "ssh" in t}
        for name, why in targets.items():
            if "error" in why:
                raw[name] = f"{name}: {why['error']}"
        got = collect_direct(direct, script("collect.py"),
                             script("container_check.py") if container_check else None,
                             limit=MAX_DOCUMENT, on_event=on_event)
        raw.update({n: g if isinstance(g, str) else (g.stdout, g.container_check)
                    for n, g in got.items()})
        through_ansible = [n for n in names if "ansible" in targets.get(n, {})]
    if through_ansible:
        result = run_playbook("collect.yml", through_ansible, netbox.settings,
                              artifacts=artifacts, ident=ident, on_event=on_event,
                              extravars={**(extravars or {}),
                                         "racklift_container_check": container_check},
                              capture=[COLLECT_TASK, CONTAINER_CHECK_TASK])
        for name in through_ansible:
            res = result.captured.get(name, {}).get(COLLECT_TASK)
            raw[name] = (result.failed.get(name, "no facts came back")
                         if name in result.failed or res is None else
                         (res.get("stdout"), result.captured[name].get(CONTAINER_CHECK_TASK)))
    out: dict[str, bundles.Bundle | str] = {}
    for name in names:
        came = raw.get(name, "no facts came back")
        got = came if isinstance(came, str) else host_bundle(name, *came)
        if isinstance(got, bundles.Bundle):
            bundles.write(got, bundle_dir)
        out[name] = got
    return out


def read_pinned_bmcs(netbox: NetBox, hosts: list[ExpectedHost], *,
                     extravars: Mapping[str, Any] | None = None,
                     progress: Callable[[str], None] = lambda _: None,
                     ) -> dict[str, BmcInventory | str]:
    """The BMC inventory of each host whose device type pins firmware or BIOS and whose BMC
    NetBox has an address for (firmware_pins.asks_bmc), read over Redfish in parallel with the
    BMC settings and credentials from the host's Ansible vars, as the image stage gets them
    (racklift.hostvars); or why it could not be read. Nothing is run where no host asks."""
    oob_ips = {h.name: h.oob_ip for h in hosts if asks_bmc(h)}
    if not oob_ips:
        return {}
    progress(f"reading the firmware and BIOS of {len(oob_ips)} hosts from their BMCs")
    hostvars = read_hostvars(list(oob_ips), netbox.settings, extravars=extravars)
    return read_bmcs(oob_ips, hostvars)


def controller_checks(host: ExpectedHost,
                      bmcs: dict[str, BmcInventory | str]) -> tuple[CheckResult, ...]:
    """What the controller checks of a host itself, not from its facts: its firmware and BIOS
    where its device type pins them (`bmcs`: read_pinned_bmcs's)."""
    check = firmware_pins(host, bmcs)
    return (check,) if check else ()


@dataclass(frozen=True)
class VerifyRun:
    verdicts: list[HostVerdict]
    run_dir: Path
    seconds: float


def gate(netbox: NetBox, hosts: list[ExpectedHost], run_dir: Path, *, write: bool = True,
         mark_active_failed: bool = False, record_observed_serials: bool = False,
         record_observed_cables: bool = False, run: str | None = None,
         admit: Callable[[ExpectedHost], bool] = lambda h: not asks_acceptance(h),
         progress: Callable[[str], None] = lambda _: None,
         on_event: Callable[[HostEvent], None] | None = None,
         extravars: Mapping[str, Any] | None = None, ident: str = "collect",
         collector: str = "direct", reached: Reached | None = None) -> list[HostVerdict]:
    """Collect, compare, check and (unless `write` is false) record the verdicts of `hosts`.
    `ident`: the collector's Ansible artifacts directory (the pipeline's racks each their own).
    `run` is the pipeline run that holds the hosts' locks, if one calls the gate; hosts locked
    by any other run, not configured, or whose status changed meanwhile are reported only.
    `admit`: whether passing puts a host in the pool; by default unless its context asks for
    acceptance tests, which then follow (`racklift accept`). `collector`, `reached`: see
    `collect`."""
    reachable = [h for h in hosts if not h.problems and h.address and h.status in VERIFIED]
    progress(f"collecting facts from {len(reachable)} hosts")
    collected = (collect(netbox, reachable, run_dir / "bundles", artifacts=run_dir / "ansible",
                         ident=ident, container_check=True, extravars=extravars,
                         on_event=on_event, collector=collector, reached=reached)
                 if reachable else {})
    bmcs = read_pinned_bmcs(netbox, reachable, extravars=extravars, progress=progress)
    judged = {h.name for h in reachable}
    verdicts = []
    observed = []
    for host in hosts:
        got = collected.get(host.name)
        checks = controller_checks(host, bmcs) if host.name in judged else ()
        if host.status not in VERIFIED:
            verdicts.append(skipped(host))
        elif isinstance(got, bundles.Bundle):
            verdict, facts = judge_bundle(host, got, checks)
            verdicts.append(replace(verdict, admit=admit(host)))
            if facts is not None:
                observed.append((host, facts))
        else:
            verdicts.append(not_verified(host, got, checks))
    if write:
        # Read once, right before writing: collecting took a while, and NetBox may have moved
        # on. What was observed is written under the same holds as the verdicts.
        observing = record_observed_serials or record_observed_cables
        now = read_now(netbox, {v.netbox_id for v in verdicts
                                if recorded(v, mark_active_failed)}
                       | ({host.netbox_id for host, _ in observed} if observing else set()))
        if observing:
            observed = _not_busy(verdicts, observed, now, run=run, progress=progress)
        if record_observed_serials:
            progress(f"recorded {record_serials(netbox, observed)} first-seen GPU serials into "
                     "NetBox")
        if record_observed_cables:
            progress(f"recorded {record_cables(netbox, observed)} observed cables into NetBox")
        verdicts = with_holds(verdicts, now, run=run, mark_active_failed=mark_active_failed)
        for v in verdicts:
            if v.held:
                progress(f"{v.host}: not recorded: {v.held}")
        # The run the device's result names: the pipeline's, or verify's own run directory.
        verdicts = record(netbox, verdicts, mark_active_failed=mark_active_failed,
                          run=run or run_dir.name)
    return verdicts


def _not_busy(verdicts: list[HostVerdict], observed: list[tuple[ExpectedHost, HostFacts]],
              now: Mapping[int, InNetBox], *, run: str | None,
              progress: Callable[[str], None]) -> list[tuple[ExpectedHost, HostFacts]]:
    """The observed hosts what they showed may be recorded of: none another run holds, none
    moved meanwhile, none not yet configured (the holds the verdict honours)."""
    by_id = {v.netbox_id: v for v in verdicts}
    kept = []
    for host, facts in observed:
        why = busy(by_id[host.netbox_id], now[host.netbox_id], run=run)
        if why:
            progress(f"{host.name}: nothing observed recorded: {why}")
        else:
            kept.append((host, facts))
    return kept


def verify(netbox: NetBox, selection: Selection, *, write: bool = True,
           mark_active_failed: bool = False, record_observed_serials: bool = False,
           record_observed_cables: bool = False, collector: str = "direct",
           progress: Callable[[str], None] = lambda _: None,
           extravars: Mapping[str, Any] | None = None) -> VerifyRun:
    started = time.monotonic()
    run_dir = new_run_dir("verify")
    if write:
        # The fields verdicts are written to, as provision does: a NetBox bootstrapped by an
        # older racklift lacks the newer ones (racklift_result).
        bootstrap(netbox)
    hosts = read_hosts(netbox, selection)
    progress(f"{len(hosts)} hosts selected ({selection.describe()})")
    verdicts = gate(netbox, hosts, run_dir, write=write, mark_active_failed=mark_active_failed,
                    record_observed_serials=record_observed_serials,
                    record_observed_cables=record_observed_cables,
                    collector=collector, progress=progress, extravars=extravars)
    return VerifyRun(verdicts, run_dir, time.monotonic() - started)
