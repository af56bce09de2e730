"""A small fixed run, as report.json has it, for the renderers' tests: two hosts of rack R01,
one joined (stage times, acceptance figures), one refused by verify on two causes; a verify
run of the same two hosts; and a host name to plant where text from NetBox goes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import emulated
from racklift.lifecycle.stages import ACCEPT, CONFIGURE, VERIFY
from racklift.netbox.desired import Acceptance
from racklift.pipeline import run_report
from racklift.pipeline.accept_stage import HostAcceptance
from racklift.pipeline.outcome import FAILED, JOINED, HostRun, PipelineRun
from racklift.pipeline.plan import HostPlan
from racklift.verify import verdict_report
from racklift.verify.check import CRITICAL as CHECK_CRITICAL
from racklift.verify.check import OK, CheckResult
from racklift.verify.mismatch import CRITICAL, Mismatch
from racklift.verify.verdict import HostVerdict

GENERATED_AT = "2026-01-02T03:04:05Z"  # 1767323045 as Unix time
HOSTILE = 'gpu-"quoted"\\back\nslash<script>alert(1)</script>"><img src=x onerror=alert(2)>'
HOST = emulated.expected_host()


def verdicts(bad_name: str = "gpu-02", check: str = "kernel.gpu_errors",
             found: str = "leaf-2 swp7") -> list[HostVerdict]:
    good = HostVerdict("gpu-01", 1, "staged", checks=(CheckResult("ecc", OK, "no errors"),),
                       rack="R01", position=3.0)
    bad = HostVerdict(bad_name, 2, "staged", mismatches=(
        Mismatch("cable.wrong_peer[eth0]", "leaf-1 swp1", found, CRITICAL,
                 "move the cable to leaf-1 swp1"),), checks=(
        CheckResult(check, CHECK_CRITICAL, "Xid 79 on GPU 3"),
        CheckResult("ecc", OK, "no errors")), rack="R01", position=5.0)
    return [good, bad]


def provision_run(run_dir: Path, **planted: str) -> PipelineRun:
    """`planted`: what `verdicts` takes, in place of the refused host's name and texts."""
    good_verdict, bad_verdict = verdicts(**planted)
    bad_name = bad_verdict.host
    stages = HostPlan((CONFIGURE, VERIFY, ACCEPT))
    joined = HostRun(replace(HOST, name="gpu-01", rack="R01", position=3.0, parsed=None),
                     stages, "imaged", result=JOINED, reached=ACCEPT, verdict=good_verdict,
                     seconds=120.0, timings={CONFIGURE: 60.0, VERIFY: 20.0, ACCEPT: 40.0},
                     acceptance=HostAcceptance("gpu-01", Acceptance(2, 150.0, 350.0), (), {
                         "dcgm": {"level": 2, "result": "pass"}, "nccl_busbw": 180.5,
                         "rdma": {"mlx5_0": {"gbps": 392.0, "outcome": "pass", "why": ""}}}))
    refused = HostRun(replace(HOST, name=bad_name, netbox_id=2, rack="R01", position=5.0,
                              parsed=None),
                      stages, "imaged", verdict=bad_verdict, seconds=30.0,
                      timings={CONFIGURE: 20.0, VERIFY: 10.0})
    refused.fail(VERIFY, "; ".join(bad_verdict.failures))
    assert refused.result == FAILED
    return PipelineRun("run-1", "provision", [joined, refused], run_dir, 150.0)


def provision_report(run_dir: Path, **planted: str) -> dict[str, Any]:
    return {**run_report.to_json(provision_run(run_dir, **planted), "rack=R01"),
            "generated_at": GENERATED_AT}


def verify_report(**planted: str) -> dict[str, Any]:
    return {**verdict_report.to_json(verdicts(**planted), "rack=R01", 12.5),
            "generated_at": GENERATED_AT}
