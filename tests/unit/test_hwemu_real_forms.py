"""The real-world failure forms the facts parsers read (test_real_world_output) as lab faults:
the emulated tool prints each in the line shapes of its real capture (tests/fixtures/real), the
project's parser reads it into the fact the gate judges, and the gate fails the host on that
field where the healthy host passes (acceptance, for DCGM's skipped tests). The bundle is what
the collector brings back from a lab host: each tool run as collect.py runs it, its exit status
and stderr kept."""

from __future__ import annotations

import re
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest

import emulated
from racklift.facts.bundle import Bundle, Output
from racklift.facts.host import from_bundle
from racklift.facts.parsers import ibstat_failure, parse_dmesg, parse_dmidecode, parse_ibstat
from racklift.facts.parsers.dcgmi import parse_dcgmi_diag
from racklift.lab import hwemu
from racklift.pipeline.accept_stage import DCGM_TASK, NCCL_SIZES, NCCL_TASK, judge_local
from racklift.verify.verdict import HostVerdict, judge

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
AER = REAL / "dmesg-reltime_aer-fatal-gpu-cant-recover_xeon-e5.txt"
NVLINK5 = REAL / "kmsg_xid-144-145-149_nvlink5-gb200.txt"
FALLEN = REAL / "dmesg_nvrm-fallen-off-bus-3-lines_open-570.158.01.txt"
IBPANIC = REAL / "ibstat_a100-azure_8-cas_ibpanic-mlx5_8_exit-255.txt"
CHASSIS = REAL / "dmidecode-t3_lenovo-yoga-300_chassis-record.txt"
SKIPPED = REAL / "dcgmi-diag-r3_2x-rtx-pro-6000-blackwell-server_3.3.9_skip-all-printed-twice.txt"

# How collect.py runs the tools these forms are printed by.
COLLECTED = {"ibstat.txt": ["ibstat"], "dmesg.txt": ["dmesg"],
             "dmidecode.txt": ["dmidecode", "-t", "0,1,3"]}
TIMESTAMP = re.compile(r"^\[[ \d.+]+\] ")


def run(p: hwemu.Profile, tool: str, *args: str) -> Output:
    """The emulated tool as a lab host runs it: stdout, exit status, stderr."""
    try:
        return Output(hwemu.TOOLS[tool](p, list(args)))
    except hwemu.ToolExit as exc:
        return Output(exc.stdout, rc=exc.code, stderr=exc.stderr)


def collected(p: hwemu.Profile) -> Bundle:
    bundle = emulated.bundle(p)
    return replace(bundle, outputs={**bundle.outputs, **{
        name: run(p, *argv) for name, argv in COLLECTED.items()}})


def verdict(p: hwemu.Profile, status: str = "staged") -> HostVerdict:
    """The gate's verdict on the lab host; `staged`: being admitted, `active`: in the pool."""
    return judge(replace(emulated.expected_host(), status=status), from_bundle(collected(p)))


def failing(v: HostVerdict) -> set[str]:
    """The fields the host fails on, as test_verify reads them."""
    return {line.split(": ")[0] for line in v.failures}


def added_lines(kind: str) -> list[str]:
    """The kernel log's lines the fault adds, without their timestamps."""
    healthy = set(hwemu.dmesg(emulated.healthy_profile()).splitlines())
    return [TIMESTAMP.sub("", line) for line in hwemu.dmesg(emulated.with_fault(kind)).splitlines()
            if line not in healthy]


def gaps(lines: list[str]) -> list[float]:
    """The seconds between the timestamped lines."""
    times = [float(m.group(1)) for line in lines if (m := re.match(r"\[\s*([\d.]+)\]", line))]
    return [round(b - a, 6) for a, b in pairwise(times)]


@pytest.mark.parametrize("status", ["staged", "active"])
def test_the_healthy_lab_host_passes_as_collected(status: str) -> None:
    v = verdict(emulated.healthy_profile(), status)
    assert v.passed and v.warnings == [], v.failures


# ----------------------------------------------------------------- PCIe AER on the GPU endpoint

def test_aer_gpu_endpoint_prints_the_real_fatal_aer_lines_for_gpu_0() -> None:
    real = AER.read_text().splitlines()[3:]  # from the error on: the lines before end another
    # One error, not several; no SDES bit; no audio function (an SXM H100 has none).
    kept = [line for line in real if "SDES" not in line and "snd_hda_intel" not in line]
    one = [TIMESTAMP.sub("", line).replace("Multiple ", "").replace("00004020", "00004000")
           .replace("0000:00:03.0", "0000:15:01.0").replace("0000:03:00.0", "0000:18:00.0")
           .replace("8086:6f08", "8086:352a") for line in kept]
    assert added_lines("aer-gpu-endpoint") == one
    # The capture's spacing (dmesg --reltime: each line's time since the line before it).
    since, spacing = 0.0, []
    for line in real[1:]:
        since += float(line[line.index("+") + 1:line.index("]")])
        if line in kept:
            spacing, since = [*spacing, round(since, 6)], 0.0
    log = hwemu.dmesg(emulated.with_fault("aer-gpu-endpoint")).splitlines()
    assert gaps(log[-len(one):]) == spacing


