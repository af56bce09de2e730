"""report.html: one static page per run beside report.json, rendered from its dict."""

from __future__ import annotations

import json
import re
from html import escape

import pytest

import small_run
from racklift import report_html
from racklift.pipeline import run_report
from racklift.pipeline.outcome import (
    FAILED,
    INTERRUPTED,
    JOINED,
    LOCKED,
    PLANNED,
    PREFLIGHT,
    SKIPPED,
    STAGED,
)
from racklift.report_view import PASSED
from racklift.verify import verdict_report


def section(page: str, title: str) -> str:
    """The page from the heading `title` to the next h2."""
    return page.split(f"<h2>{title}</h2>", 1)[1].split("<h2>", 1)[0]


@pytest.fixture
def page(tmp_path) -> str:
    return report_html.render(small_run.provision_report(tmp_path))


def test_planted_markup_in_a_host_name_and_a_failure_is_shown_only_escaped(tmp_path):
    out = report_html.render(small_run.provision_report(
        tmp_path, bad_name=small_run.HOSTILE, check=small_run.HOSTILE,
        found=small_run.HOSTILE))
    assert "<script" not in out and "<img" not in out and '"><img' not in out
    planted = escape(small_run.HOSTILE)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img src=x" in planted
    failed = section(out, "Failed hosts")
    assert failed.count(planted) == 3  # the heading, the check id, what was found
    assert planted in section(out, "Racks") and planted in section(out, "Stage times")


def test_the_summary_shows_the_hosts_per_result(page):
    assert section(page, "Summary") == (
        '<table class="summary"><tr><th>result</th><th>hosts</th></tr>'
        '<tr class="r-bad"><td>failed</td><td>1</td></tr>'
        '<tr class="r-ok"><td>joined</td><td>1</td></tr>'
        "<tr><th>all</th><th>2</th></tr></table>\n")


def test_the_refused_host_lists_each_failure_with_found_wanted_and_what_to_do(page):
    failed = section(page, "Failed hosts")
    assert "gpu-02 (R01 U5, failed)" in failed
    assert ("<tr><td>cable.wrong_peer[eth0]</td><td>leaf-2 swp7</td><td>leaf-1 swp1</td>"
            "<td>move the cable to leaf-1 swp1</td></tr>") in failed
    assert "<td>kernel.gpu_errors</td><td>CRITICAL: Xid 79 on GPU 3</td><td>OK</td>" in failed
    assert "gpu-01" not in failed  # it joined


def test_each_rack_unit_is_coloured_by_its_hosts_result_from_the_top_unit_down(page):
    units = re.findall(r'<li class="unit ([^"]*)"><span class="u">(\d+)</span>([^<]*)</li>',
                       section(page, "Racks"))
    assert units == [("r-bad", "5", "gpu-02 (failed)"), ("empty", "4", ""),
                     ("r-ok", "3", "gpu-01 (joined)"), ("empty", "2", ""), ("empty", "1", "")]
    assert "<h3>R01</h3>" in section(page, "Racks")


def test_hosts_without_a_position_or_rack_are_listed_below_a_rack(tmp_path):
    report = small_run.provision_report(tmp_path)
    report["hosts"][0]["position"] = None
    report["hosts"][1]["rack"] = report["hosts"][1]["position"] = None
    racks = section(report_html.render(report), "Racks")
    assert "<h3>R01</h3><ol class=\"units\"></ol><p>without a position:</p>" in racks
    assert '<li class="r-ok" title="joined">gpu-01 (joined)</li>' in racks
    assert '<h3>no rack</h3>' in racks
    assert '<li class="r-bad" title="failed">gpu-02 (failed)</li>' in racks


@pytest.mark.parametrize(("result", "colour"), [
    (JOINED, "r-ok"), (PASSED, "r-ok"), (FAILED, "r-bad"), (PREFLIGHT, "r-bad"),
    (SKIPPED, "r-skip"), (PLANNED, "r-plan"), (STAGED, "r-plan"), (LOCKED, "r-held"),
    (INTERRUPTED, "r-held"), ('x" onmouseover="alert(1)', "r-other")])
def test_each_result_has_its_colour_class_and_an_unknown_one_a_fixed_class(result, colour):
    assert report_html.result_class(result) == colour


def test_each_hosts_stage_bar_is_as_wide_as_its_seconds_on_one_scale(page):
    bars = re.findall(r'<span class="s-(\w+)" style="width:([\d.]+)%"', section(
        page, "Stage times"))
    # The longest host took 120 s: 60 s is half the bar's width.
    assert bars == [("configure", "50.0"), ("verify", "16.7"), ("accept", "33.3"),
                    ("configure", "16.7"), ("verify", "8.3")]


def test_the_page_fetches_nothing_and_runs_nothing(tmp_path):
    out = report_html.render(small_run.provision_report(tmp_path, bad_name=small_run.HOSTILE))
    for reference in ("http://", "https://", "//", "<script", "<link", "url(", "@import",
                      " src="):
        assert reference not in out.replace("&lt;img src=x", ""), reference
    assert "default-src 'none'; style-src 'unsafe-inline'" in out


def test_a_verify_run_shows_passed_failed_and_skipped_and_no_stage_times():
    out = report_html.render(small_run.verify_report())
    summary = section(out, "Summary")
    assert all(f"<td>{r}</td><td>{n}</td>" in summary
               for r, n in (("passed", 1), ("failed", 1), ("skipped", 0)))
    assert "cable.wrong_peer[eth0]" in section(out, "Failed hosts")
    assert "No stage times" in section(out, "Stage times")


def test_provision_writes_report_html_beside_report_json_from_the_same_data(tmp_path):
    run = small_run.provision_run(tmp_path)
    written = run_report.write(run, "rack=R01")
    assert written == tmp_path / "report.json"
    assert (tmp_path / "report.html").read_text() == report_html.render(
        json.loads(written.read_text()))


def test_verify_writes_report_html_beside_report_json_from_the_same_data(tmp_path):
    report, junit = verdict_report.write(tmp_path, small_run.verdicts(), "rack=R01", 12.5)
    assert (report, junit) == (tmp_path / "report.json", tmp_path / "junit.xml")
    html = (tmp_path / "report.html").read_text()
    assert html == report_html.render(json.loads(report.read_text()))
    assert "gpu-02 (R01 U5, failed)" in html
