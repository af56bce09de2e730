"""apt_vendor asks dpkg what a host has before it runs apt: its query (roles/apt_vendor/vars)
run for real on this Debian machine through Ansible's own templating, and what the role then
installs and removes. apt runs only for what is missing or at a version the pin does not allow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NO_SUCH = "racklift-no-such-package"


def dpkg_version(package: str) -> str:
    return subprocess.run(["dpkg-query", "--show", "--showformat=${Version}", package],
                          capture_output=True, text=True, check=True).stdout


def decide(tmp_path: Path, packages: list[str], version: str, remove: list[str]) -> dict:
    """The role's query run here, and (missing, remove_installed) as the role computes them."""
    play = [{"hosts": "localhost", "gather_facts": False,
             "vars": {"apt_vendor_packages": packages, "apt_vendor_version": version,
                      "apt_vendor_remove": remove},
             "tasks": [
                 {"ansible.builtin.include_vars": str(REPO / "roles/apt_vendor/vars/main.yml")},
                 {"ansible.builtin.command": {"argv": "{{ __apt_vendor_dpkg_query }}"},
                  "register": "apt_vendor_dpkg", "failed_when": "apt_vendor_dpkg.rc not in [0, 1]"},
                 {"ansible.builtin.copy": {
                     "dest": str(tmp_path / "out.json"),
                     "content": "{{ {'missing': __apt_vendor_missing, 'lines': "
                                "__apt_vendor_dpkg_lines, 'remove': __apt_vendor_remove_installed}"
                                " | to_json }}"}}]}]
    (tmp_path / "play.yml").write_text(json.dumps(play))
    (tmp_path / "ansible.cfg").write_text("")
    result = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
         "-e", f"ansible_python_interpreter={sys.executable}", str(tmp_path / "play.yml")],
        env={**os.environ, "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg")},
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:]
    return json.loads((tmp_path / "out.json").read_text())


def test_one_line_per_package(tmp_path):
    seen = decide(tmp_path, ["bash", "coreutils"], "", [])
    assert [line.split()[0] for line in seen["lines"]] == ["bash", "coreutils"]
    assert seen["lines"][0].split() == ["bash", "ii", dpkg_version("bash")]


def test_installed_at_an_allowed_version_is_not_installed_again(tmp_path):
    version = dpkg_version("bash")
    prefix = version.split(".")[0]
    assert decide(tmp_path, ["bash"], "", [])["missing"] == []
    assert decide(tmp_path, ["bash"], version, [])["missing"] == []
    assert decide(tmp_path, ["bash"], f"{prefix}.*", [])["missing"] == []


@pytest.mark.parametrize("pin", ["0.0.1-*", "{v}.1", "x{v}"])
def test_another_version_or_a_missing_package_is_installed(tmp_path, pin):
    pin = pin.format(v=dpkg_version("bash"))
    assert decide(tmp_path, ["bash", NO_SUCH], pin, [])["missing"] == ["bash", NO_SUCH]


def test_only_installed_packages_are_removed(tmp_path):
    assert decide(tmp_path, [], "", [NO_SUCH, "bash"])["remove"] == ["bash"]