def test_aer_gpu_endpoint_names_the_gpu_and_fails_the_host_on_kernel_errors() -> None:
    (event,) = parse_dmesg(hwemu.dmesg(emulated.with_fault("aer-gpu-endpoint")))
    assert (event.kind, event.severity, event.device, event.endpoint, event.reported_by) == (
        "aer", "critical", "0000:18:00.0", "nvidia 0000:18:00.0", "0000:15:01.0")
    for status in ("staged", "active"):
        v = verdict(emulated.with_fault("aer-gpu-endpoint"), status)
        assert failing(v) == {"kernel.gpu_errors"}
        assert "AER on nvidia 0000:18:00.0 (reported by 0000:15:01.0): Uncorrected (Fatal) " \
               "error" in v.failures[0]


# ----------------------------------------------------------------- NVLink5 Xids, "Nonfatal"

def test_xid_nvlink5_nonfatal_prints_the_real_gb200_lines_for_gpu_1() -> None:
    real = NVLINK5.read_text().splitlines()
    nonfatal = [re.sub(r"PCI:[0-9a-f:]+\)", "PCI:0000:2a:00)", line) for line in real
                if "Nonfatal" in line]
    assert added_lines("xid-nvlink5-nonfatal") == nonfatal


def test_a_nonfatal_nvlink5_xid_refuses_admission_and_only_warns_in_the_pool() -> None:
    p = emulated.with_fault("xid-nvlink5-nonfatal")
    assert [(e.code, e.severity, e.device) for e in parse_dmesg(hwemu.dmesg(p))] == [
        (144, "warning", "0000:2a:00"), (145, "warning", "0000:2a:00")]
    admitted = verdict(p, "staged")
    assert failing(admitted) == {"kernel.gpu_errors"}
    assert admitted.failures[0].endswith("a host being admitted must be clean of Xid 144, 145 "
                                         "unless racklift.hardware.tolerated_xids lists them")
    pool = verdict(p, "active")
    assert pool.passed and [w.split(": ")[0] for w in pool.warnings] == ["kernel.gpu_errors"]


# ----------------------------------------------------------------- fallen off the bus, 3 lines

def test_gpu_off_bus_prints_the_open_modules_three_lines_before_the_driver_loads() -> None:
    real = FALLEN.read_text().splitlines()
    form = [TIMESTAMP.sub("", line).replace("0000:b3:00.0", "0000:db:00.0")
            .replace("10de:26b5", "10de:2330") for line in real[:4]]
    assert added_lines("gpu-off-bus-open-module") == form
    log = hwemu.dmesg(emulated.with_fault("gpu-off-bus-open-module")).splitlines()
    at = next(i for i, line in enumerate(log) if "NVRM: The NVIDIA GPU" in line)
    assert "] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.127.08  " in log[at + 4]
    # The real capture's spacing: message, probe failure, loading line.
    assert gaps(log[at:at + 5]) == gaps(real[:5])


def test_gpu_off_bus_is_one_critical_event_and_the_driver_has_seven_gpus() -> None:
    p = emulated.with_fault("gpu-off-bus-open-module")
    (event,) = parse_dmesg(hwemu.dmesg(p))
    assert (event.kind, event.code, event.device, event.severity) == (
        "nvrm", None, "0000:db:00.0", "critical")
    assert event.line.count("\n") == 2
    assert [g.index for g in p.gpus] == list(range(7))
    for status in ("staged", "active"):
        assert failing(verdict(p, status)) == {"gpus.count", "kernel.gpu_errors"}


# ----------------------------------------------------------------- ibstat that panics

def test_ibstat_panic_prints_the_eight_cas_then_panics_on_mlx5_8() -> None:
    p = emulated.with_fault("ibstat-panic")
    out = run(p, "ibstat")
    assert out.rc == 255 and out.stdout == hwemu.ibstat(emulated.healthy_profile())
    shape = r"ibpanic: \[\d+\] main: stat of IB device 'mlx5_8' failed: No such file or " \
            r"directory\n"
    assert re.fullmatch(shape, out.stderr)
    assert re.search(shape, IBPANIC.read_text())  # the real line
    assert run(p, "ibstat", "-l").stdout.splitlines()[-1] == "mlx5_8"
    assert [h.ca for h in parse_ibstat(f"{out.stdout}\n{out.stderr}")] == [
        f"mlx5_{n}" for n in range(8)]
    assert ibstat_failure(out.stderr) == out.stderr.strip()


