"""How to reach each host for the direct collector, as Ansible would: its inventory, group vars,
extra vars and ansible.cfg, resolved by Ansible's own variable manager and the options of its
`ssh` connection plugin. Run as `python -m racklift.verify.reach` in the environment a
playbook gets (racklift.ansible.child_environment: the NetBox URL and token file, the hosts),
so Ansible's global configuration never loads into racklift's process.

Reads `{"hosts": [...], "extravars": {...}}` on stdin; writes one JSON object, host → either
`{"ssh": [argv up to the destination], "sysfs_root": ..., "mirror": {...} | null}`, or
`{"ansible": why}` for a host whose connection the direct collector does not speak (another
connection plugin, a password, a PKCS#11 key): Ansible collects those with collect.yml; or
`{"error": why}` for a host that cannot be reached safely (an address ssh would read as an
option) or is not in the inventory. An entry of a host the inventory holds also says the roles
configure.yml would apply to it (`"roles"`: `racklift_roles`, or null where that is no list of
names): a host with none is not configured at all.

Only what reaching the host needs is templated and printed: never a password or other var.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Mapping
from typing import Any

from racklift.ansible import run_in_ansible
from racklift.netbox.client import NetBoxSettings

# The ssh connection plugin's options the direct collector uses, by the plugin's own names.
SSH_OPTIONS = ("host", "port", "remote_user", "private_key_file", "ssh_args", "ssh_common_args",
               "ssh_extra_args", "timeout", "ssh_executable", "host_key_checking")
# Options that need what only Ansible's plugin does (sshpass, a PKCS#11 provider).
ANSIBLE_ONLY = ("password", "pkcs11_provider")
SSH_CONNECTIONS = frozenset({"ssh", "smart", "ansible.builtin.ssh"})


def ansible_reason(connection: str | None, options: Mapping[str, Any]) -> str | None:
    """Why Ansible, not the direct collector, must reach this host; None if ssh can."""
    if connection not in SSH_CONNECTIONS:
        return f"its connection is {connection!r}, not ssh"
    for name in ANSIBLE_ONLY:
        if options.get(name):
            return f"its ssh connection sets {name}"
    return None


def ssh_command(options: Mapping[str, Any]) -> list[str]:
    """The ssh argv that reaches the host, up to and including the destination, from the ssh
    plugin's resolved options: what Ansible's plugin passes, less connection sharing (one
    exchange per host) and with BatchMode (never a prompt). Raises ValueError for a value
    ssh could read as something else."""
    host = str(options.get("host") or "")
    if not host or host.startswith("-") or any(c.isspace() for c in host):
        raise ValueError(f"its address {host[:100]!r} is not a host ssh can be given")
    argv = [str(options.get("ssh_executable") or "ssh")]
    for name in ("ssh_args", "ssh_common_args", "ssh_extra_args"):
        argv += shlex.split(str(options.get(name) or ""))
    # Ansible adds these itself (ssh.py's _build_command); they come after the configured
    # arguments, and ssh takes the first value of an option, so the configured ones win.
    if options.get("host_key_checking") is False:
        argv += ["-o", "StrictHostKeyChecking=no"]
    argv += ["-o", "BatchMode=yes", "-o", "ControlPath=none",
             "-o", f"ConnectTimeout={int(options.get('timeout') or 10)}"]
    if options.get("port"):
        argv += ["-o", f"Port={int(options['port'])}"]
    if options.get("remote_user"):
        argv += ["-o", f"User={options['remote_user']}"]
    if options.get("private_key_file"):
        argv += ["-o", f"IdentityFile=\"{options['private_key_file']}\""]
    return [*argv, "--", host]


def roles_of(value: Any) -> list[str] | None:
    """The roles configure.yml would apply (`racklift_roles`, templated); None where that is not
    a list of names (the playbook then runs and says what is wrong)."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def target(hostvars: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The host's entry in reach's output, from its templated vars and ssh options."""
    connection = hostvars.get("ansible_connection") or "ssh"
    why = ansible_reason(str(connection), options)
    if why is not None:
        return {"ansible": why}
    try:
        argv = ssh_command(options)
    except ValueError as exc:  # refused, not handed to Ansible: its ssh would read it the same
        return {"error": str(exc)}
    desired = hostvars.get("racklift_desired") or {}
    mirror = desired.get("registry_mirror") if isinstance(desired, Mapping) else None
    return {"ssh": argv, "sysfs_root": str(hostvars.get("racklift_sysfs_root") or "/sys"),
            "mirror": dict(mirror) if isinstance(mirror, Mapping) and mirror.get("url") else None}


def reach(names: list[str], settings: NetBoxSettings,
          extravars: Mapping[str, Any] | None = None,
          env: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Each host's entry (see the module's docstring), resolved in Ansible's environment
    (`env`: more of it, as a playbook run's, e.g. other inventory sources)."""
    got = run_in_ansible(__name__, {"hosts": names, "extravars": dict(extravars or {})},
                         settings, names, env)
    return {name: got[name] if isinstance(got, dict) and isinstance(got.get(name), dict)
            else {"error": "its connection settings did not come back"} for name in names}


class Reached:
    """Each host's entry asked of Ansible once for the stages of one batch (configure reads the
    roles, verify collects, acceptance tests): an Ansible-environment process and an inventory
    read of NetBox each time it is not. Asked again when the extra vars change (the image stage
    pins each imaged host's new key)."""

    def __init__(self) -> None:
        self._extravars: dict[str, Any] | None = None
        self._entries: dict[str, dict[str, Any]] = {}

    def get(self, names: list[str], settings: NetBoxSettings,
            extravars: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        if dict(extravars or {}) != self._extravars:
            self._extravars, self._entries = dict(extravars or {}), {}
        if new := sorted({n for n in names if n not in self._entries}):
            self._entries.update(reach(new, settings, extravars))
        return {n: self._entries[n] for n in names}


def resolve(names: list[str], extravars: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each named host's entry, or `{"error": ...}` for one the inventory does not hold."""
    from ansible.plugins.loader import connection_loader

    from racklift.ansible_vars import HostVars

    context = HostVars()
    config = context.constants.config
    connection_loader.get("ssh", class_only=True)  # loads the plugin's option definitions
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        got = context.of(name, extravars)
        if got is None:
            out[name] = {"error": "not in the inventory"}
            continue
        hostvars, templated = got

        def value(raw: Any, templated: Callable[[Any], Any] = templated) -> Any:
            return templated(raw) if isinstance(raw, str) else raw

        # One host's vars (an undefined variable, a Vault value that will not decrypt) never
        # end the others' collection. Only the entry leaves this process: a password option is
        # templated to see whether it is set, never printed.
        try:
            options = {opt: value(config.get_config_value(
                opt, plugin_type="connection", plugin_name="ssh", variables=hostvars))
                for opt in SSH_OPTIONS + ANSIBLE_ONLY}
            wanted = {key: value(hostvars.get(key)) for key in
                      ("ansible_connection", "racklift_sysfs_root", "racklift_desired")}
            out[name] = {**target(wanted, options),
                         "roles": roles_of(templated(hostvars.get("racklift_roles")))}
        except Exception as exc:
            out[name] = {"error": f"its connection settings could not be read: "
                                  f"{type(exc).__name__}: {exc}"[:300]}
    return out


def main() -> None:
    request = json.load(sys.stdin)
    json.dump(resolve(list(request["hosts"]), request.get("extravars") or {}), sys.stdout)


if __name__ == "__main__":
    main()
