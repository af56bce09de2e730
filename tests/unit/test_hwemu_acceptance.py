"""The acceptance stage's tools as the lab emulates them (racklift.lab.hwemu: dcgm, nccl_tests,
perftest): laid out as the real captures in tests/fixtures/real, read by racklift's own parsers
into the healthy figures, and into the failing one under each load-only fault; ib_write_bw
pairs over real TCP on 127.0.0.1, each end a process of its own."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hwemu_support import CABLES, free_port, ib_write_bw_pair

import emulated
from racklift.facts.bundle import Output
from racklift.facts.host import from_bundle
from racklift.facts.parsers.common import ParseError
from racklift.facts.parsers.dcgmi import parse_dcgmi_diag
from racklift.facts.parsers.nccl_tests import parse_nccl_tests
from racklift.facts.parsers.perftest import parse_perftest_bw
from racklift.facts.parsers.topology import parse_nvidia_smi_nvlink
from racklift.lab import hwemu
from racklift.lab.hwemu import perftest
from racklift.netbox.desired import Acceptance
from racklift.verify.acceptance import judge_acceptance
from racklift.verify.verdict import judge

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
H200_R3 = REAL / "dcgmi-diag-r3_8x-h200_3.3.9_pass-all-eud-skip.txt"
A100_R2 = REAL / "dcgmi-diag-r2_8x-a100-sxm4-80gb-p4de_3.3.3_pass-empty-stress-section.txt"
MEMORY_FAIL = (REAL / "dcgmi-diag-r2_8-gpus_version-unstated_gpu-memory-fail-gpu0-thermal_"
                      "excerpt.txt")
NVVS_JSON = (REAL / "dcgmi-diag-j_8-gpus_3.1.0_deployment-pass_nvidia-unit-test-warning-prefix-"
                    "nulls.txt")
H100_NCCL = REAL / "nccl-tests-all_reduce_perf_8x-h100-80gb-hbm3_single-node.txt"
CX5_MIB = REAL / "ib_write_bw_connectx5-roce-100g_default-mib-sec_client.txt"
CX6_IB = REAL / "ib_write_bw_connectx6-ib-100g_a-sweep_report-gbits_client.txt"

LOAD_FAULTS = ("hbm-fail", "nvlink-slow", "rail-slow", "dcgm-skip-required")
LARGE = ["-b", "128M", "-e", "4G", "-f", "2", "-g", "8"]  # the real capture's sizes


def _host(name: str, serial: str, seed: int) -> hwemu.Profile:
    return hwemu.cabled(hwemu.generate_profile(name, serial, seed), CABLES)


@pytest.fixture
def profile() -> hwemu.Profile:
    return _host("gpu-a01", "S421GE0001X0001", 7)


@pytest.fixture
def partner() -> hwemu.Profile:
    return _host("gpu-a02", "S421GE0001X0002", 8)


def _tool(p: hwemu.Profile, name: str, *args: str) -> tuple[int, str, str]:
    """The tool's exit status, stdout and stderr, in this process."""
    try:
        return 0, hwemu.TOOLS[name](p, list(args)), ""
    except hwemu.ToolExit as exc:
        return exc.code, exc.stdout, exc.stderr


# --------------------------------------------------------------------------- dcgmi diag


def _without_metadata(text: str) -> list[str]:
    """The table's lines, the Metadata rows' values (the host's, not the layout's) left out."""
    return [line[:29] if line.startswith(("| DCGM Version", "| Driver Version", "| GPU Device"))
            else line for line in text.splitlines()]


def test_dcgmi_table_is_the_real_3_3_layout(profile: hwemu.Profile) -> None:
    assert _without_metadata(hwemu.dcgmi_diag(profile, 3)) == _without_metadata(
        H200_R3.read_text())
    assert _without_metadata(hwemu.dcgmi_diag(profile, 2)) == _without_metadata(
        A100_R2.read_text())
    metadata = parse_dcgmi_diag(hwemu.dcgmi_diag(profile, 1))
    assert (metadata.version, metadata.driver) == ("3.3.9", "550.127.08")
    assert "| GPU Device IDs Detected   | 2330,2330,2330,2330,2330,2330,2330,2330        |" in (
        hwemu.dcgmi_diag(profile, 1))


