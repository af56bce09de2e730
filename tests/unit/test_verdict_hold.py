"""Which verdicts the gate may write to NetBox (pure): only hosts the pipeline has handed over
(configured, not locked by another run) and whose status did not move while verify ran."""

from dataclasses import replace

import pytest

import emulated
from racklift.lifecycle.lock import Ticket
from racklift.text import JOURNAL_LINE, journal_line
from racklift.verify.check import CheckResult
from racklift.verify.mismatch import CRITICAL, WARNING, Mismatch
from racklift.verify.record_verdicts import InNetBox, busy, hold, recorded
from racklift.verify.verdict import HostVerdict, journal_text, skipped, target_status

OK = (CheckResult("gpu.ecc", "OK", "enabled"),)
BAD = (CheckResult("gpu.ecc", "CRITICAL", "uncorrected errors"),)
BOB = Ticket(lock_id=9, device_id=1, run="run-bob", owner="bob@ctl02.example", pid=77,
             verb="provision", created="2026-11-30T10:00:00Z")


def verdict(status="staged", checks=OK):
    return HostVerdict("gpu-001", 1, status, checks=checks)


def now(status="staged", stage="configured", holder=None):
    return InNetBox(status, stage, holder)


@pytest.mark.parametrize(("status", "checks", "mark", "written"), [
    ("staged", OK, False, True), ("staged", BAD, False, True),
    ("failed", OK, False, True), ("failed", BAD, False, True),
    ("active", OK, False, False), ("active", BAD, False, False),  # drift report only
    ("active", OK, True, False), ("active", BAD, True, True),  # --mark-failed demotes
    ("planned", OK, False, False), ("offline", BAD, True, False),
])
def test_recorded(status, checks, mark, written):
    assert recorded(verdict(status, checks), mark) is written


def test_a_configured_unlocked_host_is_written_pass_or_fail():
    assert hold(verdict(), now()) is None
    assert hold(verdict("failed", BAD), now("failed")) is None


@pytest.mark.parametrize("checks", [OK, BAD])
def test_a_host_locked_by_another_run_is_left_to_it(checks):
    why = hold(verdict(checks=checks), now(holder=BOB))
    assert why is not None and why.startswith("locked by bob@ctl02.example (provision run "
                                              "run-bob, pid 77)")
    assert why.endswith("left to that run")
    # Not another run's: the pipeline's own gate promotes the hosts it holds.
    assert hold(verdict(checks=checks), now(holder=BOB), run="run-bob") is None
    assert hold(verdict(checks=checks), now(holder=BOB), run="run-alice") is not None


@pytest.mark.parametrize(("stage", "shown"), [(None, "none"), ("imaged", "imaged")])
@pytest.mark.parametrize("status", ["staged", "failed"])
def test_a_host_not_configured_is_neither_promoted_nor_failed(stage, shown, status):
    for checks in (OK, BAD):
        assert hold(verdict(status, checks), now(status, stage)) == (
            f"last completed stage {shown}, not configured: left {status} until provision "
            "has configured it")


def test_a_host_whose_status_moved_meanwhile_is_left_as_it_is():
    assert hold(verdict(), now("offline")) == ("status changed to offline since verify "
                                               "started: left as it is")
    assert hold(verdict(), now(None)) == "no longer in NetBox"
    # Checked before the lock: whoever moved it, their change wins.
    assert hold(verdict(), now("offline", holder=BOB)).startswith("status changed")


def test_active_hosts_with_mark_failed_need_no_stage_but_respect_locks():
    failing = verdict("active", BAD)
    assert hold(failing, now("active", None), mark_active_failed=True) is None
    assert hold(failing, now("active", None, BOB), mark_active_failed=True) is not None
    # Not written at all without the flag: nothing to hold.
    assert hold(failing, now("active", None, BOB)) is None


def test_hosts_that_are_only_reported_are_never_held():
    assert hold(verdict("planned"), now("offline", None, BOB)) is None


def test_nothing_is_written_for_a_host_another_run_holds_whatever_its_status():
    # What --record-serials and --record-cables record: an active host whose verdict is only
    # reported is still another run's while it holds the lock (a re-image), and its own run's
    # is free.
    assert busy(verdict("active"), now("active", holder=BOB)) == (
        f"{BOB.describe()}: left to that run")
    assert busy(verdict("active"), now("active", holder=BOB), run="run-bob") is None
    assert busy(verdict("active"), now("active")) is None
    assert busy(verdict("staged"), now("staged", stage="imaged")) is not None
    assert busy(verdict("active"), now("offline")) == (
        "status changed to offline since verify started: left as it is")


def test_a_verified_host_awaiting_acceptance_is_gated_again():
    assert hold(verdict(), now(stage="verified")) is None
    assert hold(verdict("failed", BAD), now("failed", "verified")) is None


@pytest.mark.parametrize(("status", "checks", "admit", "target"), [
    ("staged", OK, True, "active"), ("staged", OK, False, "staged"),
    ("failed", OK, False, "staged"),  # passed again: back in the pipeline, not in the pool
    ("staged", BAD, False, "failed"), ("staged", BAD, True, "failed"),
])
def test_passing_admits_only_where_no_acceptance_follows(status, checks, admit, target):
    v = replace(verdict(status, checks), admit=admit)
    assert target_status(v) == target
    if v.passed:
        assert journal_text(v).endswith("healthy." if admit else "acceptance tests next.")


def test_warnings_are_the_non_critical_mismatches_and_warning_checks_and_do_not_fail():
    drift = Mismatch("device_type.model", "HGX", "HGX-B", WARNING, "check the device type")
    missing = Mismatch("gpus.count", 8, 7, CRITICAL, "reseat")
    hot = CheckResult("disk.space", "WARNING", "/ 10% free")
    v = HostVerdict("gpu-001", 1, "staged", mismatches=(drift,), checks=(*OK, hot))
    assert v.warnings == [str(drift), str(hot)] and v.failures == []
    assert v.passed and "- warning: device_type.model" in journal_text(v)
    failing = replace(v, mismatches=(drift, missing))
    assert failing.warnings == [str(drift), str(hot)] and failing.failures == [str(missing)]


def test_a_host_of_another_status_is_skipped_neither_passed_nor_failed():
    v = skipped(replace(emulated.expected_host(), status="planned"))
    assert v.skipped == "status planned: only staged, failed, active hosts are verified"
    assert not v.passed and not v.failed and not recorded(v)


def test_an_active_host_is_only_reported_unless_marking_failed_is_asked_for():
    assert recorded(verdict("active", BAD)) is False
    assert hold(verdict("active", BAD), now("active", stage=None)) is None


def test_a_journal_line_of_exactly_the_limit_is_kept_whole_one_longer_is_cut():
    assert journal_line("x" * JOURNAL_LINE) == "x" * JOURNAL_LINE
    assert journal_line("x" * (JOURNAL_LINE + 1)) == "x" * JOURNAL_LINE + " [...]"


def test_a_journal_line_keeps_a_thousand_characters_of_what_a_host_said():
    line = journal_line("\x00" + "y" * 2000)  # the NUL written out counts: "\\x00"
    assert line == "\\x00" + "y" * 996 + " [...]"
    assert len(line) == 1000 + len(" [...]")