def test_ibstat_panic_keeps_the_cas_and_fails_the_host_on_the_tool() -> None:
    facts = from_bundle(collected(emulated.with_fault("ibstat-panic")))
    assert len(facts.hca_ports) == 8 and facts.partial[0][0] == "ibstat.txt"
    for status in ("staged", "active"):
        assert failing(verdict(emulated.with_fault("ibstat-panic"), status)) == {"tools.ibstat"}


# ----------------------------------------------------------------- a chassis record alone

def test_the_chassis_record_has_the_real_records_keys() -> None:
    def keys(text: str) -> list[str]:
        record = text.split("Chassis Information\n")[1].split("\n\n")[0]
        return [line.split(":")[0].strip() for line in record.splitlines()]

    mine = run(emulated.healthy_profile(), "dmidecode", "-t", "chassis").stdout
    assert keys(mine) == keys(CHASSIS.read_text())
    assert "\nHandle 0x0003, DMI type 3, 22 bytes\nChassis Information\n\t" in mine


def test_dmi_chassis_only_leaves_the_serial_to_the_chassis_record() -> None:
    healthy, p = emulated.healthy_profile(), emulated.with_fault("dmi-chassis-only")
    system = parse_dmidecode(run(p, "dmidecode").stdout)
    assert (system.serial, system.chassis_serial) == (None, healthy.system.serial)
    assert run(p, "dmidecode", "-s", "system-serial-number").stdout == "To be filled by O.E.M.\n"
    assert parse_dmidecode(run(healthy, "dmidecode").stdout).serial == healthy.system.serial


def test_a_serial_in_the_chassis_record_alone_identifies_the_host() -> None:
    """collect.py runs `dmidecode -t 0,1,3`: with the system record's serial a placeholder, the
    chassis record's serial is the one the gate compares (as test_real_world_output's chassis
    capture); without type 3 the gate would find no serial and refuse a sound host."""
    p = emulated.with_fault("dmi-chassis-only")
    for status in ("staged", "active"):
        assert verdict(p, status).passed
    bundle = collected(p)
    without_chassis = replace(bundle, outputs={**bundle.outputs, "dmidecode.txt": run(
        p, "dmidecode", "-t", "0,1")})
    refused = judge(emulated.expected_host(), from_bundle(without_chassis))
    assert failing(refused) == {"system.serial"}


# ----------------------------------------------------------------- DCGM skipping its tests

def _without_metadata(text: str) -> list[str]:
    return [line[:29] if line.startswith(("| DCGM Version", "| Driver Version", "| GPU Device"))
            else line for line in text.splitlines()]


def test_dcgm_skip_required_prints_the_real_skip_all_table() -> None:
    p = emulated.with_fault("dcgm-skip-required")
    out = run(p, "dcgmi", "diag", "-r", "3")
    real = _without_metadata(SKIPPED.read_text())
    mine = _without_metadata(out.stdout)
    assert out.rc == 0 and mine == real[1:1 + len(mine)]  # the capture printed it twice
    level_2 = parse_dcgmi_diag(run(p, "dcgmi", "diag", "-r", "2").stdout)
    assert [(t.name, t.result) for t in level_2.tests][9:] == [("PCIe", "Skip"),
                                                              ("GPU Memory", "Skip")]
    document = parse_dcgmi_diag(run(p, "dcgmi", "diag", "-r", "3", "-j").stdout)
    assert {t.result for t in document.tests if t.category != "Deployment"} == {"Skip"}


def local_failures(*kinds: str) -> list[str]:
    """The fields the acceptance stage fails the lab host on (its context: DCGM level 2,
    all-reduce >= 350 GB/s) from its local tests, run as accept.yml runs them."""
    p = emulated.healthy_profile()
    for kind in kinds:
        p = hwemu.inject(p, kind)
    want = emulated.expected_host().desired.acceptance
    argv = {DCGM_TASK: ["dcgmi", "diag", "-r", str(want.dcgm_level)],
            NCCL_TASK: ["all_reduce_perf", "-b", NCCL_SIZES[0], "-e", NCCL_SIZES[1], "-f", "2",
                        "-g", str(len(p.gpus))]}
    results = {task: {"stdout": out.stdout, "stderr": out.stderr, "rc": out.rc}
               for task, out in ((task, run(p, *args)) for task, args in argv.items())}
    mismatches, _ = judge_local(emulated.expected_host(), replace(want, rdma_gbps=None), results)
    return [m.field for m in mismatches]


def test_acceptance_fails_a_host_whose_required_dcgm_tests_were_skipped() -> None:
    assert local_failures() == []
    assert local_failures("dcgm-skip-required") == ["accept.dcgm.pcie", "accept.dcgm.memory"]
    # With test_accept's slow NVLinks on the same host: each test on its own field.
    assert local_failures("nvlink-slow", "dcgm-skip-required") == [
        "accept.dcgm.pcie", "accept.dcgm.memory", "accept.nccl.busbw"]
