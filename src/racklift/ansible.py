"""Run racklift's playbooks through ansible-runner against the NetBox inventory, and read
per-host outcomes from the runner's events.

Secrets never reach an artifact: ansible-runner writes the child's whole environment into
`artifacts/<id>/command`, so the environment it gets is stripped of every variable that looks
like a secret, and the NetBox token travels in a 0600 file outside the run directory that is
deleted when the run ends (the inventory plugin reads NETBOX_TOKEN_FILE). Ansible Vault works
the same way: only where its password is (a file or a client script) is passed on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ansible_runner

from racklift.child_env import without_secrets
from racklift.errors import RackliftError
from racklift.imaging import host_keys
from racklift.names import checked_hosts, component
from racklift.netbox.client import NetBoxSettings
from racklift.paths import REPO_ROOT
from racklift.secret_files import runtime_dir

PLAYBOOKS = REPO_ROOT / "playbooks"


@dataclass(frozen=True)
class HostEvent:
    """One thing that happened on one host, for live progress."""

    host: str
    kind: str  # "start", "ok", "changed", "failed", "unreachable", "skipped"
    task: str
    message: str = ""


@dataclass(frozen=True)
class PlaybookResult:
    rc: int
    failed: dict[str, str] = field(default_factory=dict)  # host → why (unreachable / failed)
    # host → task name → the module's result, for the tasks the caller asked to capture
    captured: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    ok: frozenset[str] = frozenset()  # hosts that ran at least one task without failing


def _message(res: Mapping[str, Any]) -> str:
    text = res.get("msg") or res.get("stderr") or res.get("module_stderr") or ""
    return " ".join(str(text).split())[:300]


def host_event(event: Mapping[str, Any]) -> HostEvent | None:
    """The host-level meaning of one ansible-runner event (None: not about one host)."""
    kinds = {"runner_on_start": "start", "runner_on_ok": "ok", "runner_on_failed": "failed",
             "runner_on_unreachable": "unreachable", "runner_on_skipped": "skipped"}
    kind = kinds.get(event.get("event", ""))
    data = event.get("event_data") or {}
    host = data.get("host")
    if kind is None or not host:
        return None
    res = data.get("res") or {}
    if kind == "ok" and res.get("changed"):
        kind = "changed"
    if kind == "failed" and data.get("ignore_errors"):
        kind = "ok"
    message = _message(res) if kind in ("failed", "unreachable") else ""
    return HostEvent(host, kind, data.get("task") or "", message)


def failure_text(event: HostEvent) -> str:
    if event.kind == "unreachable":
        return f"unreachable: {host_keys.described(event.message)}"
    return f"failed at '{event.task}': {event.message}"


@contextmanager
def _token_file(token: str) -> Iterator[Path]:
    handle, name = tempfile.mkstemp(prefix="racklift-token-", dir=runtime_dir())
    try:
        os.write(handle, token.encode())
        os.close(handle)
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


def child_environment(settings: NetBoxSettings, token_file: Path, names: list[str],
                      extra: Mapping[str, str] | None = None,
                      base: Mapping[str, str] = os.environ) -> dict[str, str]:
    """What Ansible's process gets: no secrets, the NetBox URL, the token's file, the Vault
    password's file, the hosts."""
    bindir = Path(sys.executable).parent
    env = without_secrets({**base, **(extra or {})})
    env.update({
        "NETBOX_URL": settings.url, "NETBOX_TOKEN_FILE": str(token_file),
        "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
        # Ask NetBox about these hosts only, and freshly: a cached inventory could be stale. A
        # JSON list: nothing in a name can split it into more names.
        "RACKLIFT_NAMES": json.dumps(names), "ANSIBLE_INVENTORY_CACHE": "false",
        "PATH": f"{bindir}{os.pathsep}{base.get('PATH', '')}",
    })
    return env


def script(name: str) -> bytes:
    """A script from playbooks/files, as a play hands it to python3 on a host."""
    return (PLAYBOOKS / "files" / name).read_bytes()


