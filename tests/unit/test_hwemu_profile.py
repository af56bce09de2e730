"""The hardware profile (src/racklift/lab/hwemu/profile.py, generate.py): generated the same from
the same seed and with distinct identities per host, healthy, through JSON; and the installed
driver read from dpkg-query's listing, shown in every nvidia-smi format and in dmesg, kept
through a fault and heal, and asked for by the launcher on a lab host. One of the emulator's
test files, one per module of src/racklift/lab/hwemu, named test_hwemu_<module>.py."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import hwemu_support
import pytest
from hwemu_support import CABLES, _check_driver, _parse_q

from racklift.lab import hwemu
from racklift.lab.hwemu import cli as hwemu_cli
from racklift.lab.hwemu import nvidia_smi

profile = hwemu_support.profile


# --------------------------------------------------------------------------- profile


def test_generate_profile_is_deterministic(profile: hwemu.Profile) -> None:
    again = hwemu.cabled(hwemu.generate_profile("gpu-a01", "S421GE0001X0001", 7), CABLES)
    assert again.to_dict() == profile.to_dict()
    assert hwemu.nvidia_smi_query(again, ["uuid", "serial"]) == hwemu.nvidia_smi_query(
        profile, ["uuid", "serial"])


def test_generate_profile_distinct_identities(profile: hwemu.Profile) -> None:
    other = hwemu.generate_profile("gpu-a02", "S421GE0001X0002", 8)

    def ids(p: hwemu.Profile) -> set[str]:
        return ({g.serial for g in p.gpus} | {g.uuid for g in p.gpus}
                | {h.node_guid for h in p.hcas} | {p.system.uuid})

    assert len(ids(profile)) == 8 + 8 + 8 + 1
    assert not ids(profile) & ids(other)
    assert len({h.base_lid for h in profile.hcas}) == 8


def test_healthy_profile(profile: hwemu.Profile) -> None:
    assert len(profile.gpus) == 8 and len(profile.hcas) == 8
    assert profile.faults == [] and not profile.mac_swapped and not profile.nvswitch
    assert profile.seed == 7 and profile.original_serial == "S421GE0001X0001"
    assert all(h.state == "Active" and h.rate == 400 for h in profile.hcas)
    assert all(g.ecc_mode_current == "Enabled" and _aggregate(g) == 0 for g in profile.gpus)


def _aggregate(g: hwemu.GPU) -> int:
    return nvidia_smi._aggregate_uncorrected(g) + nvidia_smi._volatile_uncorrected(g)


def test_profile_json_round_trip(profile: hwemu.Profile) -> None:
    text = profile.to_json()
    back = hwemu.Profile.from_json(text)
    assert back == profile
    assert json.loads(text)["system"]["product"] == "SYS-421GE-TNHR2-LCC"
    assert hwemu.GPU.from_dict(profile.gpus[0].to_dict()) == profile.gpus[0]
    assert hwemu.HCAPort.from_dict(profile.hcas[0].to_dict()) == profile.hcas[0]
    assert hwemu.System.from_dict(profile.system.to_dict()) == profile.system


# --------------------------------------------------------------------------- installed driver

# What dpkg-query -W prints on a lab host after the nvidia_driver role (it holds its packages).
DPKG = ("base-files\t12.4+deb12u8\tii \n"
        "nvidia-fabricmanager-550\t550.127.05-1\thi \n"
        "nvidia-open-550\t550.127.05-1\thi \n")


@pytest.mark.parametrize(("packages", "version"), [
    (DPKG, "550.127.05"),
    ("nvidia-driver-570-open\t570.124.06-0ubuntu0.24.04.1\tii \n", "570.124.06"),  # Ubuntu
    ("nvidia-driver\t535.183.01-1~deb12u1\tii \n", "535.183.01"),  # Debian's own
    ("cuda-drivers\t565.57.01-1\tii \nnvidia-kernel-open-dkms\t565.57.01-1\tii \n",
     "565.57.01"),
    # Mid-upgrade the newest, compared as numbers (a string compare would pick 550.54.15).
    ("nvidia-utils-550\t550.54.15-0ubuntu1\tii \nnvidia-open-550\t550.127.08-1\tii \n",
     "550.127.08"),
    ("nvidia-open-550\t550.127.08-1\trc \n", None),  # removed, its configuration left
    ("nvidia-fabricmanager-550\t550.127.08-1\tii \n"
     "nvidia-driver-assistant\t0.20.124.06-1\tii \n", None),  # not the driver
    ("", None),
])
def test_installed_driver_from_dpkg_query(packages: str, version: str | None) -> None:
    assert hwemu.installed_driver(packages) == version


def _every_output(p: hwemu.Profile) -> dict[str, str]:
    return {"xml": hwemu.nvidia_smi_xml(p), "q": hwemu.nvidia_smi_q(p),
            "table": hwemu.nvidia_smi_summary(p), "version": hwemu.nvidia_smi_version(p),
            "csv": hwemu.nvidia_smi_query(p, ["driver_version"], True, True),
            "dmesg": hwemu.dmesg(p)}


def test_installed_driver_shows_in_every_format(profile: hwemu.Profile) -> None:
    p = hwemu.with_installed_driver(profile, "550.127.05")
    out = _every_output(p)
    assert not [name for name, text in out.items() if "550.127.08" in text]
    root = ET.fromstring(out["xml"])
    assert (root.findtext("driver_version"), root.findtext("cuda_version")) == (
        "550.127.05", "12.4")
    assert root.find("gpu").findtext("gsp_firmware_version") == "550.127.05"
    q = _parse_q(out["q"])
    assert (q["Driver Version"], q["CUDA Version"]) == ("550.127.05", "12.4")
    assert "| NVIDIA-SMI 550.127.05             Driver Version: 550.127.05     " \
           "CUDA Version: 12.4     |" in out["table"]
    assert "NVML version        : 550.127\nDRIVER version      : 550.127.05\n" in out["version"]
    assert out["csv"] == "550.127.05\n" * 8
    assert "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.127.05  " in out["dmesg"]
    assert profile.driver_version == "550.127.08"  # input untouched
    # Another branch brings its CUDA version.
    other = ET.fromstring(hwemu.nvidia_smi_xml(hwemu.with_installed_driver(profile, "570.124.06")))
    assert (other.findtext("driver_version"), other.findtext("cuda_version")) == (
        "570.124.06", "12.8")


def test_no_driver_package_means_no_driver(profile: hwemu.Profile) -> None:
    p = hwemu.with_installed_driver(profile, None)
    assert (p.driver_version, p.cuda_version) == (None, None)
    log = hwemu.dmesg(p)
    assert "mlx5_core" in log and not re.search(r"nvidia|NVRM", log)


def test_wrong_driver_fault_is_not_the_installed_one(profile: hwemu.Profile) -> None:
    faulty = hwemu.inject(profile, "driver-version-wrong")
    assert _check_driver(hwemu.with_installed_driver(faulty, "550.127.08"))
    assert hwemu.with_installed_driver(faulty, None).driver_version is None


def test_heal_keeps_the_driver_source(profile: hwemu.Profile) -> None:
    profile.driver_from_packages = True
    assert hwemu.heal(hwemu.inject(profile, "xid-79")).driver_from_packages


def test_cli_on_a_lab_host_asks_dpkg(profile: hwemu.Profile, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    profile.driver_from_packages = True
    path = tmp_path / "hw.json"
    hwemu.save_profile(profile, str(path))
    monkeypatch.setenv(hwemu.PROFILE_ENV, str(path))
    status = tmp_path / "status"  # stands in for dpkg's database: what the answer is keyed by
    monkeypatch.setattr(hwemu_cli, "DPKG_STATUS", str(status))
    monkeypatch.setattr(hwemu_cli, "DRIVER_CACHE", str(tmp_path / "run" / "installed-driver"))
    listing = tmp_path / "packages"
    fake = tmp_path / "dpkg-query"  # answers only the collector's query
    answer = (f"#!/bin/sh\n[ \"$*\" = '-W -f ${{Package}}\t${{Version}}"
              f"\t${{db:Status-Abbrev}}\n' ] && exec /bin/cat {listing}\nexit 2\n")
    fake.write_text(answer)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))

    def install(packages: str) -> None:  # as dpkg does: the database changes with them
        listing.write_text(packages)
        status.write_text(packages)

    install(DPKG)
    assert hwemu.main(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]) == 0
    assert capsys.readouterr().out == "550.127.05\n" * 8
    fake.unlink()  # the database unchanged: the driver read last time, dpkg-query not asked
    assert hwemu.main(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]) == 0
    assert capsys.readouterr().out == "550.127.05\n" * 8
    fake.write_text(answer)
    fake.chmod(0o755)
    install("base-files\t12.4+deb12u8\tii \n")
    assert hwemu.main(["nvidia-smi"]) == 9
    assert capsys.readouterr().out == hwemu.NVIDIA_SMI_NO_DRIVER + "\n\n"
    fake.unlink()  # no dpkg at all: say so, rather than guess
    install(DPKG)
    assert hwemu.main(["ibstat"]) == 1
    assert "cannot read the hardware profile or packages" in capsys.readouterr().err
