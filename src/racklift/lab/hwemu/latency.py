"""How long the real tools take to answer: the emulator sleeps that long before it does (idle,
as a real tool is while it waits on the driver or the fabric). Lab hosts answer at once unless
their profile carries a latency table (benchmarks set REALISTIC); tests stay fast.

REALISTIC holds figures measured on real GPU servers with persistence mode on, each with its
public source; where none was found the entry says so and what it was taken as.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# invocation (the tool and its leading arguments) → seconds
REALISTIC: dict[str, float] = {
    # netdata/netdata#14522: "a single run of `nvidia-smi -q -x` ... takes ~6 seconds" on a
    # multi-GPU server.
    "nvidia-smi -q": 6.0,
    "nvidia-smi --query": 6.0,
    # unslothai/unsloth#10720, 8x B200, medians: --query-gpu=index,compute_cap 438.7 ms;
    # `nvidia-smi topo -m` 1324.7 ms.
    "nvidia-smi --query-gpu": 0.44,
    "nvidia-smi topo": 1.32,
    # No public figure for `nvlink -s`/`-e` alone: taken as --query-gpu's (per-device reads
    # through NVML, as those).
    "nvidia-smi nvlink": 0.44,
    # NVIDIA/nvidia-docker#379, persistence mode on: "real 0m0.017s".
    "nvidia-smi": 0.017,
    # No public figure for ibstat or ibv_devinfo: they read sysfs and one MAD-less verbs query
    # per HCA; taken as dmidecode's order.
    "ibstat": 0.02,
    "ibv_devinfo": 0.05,
    # A fabric crawl: guilbaults/infiniband-exporter's ibqueryerrors over 60+ switches and
    # 900+ nodes "takes 3 seconds" (README; 2.24 s measured in its PR #9).
    "ibnetdiscover": 3.0,
    # rancher/elemental-operator#134: "time dmidecode ... real 0m0.014s".
    "dmidecode": 0.014,
    # nebius/soperator#380: "`dcgmi diag -r 1` (10 seconds)"; NVIDIA's dcgmi reference: level
    # 2 "normally lasting approximately two minutes".
    "dcgmi diag -r 1": 10.0,
    "dcgmi diag -r 2": 120.0,
}


def _begins(key: str, words: Sequence[str]) -> bool:
    wanted = key.split()
    given = words[:len(wanted)]
    return len(given) == len(wanted) and all(
        word == want or word.startswith(f"{want}=")
        for want, word in zip(wanted, given, strict=True))


def delay(table: Mapping[str, float], tool: str, args: Sequence[str]) -> float:
    """Seconds `tool args` takes by `table`: its longest entry whose words begin the
    invocation (`--opt` also begins `--opt=value`); 0 where none does."""
    words = [tool, *args]
    matches = [key for key in table if _begins(key, words)]
    if not matches:
        return 0.0
    return max(0.0, float(table[max(matches, key=lambda key: len(key.split()))]))