def test_dcgmi_json_is_the_real_nvvs_layout(profile: hwemu.Profile) -> None:
    """Level 1's JSON is the 3.1.0 capture's Deployment category, line for line (the capture's
    trailing blanks were edited away: compared without them)."""
    real = NVVS_JSON.read_text().splitlines()
    mine = hwemu.dcgmi_diag(profile, 1, as_json=True).splitlines()

    def deployment(lines: list[str]) -> list[str]:
        start = lines.index('\t\t\t\t"category" : "Deployment",')
        return [line.rstrip() for line in lines[start:lines.index("\t\t\t\t]", start) + 1]]

    assert deployment(mine) == deployment(real)
    assert mine[:3] == ["{", '\t"DCGM GPU Diagnostic" : ', "\t{"]  # jsoncpp's " : " kept
    assert json.loads("\n".join(mine))["DCGM GPU Diagnostic"]["version"] == "3.3.9"


LEVELS = {
    1: [],
    2: ["PCIe", "GPU Memory"],
    3: ["PCIe", "GPU Memory", "Diagnostic", "Targeted Stress", "Targeted Power",
        "Memory Bandwidth", "EUD Test"],
    4: ["PCIe", "GPU Memory", "Diagnostic", "Pulse Test", "Targeted Stress", "Targeted Power",
        "Memory Bandwidth", "Memtest", "EUD Test"],
}


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_dcgmi_levels_run_dcgm_3_3_tests_and_pass_when_healthy(
        level: int, profile: hwemu.Profile) -> None:
    table = parse_dcgmi_diag(hwemu.dcgmi_diag(profile, level))
    document = parse_dcgmi_diag(hwemu.dcgmi_diag(profile, level, as_json=True))
    assert [t.name for t in table.tests][9:] == LEVELS[level]
    assert len(document.tests) == len(table.tests)
    assert table.failed == document.failed == ()
    skipped = {t.name for t in table.tests if t.result == "Skip"}
    assert skipped == ({"EUD Test"} if level >= 3 else set())  # EUD: a package not installed
    for t in document.tests:  # every GPU's result where the JSON has one per GPU
        assert [g for g, _ in t.gpus] == list(range(8))
    assert _tool(profile, "dcgmi", "diag", "-r", str(level), "-j")[0] == 0


def _adapted(line: str) -> str:
    """A line of the real GPU 0 failure, as it reads for GPU 4."""
    return re.sub(r"(GPU:? |\| U )0\b", r"\g<1>4", line)


@pytest.mark.parametrize("level", [2, 3])
def test_hbm_fail_fails_the_memory_test_on_gpu_4(level: int, profile: hwemu.Profile) -> None:
    faulty = hwemu.inject(profile, "hbm-fail")
    code, text, _ = _tool(faulty, "dcgmi", "diag", "-r", str(level))
    assert code == 226  # DCGM_ST_NVVS_ERROR
    real = MEMORY_FAIL.read_text().splitlines()
    mine = text.splitlines()
    at = mine.index(_row("GPU Memory", "Pass - GPUs: 0, 1, 2, 3, 5, 6, 7   "))
    # The excerpt's last line was cut without its border: compared as far as it goes.
    assert all(m.startswith(_adapted(r).rstrip()) for m, r in
               zip(mine[at + 1:at + len(real)], real[1:], strict=True))
    for as_json in (False, True):
        diag = parse_dcgmi_diag(hwemu.dcgmi_diag(faulty, level, as_json))
        (failed,) = diag.failed
        assert failed.name == ("memory" if as_json else "GPU Memory")
        assert [g for g, result in failed.gpus if result == "Fail"] == [4]
        assert failed.warnings == (
            "GPU 4 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the "
            "test for GPU 4 Verify that the cooling on this machine is functional, including "
            "external, thermal material interface, fans, and any other components.",)


def _row(name: str, value: str) -> str:
    return f"| {name:<25} | {value:<46} |"


def test_hbm_fail_passes_level_1(profile: hwemu.Profile) -> None:
    faulty = hwemu.inject(profile, "hbm-fail")
    assert _tool(faulty, "dcgmi", "diag", "-r", "1") == (0, hwemu.dcgmi_diag(profile, 1), "")


