"""What the controller needs of each host, from the Ansible inventory (host and group vars,
Ansible Vault): its BMC's port, CA and credentials, the SSH key Ansible uses, an OS installer's
mirror and proxy (playbooks/hostvars.yml). Ansible writes them to 0600 files in a 0700 directory
outside any run directory (racklift.secret_files); each is read and deleted at once. They never
go on a command line (extra vars are recorded), into a run's artifacts (no_log) or a message.

`read_hostvars` runs the playbook alone (verify, `bmc.inventory --host`); the image stage runs it
inside image_hostvars.yml, with the hosts' boot ids, and reads the files with `written`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from racklift.ansible import HostEvent, run_playbook
from racklift.errors import RackliftError
from racklift.netbox.client import NetBoxSettings
from racklift.secret_files import secrets_dir

DIRECTORY_VAR = "racklift_hostvars_dir"  # where the playbook writes <host>.json
UNSET = (None, "", "None")  # what the playbook writes for a var the inventory does not set


def written(directory: Path, names: Iterable[str],
            failed: Mapping[str, str]) -> dict[str, dict[str, Any] | str]:
    """Each host's vars as the playbook wrote them to `directory`, those the inventory leaves
    unset left out (each file deleted once read); or why none came (`failed`: the playbook's
    failures by host)."""
    out: dict[str, dict[str, Any] | str] = {}
    for name in names:
        path = directory / f"{name}.json"
        if not path.exists():
            out[name] = failed.get(name, "no vars came back (is it in the Ansible inventory?)")
            continue
        out[name] = {k: v for k, v in json.loads(path.read_text()).items() if v not in UNSET}
        path.unlink()
    return out


def read_hostvars(names: list[str], settings: NetBoxSettings, *,
                  env: Mapping[str, str] | None = None,
                  extravars: Mapping[str, Any] | None = None, artifacts: Path | None = None,
                  ident: str | None = None,
                  on_event: Callable[[HostEvent], None] | None = None,
                  ) -> dict[str, dict[str, Any] | str]:
    """Each named host's vars (see `written`), from playbooks/hostvars.yml run on them (`env`,
    `artifacts`, `ident`, `extravars`: as racklift.ansible.run_playbook's). Where Ansible ran no
    task at all (an inventory that lacks every one of them, one that does not parse), its error
    is each host's why: the caller goes on with the hosts that need no vars."""
    with secrets_dir("racklift-hostvars-") as directory:
        try:
            result = run_playbook("hostvars.yml", names, settings, env, artifacts=artifacts,
                                  ident=ident, on_event=on_event,
                                  extravars={**(extravars or {}),
                                             DIRECTORY_VAR: str(directory)})
        except RackliftError as exc:
            return dict.fromkeys(names, str(exc))
        return written(directory, names, result.failed)
