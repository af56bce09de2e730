"""`racklift parse` as an operator runs it: a real capture in, its facts as JSON out; not that
tool's output, or an unknown kind, a clear error and its exit code."""

from __future__ import annotations

import json
import subprocess

from helpers import BIN, FIXTURES, REPO


def racklift(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "racklift"), *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def test_parse_command_on_real_captures():
    result = racklift("parse", "ibstat",
                      str(FIXTURES / "real" / "ibstat_h100-node_cx7-ib_cx6-eth-down.txt"))
    assert result.returncode == 0, result.stderr
    ports = json.loads(result.stdout)
    assert {p["ca"] for p in ports if p["link_layer"] == "InfiniBand"} >= {"mlx5_0"}
    bad = racklift("parse", "nvidia-smi-xml", str(FIXTURES / "real" / "SOURCES.md"))
    assert bad.returncode == 1 and bad.stderr.startswith("error: ")
    unknown = racklift("parse", "nvme", "x")
    assert unknown.returncode == 2 and "kinds: nvidia-smi-xml" in unknown.stderr
