"""The acceptance stage: load tests on verified hosts before they join (playbooks/accept.yml),
judged against the thresholds of each host's config context (racklift.verify.acceptance), with
RDMA blame from pairs (racklift.verify.pairing).

What a host printed is its word: each output is size-limited and parsed on the controller, and
an output that cannot be read fails that host's test alone, naming it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from racklift.ansible import HostEvent
from racklift.facts.parsers import (
    ParseError,
    parse_dcgmi_diag,
    parse_nccl_tests,
    parse_perftest_bw,
)
from racklift.lifecycle.result import of_acceptance
from racklift.netbox.client import NetBox
from racklift.netbox.desired import Acceptance
from racklift.netbox.expected import ExpectedHost, ExpectedInterface
from racklift.pipeline.accept_run import (
    DCGM_TASK,
    MAX_OUTPUT,
    NCCL_SIZES,
    NCCL_TASK,
    AcceptRunner,
    dcgm_argv,
    nccl_argv,
)
from racklift.verify.acceptance import best_gbps, judge_acceptance
from racklift.verify.failures import mismatch_failures
from racklift.verify.mismatch import CRITICAL, Mismatch
from racklift.verify.pairing import (
    UNPROVEN,
    Pair,
    PortVerdict,
    RailPort,
    first_pairs,
    judge_pairs,
    retest_pairs,
    rounds,
)
from racklift.verify.reach import Reached

TCP_PORT = 18515  # perftest's own; the n-th pair of a round takes the n-th port from it
DEVICE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")  # an RDMA device: mlx5_0, irdma1


@dataclass(frozen=True)
class HostAcceptance:
    host: str
    want: Acceptance
    mismatches: tuple[Mismatch, ...]
    figures: dict[str, Any] = field(default_factory=dict)  # what was measured

    @property
    def passed(self) -> bool:
        return not any(m.severity == CRITICAL for m in self.mismatches)

    @property
    def failures(self) -> list[str]:
        return [str(m) for m in self.mismatches if m.severity == CRITICAL]

    def figures_line(self) -> str:
        """The figures against their thresholds, for the summary table."""
        want = self.want
        parts = []
        if "dcgm" in self.figures:
            parts.append(f"dcgm r{want.dcgm_level} {self.figures['dcgm']['result']}")
        if "nccl_busbw" in self.figures:
            got = self.figures["nccl_busbw"]
            parts.append(f"nccl {'-' if got is None else f'{got:g}'} GB/s "
                         f"(>= {want.nccl_busbw:g})")
        if "rdma" in self.figures:
            figures = [p["gbps"] for p in self.figures["rdma"].values() if p["gbps"] is not None]
            slowest = f"{min(figures):g}" if figures else "-"
            parts.append(f"rdma min {slowest} Gb/s (>= {want.rdma_gbps:g}) on "
                         f"{len(self.figures['rdma'])} ports")
        return "; ".join(parts) or "no tests asked"

    def summary(self) -> str:
        """One dated line, for the journal and the device's custom field."""
        day = datetime.now(UTC).strftime("%Y-%m-%d")
        return f"{day} {'passed' if self.passed else 'failed'}: {self.figures_line()}"

    def rows(self) -> list[dict[str, Any]]:
        """Each figure against its threshold, one row per test (and RDMA port), for the
        device's result field."""
        want, figures = self.want, self.figures
        rows: list[dict[str, Any]] = []
        if "dcgm" in figures:
            rows.append({"test": f"DCGM diag level {want.dcgm_level}",
                         "figure": figures["dcgm"]["result"], "threshold": "pass",
                         "passed": figures["dcgm"]["result"] == "pass"})
        if "nccl_busbw" in figures:
            got = figures["nccl_busbw"]
            rows.append({"test": "NCCL all-reduce bus bandwidth",
                         "figure": "-" if got is None else f"{got:g} GB/s",
                         "threshold": f">= {want.nccl_busbw:g} GB/s",
                         "passed": got is not None and want.nccl_busbw is not None
                         and got >= want.nccl_busbw})
        for port, got in sorted(figures.get("rdma", {}).items()):
            rows.append({"test": f"RDMA ib_write_bw {port}",
                         "figure": "-" if got["gbps"] is None else f"{got['gbps']:g} Gb/s",
                         "threshold": f">= {want.rdma_gbps:g} Gb/s",
                         "passed": got["outcome"] == "pass"})
        return rows

    def result(self, run: str | None) -> dict[str, Any]:
        """The device's result field's sections for this outcome."""
        return of_acceptance(self.passed, self.summary(), self.rows(),
                             mismatch_failures(asdict(m) for m in self.mismatches), run)


