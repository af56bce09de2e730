"""racklift.hostvars: the vars the controller needs of each host (BMC settings and credentials),
from the Ansible inventory through Ansible's own variable manager, Vault included: what verify,
`bmc.inventory --host` and the image stage read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from racklift.ansible import run_in_ansible
from racklift.hostvars import read_hostvars, written
from racklift.netbox.client import NetBoxSettings

VAULT_PASSWORD = "vault-Pa55"
BMC_PASSWORD = "vaulted-bmc-Pa55"


def test_written_reads_each_hosts_file_once_and_says_why_one_is_missing(tmp_path):
    (tmp_path / "gpu-01.json").write_text(json.dumps({
        "racklift_bmc_port": 8443, "racklift_bmc_username": "admin",
        "racklift_bmc_ca_bundle": None, "racklift_installer_proxy": "", "racklift_bmc_insecure":
            "None"}))
    got = written(tmp_path, ["gpu-01", "gpu-02", "gpu-03"], {"gpu-02": "vault: bad secret"})
    assert got == {"gpu-01": {"racklift_bmc_port": 8443, "racklift_bmc_username": "admin"},
                   "gpu-02": "vault: bad secret",
                   "gpu-03": "no vars came back (is it in the Ansible inventory?)"}
    assert list(tmp_path.iterdir()) == []  # read once: the credentials do not stay on disk


def test_the_older_name_of_the_ssh_key_is_read_as_the_newer(tmp_path):
    (tmp_path / "gpu-01.json").write_text(json.dumps({"ansible_private_key_file": "/k1"}))
    (tmp_path / "gpu-02.json").write_text(json.dumps({
        "ansible_private_key_file": "/k1", "ansible_ssh_private_key_file": "/k2"}))
    assert written(tmp_path, ["gpu-01", "gpu-02"], {}) == {
        "gpu-01": {"ansible_ssh_private_key_file": "/k1"},
        "gpu-02": {"ansible_ssh_private_key_file": "/k2"}}


def _vaulted(tmp_path: Path) -> tuple[Path, Path]:
    """An inventory whose BMC password is in Vault, and the Vault's password file."""
    secret = tmp_path / "vault-password"
    secret.write_text(VAULT_PASSWORD + "\n")
    encrypted = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-vault"), "encrypt_string",
         "--vault-password-file", str(secret), BMC_PASSWORD],
        check=True, capture_output=True, text=True).stdout
    vaulted = "\n".join("        " + line for line in encrypted.strip().splitlines()[1:])
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  hosts:\n"
        "    gpu-01:\n"
        "      racklift_bmc_port: 8443\n"
        "      racklift_bmc_username: admin\n"
        f"      racklift_bmc_password: !vault |\n{vaulted}\n"
        "    gpu-02:\n"
        "      racklift_bmc_insecure: true\n")
    return inventory, secret


@pytest.mark.parametrize("variable", ["ANSIBLE_VAULT_PASSWORD_FILE",
                                      "ANSIBLE_VAULT_IDENTITY_LIST"])
def test_each_hosts_vars_come_vault_decrypted_and_one_hosts_bad_var_fails_it_alone(
        tmp_path, variable):
    inventory, secret = _vaulted(tmp_path)
    with inventory.open("a") as more:
        more.write("    gpu-03:\n      racklift_bmc_username: \"{{ undefined_thing }}\"\n")
    env = {"ANSIBLE_INVENTORY": str(inventory),
           variable: str(secret) if variable.endswith("FILE") else f"default@{secret}"}
    settings = NetBoxSettings("http://127.0.0.1:9", "unused-token")
    got = read_hostvars(["gpu-01", "gpu-02", "gpu-03", "gpu-09"], settings, env=env)
    assert got["gpu-01"] == {"racklift_bmc_port": 8443, "racklift_bmc_username": "admin",
                             "racklift_bmc_password": BMC_PASSWORD}
    assert got["gpu-02"] == {"racklift_bmc_insecure": True}
    assert got["gpu-03"].startswith("its vars could not be read: ")
    assert "undefined_thing" in got["gpu-03"]
    assert got["gpu-09"] == "not in the Ansible inventory"
    # What the process prints (and Ansible's warnings, on failure) never holds a value.
    printed = run_in_ansible("racklift.hostvars", {"hosts": ["gpu-01"], "extravars": {},
                                                   "directory": str(tmp_path)}, settings,
                             ["gpu-01"], env)
    assert printed == {"gpu-01": None} and BMC_PASSWORD not in json.dumps(printed)
    (written_file,) = tmp_path.glob("gpu-01.json")
    assert written_file.stat().st_mode & 0o777 == 0o600


def test_without_the_vaults_password_the_vaulted_host_fails_and_the_others_are_read(tmp_path):
    inventory, _ = _vaulted(tmp_path)
    got = read_hostvars(["gpu-01", "gpu-02"], NetBoxSettings("http://127.0.0.1:9", "t"),
                        env={"ANSIBLE_INVENTORY": str(inventory)})
    assert got["gpu-02"] == {"racklift_bmc_insecure": True}
    assert isinstance(got["gpu-01"], str) and "vault" in got["gpu-01"].lower()
    assert BMC_PASSWORD not in got["gpu-01"]
