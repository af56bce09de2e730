"""The verbs operators type: provision, reimage, and the locks that keep two runs apart."""

from __future__ import annotations

import json as jsonlib
from functools import partial

from invoke import task
from invoke.exceptions import Exit
from rich.text import Text

from racklift.console import console, plain, print_json
from racklift.errors import RackliftError
from racklift.lifecycle import lock
from racklift.lifecycle.stages import STAGES
from racklift.netbox.reader import read_hosts
from racklift.pipeline import run_report
from racklift.pipeline.image_plan import ImagingOptions
from racklift.pipeline.image_stage import image_hosts
from racklift.pipeline.outcome import PipelineRun
from racklift.pipeline.plan import ACCEPT_ONLY, PROVISION, REIMAGE, Options
from racklift.pipeline.progress import NORMAL, QUIET, VERBOSE, Progress
from racklift.pipeline.provision import run
from racklift.pipeline.racks import DEFAULT_RACKS, DEFAULT_RACKS_PER_SITE, Limits
from racklift.pipeline.scheduler import scheduler_from_env
from racklift.tasks.common import (
    METRICS_HELP,
    SELECTION_HELP,
    connect,
    operator_errors,
    publish_metrics,
    saved_report,
    selection,
)

RUN_HELP = {
    "check": "show what would happen to each host; change nothing",
    "no_image": "skip the image stage: hosts keep the OS they run (pre-imaged hosts, the "
                "container lab)",
    "json": "print the JSON report on stdout",
    "quiet": "only failures and the summary",
    "verbose": "every task on every host",
    "max_fail": "percentage of a rack's hosts whose failure stops that rack's batch (default 50)",
    "batch_size": "hosts of a rack configured at once (Ansible serial; default: the whole rack)",
    "until": "stop after this stage (image, configure, verify); hosts stay staged, a re-run "
             "resumes",
    "no_accept": "skip the acceptance tests the hosts' context asks for: admit on verify "
                 "alone (the journal says so)",
    "pair_with_active": "let the RDMA acceptance test pair new hosts with active hosts of "
                        "their site (known-good partners; the test loads their rails)",
    "parallel_racks": f"racks worked on at once in the whole run (default {DEFAULT_RACKS}; "
                      "1: one after another)",
    "racks_per_site": "racks worked on at once in one site: its boot server and registry "
                      f"mirror serve them all (default {DEFAULT_RACKS_PER_SITE})",
    "metrics_file": METRICS_HELP,
    "apply_firmware": "bring hosts whose firmware or BIOS is off their device type's pins "
                      "(racklift.firmware, racklift.bios) to them before imaging: updates from "
                      "the images racklift.firmware_images names (in RACKLIFT_FIRMWARE_DIR, "
                      "served by the site's boot server), BIOS settings, a reboot, read back; "
                      "a journal entry per change. Without it such hosts fail in preflight",
}


def _stage(name: str | None) -> str | None:
    if name is not None and name not in STAGES:
        raise Exit(f"error: --until takes one of {', '.join(STAGES)}, not {name!r}", code=2)
    return name


def _limits(parallel_racks: str | None, racks_per_site: str | None) -> Limits:
    # Flags taken as text (invoke's own int cast ends in a traceback on "two").
    def whole(flag: str, value: str | None, default: int) -> int:
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            raise Exit(f"error: {flag} takes a whole number of racks, not {value!r}",
                       code=2) from None
    try:
        return Limits(whole("--parallel-racks", parallel_racks, DEFAULT_RACKS),
                      whole("--racks-per-site", racks_per_site, DEFAULT_RACKS_PER_SITE))
    except RackliftError as exc:
        raise Exit(f"error: {exc}", code=2) from None


def _level(quiet: bool, verbose: bool) -> int:
    return QUIET if quiet else VERBOSE if verbose else NORMAL


