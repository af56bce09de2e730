"""Defaults live once: racklift.netbox.desired holds them (the dataclasses' defaults), and a
node role's own default for a variable that inventory/group_vars/all/node_roles.yml maps from
`racklift_desired` must be what that mapping makes of a default DesiredState(), so a role run
without racklift's inventory (Molecule, an example playbook) installs what a host with an empty
config context gets. Both sides are templated by Ansible's own Templar, in process."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from racklift.ansible_inventory import desired_vars
from racklift.netbox.desired import DesiredState
from racklift.paths import REPO_ROOT

ROLES = REPO_ROOT / "roles"
NODE_ROLES = REPO_ROOT / "inventory" / "group_vars" / "all" / "node_roles.yml"
# Role variables the mapping sets that their role has no default for, each with the reason.
# Empty: every mapped variable has a role default today; a new one added here must say why.
NO_ROLE_DEFAULT: dict[str, str] = {}


def _template(value: Any, variables: dict[str, Any]) -> Any:
    """The value as Ansible makes it of a variable file's text (types and all)."""
    if not (isinstance(value, str) and "{{" in value):
        return value
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(value))


def _role_of(variable: str) -> str:
    roles = [r.name for r in ROLES.iterdir() if variable.startswith(f"{r.name}_")]
    assert len(roles) == 1, f"{variable}: no one role's name prefixes it ({roles})"
    return roles[0]


def _defaults(role: str) -> dict[str, Any]:
    path = ROLES / role / "defaults" / "main.yml"
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def mapped() -> dict[str, Any]:
    """Role variable → what the mapping gives a host whose desired state is all defaults."""
    mapping = yaml.safe_load(NODE_ROLES.read_text())
    variables = {"racklift_desired": desired_vars(DesiredState(), {})}
    return {name: _template(value, variables) for name, value in mapping.items()
            if "racklift_desired" in str(value)}


MAPPED = mapped()


def test_the_mapping_covers_the_desired_software() -> None:
    # The three values issue 35 names as held twice; a mapping that lost one would pass below.
    assert {"nvidia_driver_branch", "container_runtime_toolkit_version",
            "ofed_source"} <= set(MAPPED)


@pytest.mark.parametrize("variable", sorted(MAPPED))
def test_the_role_default_is_the_desired_default(variable: str) -> None:
    role = _role_of(variable)
    defaults = _defaults(role)
    if variable in NO_ROLE_DEFAULT:
        assert variable not in defaults, (
            f"{variable} has a role default now: drop it from NO_ROLE_DEFAULT")
        return
    assert variable in defaults, (
        f"roles/{role}/defaults/main.yml has no {variable}: give it the desired default "
        f"{MAPPED[variable]!r}, or list it in NO_ROLE_DEFAULT with the reason")
    assert _template(defaults[variable], defaults) == MAPPED[variable], (
        f"roles/{role}/defaults/main.yml: {variable} is {defaults[variable]!r}, but a host "
        f"whose config context says nothing gets {MAPPED[variable]!r} (racklift.netbox.desired "
        "through inventory/group_vars/all/node_roles.yml)")


@pytest.mark.parametrize("variable", sorted(set(MAPPED) - set(NO_ROLE_DEFAULT)))
def test_the_role_readme_states_that_default(variable: str) -> None:
    role = _role_of(variable)
    readme = (ROLES / role / "README.md").read_text()
    row = re.search(rf"^\| `{variable}` \| `([^`]*)` \|", readme, re.MULTILINE)
    assert row, f"roles/{role}/README.md has no row for {variable} with its default"
    stated, default = row.group(1), _defaults(role)[variable]
    assert (stated if "{{" in stated else yaml.safe_load(stated)) == default, (
        f"roles/{role}/README.md states {stated} for {variable}, defaults/main.yml "
        f"{default!r}")


def test_no_reason_is_kept_for_a_variable_the_mapping_does_not_set() -> None:
    assert set(NO_ROLE_DEFAULT) <= set(MAPPED)
