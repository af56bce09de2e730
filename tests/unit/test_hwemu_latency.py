"""The emulator's latency tables (racklift.lab.hwemu.latency): the longest entry that begins an
invocation sets how long it takes, and the tool sleeps that long before it answers."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from racklift.lab import hwemu
from racklift.lab.hwemu.latency import REALISTIC, delay


@pytest.mark.parametrize(("tool", "args", "seconds"), [
    ("nvidia-smi", ["-q", "-x"], 6.0),
    ("nvidia-smi", ["--query-gpu=index,uuid", "--format=csv"], 0.44),
    ("nvidia-smi", ["--query-gpu", "index"], 0.44),
    ("nvidia-smi", ["topo", "-m"], 1.32),
    ("nvidia-smi", [], 0.017),
    ("nvidia-smi", ["-L"], 0.017),  # no entry of its own: plain nvidia-smi's
    ("dcgmi", ["diag", "-r", "2", "-j"], 120.0),
    ("dcgmi", ["discovery", "-l"], 0.0),  # no entry: at once
    ("ib_write_bw", ["-d", "mlx5_0"], 0.0),
])
def test_the_longest_entry_that_begins_the_invocation_counts(tool, args, seconds):
    assert delay(REALISTIC, tool, args) == seconds


def test_no_table_answers_at_once_and_a_negative_entry_is_none():
    assert delay({}, "nvidia-smi", ["-q", "-x"]) == 0.0
    assert delay({"ibstat": -4}, "ibstat", []) == 0.0
    # A word of the entry must be a whole argument: -q does not begin -qx.
    assert delay({"nvidia-smi -q": 1.0}, "nvidia-smi", ["-qx"]) == 0.0


def test_the_tool_sleeps_its_latency_before_it_answers(tmp_path: Path, monkeypatch,
                                                         capsys):
    profile = hwemu.generate_profile("gpu-a01", "S421GE0001X0001", 7)
    path = tmp_path / "hw.json"
    monkeypatch.setenv(hwemu.PROFILE_ENV, str(path))
    hwemu.save_profile(dataclasses.replace(profile, latency={"ibstat": 0.4}), str(path))
    started = time.monotonic()
    assert hwemu.main(["ibstat"]) == 0
    assert time.monotonic() - started >= 0.4
    assert capsys.readouterr().out.startswith("CA 'mlx5_0'")
    # The table survives the profile's round trip through JSON.
    assert hwemu.load_profile(str(path)).latency == {"ibstat": 0.4}