def _execute(chosen, options: Options, *, check: bool, json: bool, quiet: bool,
             verbose: bool, max_fail: int, batch_size: str | None,
             metrics_file: str | None, apply_firmware: bool = False) -> None:
    progress = Progress(lambda line: console.print(plain(line), highlight=False),
                        _level(quiet, verbose))
    extravars = {"racklift_max_fail_percentage": int(max_fail)}
    if batch_size:
        extravars["racklift_batch_size"] = batch_size
    with operator_errors():
        result: PipelineRun = run(connect(), chosen, options, check=check, progress=progress,
                                  scheduler=scheduler_from_env(),
                                  image=partial(image_hosts, options=ImagingOptions(
                                      apply_firmware=apply_firmware)),
                                  extravars=extravars)
        report = saved_report(result.run_dir / "report.json")
    console.print(run_report.table(result, f"{options.verb}: {chosen.describe()}"
                                        f"{' (check: nothing changed)' if check else ''}"))
    counts = ", ".join(f"{n} {k}" for k, n in run_report.summary(result).items() if k != "hosts")
    console.print(f"{counts or 'no hosts'} in {result.seconds:.1f} s; run {result.run_id}; "
                  f"report {result.run_dir / 'report.json'} (and .html); "
                  f"Ansible artifacts {result.run_dir / 'ansible'}")
    for error in result.errors:
        console.print(plain(f"error: {error}", "red"))
    with operator_errors():
        publish_metrics(metrics_file, report)
    if json:
        print_json(report)
    if not run_report.ok(result):
        raise Exit(code=1)


@task(help={**{k: v for k, v in SELECTION_HELP.items() if k != "status"}, **RUN_HELP,
            "retry_failed": "also take hosts whose status is failed",
            "reimage": "image again even hosts that finished imaging in an earlier run"})
def provision(c, site=None, rack=None, role="gpu-server", host=None, check=False,
              no_image=False, retry_failed=False, reimage=False, json=False, quiet=False,
              verbose=False, max_fail=50, batch_size=None, until=None, no_accept=False,
              pair_with_active=False, parallel_racks=None,
              racks_per_site=None, metrics_file=None, apply_firmware=False):
    """Take planned hosts to the pool: preflight, image, configure, verify + health, accept,
    join. Acceptance runs the load tests the hosts' config context asks for (DCGM, NCCL,
    RDMA in pairs) and admits only hosts that reach its thresholds.

    Racks are batches, several at once (--parallel-racks, --racks-per-site); one host's
    failure never stops the others, nor one rack's another. NetBox moves each host
    planned → staged → active, or failed with the reasons in its journal. A re-run resumes
    where each host stopped (staged hosts continue; failed ones with --retry-failed). Hosts
    that are active are never touched. Exit 1 when any host did not join."""
    chosen = selection(site, rack, role, None, host)
    options = Options(PROVISION, image=not no_image, retry_failed=retry_failed,
                      reimage=reimage, until=_stage(until), accept=not no_accept,
                      pair_with_active=pair_with_active,
                      limits=_limits(parallel_racks, racks_per_site))
    _execute(chosen, options, check=check, json=json, quiet=quiet, verbose=verbose,
             max_fail=max_fail, batch_size=batch_size, metrics_file=metrics_file,
             apply_firmware=apply_firmware)


@task(help={"host": "device name(s), comma-separated", **RUN_HELP,
            "reason": "why (recorded in the NetBox journal and the scheduler's drain reason)",
            "force": "also re-image hosts that are active (in the pool)"})
