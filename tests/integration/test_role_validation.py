"""Bad input to a node role fails in its validate step, with a message that names the host and
the variable to set, before any task that could change the host; a fixed choice a role's
meta/argument_specs.yml states fails before it, in Ansible's check of the spec (the message
names the variable, its choices and the value).

The role runs against the controller itself in check mode, so even a missing check could not
change this machine; the JSON callback shows which tasks ran before the failure.
"""

import json
import os
import subprocess
import sys

import pytest

from helpers import BIN, REPO

pytestmark = pytest.mark.ansible

CASES = {
    "unknown driver branch": (
        "nvidia_driver", {"nvidia_driver_branch": "999"},
        ["localhost", "unknown NVIDIA driver branch", "Set nvidia_driver_branch to one of",
         "550", "570"]),
    "driver version outside the branch": (
        "nvidia_driver", {"nvidia_driver_branch": "570", "nvidia_driver_version": "550.127.05"},
        ["nvidia_driver_version=550.127.05", "a version of that branch"]),
    "fabric manager without NVSwitch": (
        "nvidia_driver", {"nvidia_driver_fabricmanager": True, "nvidia_driver_nvswitch": False},
        ["asks for NVIDIA fabric manager", "has no NVSwitch", "fix the device type in NetBox"]),
    "precompiled modules on Debian": (
        "nvidia_driver", {"nvidia_driver_install_method": "precompiled"},
        ["not available on Debian", "precompiled modules only for Ubuntu"]),
    "unknown container engine": (
        "container_runtime", {"container_runtime_engine": "podman"},
        ["value of container_runtime_engine must be one of: docker, containerd, got: podman"]),
    "mirror without a scheme": (
        "container_runtime", {"container_runtime_registry_mirrors": {"docker.io": ["mirror:5000"]}},
        ['container_runtime_registry_mirrors["docker.io"] has "mirror:5000"',
         "http(s)://host[:port]"]),
    "DOCA without its repository": (
        "ofed", {"ofed_source": "doca", "ofed_version": "2.9.1-1"},
        ["localhost: ofed_source is doca but ofed_repo_url is empty", "set ofed_repo_url"]),
    "unknown OFED source": (
        "ofed", {"ofed_source": "mofed"},
        ["value of ofed_source must be one of: inbox, doca, mlnx_ofed, got: mofed"]),
    "mirror credentials on every address": (
        "registry_mirror", {"registry_mirror_upstreams": [
            {"name": "nvcr", "registry": "nvcr.io", "url": "https://nvcr.io", "port": 5001,
             "username": "$oauthtoken", "password": "nvapi-planted"}]},
        ["upstreams nvcr carry credentials", 'registry_mirror_listen_address is "0.0.0.0"',
         "set it to this host's address"]),
    "host name that is no DNS label": (
        "base_os", {"base_os_hostname": "GPU_042"},
        ["base_os_hostname must be a lowercase DNS label", "GPU_042", "rename the device"]),
}
SPEC_OR_ASSERT = {"ansible.builtin.validate_argument_spec", "ansible.builtin.assert"}


def run_role(role: str, variables: dict, tmp_path) -> dict:
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "gather_facts": True,
        "roles": [{"role": role, **variables}]}]))
    env = {**os.environ, "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
           "ANSIBLE_LIBRARY": str(REPO / "plugins" / "modules"),
           "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
           "ANSIBLE_INVENTORY_UNPARSED_FAILED": "false", "ANSIBLE_LOCALHOST_WARNING": "false"}
    result = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "--check",
         "-e", f"ansible_python_interpreter={sys.executable}", str(playbook)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0, f"{role} accepted bad input: {result.stdout[-2000:]}"
    return json.loads(result.stdout)


@pytest.mark.parametrize("case", CASES)
def test_bad_input_fails_in_validate_before_any_change(case, tmp_path):
    role, variables, fragments = CASES[case]
    report = run_role(role, variables, tmp_path)
    tasks = report["plays"][0]["tasks"]
    ran = [(t["task"]["name"], t["hosts"]["localhost"]) for t in tasks if "localhost" in t["hosts"]]
    failed = [(name, res) for name, res in ran if res.get("failed")]
    assert len(failed) == 1, ran
    name, result = failed[0]
    # The spec's check, or an assert of the role's validate.yml.
    assert result["action"] in SPEC_OR_ASSERT, name
    # A looped assert keeps each item's message in its results.
    messages = [result["msg"], *(item.get("msg", "") for item in result.get("results", []))]
    message = " ".join(m if isinstance(m, str) else " ".join(m) for m in messages)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert not any(res.get("changed") for _, res in ran), ran
