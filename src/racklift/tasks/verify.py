"""The gate: verify hosts against NetBox, and diagnose from support bundles offline."""

from __future__ import annotations

import json as jsonlib
from collections.abc import Callable
from contextlib import suppress
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from invoke import task
from invoke.exceptions import Exit

from racklift.console import console, plain, print_json, terminal
from racklift.errors import RackliftError
from racklift.facts import bundle as bundles
from racklift.facts import parsers
from racklift.facts.host import from_bundle
from racklift.names import is_hostname
from racklift.netbox import expected_json
from racklift.netbox.expected import ExpectedHost
from racklift.netbox.reader import read_hosts
from racklift.runs import new_run_dir
from racklift.tasks.common import (
    METRICS_HELP,
    SELECTION_HELP,
    connect,
    operator_errors,
    publish_metrics,
    saved_report,
    selection,
)
from racklift.verify import verdict_report
from racklift.verify.gate import collect
from racklift.verify.gate import verify as verify_hosts
from racklift.verify.verdict import VERIFIED, judge

PARSERS = {
    "nvidia-smi-xml": parsers.parse_nvidia_smi_xml,
    "nvidia-smi-csv": parsers.parse_nvidia_smi_csv,
    "nvidia-smi-q": parsers.parse_nvidia_smi_q,
    "nvidia-smi-topo": parsers.parse_nvidia_smi_topo,
    "nvidia-smi-nvlink": parsers.parse_nvidia_smi_nvlink,
    "nvidia-smi-nvlink-e": parsers.parse_nvidia_smi_nvlink_errors,
    "ibstat": parsers.parse_ibstat,
    "ibv-devinfo": parsers.parse_ibv_devinfo,
    "dmidecode": parsers.parse_dmidecode,
    "lspci": parsers.parse_lspci,
    "dmesg": parsers.parse_dmesg,
    "lldpctl": parsers.parse_lldpctl,  # -f json, json0 or keyvalue
    "ibnetdiscover": parsers.parse_ibnetdiscover,
    "iblinkinfo": parsers.parse_iblinkinfo,
    "dcgmi-diag": parsers.parse_dcgmi_diag,
    "nccl-tests": parsers.parse_nccl_tests,
    "perftest-bw": parsers.parse_perftest_bw,
}


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@task(help={**SELECTION_HELP,
            "check": "report only: write nothing to NetBox",
            "mark_failed": "also mark failing `active` hosts `failed` (default: drift report)",
            "record_serials": "record first-seen GPU serials on blank NetBox inventory items",
            "record_cables": "create NetBox cables for the links hosts see on ports NetBox has "
                             "no cable for (to switch ports NetBox has, free of cables)",
            "json": "print the JSON report on stdout",
            "collector": "direct (default: one ssh client per host, as Ansible's inventory "
                         "and ssh settings say to reach it) or ansible (collect.yml)",
            "metrics_file": METRICS_HELP})
def verify(c, site=None, rack=None, role="gpu-server", status=None, host=None, check=False,
           mark_failed=False, record_cables=False, record_serials=False, json=False,
           collector="direct", metrics_file=None):
    """The gate: collect each host's facts, compare them with NetBox, run health checks.

    staged/failed hosts become `active` only when everything passes, otherwise `failed`,
    with a journal entry listing every reason; hosts locked by a running provision, not yet
    configured, or whose status changed meanwhile are reported and left as they are. `active`
    hosts get a drift report. Writes report.json, report.html, junit.xml and the support
    bundles to runs/<time>-verify/ (and Prometheus metrics to --metrics-file). Exit 1 when any host
    fails."""
    chosen = selection(site, rack, role, status, host)
    with operator_errors():
        run = verify_hosts(connect(), chosen, write=not check, mark_active_failed=mark_failed,
                           record_observed_serials=record_serials,
                           record_observed_cables=record_cables,
                           collector=collector,
                           progress=lambda m: console.print(plain(m, "dim")))
        report_file, junit = verdict_report.write(run.run_dir, run.verdicts, chosen.describe(),
                                                  run.seconds)
        report = saved_report(report_file)
    console.print(verdict_report.table(run.verdicts, f"verify: {chosen.describe()}"))
    counts = verdict_report.summary(run.verdicts)
    held = sum(1 for v in run.verdicts if v.held)  # each said why as it was decided
    console.print(f"{counts['passed']} passed, {counts['failed']} failed, "
                  f"{counts['skipped']} skipped in {run.seconds:.1f} s"
                  f"{f', {held} left as they are in NetBox' if held else ''}"
                  f"{' (check: NetBox not written)' if check else ''}; "
                  f"report {report_file} (and .html), JUnit {junit}, "
                  f"bundles {run.run_dir / 'bundles'}")
    with operator_errors():
        publish_metrics(metrics_file, report)
    if json:
        print_json(report)
    if counts["failed"]:
        raise Exit(code=1)


@task(positional=["kind", "file"],
      help={"kind": ", ".join(PARSERS), "file": "a captured output of that tool ('-': stdin)"})