def reimage(c, host, reason, force=False, check=False, no_image=False, json=False,
            quiet=False, verbose=False, max_fail=50, batch_size=None, until=None,
            no_accept=False, pair_with_active=False, parallel_racks=None,
            racks_per_site=None, metrics_file=None, apply_firmware=False):
    """Rebuild hosts: drain (scheduler hook), offline, image, configure, verify, accept,
    rejoin.

    Refuses active hosts unless --force (--apply-firmware too touches only the hosts the run
    takes). Exit 1 when any host did not rejoin."""
    if not reason.strip():
        raise Exit("error: --reason must say why the host is re-imaged", code=2)
    options = Options(REIMAGE, image=not no_image, force=force, reason=reason,
                      until=_stage(until), accept=not no_accept,
                      pair_with_active=pair_with_active,
                      limits=_limits(parallel_racks, racks_per_site))
    _execute(selection(host=host), options, check=check, json=json, quiet=quiet,
             verbose=verbose, max_fail=max_fail, batch_size=batch_size,
             metrics_file=metrics_file, apply_firmware=apply_firmware)


@task(help={**{k: v for k, v in SELECTION_HELP.items() if k != "status"},
            **{k: RUN_HELP[k] for k in ("check", "json", "quiet", "verbose",
                                        "pair_with_active", "parallel_racks",
                                        "racks_per_site", "metrics_file")},
            "retry_failed": "also take hosts whose acceptance failed",
            "force": "also test hosts that are active (in the pool): drained through the "
                     "scheduler hook first, back in the pool when they pass",
            "reason": "why, for the journal and the scheduler's drain reason (with --force)"})
def accept(c, site=None, rack=None, role="gpu-server", host=None, check=False,
           retry_failed=False, force=False, reason="", pair_with_active=False, json=False,
           quiet=False, verbose=False, parallel_racks=None,
           racks_per_site=None, metrics_file=None):
    """Run the acceptance tests alone on hosts verify has passed: DCGM diagnostics, NCCL
    all-reduce and RDMA bandwidth in pairs, at the thresholds of their config context.
    Passing hosts join the pool; slow ones go failed with the figure and the threshold.
    Exit 1 when any host did not join."""
    options = Options(ACCEPT_ONLY, image=False, retry_failed=retry_failed, force=force,
                      reason=reason, pair_with_active=pair_with_active,
                      limits=_limits(parallel_racks, racks_per_site))
    _execute(selection(site, rack, role, None, host), options, check=check, json=json,
             quiet=quiet, verbose=verbose, max_fail=50, batch_size=None,
             metrics_file=metrics_file)


@task(help={**SELECTION_HELP})
def locks(c, site=None, rack=None, role=None, status=None, host=None):
    """Which hosts are locked by a run, by whom and since when."""
    with operator_errors():
        netbox = connect()
        hosts = read_hosts(netbox, selection(site, rack, role, status, host))
        held = lock.current(netbox, [h.netbox_id for h in hosts])
    for h in hosts:
        if h.netbox_id in held:
            console.print(locked_line(h.name, held[h.netbox_id]))
    console.print(jsonlib.dumps({"locked": sum(1 for h in hosts if h.netbox_id in held),
                                 "hosts": len(hosts)}))


@task(help={"host": "device name(s), comma-separated", "reason": "why (recorded in the journal)"})
def unlock(c, host, reason="stale lock broken by the operator"):
    """Break the lock a run holds on hosts (a run that was killed, or a dead controller)."""
    with operator_errors():
        netbox = connect()
        hosts = read_hosts(netbox, selection(host=host))
        missing = set(selection(host=host).names) - {h.name for h in hosts}
        if missing:
            raise RackliftError(f"not in NetBox: {', '.join(sorted(missing))}")
        broken = lock.break_locks(netbox, [h.netbox_id for h in hosts], reason)
    for h in hosts:
        console.print(unlocked_line(h.name, broken.get(h.netbox_id)))


# A lock's owner, run and verb are whatever its taker wrote into NetBox: data, shown as text.
def locked_line(host: str, held: lock.Ticket) -> Text:
    return plain(f"{host}: {held.describe()}")


def unlocked_line(host: str, broken: lock.Ticket | None) -> Text:
    return plain(f"{host}: " + (f"broke the lock of {broken.owner} (run {broken.run})"
                                if broken else "not locked"))
