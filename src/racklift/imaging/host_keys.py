"""The SSH host key the controller gives a host it images, and the known_hosts that pins it.

The deploy's nonce proves which disk booted, not which machine answers: the first SSH after a
deploy would otherwise trust whatever key it is shown. So the controller makes each deployed
host's ed25519 host key, hands it over in what only that host can fetch (the deploy data behind
its one-time token; an installed host's preseed or autoinstall, served to its reserved address
alone), which the deploy ramdisk or the installer's late command writes into /etc/ssh before the
host's first boot, and writes the public half to the run's known_hosts file for that host. Every
connection of the run to the host then accepts that key alone (`racklift_host_key_args` in
inventory/group_vars/all/ssh.yml): the image stage's SSH check, configure, the collector,
acceptance. A host presenting another key fails with MISMATCH_ERROR (`described`).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from racklift.errors import RackliftError
from racklift.names import checked_hosts

PUBLIC_RE = re.compile(r"^ssh-ed25519 [A-Za-z0-9+/]+={0,2}$")
BASE64_RE = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
KNOWN_HOSTS_DIR = "known_hosts"  # under the run directory: one file per host, named after it
EXTRA_VAR = "racklift_known_hosts"  # what the run passes Ansible: {"dir": ..., "hosts": [...]}
# ssh reads UserKnownHostsFile as whitespace-separated names with %-tokens: a directory holding
# any of these would name another file than the run's.
UNSAFE_PATH = re.compile(r"[\s%\"'\\]")
# What OpenSSH prints when the key a host presents is not the one known_hosts holds for it.
MISMATCH_SIGNS = ("REMOTE HOST IDENTIFICATION HAS CHANGED", "Host key verification failed")


@dataclass(frozen=True)
class HostKey:
    """One host's SSH host key pair; the private half never appears in a repr."""

    public: str  # "ssh-ed25519 AAAA...", as /etc/ssh/ssh_host_ed25519_key.pub holds it
    private: str = field(repr=False)  # the OpenSSH private key file's text

    def private_base64(self) -> str:
        """The private key file in one line: the ramdisk reads deploy data with sed."""
        return base64.b64encode(self.private.encode()).decode()


def new_host_key() -> HostKey:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    return HostKey(public=public, private=private)


def deploy_fields(key: HostKey) -> dict[str, str]:
    """The key's fields in a host's deploy data, each checked to be one plain line."""
    public, private = key.public.strip(), key.private_base64()
    if not PUBLIC_RE.fullmatch(public) or not BASE64_RE.fullmatch(private):
        raise ValueError("not an ed25519 host key made by host_keys.new_host_key()")
    return {"ssh_host_ed25519_key": private, "ssh_host_ed25519_key_pub": public}


def known_hosts_dir(run_dir: Path) -> Path:
    path = Path(run_dir).resolve() / KNOWN_HOSTS_DIR
    if UNSAFE_PATH.search(str(path)):
        raise RackliftError(f"the run directory {str(path)[:200]!r} holds whitespace, a quote, "
                            "a backslash or '%', which ssh's UserKnownHostsFile would read as "
                            "something else: give racklift a state directory without them "
                            "(RACKLIFT_STATE)")
    return path


def write_known_hosts(run_dir: Path, host: str, key: HostKey) -> Path:
    """The run's known_hosts file for `host`: its key under its name, the HostKeyAlias the
    inventory's ssh arguments give (so the key holds whatever address reaches the host)."""
    (name,) = checked_hosts([host])
    directory = known_hosts_dir(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(f"{name} {key.public.strip()}\n")
    return path


def extravars(run_dir: Path, hosts: list[str]) -> dict[str, Any]:
    """What the run's Ansible runs get so that each of `hosts` this run gave a key (its
    known_hosts file is under run_dir) is reached with that key alone."""
    directory = known_hosts_dir(run_dir)
    return {EXTRA_VAR: {"dir": str(directory), "hosts": [
        name for name in checked_hosts(sorted(hosts)) if (directory / name).is_file()]}}


def mismatch(text: str) -> bool:
    """Whether ssh's output says the host presented another key than the pinned one."""
    return any(sign in text for sign in MISMATCH_SIGNS)


def described(ssh_error: str) -> str:
    """ssh's failure as an operator should read it: a key other than the pinned one is no
    network trouble, so it is said what it means (MISMATCH_ERROR); anything else as it came."""
    return MISMATCH_ERROR if mismatch(ssh_error) else ssh_error


MISMATCH_ERROR = (
    "the SSH host key it presents is not the one racklift gave it when it imaged it in this run: "
    "the machine answering at its address is not the one deployed, or its /etc/ssh keys were "
    "replaced; nothing was run on it. Check which machine has its address, then re-image it")