def test_dcgmi_without_a_driver_finds_no_gpu(profile: hwemu.Profile) -> None:
    none = hwemu.with_installed_driver(profile, None)
    error = ("Error: Unable to complete diagnostic for group 2147483647. Return: (-35) The "
             "specified group is empty, and this operation is incompatible with an empty group.")
    assert _tool(none, "dcgmi", "diag", "-r", "2") == (221, error + "\n", "")
    code, document, _ = _tool(none, "dcgmi", "diag", "-r", "2", "-j")
    assert code == 221 and json.loads(document) == {"DCGM GPU Diagnostic": {
        "runtime_error": error, "version": "3.3.9"}}
    with pytest.raises(ParseError):
        parse_dcgmi_diag(document)
    assert _tool(profile, "dcgmi", "diag", "-r", "5")[0] == 1  # not a level the lab emulates


# --------------------------------------------------------------------------- all_reduce_perf


def _shape(line: str) -> str:
    return re.sub(r"\d", "9", line.rstrip())


def _all_reduce(p: hwemu.Profile, *args: str) -> str:
    code, out, err = _tool(p, "all_reduce_perf", *args)
    assert code == 0, err
    return out


def test_all_reduce_perf_is_the_real_layout(profile: hwemu.Profile) -> None:
    """The capture's command line (-n 2), printed as that nccl-tests release prints it: the
    same header, device lines, table and summary, column for column."""
    real = H100_NCCL.read_text().splitlines()
    mine = _all_reduce(profile, *LARGE, "-n", "2").splitlines()
    assert mine[0] == real[0]
    def device(line: str) -> str:  # which process, which bus: not the layout
        return _shape(re.sub(r"Pid +\d+|\[0x[0-9a-f]{2}\]", "", line))

    assert [device(line) for line in mine[3:11]] == [
        device(line.replace("node005", "gpu-a01")) for line in real[3:11]]
    assert [line.rstrip() for line in mine[11:15]] == real[11:15]
    assert [_shape(line) for line in mine[15:21]] == [_shape(line) for line in real[15:21]]
    assert [_shape(line) for line in mine[21:]] == [*map(_shape, real[21:]), ""]
    # nccl-tests prints a blank after the average, and a last line for NCCL's last error.
    assert mine[22].endswith(" ") and mine[-1] == ""


def test_all_reduce_perf_healthy_figures_follow_the_real_capture(
        profile: hwemu.Profile) -> None:
    run = parse_nccl_tests(_all_reduce(profile, *LARGE))
    real = parse_nccl_tests(H100_NCCL.read_text())
    assert (run.ranks, run.out_of_bounds, run.errors) == (8, 0, ())
    assert [r.size for r in run.rows] == [r.size for r in real.rows]
    for mine, theirs in zip(run.rows, real.rows, strict=True):
        assert mine.busbw == pytest.approx(theirs.busbw, rel=0.05)
        assert (mine.wrong, mine.wrong_in_place) == (0, 0)
    assert 400 < run.avg_busbw == pytest.approx(real.avg_busbw, rel=0.05)


def test_all_reduce_perf_averages_every_row_as_the_real_tool(profile: hwemu.Profile) -> None:
    """From 8 bytes the small messages' near-zero bus bandwidth is in the average: a healthy
    board averages some 150 GB/s while its large messages reach 480."""
    run = parse_nccl_tests(_all_reduce(profile, "-b", "8", "-e", "8G", "-f", "2", "-g", "8"))
    assert len(run.rows) == 31 and run.rows[0].busbw == 0
    assert 470 < run.rows[-1].busbw < 485
    assert 100 < run.avg_busbw < 200
    assert run.avg_busbw == pytest.approx(
        sum(b for r in run.rows for b in (r.busbw, r.busbw_in_place)) / 62, abs=0.01)


def test_nvlink_slow_all_reduce_at_30_percent_with_every_link_up(
        profile: hwemu.Profile) -> None:
    faulty = hwemu.inject(profile, "nvlink-slow")
    slow, healthy = (parse_nccl_tests(_all_reduce(p, *LARGE)) for p in (faulty, profile))
    assert slow.avg_busbw < 350 < 400 < healthy.avg_busbw
    assert slow.rows[-1].busbw == pytest.approx(0.3 * healthy.rows[-1].busbw, rel=0.03)
    assert [g.inactive for g in parse_nvidia_smi_nvlink(hwemu.nvidia_smi_nvlink(faulty))] == [
        ()] * 8
    # Without GPU 6 in the run, the others are fast.
    assert parse_nccl_tests(_all_reduce(faulty, *LARGE[:-1], "4")).rows[-1].busbw > 400