def run_in_ansible(module: str, request: Any, settings: NetBoxSettings,
                   names: list[str], env: Mapping[str, str] | None = None) -> Any:
    """`python -m MODULE` in the environment ansible-playbook gets for `names` (the NetBox
    inventory narrowed to them, ansible.cfg, no secrets but the token's file; `env` as
    run_playbook's): for code that uses Ansible's own API, kept out of racklift's process.
    `request` goes to its stdin as JSON; its stdout is read as JSON."""
    with _token_file(settings.token) as token_file:
        proc = subprocess.run([sys.executable, "-m", module], input=json.dumps(request),
                              capture_output=True, text=True, cwd=REPO_ROOT,
                              env=child_environment(settings, token_file, names, env))
    if proc.returncode != 0:
        raise RackliftError(f"{module} did not run (exit {proc.returncode}): "
                            f"{proc.stderr.strip()[-1500:]}")
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise RackliftError(f"{module} did not print JSON: {proc.stdout[:300]!r}") from None


def run_playbook(name: str, hosts: Iterable[str], settings: NetBoxSettings,
                 env: Mapping[str, str] | None = None, *,
                 artifacts: Path | None = None, ident: str | None = None,
                 extravars: Mapping[str, Any] | None = None,
                 on_event: Callable[[HostEvent], None] | None = None,
                 capture: Iterable[str] = ()) -> PlaybookResult:
    """`ansible-playbook playbooks/NAME --limit HOSTS` with the NetBox inventory narrowed to
    those hosts; per-host failures come back instead of ending the run. Runner artifacts go to
    `artifacts/<ident>` (kept) or a temporary directory (removed). Extra vars must not hold
    secrets: they are part of the command line the runner records."""
    names = checked_hosts(sorted(hosts))  # host names: no pattern syntax in the --limit
    if not names:
        return PlaybookResult(0)
    wanted = set(capture)
    failed: dict[str, str] = {}
    ok: set[str] = set()
    captured: dict[str, dict[str, dict[str, Any]]] = {}

    def handle(event: dict[str, Any]) -> bool:
        got = host_event(event)
        if got is not None:
            if got.kind in ("failed", "unreachable"):
                failed.setdefault(got.host, failure_text(got))
            elif got.kind in ("ok", "changed"):
                ok.add(got.host)
                if got.task in wanted:
                    captured.setdefault(got.host, {})[got.task] = event["event_data"]["res"]
            if on_event is not None:
                on_event(got)
        return True

    private = Path(artifacts) if artifacts else Path(tempfile.mkdtemp(prefix="racklift-ansible-"))
    private.mkdir(parents=True, exist_ok=True)
    # A directory under `artifacts`; callers put rack and server names from NetBox in it.
    ident = component(ident or f"{Path(name).stem}-{time.strftime('%H%M%S')}")
    try:
        with _token_file(settings.token) as token_file:
            runner = ansible_runner.interface.init_runner(
                private_data_dir=str(private), ident=ident, playbook=str(PLAYBOOKS / name),
                limit=",".join(names), extravars=dict(extravars or {}),
                project_dir=str(REPO_ROOT), quiet=True, suppress_env_files=True,
                event_handler=handle, envvars={})
            # The runner seeded its environment from ours (plus its event callback settings):
            # strip the secrets before anything, the `command` artifact included, is written.
            runner.config.env = child_environment(settings, token_file, names, env,
                                                  base=runner.config.env)
            runner.run()
        stdout = Path(runner.config.artifact_dir, "stdout")
        if runner.status not in ("successful", "failed") or (
                runner.rc != 0 and not failed and not ok):
            # Ansible stopped before running a task: inventory, syntax or connection setup.
            tail = stdout.read_text(errors="replace")[-1500:] if stdout.exists() else ""
            raise RackliftError(f"ansible-playbook {name} did not run (status {runner.status}, "
                                f"exit {runner.rc}): {tail.strip()}")
        return PlaybookResult(runner.rc, failed, captured, frozenset(ok - set(failed)))
    finally:
        if artifacts is None:
            shutil.rmtree(private, ignore_errors=True)
