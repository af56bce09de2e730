"""racklift.hostvars: the vars the controller needs of each host (BMC settings and credentials),
from the Ansible inventory through playbooks/hostvars.yml, Vault included: what verify and
`bmc.inventory --host` read, and the image stage inside image_hostvars.yml."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


def test_the_playbook_gives_each_hosts_vars_vault_decrypted_and_records_no_secret(tmp_path):
    inventory, secret = _vaulted(tmp_path)
    artifacts = tmp_path / "artifacts"
    got = read_hostvars(["gpu-01", "gpu-02", "gpu-09"],
                        NetBoxSettings("http://127.0.0.1:9", "unused-token"),
                        env={"ANSIBLE_INVENTORY": str(inventory),
                             "ANSIBLE_VAULT_PASSWORD_FILE": str(secret)},
                        artifacts=artifacts, ident="hostvars")
    assert got == {
        "gpu-01": {"racklift_bmc_port": 8443, "racklift_bmc_username": "admin",
                   "racklift_bmc_password": BMC_PASSWORD},
        "gpu-02": {"racklift_bmc_insecure": True},
        "gpu-09": "no vars came back (is it in the Ansible inventory?)"}
    # An inventory with none of them: Ansible runs nothing, and says so for each.
    lacking = read_hostvars(["gpu-08", "gpu-09"], NetBoxSettings("http://127.0.0.1:9", "t"),
                            env={"ANSIBLE_INVENTORY": str(inventory)})
    assert set(lacking) == {"gpu-08", "gpu-09"} and len(set(lacking.values())) == 1
    assert "ansible-playbook hostvars.yml did not run" in lacking["gpu-09"]
    assert "Could not match supplied host pattern" in lacking["gpu-09"]
    recorded = [p for p in artifacts.rglob("*") if p.is_file()]
    assert recorded, "the run's artifacts are kept"
    assert not any(BMC_PASSWORD in p.read_text(errors="replace") for p in recorded)
