"""Run racklift's playbooks against the NetBox inventory, and read per-host outcomes.

The NetBox token reaches Ansible through the environment of the child process only: it is
never written to a file, a log or an artifact.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from racklift.errors import RackliftError
from racklift.netbox.client import NetBoxSettings
from racklift.paths import REPO_ROOT

PLAYBOOKS = REPO_ROOT / "playbooks"


@dataclass(frozen=True)
class PlaybookResult:
    rc: int
    failed: dict[str, str] = field(default_factory=dict)  # host → why (unreachable / failed)


def _host_failures(document: dict) -> dict[str, str]:
    failed: dict[str, str] = {}
    for play in document.get("plays", []):
        for task in play.get("tasks", []):
            for host, result in task.get("hosts", {}).items():
                if host in failed:
                    continue
                if result.get("unreachable"):
                    failed[host] = f"unreachable: {result.get('msg', '').strip()}"
                elif result.get("failed"):
                    name = task.get("task", {}).get("name", "a task")
                    message = str(result.get("msg") or result.get("stderr") or "")[:300]
                    failed[host] = f"failed at '{name}': {message}"
    return failed


def run_playbook(name: str, hosts: Iterable[str], settings: NetBoxSettings,
                 env: Mapping[str, str] | None = None) -> PlaybookResult:
    """`ansible-playbook playbooks/NAME --limit HOSTS` with the NetBox inventory narrowed to
    those hosts; per-host failures come back instead of ending the run."""
    names = sorted(hosts)
    if not names:
        return PlaybookResult(0)
    bindir = Path(sys.executable).parent
    child_env = {
        **os.environ, **(env or {}),
        "NETBOX_URL": settings.url, "NETBOX_TOKEN": settings.token,
        "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
        # Ask NetBox about these hosts only, and freshly: a cached inventory could be stale.
        "RACKLIFT_NAMES": ",".join(names), "ANSIBLE_INVENTORY_CACHE": "false",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    result = subprocess.run(
        [str(bindir / "ansible-playbook"), str(PLAYBOOKS / name), "--limit", ",".join(names)],
        env=child_env, cwd=REPO_ROOT, capture_output=True, text=True)
    try:
        document = json.loads(result.stdout)
    except ValueError:
        # No JSON means Ansible stopped before running: inventory or syntax error.
        raise RackliftError(f"ansible-playbook {name} did not run (exit {result.returncode}): "
                            f"{(result.stderr or result.stdout).strip()[-1500:]}") from None
    return PlaybookResult(result.returncode, _host_failures(document))
