"""What the controller needs of each host, from the Ansible inventory (host and group vars,
Ansible Vault): its BMC's port, CA and credentials, the SSH key Ansible uses, an OS installer's
mirror and proxy (`VARS`). They are resolved by Ansible's own variable manager and templar in a
child process in Ansible's environment (racklift.ansible_vars; `python -m racklift.hostvars`),
which writes each host's to a 0600 file in a 0700 directory outside any run directory
(racklift.secret_files); each is read and deleted at once. They never go on a command line, to
stdout, into a run's artifacts or a message.

One process for a batch of hosts: a playbook run did the same with a module run per host on
the controller (~0.5 s of CPU each, most of verify's cost per host at 512 simulated hosts).
Verify, `bmc.inventory --host` and the image stage read them so."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from racklift.ansible import run_in_ansible
from racklift.errors import RackliftError
from racklift.netbox.client import NetBoxSettings
from racklift.secret_files import secrets_dir, write_secret

VARS = ("racklift_bmc_port", "racklift_bmc_ca_bundle", "racklift_bmc_insecure",
        "racklift_bmc_username", "racklift_bmc_password", "racklift_authorized_keys",
        "racklift_installer_mirror", "racklift_installer_proxy",
        "ansible_ssh_private_key_file", "ansible_private_key_file")
# The SSH key Ansible connects with: ansible_ssh_private_key_file, else its older name.
KEY, OLD_KEY = "ansible_ssh_private_key_file", "ansible_private_key_file"
UNSET = (None, "", "None")  # a var the inventory does not set


def written(directory: Path, names: Iterable[str],
            failed: Mapping[str, str]) -> dict[str, dict[str, Any] | str]:
    """Each host's vars as written to `directory`, those the inventory leaves unset left out
    (each file deleted once read); or why none came (`failed`: by host)."""
    out: dict[str, dict[str, Any] | str] = {}
    for name in names:
        path = directory / f"{name}.json"
        if not path.exists():
            out[name] = failed.get(name, "no vars came back (is it in the Ansible inventory?)")
            continue
        values = {k: v for k, v in json.loads(path.read_text()).items() if v not in UNSET}
        path.unlink()
        if OLD_KEY in values:
            values.setdefault(KEY, values.pop(OLD_KEY))
        out[name] = values
    return out


def read_hostvars(names: list[str], settings: NetBoxSettings, *,
                  env: Mapping[str, str] | None = None,
                  extravars: Mapping[str, Any] | None = None,
                  ) -> dict[str, dict[str, Any] | str]:
    """Each named host's vars (see `written`), resolved as a playbook run on them would
    (`env`, `extravars`: as racklift.ansible.run_playbook's). Where the inventory cannot be
    read at all, its error is each host's why: the caller goes on with the hosts that need no
    vars."""
    with secrets_dir("racklift-hostvars-") as directory:
        try:
            failed = run_in_ansible(__name__, {"hosts": names, "directory": str(directory),
                                               "extravars": dict(extravars or {})},
                                    settings, names, env)
        except RackliftError as exc:
            return dict.fromkeys(names, str(exc))
        if not isinstance(failed, dict):
            return dict.fromkeys(names, "racklift.hostvars answered what is not a mapping")
        return written(directory, names, {n: str(why) for n, why in failed.items() if why})


def resolve(names: list[str], extravars: Mapping[str, Any], directory: Path
            ) -> dict[str, str | None]:
    """Each host's VARS templated and written to `directory`; host → None, or why not. One
    host's vars (an undefined variable, a Vault value that will not decrypt) never stop the
    others'."""
    from racklift.ansible_vars import HostVars

    context = HostVars()
    out: dict[str, str | None] = {}
    for name in names:
        got = context.of(name, extravars)
        if got is None:
            out[name] = "not in the Ansible inventory"
            continue
        hostvars, value = got
        try:
            values = {key: value(hostvars.get(key)) for key in VARS}
            json.dumps(values)  # whole, or no file: written() reads what is there
            write_secret(directory / f"{name}.json", values)
        except Exception as exc:
            # The error's type and Ansible's words (which name a variable, not its value).
            out[name] = f"its vars could not be read: {type(exc).__name__}: {exc}"[:300]
            continue
        out[name] = None
    return out


def main() -> None:
    request = json.load(sys.stdin)
    json.dump(resolve(list(request["hosts"]), request.get("extravars") or {},
                      Path(request["directory"])), sys.stdout)


if __name__ == "__main__":
    main()