def parse(c, kind, file):
    """Parse one captured tool output and print the facts as JSON (offline diagnosis)."""
    if kind not in PARSERS:
        raise Exit(f"error: unknown kind {kind!r}; kinds: {', '.join(PARSERS)}", code=2)
    try:
        text = Path("/dev/stdin" if file == "-" else file).read_text(errors="replace")
    except OSError as exc:
        raise Exit(f"error: cannot read {file}: {exc.strerror}", code=1) from None
    try:
        facts = PARSERS[kind](text)
    except parsers.ParseError as exc:
        raise Exit(terminal(f"error: {file}: {exc}"), code=1) from None
    with suppress(BrokenPipeError):  # `| head` closed the pipe: what it wanted it has
        print_json(_plain(facts))


def _host_dirs(path: Path) -> list[Path]:
    if (path / "meta.json").exists() or (path / "nvidia-smi-q-x.xml").exists():
        return [path]
    return sorted(p for p in path.iterdir() if p.is_dir())


@task(name="facts", help={"from": "a support bundle: a host's directory, or one holding a "
                                  "directory per host",
                          "compare": "also judge each host against NetBox (read-only)",
                          "expected": "also judge each host against FILE, what `netbox."
                                      "expected --json` printed (no NetBox)"})
def facts_(c, from_, compare=False, expected=None):
    """The facts in a support bundle, as JSON; with --compare (NetBox) or --expected FILE (an
    export of it), the gate's verdict too. Exit 1 when a bundle cannot be read or a judged
    host fails, 2 when a host has no expected state to be judged against (the others are
    still judged)."""
    if compare and expected:
        raise Exit("error: --compare judges against NetBox and --expected against a file: "
                   "give one", code=2)
    against = _expected_file(expected) if expected else None
    with operator_errors():
        directories = _host_dirs(Path(from_))
        if not directories:
            raise RackliftError(f"no host bundles in {from_}")
        if compare:
            chosen = selection(host=",".join(d.name for d in directories))
            against = _in_netbox({h.name: h for h in read_hosts(connect(), chosen)})
        # One bundle that cannot be read is that host's error; the others are still shown.
        out = [_bundle_entry(d, against) for d in directories]
    print_json(out if len(out) > 1 else out[0])
    # Facts but no verdict: there was nothing to judge the host against (usage: the wrong
    # file, or NetBox); checked first, as what was judged is then only part of the bundle.
    unjudged = [e["error"] for e in out if "facts" in e and "error" in e]
    if unjudged:
        raise Exit(terminal("\n".join(f"error: {e}" for e in unjudged)), code=2)
    if any("error" in e or e.get("verdict", {}).get("failed") for e in out):
        raise Exit(code=1)


# A host's expected state, by the name its bundle gives; or why there is none.
Expected = Callable[[str], ExpectedHost | str]


def _in_netbox(hosts: dict[str, ExpectedHost]) -> Expected:
    return lambda name: hosts.get(name) or f"{name} is not in NetBox"


def _expected_file(path: str) -> Expected:
    """The hosts in an expected-host export; a file that holds none is a usage error."""
    try:
        found = expected_json.read(Path(path).read_bytes())
    except OSError as exc:
        raise Exit(f"error: cannot read {path}: {exc.strerror}", code=2) from None
    except expected_json.NotAnExport as exc:
        raise Exit(terminal(f"error: {path}: {exc}"), code=2) from None

    def get(name: str) -> ExpectedHost | str:
        host = found.get(name)
        return host if isinstance(host, ExpectedHost) else "; ".join(
            f"{path}: {p}" for p in host)

    return get


def _bundle_entry(directory: Path, expected: Expected | None) -> dict[str, Any]:
    """A host's facts (and its verdict, judged against `expected`), or why there are none."""
    try:
        bundle = bundles.read(directory)
        facts = from_bundle(bundle)
    except RackliftError as exc:
        return {"host": directory.name, "error": str(exc)}
    entry: dict[str, Any] = {"host": bundle.host, "facts": facts.to_dict()}
    if expected is not None:
        host = expected(bundle.host)
        if isinstance(host, ExpectedHost):
            entry["verdict"] = judge(host, facts).to_dict()
        else:
            entry["error"] = host
    return entry


@task(help={**SELECTION_HELP, "to": "directory for the bundles (default runs/<time>-bundle)"})
def bundle(c, site=None, rack=None, role="gpu-server", status=None, host=None, to=None):
    """Collect support bundles from hosts (read-only on the hosts), for offline diagnosis."""
    chosen = selection(site, rack, role, status, host)
    with operator_errors():
        netbox = connect()
        selected = read_hosts(netbox, chosen)
        hosts = [h for h in selected
                 if h.address and h.status in VERIFIED and is_hostname(h.name)]
        for h in selected:
            if h not in hosts:
                console.print(plain(f"{h.name}: skipped (status {h.status}, address "
                                    f"{h.address or 'none'}, name {h.name!r})", "dim"))
        target = Path(to) if to else new_run_dir("bundle")
        results = collect(netbox, hosts, target)
    for name, got in sorted(results.items()):
        console.print(plain(f"{name}: {target / name}") if not isinstance(got, str)
                      else plain(f"{name}: {got}", "red"))
    console.print(jsonlib.dumps({"bundles": str(target)}))
