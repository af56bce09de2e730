"""The metrics file (--metrics-file): Prometheus text exposition format for node_exporter's
textfile collector, rendered from report.json's dict."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import small_run
from racklift import metrics
from racklift.errors import RackliftError
from racklift.lifecycle.stages import ACCEPT
from racklift.netbox.desired import Acceptance
from racklift.pipeline import run_report
from racklift.pipeline.accept_stage import HostAcceptance
from racklift.tasks.common import publish_metrics, saved_report
from racklift.tasks.pipeline import accept, provision, reimage
from racklift.tasks.verify import verify
from racklift.verify.mismatch import CRITICAL, Mismatch

COMMON = 'verb="provision",selection="rack=R01"'
EXPECTED = f"""\
# HELP racklift_run_timestamp_seconds When the run's report was written, as Unix time.
# TYPE racklift_run_timestamp_seconds gauge
racklift_run_timestamp_seconds{{{COMMON}}} 1767323045.0
# HELP racklift_run_duration_seconds How long the run took.
# TYPE racklift_run_duration_seconds gauge
racklift_run_duration_seconds{{{COMMON}}} 150.0
# HELP racklift_run_ok 1 when every host worked on passed (verify) or joined, 0 otherwise.
# TYPE racklift_run_ok gauge
racklift_run_ok{{{COMMON}}} 0
# HELP racklift_hosts Hosts of the run, by the result they ended it with.
# TYPE racklift_hosts gauge
racklift_hosts{{{COMMON},result="failed"}} 1
racklift_hosts{{{COMMON},result="joined"}} 1
# HELP racklift_host_failures Hosts of the run failing a check, by check id (its port or GPU \
left out).
# TYPE racklift_host_failures gauge
racklift_host_failures{{{COMMON},cause="cable.wrong_peer"}} 1
racklift_host_failures{{{COMMON},cause="kernel.gpu_errors"}} 1
# HELP racklift_host_info Each host's result and rack in the run (always 1).
# TYPE racklift_host_info gauge
racklift_host_info{{{COMMON},host="gpu-01",rack="R01",result="joined"}} 1
racklift_host_info{{{COMMON},host="gpu-02",rack="R01",result="failed"}} 1
# HELP racklift_host_duration_seconds How long the run worked on the host.
# TYPE racklift_host_duration_seconds gauge
racklift_host_duration_seconds{{{COMMON},host="gpu-01"}} 120.0
racklift_host_duration_seconds{{{COMMON},host="gpu-02"}} 30.0
# HELP racklift_stage_duration_seconds How long each stage took on the host.
# TYPE racklift_stage_duration_seconds gauge
racklift_stage_duration_seconds{{{COMMON},host="gpu-01",stage="configure"}} 60.0
racklift_stage_duration_seconds{{{COMMON},host="gpu-01",stage="verify"}} 20.0
racklift_stage_duration_seconds{{{COMMON},host="gpu-01",stage="accept"}} 40.0
racklift_stage_duration_seconds{{{COMMON},host="gpu-02",stage="configure"}} 20.0
racklift_stage_duration_seconds{{{COMMON},host="gpu-02",stage="verify"}} 10.0
# HELP racklift_acceptance_passed 1 when the host passed its acceptance tests, 0 when it \
failed them.
# TYPE racklift_acceptance_passed gauge
racklift_acceptance_passed{{{COMMON},host="gpu-01"}} 1
# HELP racklift_acceptance_dcgm_passed 1 when DCGM's diagnostic passed on the host at the \
level asked, 0 otherwise.
# TYPE racklift_acceptance_dcgm_passed gauge
racklift_acceptance_dcgm_passed{{{COMMON},host="gpu-01",level="2"}} 1
# HELP racklift_acceptance_nccl_bus_bandwidth_bytes_per_second NCCL all-reduce average bus \
bandwidth on the host (nccl-tests' busbw).
# TYPE racklift_acceptance_nccl_bus_bandwidth_bytes_per_second gauge
racklift_acceptance_nccl_bus_bandwidth_bytes_per_second{{{COMMON},host="gpu-01"}} \
180500000000.0
# HELP racklift_acceptance_rdma_bandwidth_bytes_per_second RDMA write bandwidth of the host's \
HCA port with its partners (ib_write_bw).
# TYPE racklift_acceptance_rdma_bandwidth_bytes_per_second gauge
racklift_acceptance_rdma_bandwidth_bytes_per_second{{{COMMON},host="gpu-01",port="mlx5_0"}} \
49000000000.0
"""

# The exposition format's grammar (prometheus.io/docs/instrumenting/exposition_formats).
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
VALUE = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|Inf|NaN)"
SAMPLE = re.compile(rf"({NAME})(?:\{{(?:{LABEL}(?:,{LABEL})*)?\}})? {VALUE}")
HELP = re.compile(rf"# HELP ({NAME}) (?:[^\\\n]|\\[\\n])*")
TYPE = re.compile(rf"# TYPE ({NAME}) (counter|gauge|histogram|summary|untyped)")


def assert_exposition_format(text: str) -> None:
    """Every line a HELP, TYPE or sample line; each family HELP then TYPE, then its samples,
    and never again."""
    assert text.endswith("\n")
    seen: list[str] = []
    state = ""  # the family being read, and what came of it: "help", "type"
    for line in text.removesuffix("\n").split("\n"):
        if m := HELP.fullmatch(line):
            assert m[1] not in seen, f"{m[1]} repeats"
            seen.append(m[1])
            state = "help"
        elif m := TYPE.fullmatch(line):
            assert (m[1], state) == (seen[-1], "help"), line
            state = "type"
        else:
            m = SAMPLE.fullmatch(line)
            assert m, f"not a sample line: {line!r}"
            assert (m[1], state) == (seen[-1], "type"), f"{line!r} is not under its TYPE line"


@pytest.fixture
def provision_report(tmp_path: Path) -> dict:
    return small_run.provision_report(tmp_path)


def test_a_small_provision_run_renders_exactly_these_lines(provision_report):
    assert metrics.render(provision_report) == EXPECTED
    assert_exposition_format(EXPECTED)


def test_a_verify_run_counts_hosts_per_result_and_failing_hosts_per_check_id():
    out = metrics.render(small_run.verify_report()).splitlines()
    common = 'verb="verify",selection="rack=R01"'
    assert [line for line in out if line.startswith(("racklift_hosts", "racklift_host_fail"))] \
        == [f'racklift_hosts{{{common},result="failed"}} 1',
            f'racklift_hosts{{{common},result="passed"}} 1',
            f'racklift_hosts{{{common},result="skipped"}} 0',
            f'racklift_host_failures{{{common},cause="cable.wrong_peer"}} 1',
            f'racklift_host_failures{{{common},cause="kernel.gpu_errors"}} 1']
    assert f"racklift_run_duration_seconds{{{common}}} 12.5" in out
    # verify times no stages and runs no acceptance tests: those families are left out.
    assert not [line for line in out if "stage_duration" in line or "acceptance" in line]
    assert_exposition_format("\n".join(out) + "\n")


def test_a_host_failing_acceptance_counts_under_the_figure_it_missed(tmp_path):
    run = small_run.provision_run(tmp_path)
    slow = run.hosts[0]
    slow.acceptance = HostAcceptance(slow.name, Acceptance(nccl_busbw=150.0), (
        Mismatch("accept.nccl.busbw", ">= 150 GB/s", "120 GB/s", CRITICAL, "check NVLink"),),
        {"nccl_busbw": 120.0})
    slow.fail(ACCEPT, "; ".join(slow.acceptance.failures))
    out = metrics.render(run_report.to_json(run, "rack=R01")).splitlines()
    assert f'racklift_host_failures{{{COMMON},cause="accept.nccl.busbw"}} 1' in out
    assert f'racklift_acceptance_passed{{{COMMON},host="gpu-01"}} 0' in out
    assert (f"racklift_acceptance_nccl_bus_bandwidth_bytes_per_second{{{COMMON},"
            'host="gpu-01"} 120000000000.0') in out


def test_a_host_failing_outside_the_gate_counts_under_its_stage_or_its_result(tmp_path):
    report = small_run.provision_report(tmp_path)
    imaged, locked = report["hosts"]
    imaged.update(result="failed", stage_reached="image", error="boot server: no answer",
                  verdict=None, acceptance=None)
    locked.update(result="locked", stage_reached="select", error="held by run-0", verdict=None)
    report["summary"] = {"hosts": 2, "failed": 1, "locked": 1}
    assert [line for line in metrics.render(report).splitlines()
            if line.startswith("racklift_host_failures")] == [
        f'racklift_host_failures{{{COMMON},cause="result.locked"}} 1',
        f'racklift_host_failures{{{COMMON},cause="stage.image"}} 1']


def test_planted_label_values_stay_one_escaped_sample_line(tmp_path):
    text = metrics.render(small_run.provision_report(
        tmp_path, bad_name=small_run.HOSTILE, check=small_run.HOSTILE))
    assert_exposition_format(text)
    escaped = (r'gpu-\"quoted\"\\back\nslash<script>alert(1)</script>\"><img src=x '
               r'onerror=alert(2)>')
    assert (f'racklift_host_info{{{COMMON},host="{escaped}",rack="R01",result="failed"}} 1'
            in text.splitlines())
    assert f'racklift_host_failures{{{COMMON},cause="{escaped}"}} 1' in text.splitlines()


def test_the_label_escape_is_backslash_quote_and_newline_only():
    assert metrics.escape('a\\b"c\nd\te') == 'a\\\\b\\"c\\nd\te'


def test_a_report_read_back_from_its_json_renders_the_same(provision_report):
    # The tasks render the report.json the run wrote, not the objects it was made from.
    assert metrics.render(json.loads(json.dumps(provision_report, default=str))) == EXPECTED


def test_the_file_is_written_beside_its_place_and_renamed_over_it(tmp_path, monkeypatch):
    target = tmp_path / "textfile" / "racklift-provision.prom"
    target.parent.mkdir()
    target.write_text("old\n")
    renamed = []
    real_replace = os.replace

    def replace(source, destination):
        renamed.append((Path(source).parent, Path(source).name.endswith(".prom"),
                        Path(source).read_text(), target.read_text()))
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", replace)
    metrics.write(target, EXPECTED)
    # Written in full in the same directory (same filesystem: an atomic rename), under a name
    # the textfile collector does not read, while the old file was still whole.
    assert renamed == [(target.parent, False, EXPECTED, "old\n")]
    assert target.read_text() == EXPECTED
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)
    assert [p.name for p in target.parent.iterdir()] == [target.name]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "racklift.prom"
    target.write_text("old\n")

    def refuse(source, destination):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(RackliftError, match=r"cannot write the metrics file .*racklift\.prom: "
                                            r"Permission denied"):
        metrics.write(target, EXPECTED)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


@pytest.mark.parametrize("command", [verify, provision, reimage, accept])
def test_every_command_that_reports_a_run_takes_a_metrics_file_with_help(command):
    assert "metrics_file" in command.help
    assert "Prometheus" in command.help["metrics_file"]


def test_the_tasks_write_the_metrics_of_the_saved_report_only_when_asked(tmp_path):
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(small_run.provision_report(tmp_path), default=str))
    publish_metrics(None, saved_report(saved))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
    publish_metrics(str(tmp_path / "out.prom"), saved_report(saved))
    assert (tmp_path / "out.prom").read_text() == EXPECTED


def test_a_report_that_cannot_be_read_is_an_operator_error(tmp_path):
    with pytest.raises(RackliftError, match="cannot read the run's report"):
        saved_report(tmp_path / "report.json")
