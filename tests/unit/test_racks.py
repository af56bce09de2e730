"""Racks at once (racklift.pipeline.racks): the limits hold, a full site never holds back
another, one rack's trouble never stops the others."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from racklift.errors import RackliftError
from racklift.pipeline.racks import Limits, next_ready, run_all


def site(item: str) -> str:
    return item[0]


def test_the_first_waiting_rack_whose_site_has_room_starts():
    limits = Limits(total=3, per_site=2)
    assert next_ready(["a1", "a2", "b1"], {}, limits, site) == "a1"
    # Site a is full: b1 goes first although a3 waited longer.
    assert next_ready(["a3", "b1"], {"a": 2}, limits, site) == "b1"
    assert next_ready(["a3"], {"a": 2}, limits, site) is None
    # The run is full.
    assert next_ready(["b1"], {"a": 2, "c": 1}, limits, site) is None
    assert next_ready([], {}, limits, site) is None


@pytest.mark.parametrize(("total", "per_site", "flag"), [
    (0, 4, "--parallel-racks"), (4, 0, "--racks-per-site"), (-1, 4, "--parallel-racks")])
def test_a_limit_below_one_rack_is_refused(total, per_site, flag):
    with pytest.raises(RackliftError, match=f"^{flag} takes a whole number of racks from 1"):
        Limits(total, per_site)


def test_racks_run_at_once_within_the_limits():
    guard = threading.Lock()
    running: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    done: list[str] = []
    # The first three can only all get here if they run at once.
    first_wave = threading.Barrier(3, timeout=10)

    def work(item: str) -> None:
        with guard:
            for key in (site(item), "all"):
                running[key] += 1
                peak[key] = max(peak[key], running[key])
        if item in ("a1", "a2", "b1"):
            first_wave.wait()
        time.sleep(0.02)
        with guard:
            for key in (site(item), "all"):
                running[key] -= 1
            done.append(item)

    run_all(["a1", "a2", "a3", "b1", "b2"], work, site, Limits(total=3, per_site=2))
    assert sorted(done) == ["a1", "a2", "a3", "b1", "b2"]
    assert (peak["all"], peak["a"]) == (3, 2) and peak["b"] <= 2


def test_one_rack_at_a_time_keeps_the_order():
    done: list[str] = []
    run_all(["b2", "a1", "b1"], done.append, site, Limits(total=1, per_site=4))
    assert done == ["b2", "a1", "b1"]


def test_what_one_rack_raises_is_raised_after_the_others_finished():
    done: list[str] = []

    def work(item: str) -> None:
        if item == "a1":
            raise ValueError("a bug met in rack a1")
        time.sleep(0.05)
        done.append(item)

    with pytest.raises(ValueError, match="rack a1"):
        run_all(["a1", "a2", "b1"], work, site, Limits(total=2, per_site=2))
    assert sorted(done) == ["a2", "b1"]


@pytest.mark.parametrize(("given", "message"), [
    (("two", None), "error: --parallel-racks takes a whole number of racks, not 'two'"),
    ((None, "0"), "error: --racks-per-site takes a whole number of racks from 1, not 0")])
def test_the_flags_refuse_what_is_no_number_of_racks(given, message):
    from invoke.exceptions import Exit

    from racklift.tasks.pipeline import _limits

    assert _limits(None, None) == Limits()
    assert _limits("8", "2") == Limits(total=8, per_site=2)
    with pytest.raises(Exit) as caught:
        _limits(*given)
    assert caught.value.code == 2 and str(caught.value.message).startswith(message)
