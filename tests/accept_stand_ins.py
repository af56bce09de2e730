"""Stand-ins for the acceptance tests' tools, for the tests of how the stage runs them
(test_accept_run, test_accept_playbook): each logs its words to $LOG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Each stand-in tool logs its words (after the host's name, $ON, where the transport sets it);
# ib_write_bw and dcgmi print them too, `ss` says a server listens, setsid runs nothing (a real
# server would stay).
TOOLS = {
    "dcgmi": 'echo "dcgmi $*" >> "$LOG"; echo "dcgmi $*"',
    "all_reduce_perf": 'echo "all_reduce_perf $*" >> "$LOG"; echo "all_reduce_perf $*"',
    "ib_write_bw": 'echo "ib_write_bw $*" >> "$LOG"; echo "ib_write_bw $*"',
    "setsid": 'echo "setsid ${ON:-} $*" >> "$LOG"',
    "ss": 'echo "ss $*" >> "$LOG"; echo "LISTEN 0 1 0.0.0.0:18515 0.0.0.0:*"',
    "pkill": 'echo "pkill $*" >> "$LOG"; exit 1',  # nothing to stop: the script goes on
}


def transport_to(host: str) -> list[str]:
    """Stands in for `ssh ... -- host` as test_direct_collect's TRANSPORT_STAND_IN does, with
    the host's name in $ON for the stand-ins' log."""
    return ["sh", "-c", f'ON={host} exec sh -c "$1"', "transport-stand-in"]


def install_tools(bin_dir: Path) -> Path:
    """The stand-ins as executables in `bin_dir` (made), for the front of PATH."""
    bin_dir.mkdir()
    for name, body in TOOLS.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def pair(n: int, client: str, server: str) -> dict[str, Any]:
    return {"n": n, "client": client, "server": server, "server_address": f"10.0.0.{n + 2}",
            "client_device": f"mlx5_{n}", "server_device": f"mlx5_{n}",
            "tcp_port": 18515 + n}
