"""The emulator on a lab host (src/racklift/lab/hwemu/cli.py and the lab_hardware role's hwemu-tool
launcher): installed outside the racklift tree and run by the hosts' Python 3.11 through
tool-named links, directly and as subcommands, without a driver, with a lost GPU, and the
acceptance tools; and the package importing only the standard library. One of the emulator's
test files, one per module of src/racklift/lab/hwemu, named test_hwemu_<module>.py."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import hwemu_support
import pytest
from hwemu_support import free_port

from racklift.facts.parsers.nccl_tests import parse_nccl_tests
from racklift.facts.parsers.perftest import parse_perftest_bw
from racklift.lab import hwemu
from racklift.paths import REPO_ROOT

PACKAGE = Path(hwemu.__file__).resolve().parent
SYSTEM_PYTHON = Path("/usr/bin/python3")

profile = hwemu_support.profile


# --------------------------------------------------------------------------- lab-host CLI


def _system_python() -> Path:
    if not SYSTEM_PYTHON.exists():
        pytest.skip("no /usr/bin/python3 on this machine")
    version = subprocess.run([SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    if version != "(3, 11)":
        pytest.skip(f"/usr/bin/python3 is {version}, not the lab hosts' 3.11")
    return SYSTEM_PYTHON


@pytest.fixture
def lab_host(tmp_path: Path, profile: hwemu.Profile) -> dict[str, object]:
    """The emulator as the lab_hardware role installs it (outside the racklift tree): the
    package's modules and the launcher, with tool-named symlinks to the launcher."""
    python = _system_python()
    libdir = tmp_path / "lib"
    (libdir / "hwemu").mkdir(parents=True)
    for module in PACKAGE.glob("*.py"):
        shutil.copy2(module, libdir / "hwemu" / module.name)
    script = libdir / "hwemu-tool"
    shutil.copy2(REPO_ROOT / "roles/lab_hardware/files/hwemu-tool", script)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in hwemu.TOOLS:
        (bindir / tool).symlink_to(script)
    profile_path = tmp_path / "hardware.json"
    hwemu.save_profile(profile, str(profile_path))
    env = {"PATH": "/usr/bin:/bin", "RACKLIFT_HW_PROFILE": str(profile_path), "LC_ALL": "C"}

    def run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        target = bindir / tool if tool in hwemu.TOOLS else script
        argv = [str(python), "-I", str(target), *args] if tool in hwemu.TOOLS else [
            str(python), "-I", str(script), tool, *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60,
                              check=False)

    return {"run": run, "bin": bindir, "profile": profile_path, "env": env, "script": script}


def test_lab_cli_through_symlinks(lab_host: dict, profile: hwemu.Profile) -> None:
    run = lab_host["run"]
    xml = run("nvidia-smi", "-q", "-x")
    assert xml.returncode == 0, xml.stderr
    assert len(ET.fromstring(xml.stdout).findall("gpu")) == 8
    listing = run("nvidia-smi", "-L")
    assert listing.stdout == hwemu.nvidia_smi_list(profile)
    csv = run("nvidia-smi", "--query-gpu=index,serial,pcie.link.width.current,memory.total",
              "--format=csv,noheader,nounits")
    assert csv.returncode == 0
    assert csv.stdout.splitlines()[0] == f"0, {profile.gpus[0].serial}, 16, 81559"
    bad = run("nvidia-smi", "--query-gpu=index,nope", "--format=csv")
    assert bad.returncode == 2
    assert bad.stdout == 'Field "nope" is not a valid field to query.\n\n'
    assert run("ibstat").stdout == hwemu.ibstat(profile)
    assert run("ibstat", "mlx5_0").stdout == hwemu.ibstat(profile, "mlx5_0")
    missing = run("ibstat", "mlx5_42")
    assert missing.returncode == 255 and "stat of IB device 'mlx5_42' failed" in missing.stderr
    assert run("ibv_devinfo").stdout == hwemu.ibv_devinfo(profile)
    assert run("dmidecode", "-t", "system").stdout == hwemu.dmidecode(profile, "system")
    assert run("dmidecode", "-s", "system-serial-number").stdout == "S421GE0001X0001\n"
    assert run("dmesg").stdout == hwemu.dmesg(profile)
    assert run("nvidia-smi").stdout.splitlines()[2].startswith("| NVIDIA-SMI 550.127.08 ")


