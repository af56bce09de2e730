"""The lock that serialises starting a machine-wide service (PostgreSQL, a Redis port).

On a fresh CI machine both test lanes started the stopped PostgreSQL cluster at once and one
lane's NetBox tests all failed on the other's half-written postmaster.pid. The lock must hold
across processes that were given different cache directories (a demo beside the tests).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HOLDER = """
import pathlib, sys, time
from racklift.paths import machine_lock
with machine_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
    pathlib.Path(sys.argv[3]).write_text("released")
"""


def _hold(name: str, seconds: float, cache: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "RACKLIFT_CACHE": str(cache), "RACKLIFT_STATE": str(cache / "state")}
    marker = cache / "released"
    child = subprocess.Popen([sys.executable, "-c", HOLDER, name, str(seconds), str(marker)],
                             env=env,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def test_a_second_process_with_another_cache_waits_for_the_first(tmp_path, monkeypatch):
    from racklift.paths import machine_lock

    name = f"test-{os.getpid()}-{time.monotonic_ns()}"
    (tmp_path / "a").mkdir()
    child = _hold(name, 2.0, tmp_path / "a")
    monkeypatch.setenv("RACKLIFT_CACHE", str(tmp_path / "b"))
    with machine_lock(name):
        # Entered only once the holder had finished its block.
        assert (tmp_path / "a" / "released").read_text() == "released"
    assert child.wait(timeout=10) == 0


def test_different_names_do_not_wait_for_each_other(tmp_path):
    from racklift.paths import machine_lock

    name = f"test-{os.getpid()}-{time.monotonic_ns()}"
    child = _hold(name, 30.0, tmp_path)  # never releases within the test
    try:
        started = time.monotonic()
        with machine_lock(name + "-other"):
            assert time.monotonic() - started < 5
    finally:
        child.kill()
        child.wait()
