"""BMC credentials kept in Ansible Vault: a playbook run through racklift's `run_playbook`
decrypts them with the operator's Vault password file or identity list, and neither the Vault
password nor the decrypted secret reaches the runner's artifacts. Local connection only."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from helpers import BIN
from racklift.ansible import run_playbook
from racklift.netbox.client import NetBoxSettings

pytestmark = pytest.mark.ansible

VAULT_PASSWORD = "vault-pass-3c9d1e"
BMC_PASSWORD = "bmc-pass-7a41f0"
TASK = "Fingerprint the BMC password"
PLAYBOOK = f"""
- hosts: localhost
  gather_facts: false
  vars_files: [bmc.yml]
  tasks:
    - name: {TASK}
      ansible.builtin.debug:
        msg: "{{{{ racklift_bmc_password | hash('sha256') }}}}"
"""


@pytest.fixture
def vaulted(tmp_path):
    """A playbook whose vars file holds the BMC password encrypted, and the Vault password's
    file."""
    password_file = tmp_path / "vault-pass"
    password_file.write_text(VAULT_PASSWORD + "\n")
    password_file.chmod(0o600)
    encrypted = subprocess.run(
        [str(BIN / "ansible-vault"), "encrypt_string", "--vault-id",
         f"bmc@{password_file}", "--stdin-name", "racklift_bmc_password"],
        input=BMC_PASSWORD, capture_output=True, text=True, check=True).stdout
    assert BMC_PASSWORD not in encrypted
    (tmp_path / "bmc.yml").write_text(encrypted)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "hosts.ini").write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    return tmp_path


@pytest.mark.parametrize("variable", ["ANSIBLE_VAULT_PASSWORD_FILE",
                                      "ANSIBLE_VAULT_IDENTITY_LIST"])
def test_vaulted_bmc_password_is_decrypted_and_never_recorded(vaulted, monkeypatch, variable):
    password_file = vaulted / "vault-pass"
    monkeypatch.setenv(variable, str(password_file) if variable.endswith("FILE")
                       else f"bmc@{password_file}")
    artifacts = vaulted / "artifacts"
    result = run_playbook(str(vaulted / "play.yml"), ["localhost"],
                          NetBoxSettings("http://127.0.0.1:9", "unused-token"),
                          {"ANSIBLE_INVENTORY": str(vaulted / "hosts.ini")},
                          artifacts=artifacts, ident="vault", capture=[TASK])
    assert result.rc == 0 and not result.failed
    assert result.captured["localhost"][TASK]["msg"] == hashlib.sha256(
        BMC_PASSWORD.encode()).hexdigest()
    # The runner recorded where the password is, and nothing else of it.
    command = json.loads(next(artifacts.rglob("command")).read_text())
    assert command["env"][variable].endswith(str(password_file))
    assert TASK in next(artifacts.rglob("stdout")).read_text()
    files = [p for p in artifacts.rglob("*") if p.is_file()]
    for path in files:
        text = path.read_text(errors="replace")
        assert VAULT_PASSWORD not in text and BMC_PASSWORD not in text, path