@pytest.mark.parametrize(("args", "sizes"), [
    (["-b", "8M", "-e", "1G", "-f", "2"], [8 << 20 << n for n in range(8)]),
    (["-b", "1K", "-e", "4k", "-f", "2"], [1024, 2048, 4096]),
    (["--minbytes=0.5G", "--maxbytes", "1G", "-f", "2"], [1 << 29, 1 << 30]),
])
def test_all_reduce_perf_reads_sizes_as_nccl_tests(profile: hwemu.Profile, args: list[str],
                                                   sizes: list[int]) -> None:
    run = parse_nccl_tests(_all_reduce(profile, *args, "-g", "8", "-c", "1", "-n", "5",
                                       "-w", "1"))
    assert [r.size for r in run.rows] == sizes


def test_all_reduce_perf_without_validation(profile: hwemu.Profile) -> None:
    out = _all_reduce(profile, *LARGE, "-c", "0")
    assert "validation: 0 graph: 0" in out.splitlines()[0]
    assert {(r.wrong, r.wrong_in_place) for r in parse_nccl_tests(out).rows} == {(None, None)}


def test_all_reduce_perf_bad_sizes(profile: hwemu.Profile) -> None:
    assert _tool(profile, "all_reduce_perf", "-b", "8X") == (
        255, "", "invalid size specified for 'minbytes'\n")
    assert _tool(profile, "all_reduce_perf", "-b", "1G", "-e", "1M")[0] == 255
    assert _tool(profile, "all_reduce_perf", "-t", "2")[0] == 1  # not emulated


@pytest.mark.parametrize(("fault", "gpus", "error"), [
    (None, "9", "invalid device ordinal"),
    ("gpu-missing", "8", "invalid device ordinal"),
    ("no-driver", "8", "CUDA driver version is insufficient for CUDA runtime version"),
])
def test_all_reduce_perf_on_gpus_it_cannot_have(profile: hwemu.Profile, fault: str | None,
                                                gpus: str, error: str) -> None:
    p = (hwemu.with_installed_driver(profile, None) if fault == "no-driver"
         else hwemu.inject(profile, fault) if fault else profile)
    code, out, _ = _tool(p, "all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", gpus)
    assert code == 2
    lines = out.splitlines()
    assert lines[1:3] == ["#", "# Using devices"]
    assert lines[3] == f"gpu-a01: Test CUDA failure common.cu:894 '{error}'"
    assert re.fullmatch(r" \.\. gpu-a01 pid \d+: Test failure common\.cu:844", lines[4])
    run = parse_nccl_tests(out)
    assert (run.avg_busbw, run.rows, len(run.errors)) == (None, (), 2)


# --------------------------------------------------------------------------- ib_write_bw


