"""Acceptance: whether a host's figures under load meet what its device type asks for
(`racklift.acceptance`: DCGM's diagnostic level and the tests it must run, the least all-reduce
bus bandwidth, the least RDMA bandwidth per HCA port). Pure: the wanted thresholds and the
parsed runs (and each port's verdict from its pairs) in, Mismatches out, each naming the figure
and the threshold. A test asked for that did not run, or did not finish, fails the host:
acceptance is proof, not the absence of bad news. So does a record with nothing to test: the
pipeline's preflight refuses it (`acceptance_problems`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from racklift.facts.observed import DCGM_TEST_LEVELS, DcgmDiag, NcclRun, PerftestRun
from racklift.netbox.desired import FIELD_PREFIX, Acceptance
from racklift.netbox.expected import GPU_ROLE, ExpectedHost, Problem
from racklift.verify.mismatch import CRITICAL, Mismatch
from racklift.verify.pairing import FAIL, UNPROVEN, PortVerdict


def asks_acceptance(host: ExpectedHost) -> bool:
    """Whether the host's context asks for acceptance tests before it joins."""
    return host.desired is not None and host.desired.acceptance.asks


def acceptance_problems(host: ExpectedHost) -> list[Problem]:
    """What the tests the host's context asks for need of its record beyond what every host
    needs: something to test, and DCGM tests its level runs. The pipeline's preflight for
    hosts headed for acceptance."""
    if host.desired is None:  # its problems say why
        return []
    want, field = host.desired.acceptance, f"{FIELD_PREFIX}.acceptance"
    problems = []
    if want.rdma_gbps is not None and not host.ib_ports:
        problems.append(Problem(host.name, f"{field}.rdma_gbps", (
            "is set but the device has no InfiniBand interfaces in NetBox, so no HCA port "
            "would be tested: add one per HCA port (the device type's interface templates) "
            "or unset it")))
    if want.nccl_busbw is not None and not host.gpus:
        problems.append(Problem(host.name, f"{field}.nccl_busbw", (
            "is set but NetBox records no GPUs for the device, so all_reduce_perf has none "
            f"to run on: add the device type's inventory item templates of role '{GPU_ROLE}' "
            "(or the device's GPU modules) or unset it")))
    if want.dcgm_level is None and want.dcgm_required is not None:
        problems.append(Problem(host.name, f"{field}.dcgm_required", (
            "is set but dcgm_level is null, so DCGM does not run: set the level or unset it")))
    above = [t for t in want.dcgm_tests if DCGM_TEST_LEVELS[t] > (want.dcgm_level or 0)]
    if above:
        problems.append(Problem(host.name, f"{field}.dcgm_required", (
            f"{', '.join(above)} do not run at level {want.dcgm_level}: raise dcgm_level to "
            f"{max(DCGM_TEST_LEVELS[t] for t in above)} or drop them")))
    return problems


def judge_acceptance(want: Acceptance, *, dcgm: DcgmDiag | None = None,
                     nccl: NcclRun | None = None,
                     rdma: Mapping[str, PortVerdict] | None = None) -> list[Mismatch]:
    """`rdma`: each HCA port the host should have, to its verdict from the pairs it was
    tested in (racklift.verify.pairing)."""
    return [*_dcgm(want, dcgm), *_nccl(want, nccl), *_rdma(want, rdma or {})]


def _dcgm(want: Acceptance, diag: DcgmDiag | None) -> Iterator[Mismatch]:
    if want.dcgm_level is None:
        return
    if diag is None:
        yield Mismatch("accept.dcgm", f"dcgmi diag -r {want.dcgm_level}", "not run", CRITICAL,
                       "install DCGM (datacenter-gpu-manager) and run the diagnostic")
        return
    for test in diag.failed:
        gpus = [str(g) for g, result in test.gpus if result in ("Fail", "Error")]
        why = test.warnings[0] if test.warnings else "no reason printed"
        yield Mismatch(f"accept.dcgm.{test.name}", "Pass",
                       f"{test.result}{' on GPU ' + ', '.join(gpus) if gpus else ''}: {why}",
                       CRITICAL, "what DCGM says to do first (reset the GPU, check its "
                       "cooling or seating), then run the diagnostic again; RMA if it fails "
                       "again")
    for name in want.dcgm_tests:
        if why := _not_run(diag, name, want.dcgm_level):
            yield Mismatch(f"accept.dcgm.{name}", "Pass", why, CRITICAL, (
                f"run `dcgmi diag -r {want.dcgm_level}` by hand and see why DCGM did not run "
                f"{name} (a GPU it does not support, a prerequisite not met, a DCGM without "
                "the test); where "
                "this GPU never runs it, leave it out of racklift.acceptance.dcgm_required"))


