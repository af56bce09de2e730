"""nccl-tests' ``all_reduce_perf``: one process driving ``-g`` of the emulated GPUs.

The layout is nccl-tests 2.13's, as in the real 8x H100 capture in tests/fixtures/real (no
version line, ``[0x18]`` bus ids), printed with that release's format strings (src/common.cu at
v2.13.9), so with the trailing blanks the pasted capture lost. The figures are the NVLink
all-reduce of an HGX H100 board shaped on that capture: bus bandwidth rising with the message
size toward 480 GB/s (473-477 at 4 GiB), a small message taking some 22 us. As in the real
tool the average bus bandwidth is the mean over every row, out-of-place and in-place: a sweep
from 8 bytes averages far below the large messages' figure."""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass, replace

from .command import ToolExit, read_options
from .profile import GPU, Profile

_LATENCY_US = 22.0
# The overhead a large message pays once its pipeline fills, reached past ~32 MiB.
_SETUP_US = 100.0
_SETUP_BYTES = 32 << 20
_PEAK_BUSBW = 480.0  # GB/s, NVLink SHARP through the board's NVSwitches
_COPY_GBPS = 1500.0  # one GPU: the all-reduce is a copy in its HBM
_JITTER = 0.01  # a row's time, either way, as a real run's rows and in-place runs differ


# Where v2.13.9's CUDACHECK and TESTCHECK report a device it cannot open (common.cu).
_DEVICE_CHECK_LINE = 894
_RUN_CHECK_LINE = 844
_CUDA_ERROR = 2  # testCudaError, main's exit status


@dataclass(frozen=True)
class AllReduceRun:
    """The command line's settings, with nccl-tests' defaults."""

    min_bytes: int = 32 << 20
    max_bytes: int = 32 << 20
    step_factor: int = 1
    step_bytes: int = 1 << 20
    ngpus: int = 1
    iters: int = 20
    warmup: int = 5
    check: int = 1


_VALUED = {"-b": "b", "--minbytes": "b", "-e": "e", "--maxbytes": "e", "-f": "f",
           "--stepfactor": "f", "-i": "i", "--stepbytes": "i", "-g": "g", "--ngpus": "g",
           "-n": "n", "--iters": "n", "-w": "w", "--warmup_iters": "w", "-c": "c",
           "--check": "c"}


_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def _size(value: str) -> int | None:
    """parsesize(): a number and an optional K, M or G (binary); None where it reads none."""
    match = re.match(r"\s*((?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S?)", value)
    if not match or (match[2] and match[2].lower() not in _UNITS):
        return None
    return int(float(match[1]) * _UNITS.get(match[2].lower(), 1))


def _int(value: str) -> int:
    """strtol()'s reading of a decimal option: its leading digits, 0 without any."""
    match = re.match(r"\s*[-+]?\d+", value)
    return int(match[0]) if match else 0


def parse_all_reduce_perf(args: list[str]) -> AllReduceRun:
    """The run the command line asks for; a line nccl-tests refuses ends the tool as it ends."""
    options, operands = read_options("all_reduce_perf", args, _VALUED)
    if operands:
        raise ToolExit(1, "", f"all_reduce_perf: the lab does not emulate {operands[0]}\n")
    values: dict[str, int] = {}
    for key, field, name in (("b", "min_bytes", "minbytes"), ("e", "max_bytes", "maxbytes")):
        if key in options:
            size = _size(options[key])
            if size is None:
                raise ToolExit(255, "", f"invalid size specified for '{name}'\n")
            values[field] = size
    for key, field in (("f", "step_factor"), ("i", "step_bytes"), ("g", "ngpus"),
                       ("n", "iters"), ("w", "warmup"), ("c", "check")):
        if key in options:
            values[field] = _int(options[key])
    run = AllReduceRun(**values)
    if run.min_bytes > run.max_bytes:
        raise ToolExit(255, "", "invalid sizes for 'minbytes' and 'maxbytes': "
                                f"{run.min_bytes} > {run.max_bytes}\n")
    if run.ngpus < 1 or (run.min_bytes < 1 if run.step_factor > 1 else run.step_bytes < 1):
        # The real tool would divide by no rank, or sweep forever.
        raise ToolExit(1, "", "all_reduce_perf: the lab emulates -g 1 or more and sweeps that "
                              "end\n")
    return run


def _sizes(run: AllReduceRun) -> list[int]:
    sizes, size = [], run.min_bytes
    while size <= run.max_bytes:
        sizes.append(size)
        size = size * run.step_factor if run.step_factor > 1 else size + run.step_bytes
    return sizes


