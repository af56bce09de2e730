"""Every process racklift starts gets its environment less its secrets: podman (and Molecule
through it), the image and ramdisk builders' tools, as Ansible, ssh and scontrol do. Planted:
racklift runs with the NetBox token and a BMC password in its environment."""

from __future__ import annotations

import pytest

from racklift import podman
from racklift.child_env import without_secrets
from racklift.imaging import diskimage

PLANTED = {"NETBOX_TOKEN": "nbt-0123456789abcdef", "RACKLIFT_BMC_PASSWORD": "s3cret-bmc",
           "MY_SECRET": "s3cret-other"}


@pytest.fixture
def planted(monkeypatch):
    for name, value in PLANTED.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", "/etc/racklift/vault-pass")
    monkeypatch.setenv("LANG", "C.UTF-8")


def test_the_stripped_environment_keeps_where_the_vault_password_is(planted):
    env = without_secrets()
    assert not set(PLANTED) & set(env)
    assert env["ANSIBLE_VAULT_PASSWORD_FILE"] == "/etc/racklift/vault-pass"
    assert env["LANG"] == "C.UTF-8"


def test_podman_gets_no_secret(planted):
    env = podman.env()
    assert not set(PLANTED) & set(env) and env["LANG"] == "C.UTF-8"
    assert env["CONTAINERS_CONF"] == str(podman.CONTAINERS_CONF)


def test_the_image_builders_tools_get_no_secret(planted):
    printed = diskimage._run("env", what="printing the environment").stdout.decode()
    assert "LANG=C.UTF-8" in printed
    assert not any(value in printed for value in PLANTED.values()), printed
