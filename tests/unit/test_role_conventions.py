"""One convention across the roles, read from their files: public variables named after the role
and documented in its README, private (OS) variables `__<role>_` in vars/<Distribution>-<major>.yml
or vars/<os_family>.yml found first-found, handlers that only restart, reload or reboot, and one
reboot contract (`<role>_reboot`, `_throttle`, `_timeout`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from racklift.paths import REPO_ROOT

ROLES = sorted(p for p in (REPO_ROOT / "roles").iterdir() if p.is_dir())
VARS_FILE = re.compile(r"(main|[A-Z][a-z]+(-\d+)?)\.yml")
HANDLER_MODULES = {"ansible.builtin.systemd_service", "ansible.builtin.reboot"}
VARS_LOOKUP = [
    "{{ ansible_facts.distribution }}-{{ ansible_facts.distribution_major_version }}.yml",
    "{{ ansible_facts.os_family }}.yml",
]


def _load(path: Path):
    return yaml.safe_load(path.read_text()) if path.exists() else None


def _ids(roles):
    return [r.name for r in roles]


@pytest.mark.parametrize("role", ROLES, ids=_ids(ROLES))
def test_public_variables_carry_the_role_name_and_are_documented(role: Path) -> None:
    defaults = _load(role / "defaults" / "main.yml") or {}
    readme = (role / "README.md").read_text()
    assert [n for n in defaults if not n.startswith(f"{role.name}_")] == []
    assert [n for n in defaults if f"`{n}`" not in readme] == []


@pytest.mark.parametrize("role", ROLES, ids=_ids(ROLES))
def test_os_variables_are_private_and_found_by_release_then_family(role: Path) -> None:
    files = sorted((role / "vars").glob("*.yml"))
    assert [f.name for f in files if not VARS_FILE.fullmatch(f.name)] == []
    for path in files:
        names = _load(path) or {}
        assert [n for n in names if not n.startswith(f"__{role.name}_")] == [], path.name
    if [f for f in files if f.name != "main.yml"]:
        # In main.yml, or in a file it imports (which other entry points import too).
        tasks = _load(role / "tasks" / "main.yml")
        tasks += [t for i in tasks if "ansible.builtin.import_tasks" in i
                  for t in _load(role / "tasks" / i["ansible.builtin.import_tasks"])]
        (task,) = [t for t in tasks if "ansible.builtin.include_vars" in t]
        lookup = next(iter(task["vars"].values()))
        assert task["ansible.builtin.include_vars"].startswith(
            "{{ lookup('ansible.builtin.first_found', __")
        assert lookup == {"files": VARS_LOOKUP, "paths": ["{{ role_path }}/vars"]}


@pytest.mark.parametrize("role", ROLES, ids=_ids(ROLES))
def test_handlers_only_restart_reload_or_reboot(role: Path) -> None:
    for handler in _load(role / "handlers" / "main.yml") or []:
        modules = [k for k in handler if k.startswith("ansible.")]
        assert modules and set(modules) <= HANDLER_MODULES, handler["name"]
        if "ansible.builtin.systemd_service" in modules:
            module = handler["ansible.builtin.systemd_service"]
            assert module.get("state") in {"restarted", "reloaded", None}, handler["name"]


REBOOTING = [r for r in ROLES if "ansible.builtin.reboot" in
             str(_load(r / "handlers" / "main.yml") or "")]


def test_the_node_roles_that_reboot_are_the_ones_expected() -> None:
    assert _ids(REBOOTING) == ["base_os", "nvidia_driver", "ofed"]


@pytest.mark.parametrize("role", REBOOTING, ids=_ids(REBOOTING))
def test_one_reboot_contract(role: Path) -> None:
    name = role.name
    defaults = _load(role / "defaults" / "main.yml")
    assert defaults[f"{name}_reboot"] is True
    assert isinstance(defaults[f"{name}_reboot_throttle"], int)
    assert isinstance(defaults[f"{name}_reboot_timeout"], int)
    (handler,) = [h for h in _load(role / "handlers" / "main.yml")
                  if "ansible.builtin.reboot" in h]
    assert handler["throttle"] == f"{{{{ {name}_reboot_throttle }}}}"
    assert handler["ansible.builtin.reboot"]["reboot_timeout"] == \
        f"{{{{ {name}_reboot_timeout }}}}"
    assert handler["when"] == f"{name}_reboot | bool"


# Keys whose values Ansible evaluates as bare Jinja expressions.
CONDITIONALS = {"when", "changed_when", "failed_when", "until", "that"}


def _expressions(node, bare: bool = False):
    """The Jinja expressions in a YAML document: {{ }} and {% %} spans, and conditionals."""
    if isinstance(node, str):
        yield from ([node] if bare else JINJA.findall(node))
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _expressions(value, key in CONDITIONALS)
    elif isinstance(node, list):
        for item in node:
            yield from _expressions(item, bare)


JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)
LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'")


@pytest.mark.parametrize("role", ROLES, ids=_ids(ROLES))
def test_no_doubled_backslash_in_a_jinja_string_literal(role: Path) -> None:
    """Ansible's templating keeps a Jinja string literal's backslashes as they are: '\\\\S' (as
    YAML hands it over) is a regex for a backslash and an S, and a '\\\\n' in dpkg-query's
    format joined every line into one (base_os then reinstalled its packages on every run)."""
    found = []
    for path in sorted(role.rglob("*.yml")):
        for expression in _expressions(yaml.safe_load(path.read_text())):
            found += [(path.relative_to(role).as_posix(), literal)
                      for literal in LITERAL.findall(expression) if "\\\\" in literal]
    assert found == []