def _start(p: hwemu.Profile, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    """ib_write_bw as its own process, ``python -m racklift.lab.hwemu`` on a profile file."""
    path = tmp_path / f"{p.hostname}.json"
    hwemu.save_profile(p, str(path))
    return subprocess.Popen([sys.executable, "-m", "racklift.lab.hwemu", "ib_write_bw", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={"RACKLIFT_HW_PROFILE": str(path), "PATH": "/usr/bin:/bin"})


def _pair(server: hwemu.Profile, client: hwemu.Profile, tmp_path: Path,
          *args: str) -> tuple[Output, Output]:
    """Both ends of one run over TCP on 127.0.0.1, as the acceptance stage runs it."""
    port = str(free_port())
    ends = [_start(server, tmp_path, *args, "-p", port),
            _start(client, tmp_path, *args, "-p", port, "127.0.0.1")]
    outputs = [end.communicate(timeout=60) for end in ends]
    return tuple(Output(out, end.returncode, err)
                 for end, (out, err) in zip(ends, outputs, strict=True))


ACCEPT = ("-F", "--report_gbits", "-D", "5")  # the acceptance stage's options


def _average(output: Output) -> float:
    assert output.rc == 0, output.stderr
    (row,) = parse_perftest_bw(output.stdout).rows
    return row.average_gbps


def test_ib_write_bw_pair_over_tcp(profile: hwemu.Profile, partner: hwemu.Profile,
                                   tmp_path: Path) -> None:
    server, client = _pair(profile, partner, tmp_path, "-d", "mlx5_0", *ACCEPT)
    assert 370 < _average(client) == _average(server) < 388
    runs = [parse_perftest_bw(end.stdout) for end in (server, client)]
    assert {(r.test, r.device, r.link_type, r.qps) for r in runs} == {
        ("RDMA_Write BW Test", "mlx5_0", "IB", 1)}
    assert runs[0].rows == runs[1].rows and runs[0].rows[0].peak_gbps == 0  # -D: no peak
    assert server.stdout.startswith(" WARNING: BW peak won't be measured in this run.\n\n"
                                    "************************************\n"
                                    "* Waiting for client to connect... *\n")
    # Each end's queue pairs are the other's remote ones; the LIDs the profiles'.
    ends = [{side: [line.split(": ", 1)[1] for line in end.stdout.splitlines()
                    if line.startswith(f" {side} address")] for side in ("local", "remote")}
            for end in (server, client)]
    assert ends[0]["local"] == ends[1]["remote"] and ends[1]["local"] == ends[0]["remote"]
    assert ends[0]["local"][0].startswith(f"LID {profile.hcas[0].base_lid:#04x} QPN ")


@pytest.mark.parametrize("slow_end", ["server", "client"])
def test_rail_slow_at_either_end(slow_end: str, profile: hwemu.Profile,
                                 partner: hwemu.Profile, tmp_path: Path) -> None:
    slow = hwemu.inject(profile, "rail-slow")
    server, client = (slow, partner) if slow_end == "server" else (partner, slow)
    ends = _pair(server, client, tmp_path, "-d", "mlx5_3", "-F", "--report_gbits")
    assert all(_average(end) < 150 for end in ends)
    assert _average(ends[1]) == pytest.approx(400 * 0.97 * 0.3, rel=0.005)
    assert "\t\tRate: 400\n" in hwemu.ibstat(slow, "mlx5_3")  # ibstat sees nothing


def test_ib_write_bw_pair_gets_the_slower_ports_rate(profile: hwemu.Profile,
                                                     partner: hwemu.Profile) -> None:
    hdr = hwemu.inject(partner, "ib-link-degraded")  # mlx5_4 trained at 200
    for server, client in ((profile, hdr), (hdr, profile)):
        ends = ib_write_bw_pair(server, client, "-d", "mlx5_4", "--report_gbits")
        figures = {parse_perftest_bw(end).rows for end in ends}
        assert len(figures) == 1
        (row,) = figures.pop()
        assert row.average_gbps == pytest.approx(200 * 0.97, rel=0.005)
        assert row.average_gbps < row.peak_gbps < row.average_gbps * 1.003


def test_ib_write_bw_is_the_real_layout(profile: hwemu.Profile, partner: hwemu.Profile) -> None:
    """Default options print MiB/sec: the MLNX_OFED 24.10 capture's lines, but an InfiniBand
    port's (no GID index, no GID lines: the IB capture has none), its row in the same format."""
    client, _ = ib_write_bw_pair(profile, partner, "-d", "mlx5_0")
    real = [line for line in CX5_MIB.read_text().splitlines()
            if not line.startswith((" GID", " Link type"))]
    mine = [line for line in client.splitlines() if not line.startswith(" Link type")]

    def shape(line: str) -> str:
        return re.sub(r"(: )[0-9a-zA-Z_.\[\]]+", r"\1X", _shape(line))

    addresses = [n for n, line in enumerate(real) if " address: " in line]
    assert [shape(line) for n, line in enumerate(mine) if n not in addresses] == [
        shape(line) for n, line in enumerate(real) if n not in addresses]
    assert "\n Link type       : IB\n" in client
    # Addresses as perftest prints them (BASIC_ADDR_FMT, RDMA_FMT), LIDs as on an IB port.
    address = re.compile(r" (local|remote) address: LID (0x[0-9a-f]{2,4}|0000) QPN 0x[0-9a-f]{4,6} "
                         r"PSN 0x[0-9a-f]{1,6} RKey 0x[0-9a-f]{6,8} VAddr 0x[0-9a-f]{14}")
    ib = [line for line in CX6_IB.read_text().splitlines() if " address: " in line]
    for line in [*ib, *(real[n] for n in addresses), *(mine[n] for n in addresses)]:
        assert address.fullmatch(line), line
    assert [line.split(":")[0] for line in ib] == [
        line.split(":")[0] for line in client.splitlines() if " address: " in line]
    (row,) = parse_perftest_bw(client).rows
    assert (row.size, row.iterations) == (65536, 5000)
    assert row.average_gbps == pytest.approx(388, rel=0.005)


def test_ib_write_bw_client_without_a_server(monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str],
                                             profile: hwemu.Profile, tmp_path: Path) -> None:
    monkeypatch.setattr(perftest, "CONNECT_RETRY_S", 0.3)
    monkeypatch.setenv(hwemu.PROFILE_ENV, str(tmp_path / "hw.json"))
    hwemu.save_profile(profile)
    port = free_port()
    assert hwemu.main(["ib_write_bw", "-d", "mlx5_0", "-p", str(port), "127.0.0.1"]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == (f"Couldn't connect to 127.0.0.1:{port}\nUnable to open file descriptor "
                       "for socket connection\n Unable to init the socket connection\n")


def test_ib_write_bw_server_without_a_client(monkeypatch: pytest.MonkeyPatch,
                                             profile: hwemu.Profile) -> None:
    monkeypatch.setattr(perftest, "ACCEPT_WAIT_S", 0.3)
    code, out, err = _tool(profile, "ib_write_bw", "-d", "mlx5_0", "-p", str(free_port()))
    assert code == 1 and out.startswith("\n***") and "Waiting for client" in out
    assert err.startswith("server accept: Connection timed out\naccept() failed\n")


@pytest.mark.parametrize(("fault", "args", "error"), [
    (None, ["-d", "mlx5_9"], "IB device mlx5_9 not found\n Unable to find the Infiniband/RoCE "
                             "device\n"),
    ("ib-port-down", ["-d", "mlx5_3"], " Port number 1 state is Down\n Couldn't set the link "
                                       "layer\n Couldn't get context for the device\n"),
    ("link-no-neighbor", ["-d", "mlx5_7"], " Port number 1 state is Down\n"),
    (None, ["-d", "mlx5_0", "-i", "2"], " Unable to query port 2 attributes\n"),
    (None, ["-p", "x"], " Port argument x should be int\n Parser function exited with Error\n"),
    (None, ["--all"], "ib_write_bw: the lab does not emulate option --all\n"),
])
def test_ib_write_bw_refuses_as_perftest(profile: hwemu.Profile, fault: str | None,
                                         args: list[str], error: str) -> None:
    p = hwemu.inject(profile, fault) if fault else profile
    code, _, err = _tool(p, "ib_write_bw", *args, "127.0.0.1")
    assert code == 1 and err.startswith(error)


# --------------------------------------------------------------------------- profile, gate


def test_profiles_saved_before_the_load_fields_read_healthy(profile: hwemu.Profile) -> None:
    saved = profile.to_dict()
    for gpu in saved["gpus"]:
        del gpu["memory_test_fails"], gpu["nvlink_load_factor"]
    for hca in saved["hcas"]:
        del hca["load_factor"]
    assert hwemu.Profile.from_dict(saved) == profile


@pytest.mark.parametrize("kind", LOAD_FAULTS)
def test_load_only_faults_pass_the_gate(kind: str) -> None:
    verdict = judge(emulated.expected_host(), from_bundle(emulated.bundle(
        emulated.with_fault(kind))))
    assert verdict.passed and verdict.mismatches == ()


def test_acceptance_judges_the_emulated_figures(profile: hwemu.Profile) -> None:
    want = Acceptance(dcgm_level=3, nccl_busbw=400)

    def judged(p: hwemu.Profile) -> list[str]:
        return [m.field for m in judge_acceptance(
            want, dcgm=parse_dcgmi_diag(_tool(p, "dcgmi", "diag", "-r", "3", "-j")[1]),
            nccl=parse_nccl_tests(_all_reduce(p, *LARGE)))]

    assert judged(profile) == []
    assert judged(hwemu.inject(profile, "hbm-fail")) == ["accept.dcgm.memory"]
    assert judged(hwemu.inject(profile, "nvlink-slow")) == ["accept.nccl.busbw"]