def rdma_device(iface: ExpectedInterface) -> str | None:
    """The CA ib_write_bw -d takes for this NetBox port: its label where that is a device
    name (NetBox naming ports by netdev), else its name; None where neither is one (a NetBox
    string goes on no command line unchecked)."""
    for text in (iface.label, iface.name):
        if text and DEVICE_NAME.fullmatch(text):
            return text
    return None


def rail_ports(host: ExpectedHost) -> list[RailPort]:
    """The host's HCA ports as the RDMA test pairs them: each its CA, on the switch its NetBox
    cable ends at or, uncabled, on a rail of its own name (rail-optimised hosts cable HCA i to
    rail i). Ports without a device name are not among them (`untestable`)."""
    return [RailPort(host.name, device, i.peer.device if i.peer else i.name)
            for i in host.ib_ports if (device := rdma_device(i))]


def untestable(host: ExpectedHost) -> list[PortVerdict]:
    """The host's HCA ports no device name can be told for: unproven, saying what to set."""
    return [PortVerdict(RailPort(host.name, i.name, i.name), UNPROVEN, None,
                        f"NetBox names it {i.name!r} and labels it {i.label or 'nothing'!r}: "
                        "neither is an RDMA device name for ib_write_bw -d; set its label to "
                        "the CA (e.g. mlx5_0)")
            for i in host.ib_ports if rdma_device(i) is None]


