"""The environment of every process racklift starts: its own, less its secrets."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

# Environment variables never handed to a child process: Ansible (they would land in the
# runner's artifacts), ssh (its ProxyCommand would see them, and a SendEnv in ssh_config would
# send them), podman, the image and ramdisk builders' tools, scontrol.
SECRET_ENV = re.compile(r"TOKEN|PASSWORD|PASSWD|SECRET|PRIVATE_KEY|CREDENTIAL", re.IGNORECASE)
# ... except these: they name where the Vault password is, not the password, and without them
# Ansible cannot decrypt what is kept in Vault (BMC credentials in host vars).
VAULT_ENV = frozenset({"ANSIBLE_VAULT_PASSWORD_FILE", "ANSIBLE_VAULT_IDENTITY_LIST"})


def without_secrets(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (racklift's own environment unless given) less the variables named like
    secrets (but where the Vault password is)."""
    return {key: value for key, value in (os.environ if base is None else base).items()
            if key in VAULT_ENV or not SECRET_ENV.search(key)}