def test_lab_cli_direct_exec_and_subcommands(lab_host: dict, tmp_path: Path,
                                             profile: hwemu.Profile) -> None:
    env = lab_host["env"]
    direct = subprocess.run([str(lab_host["bin"] / "nvidia-smi"), "-L"], capture_output=True,
                            text=True, env=env, timeout=60, check=False)
    assert direct.returncode == 0 and direct.stdout == hwemu.nvidia_smi_list(profile)
    run = lab_host["run"]
    shown = run("profile")
    assert shown.returncode == 0 and hwemu.Profile.from_json(shown.stdout) == profile
    root = tmp_path / "sysroot"
    assert run("write-sysfs", str(root)).returncode == 0
    assert (root / "class/infiniband/mlx5_0/ports/1/state").read_text() == "4: ACTIVE\n"
    assert run("inject", "ib-rate-wrong").returncode == 0
    assert "\t\tRate: 200\n" in run("ibstat", "mlx5_5").stdout
    assert run("heal").returncode == 0
    assert hwemu.load_profile(str(lab_host["profile"])) == profile
    assert run("inject", "no-such-fault").returncode == 1
    assert run("nvidia-smi", "-L").stdout == hwemu.nvidia_smi_list(profile)


def test_lab_cli_without_driver_exits_9(lab_host: dict, profile: hwemu.Profile) -> None:
    profile.driver_version = None
    profile.cuda_version = None
    hwemu.save_profile(profile, str(lab_host["profile"]))
    for args in (["-q", "-x"], ["-L"], []):
        res = lab_host["run"]("nvidia-smi", *args)
        assert res.returncode == 9
        assert res.stdout.splitlines()[0] == (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.")


def test_lab_cli_with_a_lost_gpu_names_it_and_exits_15(lab_host: dict,
                                                       profile: hwemu.Profile) -> None:
    hwemu.save_profile(hwemu.inject(profile, "gpu-lost"), str(lab_host["profile"]))
    line = "Unable to determine the device handle for GPU 0000:AB:00.0: Unknown Error"
    xml = lab_host["run"]("nvidia-smi", "-q", "-x")
    assert xml.returncode == 15 and xml.stdout.startswith(line + "\n<?xml")
    assert len(ET.fromstring(xml.stdout.split("\n", 1)[1]).findall("gpu")) == 7
    summary = lab_host["run"]("nvidia-smi")
    assert (summary.returncode, summary.stdout) == (15, line + "\n")
    listing = lab_host["run"]("nvidia-smi", "-L").stdout.splitlines()
    assert listing[5] == line and len(listing) == 8


def test_lab_cli_acceptance_tools(lab_host: dict, profile: hwemu.Profile) -> None:
    """dcgmi, all_reduce_perf and an ib_write_bw pair on the lab hosts' Python, through their
    links: the server in the background, its client over TCP."""
    run = lab_host["run"]
    diag = run("dcgmi", "diag", "-r", "1")
    assert (diag.returncode, diag.stdout) == (0, hwemu.dcgmi_diag(profile, 1))
    nccl = run("all_reduce_perf", "-b", "8", "-e", "128M", "-f", "2", "-g", "8")
    assert nccl.returncode == 0 and parse_nccl_tests(nccl.stdout).ranks == 8
    port = str(free_port())
    server = subprocess.Popen([str(_system_python()), "-I", str(lab_host["bin"] / "ib_write_bw"),
                               "-d", "mlx5_0", "-p", port], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=lab_host["env"])
    client = run("ib_write_bw", "-d", "mlx5_0", "-p", port, "127.0.0.1")
    served, _ = server.communicate(timeout=60)
    assert (client.returncode, server.returncode) == (0, 0), client.stderr
    assert parse_perftest_bw(client.stdout).rows == parse_perftest_bw(served).rows


def test_hwemu_imports_only_stdlib_and_itself() -> None:
    """On a lab host the package is a top-level `hwemu`: stdlib and relative imports only."""
    for path in [*PACKAGE.glob("*.py"), REPO_ROOT / "roles/lab_hardware/files/hwemu-tool"]:
        tree = ast.parse(path.read_text())
        modules = {alias.name.split(".")[0] for node in ast.walk(tree)
                   if isinstance(node, ast.Import) for alias in node.names}
        modules |= {node.module.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module and not node.level}
        allowed = {"hwemu"} if path.name == "hwemu-tool" else set()
        assert modules <= set(sys.stdlib_module_names) | {"__future__"} | allowed, (path, modules)
