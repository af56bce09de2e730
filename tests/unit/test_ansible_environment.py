"""What Ansible's process is handed: no secret, but where the Vault password is."""

from pathlib import Path

from racklift.ansible import child_environment
from racklift.netbox.client import NetBoxSettings


def test_vault_password_location_is_passed_and_secrets_are_not():
    base = {"PATH": "/usr/bin", "NETBOX_TOKEN": "s3cret", "RACKLIFT_BMC_PASSWORD": "hunter2",
            "ANSIBLE_VAULT_PASSWORD_FILE": "/etc/racklift/vault-pass",
            "ANSIBLE_VAULT_IDENTITY_LIST": "bmc@/etc/racklift/bmc-pass,ops@/usr/bin/vault-client",
            "ANSIBLE_BECOME_PASSWORD": "root-pw", "VAULT_TOKEN": "hvs.x"}
    env = child_environment(NetBoxSettings("http://nb", "s3cret"), Path("/run/tok"), ["a"],
                            base=base)
    assert env["ANSIBLE_VAULT_PASSWORD_FILE"] == "/etc/racklift/vault-pass"
    assert env["ANSIBLE_VAULT_IDENTITY_LIST"] == base["ANSIBLE_VAULT_IDENTITY_LIST"]
    # Everything else that looks like a secret stays stripped, Vault's own token included.
    assert not {"NETBOX_TOKEN", "RACKLIFT_BMC_PASSWORD", "ANSIBLE_BECOME_PASSWORD",
                "VAULT_TOKEN"} & env.keys()
    assert not {"s3cret", "hunter2", "root-pw", "hvs.x"} & set(env.values())


def test_vault_password_file_from_the_caller_is_passed_too():
    env = child_environment(NetBoxSettings("http://nb", "t"), Path("/run/tok"), ["a"],
                            {"ANSIBLE_VAULT_PASSWORD_FILE": "/tmp/pw"}, base={})
    assert env["ANSIBLE_VAULT_PASSWORD_FILE"] == "/tmp/pw"
