"""inventory/group_vars/all: the node roles' variables come from the inventory's
`racklift_desired` (racklift.netbox.desired's defaults), with no defaults of their own; what
the roles get, as Ansible itself templates it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from helpers import BIN
from racklift.ansible_inventory import desired_vars
from racklift.lab import hosts, seed
from racklift.netbox.desired import DesiredState, parse
from racklift.paths import REPO_ROOT

GROUP_VARS = REPO_ROOT / "inventory" / "group_vars"
NODE_ROLES = GROUP_VARS / "all" / "node_roles.yml"
# What every role variable is where the context says nothing: racklift's defaults.
DEFAULTS = {
    "nvidia_driver_branch": "550", "nvidia_driver_version": "",
    "nvidia_driver_kernel_modules": "open", "nvidia_driver_nvswitch": False,
    "nvidia_driver_fabricmanager": False,
    "container_runtime_toolkit_enabled": True, "container_runtime_toolkit_version": "1.17.3-1",
    "container_runtime_registry_mirrors": {},
    "ofed_source": "inbox", "ofed_version": "", "ofed_repo_url": "", "ofed_repo_key_url": "",
    "ofed_repo_key_fingerprint": "", "ofed_hca_firmware_version": "",
}
# Host → its config context, and the role variables that differ from DEFAULTS.
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "empty": ({}, {}),
    "seed-gpu-server": ({**seed.DESIRED_SOFTWARE, "hardware": {"nvswitch": True}}, {
        "nvidia_driver_version": "550.127.08", "nvidia_driver_nvswitch": True,
        "nvidia_driver_fabricmanager": True,
        "container_runtime_registry_mirrors": {
            "docker.io": ["https://registry-mirror.lab.racklift.test:5000"]},
        # DOCA without its repository: the ofed role refuses it and says what to set.
        "ofed_source": "doca", "ofed_version": "2.9.1-1"}),
    # Lab hosts: no toolkit, OFED version or mirror managed.
    "lab-host": (hosts.LAB_SOFTWARE, {"nvidia_driver_version": "550.127.08",
                                      "container_runtime_toolkit_enabled": False,
                                      "container_runtime_toolkit_version": ""}),
    "fabric-manager-off": ({"nvidia_driver": {"fabricmanager": False},
                            "hardware": {"nvswitch": True}}, {"nvidia_driver_nvswitch": True}),
    # The HCAs' firmware is pinned with the rest of the firmware (racklift.firmware.HCA).
    "other-branch": ({"nvidia_driver": {"branch": "570", "kernel_modules": "proprietary"},
                      "firmware": {"HCA": "28.39.1002", "BMC": "1.0"}},
                     {"nvidia_driver_branch": "570", "nvidia_driver_kernel_modules": "proprietary",
                      "ofed_hca_firmware_version": "28.39.1002"}),
}


def test_group_vars_keep_no_defaults_of_their_own() -> None:
    found: dict[str, Any] = {}
    for path in sorted((GROUP_VARS / "all").glob("*.yml")):
        found.update(yaml.safe_load(path.read_text()))
    assert "racklift_software_defaults" not in found and "racklift_software" not in found
    assert found["racklift_roles"] == ["base_os", "nvidia_driver", "ofed", "container_runtime"]
    for name, value in found.items():
        # ssh.yml: how the run reaches a host it imaged (its pinned host key), no role's value.
        if name not in ("racklift_roles", "base_os_hostname", "racklift_host_key_args",
                        "ansible_ssh_extra_args"):
            assert "racklift_desired" in str(value) and "default(" not in str(value), name


def test_each_role_variable_follows_the_desired_state_as_ansible_templates_it(
        tmp_path: Path) -> None:
    inventory = {"all": {"hosts": {}}}
    for name, (context, _) in CASES.items():
        state = parse(context)
        assert isinstance(state, DesiredState), name
        inventory["all"]["hosts"][name] = {"ansible_connection": "local",
                                           "racklift_desired": desired_vars(state, context)}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "group_vars").symlink_to(GROUP_VARS)  # loaded next to the inventory source
    (tmp_path / "ansible.cfg").write_text("")
    names = [*yaml.safe_load(NODE_ROLES.read_text())]
    shown = "{" + ", ".join(f"'{n}': {n}" for n in names) + "}"
    result = subprocess.run(
        [str(BIN / "ansible"), "all", "-i", "hosts.yml", "-m", "ansible.builtin.debug",
         "-a", f"msg={{{{ {shown} | to_json }}}}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"),
             "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
             "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"})
    assert result.returncode == 0, result.stdout + result.stderr
    got = json.loads(result.stdout)["plays"][0]["tasks"][0]["hosts"]
    for name, (_, changed) in CASES.items():
        assert json.loads(got[name]["msg"]) == {"base_os_hostname": name, **DEFAULTS,
                                                **changed}, name
