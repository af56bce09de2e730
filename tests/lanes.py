"""The whole suite in lanes side by side: `invoke test` with no selection.

A VM under TCG keeps one core busy for minutes while the controller mostly waits on it, so run
serially the suite leaves the machine's second core idle for most of the VM tier. The VM tier
(with half the Molecule scenarios, to even the lanes out) runs in a lane of its own, beside the
rest, each lane a pytest session with its own test NetBox (instance, port, Redis databases:
tests/integration/conftest.py reads them from the environment). What both lanes build (images,
stand-in repositories, the NetBox dump) is built once, under a lock
(racklift.paths.cache_lock). Lanes share no lab rack: each module names its own.

Each lane's lines are printed as they come, behind the lane's name; the end prints each lane's
result and one closing line for the whole run. Exit status: 0 when every lane passed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = ROOT / ".venv" / "bin" / "pytest"


@dataclass(frozen=True)
class Lane:
    name: str
    markers: str  # the lane's tests, a marker expression
    env: dict[str, str] = field(default_factory=dict)


# What is marked vm_lane beside the VM tier evens the two lanes out: some roles' Molecule
# scenarios (test_molecule.VM_LANE) and two NetBox/container modules (test_installed_software,
# test_warm_inventory). Each lane has its own lab network (RACKLIFT_TEST_NET, helpers.TEST_NET),
# so a container module may run in either. Measured as CI runs it on a two-core AMD EPYC
# (2026-12-04): vm lane 3,499 s, the other 4,328 s, before the VM lane lost the deploy test's own
# VM (the whole run deploys through the same ramdisk) and took container_runtime's scenario and
# those two modules (about 560 s of the other lane's time); after, vm 3,226 s and the other
# 3,434 s (039f1a6, `.ci/run` 3,537 s).
LANES = (
    Lane("vm", "vm or vm_lane", {"RACKLIFT_TEST_NETBOX": "testvm",
                                 "RACKLIFT_TEST_NETBOX_PORT": "18002",
                                 "RACKLIFT_TEST_REDIS_BASE": "4", "RACKLIFT_TEST_NET": "1"}),
    Lane("rest", "not vm and not vm_lane"),
)


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.passed + other.passed, self.failed + other.failed,
                      self.errors + other.errors, self.skipped + other.skipped)

    def line(self) -> str:
        text = f"{self.passed} passed, {self.failed + self.errors} failed"
        return f"{text}, {self.skipped} skipped" if self.skipped else text


def counts(junit: Path) -> Counts:
    """The lane's outcome from pytest's JUnit XML (what its closing line says, machine-read)."""
    if not junit.exists():
        return Counts()
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = Counts()
    for suite in suites:
        tests, failures, errors, skipped = (int(suite.get(k, 0)) for k in
                                            ("tests", "failures", "errors", "skipped"))
        total += Counts(tests - failures - errors - skipped, failures, errors, skipped)
    return total


def _pump(lane: Lane, stream, log, lock: threading.Lock) -> None:
    for line in stream:
        log.write(line)
        with lock:
            sys.stdout.write(f"[{lane.name}] {line}")
            sys.stdout.flush()


def run(lanes: tuple[Lane, ...] = LANES, extra: list[str] | None = None,
        work: Path | None = None) -> int:
    """Every lane at once; each lane's log and JUnit XML are kept in `work` (a new temporary
    directory by default) for a look after the run."""
    work = work or Path(tempfile.mkdtemp(prefix="racklift-lanes-"))
    lock = threading.Lock()
    started = time.monotonic()
    procs: list[tuple[Lane, subprocess.Popen, threading.Thread, Path]] = []
    for lane in lanes:
        junit = work / f"{lane.name}.xml"
        log = (work / f"{lane.name}.log").open("w")
        cmd = [str(PYTEST), "--durations=30", f"--junitxml={junit}", "-m", lane.markers,
               *(extra or [])]
        print(f"[lanes] {lane.name}: {' '.join(cmd[1:])} (log {work / lane.name}.log)",
              flush=True)
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **lane.env},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1)
        pump = threading.Thread(target=_pump, args=(lane, proc.stdout, log, lock), daemon=True)
        pump.start()
        procs.append((lane, proc, pump, junit))
    results = []
    for lane, proc, pump, junit in procs:
        code = proc.wait()
        pump.join()
        lane_counts = counts(junit)
        results.append((lane, code, lane_counts))
        print(f"[lanes] {lane.name} ended with exit status {code} after "
              f"{time.monotonic() - started:.0f} s: {lane_counts.line()}", flush=True)
    total = Counts()
    for _, _, lane_counts in results:
        total += lane_counts
    failed = [lane.name for lane, code, _ in results if code != 0]
    print(f"[lanes] all lanes in {time.monotonic() - started:.0f} s"
          + (f"; failed: {', '.join(failed)}" if failed else ""), flush=True)
    print(total.line(), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run(extra=sys.argv[1:]))