def _not_run(diag: DcgmDiag, name: str, level: int) -> str | None:
    """Why a required test did not run on every GPU (None: it did): skipped, with DCGM's
    reason, or not in the output."""
    tests = [t for t in diag.tests if t.test == name]
    if not tests:
        ran = diag.level
        if ran is not None and ran < min(level, DCGM_TEST_LEVELS[name]):
            return f"not run: the run was level {ran}, level {level} asked"
        return "absent from the output"
    said = [m for t in tests for m in (*t.warnings, *t.info)]
    why = said[0] if said else "no reason printed"
    if all(t.result == "Skip" for t in tests):
        return f"skipped: {why}"
    # A GPU that one of the test's rows skips and none runs (3.x: "Skip - GPU: 3").
    results: dict[int, set[str]] = {}
    for gpu, result in (g for t in tests for g in t.gpus):
        results.setdefault(gpu, set()).add(result)
    skipped = sorted(gpu for gpu, seen in results.items() if seen == {"Skip"})
    return f"skipped on GPU {', '.join(map(str, skipped))}: {why}" if skipped else None


def _nccl(want: Acceptance, run: NcclRun | None) -> Iterator[Mismatch]:
    if want.nccl_busbw is None:
        return
    wanted = f">= {want.nccl_busbw:g} GB/s"
    if run is None or run.avg_busbw is None:
        said = run.errors[0] if run and run.errors else "no result"
        yield Mismatch("accept.nccl.busbw", wanted, f"did not finish: {said}", CRITICAL,
                       "run all_reduce_perf on the host's GPUs by hand and read its error")
        return
    wrong = sum(w for r in run.rows for w in (r.wrong, r.wrong_in_place) if w)
    if wrong or run.out_of_bounds:
        yield Mismatch("accept.nccl.wrong", 0, f"{wrong} wrong values, "
                       f"{run.out_of_bounds or 0} out of bounds", CRITICAL,
                       "a GPU or NVLink computes wrong results: run dcgmi diag -r 3 and the "
                       "kernel log's Xids to find which, then RMA it")
    if run.avg_busbw < want.nccl_busbw:
        yield Mismatch("accept.nccl.busbw", wanted, f"{run.avg_busbw:g} GB/s", CRITICAL,
                       "slow collectives: check `nvidia-smi topo -m` and NVLink status, fabric "
                       "manager, and GPU clocks (thermal or power throttling)")


def best_gbps(run: PerftestRun) -> float | None:
    """A run's figure: the best average of its rows (one row, or an -a sweep's sizes)."""
    return max((r.average_gbps for r in run.rows), default=None)


def _rdma(want: Acceptance, ports: Mapping[str, PortVerdict]) -> Iterator[Mismatch]:
    if want.rdma_gbps is None:
        return
    wanted = f">= {want.rdma_gbps:g} Gb/s"
    if not ports:
        yield Mismatch("accept.rdma", wanted, "no HCA port tested", CRITICAL,
                       "record the host's InfiniBand ports in NetBox (the device type's "
                       "interface templates), or unset racklift.acceptance.rdma_gbps")
    for port, verdict in sorted(ports.items()):
        if verdict.outcome == FAIL:
            yield Mismatch(f"accept.rdma[{port}]", wanted, f"{verdict.gbps:g} Gb/s ({verdict.why})"
                           if verdict.gbps is not None else f"no result ({verdict.why})",
                           CRITICAL, f"{port} is slow: check its link (width and speed in "
                           "ibstat, the cable), its PCIe slot and its firmware")
        elif verdict.outcome == UNPROVEN:
            yield Mismatch(f"accept.rdma[{port}]", wanted, f"unproven: {verdict.why}", CRITICAL,
                           f"test {port} with another host on its rail: `racklift accept` with "
                           "more hosts of the rack, or --pair-with-active to use a pool host")
