"""racklift's NetBox plugin, its pure part (netbox-racklift/netbox_racklift/reading.py, loaded
on its own: the rest of the plugin needs NetBox): the device's racklift_result read whatever
it holds, hosts counted per state, failures grouped by cause, racks drawn unit by unit. And
the field as racklift writes it (racklift.lifecycle.result), read back by the plugin."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from racklift.lifecycle import lock, state
from racklift.lifecycle import result as result_field
from racklift.netbox import bootstrap
from racklift.netbox.desired import Acceptance
from racklift.pipeline.accept_stage import HostAcceptance
from racklift.verify.failures import verdict_failures

SOURCE = (Path(__file__).resolve().parents[2] / "netbox-racklift" / "netbox_racklift"
          / "reading.py")
_spec = importlib.util.spec_from_file_location("racklift_plugin_reading", SOURCE)
assert _spec and _spec.loader
reading = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = reading  # dataclasses look their module up
_spec.loader.exec_module(reading)

XID = {"name": "kernel.gpu_errors", "status": "CRITICAL", "detail": "XID 79 on GPU 3"}
VERDICT = {"passed": False, "failed": True, "problems": [], "error": None,
           "mismatches": [
               {"field": "cable.wrong_peer[eth1]", "expected": "leaf-01 swp2",
                "observed": "leaf-01 swp7", "severity": "critical", "hint": "move the cable"},
               {"field": "cable.wrong_peer[eth2]", "expected": "leaf-01 swp3",
                "observed": "leaf-01 swp9", "severity": "critical", "hint": "move the cable"},
               {"field": "gpu.count", "expected": 8, "observed": 8, "severity": "info",
                "hint": "-"}],
           "checks": [XID, {"name": "gpu.ecc", "status": "OK", "detail": "enabled"}]}


def host(name, status, value=None, position=None, height=1, ours=True, rack="R1"):
    return reading.Host(name, f"/dcim/devices/{name}/", rack, position, height, status, None,
                        ours, reading.result(value))


def test_a_verdict_written_by_racklift_reads_back_with_every_mismatch_check_and_cause():
    got = reading.result(result_field.of_verdict(VERDICT, verdict_failures(VERDICT), "run-7"))
    assert got.last["result"] == "failed" and got.last["run"] == "run-7"
    assert [(f["check"], f["cause"], f["found"], f["wanted"]) for f in got.failures] == [
        ("cable.wrong_peer[eth1]", "cable.wrong_peer", "leaf-01 swp7", "leaf-01 swp2"),
        ("cable.wrong_peer[eth2]", "cable.wrong_peer", "leaf-01 swp9", "leaf-01 swp3"),
        ("kernel.gpu_errors", "kernel.gpu_errors", "CRITICAL: XID 79 on GPU 3", "OK")]
    # Every mismatch, not only the critical ones; every check, passing ones too.
    assert [m["field"] for m in got.verdict["mismatches"]] == [
        "cable.wrong_peer[eth1]", "cable.wrong_peer[eth2]", "gpu.count"]
    assert got.verdict["mismatches"][2]["expected"] == "8"
    assert [c["status"] for c in got.verdict["checks"]] == ["CRITICAL", "OK"]
    assert set(reading.port_findings(got.verdict)) == {"eth1", "eth2"}


def test_sections_are_replaced_one_at_a_time_and_the_others_kept():
    verdict = result_field.of_verdict(VERDICT, verdict_failures(VERDICT), "run-1")
    accepted = result_field.of_acceptance(
        True, "2026-12-04 passed: nccl 480 GB/s (>= 350)",
        [{"test": "NCCL all-reduce bus bandwidth", "figure": "480 GB/s",
          "threshold": ">= 350 GB/s", "passed": True}], [], "run-2")
    value = result_field.merged(result_field.merged(None, verdict), accepted)
    got = reading.result(value)
    assert got.verdict["run"] == "run-1" and got.acceptance["run"] == "run-2"
    assert got.last["stage"] == "accept" and got.last["result"] == "passed"
    assert got.acceptance["rows"][0]["passed"] is True
    # A stage failing later names itself as the cause, and keeps the verdict to look at.
    value = result_field.merged(value, result_field.of_stage_failure("configure", "ssh", "r3"))
    got = reading.result(value)
    assert [f["cause"] for f in got.failures] == ["stage.configure"]
    assert got.verdict["run"] == "run-1"
    assert set(result_field.merged({"junk": 1, "last": {}}, {})) == {"last"}


@pytest.mark.parametrize("value", [None, "text", 7, [], {"last": "x"}, {"last": {"failures": 3}},
                                   {"verdict": {"mismatches": ["x", {"field": None}]}}])
def test_a_field_racklift_did_not_write_reads_as_what_can_be_read(value):
    got = reading.result(value)
    assert isinstance(got.failures, list)
    if got.verdict:
        assert got.verdict["mismatches"] == [{"field": "-", "observed": "-", "expected": "-",
                                              "severity": "-", "hint": "-"}]


def test_hosts_per_state_and_failures_by_cause_count_each_host_once():
    xid = {"last": {"result": "failed", "failures": [
        {"check": "kernel.gpu_errors", "cause": "kernel.gpu_errors"}]}}
    cables = {"last": {"result": "failed", "failures": [
        {"check": "cable.wrong_peer[eth1]", "cause": "cable.wrong_peer"},
        {"check": "cable.wrong_peer[eth2]", "cause": "cable.wrong_peer"},
        {"check": "kernel.gpu_errors", "cause": "kernel.gpu_errors"}]}}
    hosts = [host("a", "active"), host("b", "failed", xid), host("c", "failed", cables),
             host("d", "planned"), host("leaf", "active", ours=False),
             # Failed long ago, active now: no longer a failure.
             host("e", "active", xid)]
    assert reading.counts(hosts) == [("in the pool", "success", 2), ("refused", "danger", 2),
                                     ("planned", "secondary", 1)]
    assert [(c.cause, [h.name for h in c.hosts]) for c in reading.causes(hosts)] == [
        ("kernel.gpu_errors", ["b", "c"]), ("cable.wrong_peer", ["c"])]


def test_a_rack_is_drawn_from_the_top_with_each_host_over_its_units():
    drawn = reading.draw("R1", 6, [host("two-u", "failed", position=2, height=2),
                                   host("top", "active", position=6),
                                   host("switch", "active", position=1, ours=False),
                                   host("loose", "planned")])
    rows = [(u.number, u.host.name if u.host else None, u.span, u.covered, u.colour)
            for u in drawn.units]
    assert rows == [(6, "top", 1, False, "success"), (5, None, 1, False, ""),
                    (4, None, 1, False, ""), (3, "two-u", 2, False, "danger"),
                    (2, None, 1, True, ""), (1, "switch", 1, False, "light")]
    assert [h.name for h in drawn.unracked] == ["loose"]


def test_the_run_is_the_newest_pipeline_entry_s():
    assert reading.last_run(["racklift lock: released", "racklift provision (run 2026-x-ab): "
                             "configured", "racklift verify (run old): failed"]) == "2026-x-ab"
    assert reading.last_run(["racklift verify: passed"]) is None


def test_acceptance_rows_put_each_figure_beside_its_threshold():
    got = HostAcceptance("gpu-01", Acceptance(dcgm_level=2, nccl_busbw=350.0, rdma_gbps=370.0),
                         (), {"dcgm": {"level": 2, "result": "pass"}, "nccl_busbw": 480.5,
                              "rdma": {"mlx5_1": {"gbps": 120.0, "outcome": "fail"},
                                       "mlx5_0": {"gbps": 390.2, "outcome": "pass"}}})
    assert got.rows() == [
        {"test": "DCGM diag level 2", "figure": "pass", "threshold": "pass", "passed": True},
        {"test": "NCCL all-reduce bus bandwidth", "figure": "480.5 GB/s",
         "threshold": ">= 350 GB/s", "passed": True},
        {"test": "RDMA ib_write_bw mlx5_0", "figure": "390.2 Gb/s", "threshold": ">= 370 Gb/s",
         "passed": True},
        {"test": "RDMA ib_write_bw mlx5_1", "figure": "120 Gb/s", "threshold": ">= 370 Gb/s",
         "passed": False}]
    shown = reading.result(result_field.merged(None, got.result("run-9")))
    assert [r["passed"] for r in shown.acceptance["rows"]] == [True, True, True, False]


def test_the_plugin_reads_the_names_racklift_writes():
    """views.py (which needs NetBox to import) names racklift's fields, lock and role as
    racklift does."""
    tree = ast.parse((SOURCE.parent / "views.py").read_text())
    names = {node.targets[0].id: node.value.value for node in tree.body
             if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
             and isinstance(node.value, ast.Constant)}
    assert names["STAGE_FIELD"] == state.STAGE_FIELD
    assert names["VERIFIED_FIELD"] == state.VERIFIED_FIELD
    assert names["RESULT_FIELD"] == result_field.RESULT_FIELD
    assert names["ACCEPTANCE_FIELD"] == state.ACCEPTANCE_FIELD
    assert (names["LOCK_PREFIX"], names["LOCK_HOLDER"]) == (lock.NAME_PREFIX, lock.HOLDER)
    assert bootstrap.ROLE_GPU_SERVER in (SOURCE.parent / "__init__.py").read_text()