def _output(res: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """(stdout, why there is none) of a task's result, within the size limit. A test asked
    for that never ran is no pass: acceptance is proof."""
    if not res or res.get("skipped"):
        return None, ("it did not run on the host (no GPUs in NetBox to run it on, or the "
                      "run stopped)")
    text = res.get("stdout")
    if not isinstance(text, str) or not text.strip():
        said = res.get("stderr") or res.get("msg") or f"exit {res.get('rc')}"
        return None, str(said).strip()[:200]
    if len(text) > MAX_OUTPUT:
        return None, f"its output is {len(text) // 2**20} MiB, over the {MAX_OUTPUT // 2**20} " \
                     "MiB racklift reads: refused, not read"
    return text, None


def _read(parse: Callable[[str], Any], res: Mapping[str, Any] | None, field_name: str,
          what: str) -> tuple[Any, list[Mismatch]]:
    """The parsed run, or None with the mismatch saying why it could not be read."""
    text, why = _output(res)
    if text is None:
        return None, [Mismatch(field_name, what, f"not run: {why}", CRITICAL,
                               f"run `{what}` on the host by hand and read its error")]
    try:
        return parse(text), []
    except ParseError as exc:
        return None, [Mismatch(field_name, what, f"output not readable: {exc}", CRITICAL,
                               f"run `{what}` on the host by hand: racklift reads its real "
                               "output format")]


def judge_local(host: ExpectedHost, want: Acceptance,
           results: Mapping[str, Any]) -> tuple[list[Mismatch], dict[str, Any]]:
    """The host's own tests (DCGM, NCCL) judged, and their figures."""
    mismatches: list[Mismatch] = []
    figures: dict[str, Any] = {}
    dcgm = nccl = None
    if want.dcgm_level is not None:
        dcgm, unread = _read(parse_dcgmi_diag, results.get(DCGM_TASK), "accept.dcgm",
                             f"dcgmi diag -r {want.dcgm_level}")
        mismatches += unread
    if want.nccl_busbw is not None:
        nccl, unread = _read(parse_nccl_tests, results.get(NCCL_TASK), "accept.nccl.busbw",
                             f"all_reduce_perf -b {NCCL_SIZES[0]} -e {NCCL_SIZES[1]} -f 2")
        mismatches += unread
        figures["nccl_busbw"] = nccl.avg_busbw if nccl else None
    # What could not be read is said above; judge what could (RDMA is judged in pairs).
    judged = judge_acceptance(
        replace(want, dcgm_level=want.dcgm_level if dcgm else None,
                nccl_busbw=want.nccl_busbw if nccl else None, rdma_gbps=None),
        dcgm=dcgm, nccl=nccl)
    if want.dcgm_level is not None:
        # Failed and required-but-not-run tests alike: the summary never says "pass" for them.
        failed = [m.field.removeprefix("accept.dcgm.") for m in judged
                  if m.field.startswith("accept.dcgm.") and m.severity == CRITICAL]
        figures["dcgm"] = {"level": want.dcgm_level,
                           "result": "not run" if dcgm is None else
                           f"failed {', '.join(failed)}" if failed else "pass"}
    return mismatches + judged, figures


def _pair_vars(round_: list[Pair], addresses: Mapping[str, str]) -> list[dict[str, Any]]:
    return [{"n": n, "client": p.client.host, "server": p.server.host,
             "server_address": addresses[p.server.host], "client_device": p.client.port,
             "server_device": p.server.port, "tcp_port": TCP_PORT + n}
            for n, p in enumerate(round_)]


def _pairs(runner: AcceptRunner, pairs: list[Pair], addresses: Mapping[str, str],
           progress: Callable[[str], None]) -> dict[Pair, float | None]:
    """Each pair's figure (its client's best average; None: no result), round by round."""
    results: dict[Pair, float | None] = {}
    for n, round_ in enumerate(rounds(pairs), start=1):
        progress(f"ib_write_bw round {n}: {len(round_)} pairs")
        for pair, item in zip(round_, runner.rdma_round(_pair_vars(round_, addresses)),
                              strict=True):
            text, _ = _output(item)
            try:
                results[pair] = best_gbps(parse_perftest_bw(text)) if text else None
            except ParseError:
                results[pair] = None
    return results


def accept(netbox: NetBox, hosts: list[ExpectedHost], run_dir: Path, *,
           partners: Sequence[ExpectedHost] = (),
           ident: str = "accept", progress: Callable[[str], None] = lambda _: None,
           on_event: Callable[[HostEvent], None] | None = None,
           extravars: Mapping[str, Any] | None = None,
           reached: Reached | None = None) -> dict[str, HostAcceptance]:
    """Run the acceptance tests each host's context asks for; `partners` are known-good
    (active) hosts the RDMA test may pair with. Returns each host's judged acceptance."""
    wants = {h.name: h.desired.acceptance if h.desired else Acceptance() for h in hosts}
    runner = AcceptRunner(netbox, run_dir, ident, on_event, extravars or {}, reached)
    local = {h.name: local_commands(wants[h.name], len(h.gpus)) for h in hosts}
    local_results: dict[str, dict[str, Any]] = {}
    if asked_local := {name: tests for name, tests in local.items() if tests}:
        progress(f"DCGM diagnostics and NCCL all-reduce on {len(asked_local)} hosts")
        captured, failed = runner.local(asked_local)
        local_results = {name: {**captured.get(name, {}),
                                **({"failed": failed[name]} if name in failed else {})}
                         for name in asked_local}
    port_verdicts = _rdma(runner, [h for h in hosts if wants[h.name].rdma_gbps is not None],
                          partners, wants, progress)
    out = {}
    for h in hosts:
        want = wants[h.name]
        mismatches, figures = judge_local(h, want, local_results.get(h.name, {}))
        if h.name in local_results and "failed" in local_results[h.name]:
            mismatches.insert(0, Mismatch("accept.run", "the tests run",
                                          str(local_results[h.name]["failed"])[:300], CRITICAL,
                                          "the host could not be reached or Ansible failed on "
                                          "it: see the run's Ansible artifacts"))
        if want.rdma_gbps is not None:
            verdicts = {v.port.port: v for v in port_verdicts if v.port.host == h.name}
            mismatches += judge_acceptance(Acceptance(rdma_gbps=want.rdma_gbps), rdma=verdicts)
            figures["rdma"] = {port: {"gbps": v.gbps, "outcome": v.outcome, "why": v.why}
                               for port, v in sorted(verdicts.items())}
        out[h.name] = HostAcceptance(h.name, want, tuple(mismatches), figures)
    return out


def local_commands(want: Acceptance, gpus: int) -> dict[str, list[str]]:
    """The host's own tests its context asks for (all-reduce only where NetBox shows GPUs)."""
    return {**({DCGM_TASK: dcgm_argv(want.dcgm_level)} if want.dcgm_level is not None else {}),
            **({NCCL_TASK: nccl_argv(gpus)} if want.nccl_busbw is not None and gpus else {})}


def _rdma(runner: AcceptRunner, hosts: list[ExpectedHost], partners: Sequence[ExpectedHost],
          wants: Mapping[str, Acceptance],
          progress: Callable[[str], None]) -> list[PortVerdict]:
    """Every asked host's ports, paired per threshold (hosts of one SKU share one), tested,
    the slow pairs tested again with other partners, and judged."""
    addresses = {h.name: h.address or "" for h in (*hosts, *partners)}
    good = [p for h in partners for p in rail_ports(h)]
    verdicts: list[PortVerdict] = []
    for threshold in sorted({wants[h.name].rdma_gbps for h in hosts}):  # type: ignore[type-var]
        new = [p for h in hosts if wants[h.name].rdma_gbps == threshold for p in rail_ports(h)]
        results = _pairs(runner, first_pairs(new, good), addresses, progress)
        again = retest_pairs(results, threshold, new, good)
        if again:
            progress(f"{len(again)} ports slow with their first partner: testing them again "
                     "with others")
            results |= _pairs(runner, again, addresses, progress)
        verdicts += judge_pairs(results, threshold, new, good)
    return verdicts + [v for h in hosts for v in untestable(h)]