def _nvlink_share(gpus: list[GPU]) -> float:
    """The ring runs at its slowest GPU's NVLink bandwidth: the links it has up, and what they
    carry under load."""
    return min((g.nvlinks - len(g.nvlinks_down)) / g.nvlinks * g.nvlink_load_factor
               for g in gpus)


def _time_us(size: int, ranks: int, share: float) -> float:
    bus_factor = 2 * (ranks - 1) / ranks
    algbw = _PEAK_BUSBW * share / bus_factor if ranks > 1 else _COPY_GBPS
    return _LATENCY_US + size / (algbw * 1e3) + _SETUP_US * size / (size + _SETUP_BYTES)


def _time_str(us: float) -> str:
    return f"{us:7.0f}" if us >= 10000 else f"{us:7.1f}" if us >= 100 else f"{us:7.2f}"


def _header(run: AllReduceRun) -> str:
    step = (f"{run.step_factor}(factor)" if run.step_factor > 1
            else f"{run.step_bytes}(bytes)")
    return (f"# nThread 1 nGpus {run.ngpus} minBytes {run.min_bytes} maxBytes {run.max_bytes} "
            f"step: {step} warmup iters: {run.warmup} iters: {run.iters} agg iters: 1 "
            f"validation: {run.check} graph: 0\n#\n# Using devices\n")


_TABLE_HEADER = (
    "#\n"
    f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place"
    "                       in-place          \n"
    f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  "
    f"{'algbw':>6}  {'busbw':>6} {'#wrong':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6} "
    f"{'#wrong':>6}\n"
    f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  "
    f"{'(GB/s)':>6}  {'(GB/s)':>6}  {'':>5}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  "
    f"{'':>5}\n")


def all_reduce_perf_output(p: Profile, run: AllReduceRun, pid: int) -> str:
    """What the run prints on a host whose driver sees at least ``run.ngpus`` GPUs."""
    gpus = p.gpus[:run.ngpus]
    out = [_header(run)] + [
        f"#  Rank {r:2d} Group  0 Pid {pid:6d} on {p.hostname:>10} device {r:2d} "
        f"[0x{g.bus:02x}] {g.product_name}\n" for r, g in enumerate(gpus)]
    # Its buffers (send, receive, expected) fit the smallest GPU, with 1 GiB to spare.
    memory = min(g.fb_memory_total_mib for g in gpus) << 20
    fits = (memory - (1 << 30)) // (3 if run.check else 2)
    if run.max_bytes > fits:
        run = replace(run, max_bytes=fits)
        out.append(f"#\n# Reducing maxBytes to {fits} due to memory limitation\n")
    out.append(_TABLE_HEADER)
    share, busbws = _nvlink_share(gpus), []
    for size in _sizes(run):
        count = size // 4  # float
        row = f"{count * 4:12d}  {count:12d}  {'float':>8}  {'sum':>6}  {-1:6d}"
        rng = random.Random(f"{p.hostname}:{run.ngpus}:{size}")
        for _ in ("out-of-place", "in-place"):
            us = _time_us(count * 4, run.ngpus, share) * (1 + _JITTER * (2 * rng.random() - 1))
            algbw = count * 4 / us / 1e3
            busbw = algbw * 2 * (run.ngpus - 1) / run.ngpus
            busbws.append(busbw)
            wrong = "0" if run.check else "N/A"
            row += f"  {_time_str(us)}  {algbw:6.2f}  {busbw:6.2f}  {wrong:>5}"
        out.append(row + "\n")
    avg = sum(busbws) / len(busbws) if busbws else float("nan")
    out.append(f"# Out of bounds values : 0 OK\n# Avg bus bandwidth    : {avg:g} \n#\n\n")
    return "".join(out)


def _cuda_failure(p: Profile, run: AllReduceRun, error: str) -> ToolExit:
    """The run ends where it asks CUDA for a device it cannot have (nothing of the device list
    is printed: it is printed once whole)."""
    pid = os.getpid()
    return ToolExit(_CUDA_ERROR, _header(run)
                    + f"{p.hostname}: Test CUDA failure common.cu:{_DEVICE_CHECK_LINE} "
                      f"'{error}'\n .. {p.hostname} pid {pid}: Test failure "
                      f"common.cu:{_RUN_CHECK_LINE}\n")


def all_reduce_perf(p: Profile, args: list[str]) -> str:
    """The ``all_reduce_perf`` tool. More GPUs than the host has (or no driver) fail as CUDA
    fails them."""
    run = parse_all_reduce_perf(args)
    if not p.driver_version:
        raise _cuda_failure(p, run, "CUDA driver version is insufficient for CUDA runtime "
                                    "version")
    if run.ngpus > len(p.gpus):
        raise _cuda_failure(p, run, "invalid device ordinal")
    return all_reduce_perf_output(p, run, os.getpid())
