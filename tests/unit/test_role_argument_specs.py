"""Roles that document themselves (issue 35): every role's meta/argument_specs.yml names every
public variable of its defaults/main.yml, with a type, a description and the same default, and
the role README's variable table names the same variables. The values the roles really get
validate against the specs with Ansible's own validator (the one the role's first, implicit
task runs): each Molecule scenario's variables, and what racklift's inventory gives a node role
for a default desired state, the lab's GPU servers', the lab hosts' and the virtual rack's VMs'.
Pure Python: values are templated with Ansible's Templar in process, no Ansible run."""

from __future__ import annotations

import ipaddress
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template
from jinja2 import Environment, meta

from racklift.ansible_inventory import desired_vars
from racklift.lab import hosts, seed, vrack
from racklift.lab.sources import LAB_SOURCE
from racklift.lab.vrack.records import vm_software
from racklift.netbox.desired import DesiredState, parse
from racklift.paths import REPO_ROOT

# Lookups (the environment, in a few defaults and group vars) need Ansible's plugin loader.
init_plugin_loader()
ROLES = sorted(p for p in (REPO_ROOT / "roles").iterdir() if p.is_dir())
GROUP_VARS = REPO_ROOT / "inventory" / "group_vars"
NODE_ROLES = GROUP_VARS / "all" / "node_roles.yml"
TYPES = {"str", "bool", "int", "float", "list", "dict", "path", "raw"}
# What a host's facts and magic variables are where a value templates them (Debian 12).
HOST = {"inventory_hostname": "gpu-0001", "ansible_host": "10.16.0.11",
        "ansible_facts": {"distribution": "Debian", "distribution_major_version": "12",
                          "distribution_release": "bookworm", "os_family": "Debian"},
        "playbook_dir": "/molecule/default"}


def _ids(roles: list[Path]) -> list[str]:
    return [r.name for r in roles]


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.exists() else None


def specs(role: Path) -> dict[str, Any]:
    return (_load(role / "meta" / "argument_specs.yml") or {}).get("argument_specs") or {}


def options(role: Path, entry: str = "main") -> dict[str, dict[str, Any]]:
    return specs(role)[entry].get("options") or {}


def defaults(role: Path) -> dict[str, Any]:
    return _load(role / "defaults" / "main.yml") or {}


def is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def readme_variables(role: Path) -> set[str]:
    """The variables the README's table documents: its rows' first cells (`a` or `a` / `b`)."""
    text = (role / "README.md").read_text()
    table = text.split("## Role Variables", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for row in re.findall(r"^\| (`[^|]*) \|", table, re.MULTILINE):
        names.update(re.findall(r"`([a-z0-9_]+)`", row))
    return names


def render(values: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    """The values as Ansible templates them, every variable of `context` (and `values`)
    visible; each variable templated lazily, as Ansible does."""
    variables = {**HOST, **context, **values}
    templar = Templar(loader=DataLoader(), variables={
        k: trust_as_template(v) if is_template(v) else v for k, v in variables.items()})
    return {k: templar.template(trust_as_template(v)) if is_template(v) else v
            for k, v in values.items()}


def os_vars(role: Path) -> dict[str, Any]:
    """What the role's vars/ give a Debian 12 host (vars/main.yml, then vars/Debian-12.yml)."""
    return {**(_load(role / "vars" / "main.yml") or {}),
            **(_load(role / "vars" / "Debian-12.yml") or {})}


def validate(role: Path, values: dict[str, Any], entry: str = "main") -> list[str]:
    """Ansible's validate_argument_spec: the spec's options are the argument_spec, the values
    the variables of those names (spec defaults are documentation, not values)."""
    spec = options(role, entry)
    given = {k: v for k, v in values.items() if k in spec}
    return ArgumentSpecValidator(spec).validate(given).error_messages


# The spec's shape


@pytest.mark.parametrize("role", ROLES, ids=_ids(ROLES))
def test_every_role_has_a_main_entry_point(role: Path) -> None:
    main = specs(role).get("main")
    assert main, f"roles/{role.name}/meta/argument_specs.yml has no `main` entry point"
    assert main.get("short_description") and main.get("description")


@pytest.mark.parametrize("role", ROLES, ids=_ids(ROLES))
def test_every_public_variable_has_an_option_with_a_type_and_a_description(role: Path) -> None:
    spec = options(role)
    assert sorted(set(defaults(role)) - set(spec)) == []
    for entry, entry_spec in specs(role).items():
        for name, option in (entry_spec.get("options") or {}).items():
            assert option.get("description"), f"{entry}: {name}"
            assert option.get("type") in TYPES, f"{entry}: {name}"
            assert (option["type"] == "list") == ("elements" in option), f"{entry}: {name}"
            # An option with no default is one the role needs given.
            assert name in defaults(role) or option.get("required") is True, f"{entry}: {name}"


@pytest.mark.parametrize("role", ROLES, ids=_ids(ROLES))
def test_each_literal_default_is_the_roles_default(role: Path) -> None:
    for entry, entry_spec in specs(role).items():
        for name, option in (entry_spec.get("options") or {}).items():
            if name not in defaults(role):
                assert "default" not in option, f"{entry}: {name}"
                continue
            value = defaults(role)[name]
            if is_template(value):
                # Said in the description instead: Ansible does not template a spec's default.
                assert "default" not in option, f"{entry}: {name}"
                assert "Defaults to" in option["description"], f"{entry}: {name}"
            else:
                assert "default" in option and option["default"] == value, f"{entry}: {name}"
                assert type(option["default"]) is type(value), f"{entry}: {name}"


@pytest.mark.parametrize("role", ROLES, ids=_ids(ROLES))
def test_the_spec_holds_no_template(role: Path) -> None:
    # Ansible passes the spec as the arguments of the check task it prepends to the role, and
    # templates them: a "{{ }}" in a description would be evaluated on every run.
    text = (role / "meta" / "argument_specs.yml").read_text()
    assert "{{" not in text and "{%" not in text


@pytest.mark.parametrize("role", ROLES, ids=_ids(ROLES))
def test_the_readme_table_documents_the_spec(role: Path) -> None:
    documented = set().union(*(set(e.get("options") or {}) for e in specs(role).values()))
    assert sorted(documented - readme_variables(role)) == [], "in the spec, not the README"
    assert sorted(readme_variables(role) - documented) == [], "in the README, not the spec"


@pytest.mark.parametrize("role", ROLES, ids=_ids(ROLES))
def test_a_choice_default_is_one_of_its_choices(role: Path) -> None:
    for name, option in options(role).items():
        if "choices" in option and "default" in option:
            assert option["default"] in option["choices"], name


# The values the roles really get


@pytest.mark.parametrize("role", ROLES, ids=_ids(ROLES))
def test_the_defaults_validate(role: Path) -> None:
    """Every default, templated as the check before the first task sees it: before the role's
    own tasks load vars/<OS>.yml (vars/main.yml is loaded with the role)."""
    values = defaults(role)
    rendered = render(values, _load(role / "vars" / "main.yml") or {})
    assert validate(role, rendered) == []
    # And as the tasks see them, once vars/<OS>.yml is loaded.
    assert validate(role, render(values, os_vars(role))) == []


def _scenario_vars(role: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """Each Molecule scenario's variables per entry point it runs: its inventory group_vars
    (molecule.yml), over them the converge play's vars and the vars given with the role."""
    found = []
    for scenario in sorted((role / "molecule").glob("*/molecule.yml")):
        inventory = (_load(scenario) or {}).get("provisioner", {}).get("inventory", {})
        group = (inventory.get("group_vars") or {}).get("all") or {}
        entries = [("main", {})]
        for play in _load(scenario.with_name("converge.yml")) or []:
            play_vars = play.get("vars") or {}
            for item in play.get("roles") or []:
                if isinstance(item, dict):
                    found_vars = {**play_vars, **(item.get("vars") or {})}
                    entries.append(("main", found_vars))
            for task in play.get("tasks") or []:
                include = task.get("ansible.builtin.include_role")
                if include and include.get("name") == role.name:
                    entry = include.get("tasks_from", "main")
                    entries.append((entry, {**play_vars, **(task.get("vars") or {})}))
        for entry, given in entries:
            if entry in specs(role):
                found.append((scenario.parent.name, entry, {**group, **given}))
    return found


SCENARIOS = [(role, scenario, entry, given) for role in ROLES
             for scenario, entry, given in _scenario_vars(role)]


@pytest.mark.parametrize(("role", "scenario", "entry", "given"), SCENARIOS,
                         ids=[f"{r.name}-{s}-{e}-{i}" for i, (r, s, e, _) in enumerate(SCENARIOS)])
def test_the_molecule_scenarios_values_validate(role: Path, scenario: str, entry: str,
                                                given: dict[str, Any],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # Lookups of the environment template to what racklift.lab.molecule would set (the
    # stand-in key's fingerprint, Molecule's ephemeral directory).
    monkeypatch.setenv("RACKLIFT_STANDIN_FINGERPRINT", "0" * 40)
    monkeypatch.setenv("MOLECULE_EPHEMERAL_DIRECTORY", "/tmp/molecule")
    values = render({**defaults(role), **given},
                    {**os_vars(role), "ansible_play_hosts": [HOST["inventory_hostname"]]})
    assert validate(role, values, entry) == []


def test_the_scenarios_are_read() -> None:
    # A reader that found no scenario would pass above: the ones known to run `main`.
    ran = {r.name for r, _, entry, _ in SCENARIOS if entry == "main"}
    assert ran >= {"base_os", "boot_server", "container_runtime", "lab_hardware",
                   "nvidia_driver", "ofed", "registry_mirror"}
    assert ("registry_mirror", "client") in {(r.name, e) for r, _, e, _ in SCENARIOS}


# What racklift's inventory gives the node roles: node_roles.yml's mapping of `racklift_desired`
# (racklift.netbox.desired.role_vars), with the group vars of the hosts that get each state.
RACK = vrack.Vrack("rltest-prov", "rltest0", ipaddress.ip_network("10.91.0.0/24"),
                   ipaddress.ip_network("fd52:4c91::/64"), ipaddress.ip_network("127.0.78.0/24"),
                   rack="V91", mac_base=0x5800, memory_mib=512, disk_gib=1)
LAB_GROUP_VARS = LAB_SOURCE.parent / "group_vars"
DESIRED: dict[str, tuple[dict[str, Any], list[Path]]] = {
    "default": ({}, []),
    "lab-gpu-server": ({**seed.DESIRED_SOFTWARE, "hardware": {"nvswitch": True}}, []),
    "lab-host": (hosts.LAB_SOFTWARE, [LAB_GROUP_VARS / "tag_racklift_lab_host.yml"]),
    "vrack-vm": ({**vm_software(RACK), "hardware": {"nvswitch": True}},
                 [LAB_GROUP_VARS / "tag_racklift_lab_prov.yml",
                  LAB_GROUP_VARS / "tag_racklift_lab_vm.yml"]),
}
# Group variables whose value reads a file on the controller (the lab's state directory): not
# rendered here, so left out; each is checked by its type where a Molecule scenario gives it.
UNRENDERED = {"lab_hardware_profile"}
LAB_GATEWAY = "10.91.0.1"


def _group_vars(files: list[Path]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for path in files:
        found.update(_load(path) or {})
    return {k: v for k, v in found.items() if k not in UNRENDERED}


def pipeline_vars(case: str) -> dict[str, Any]:
    context, files = DESIRED[case]
    state = parse(context)
    assert isinstance(state, DesiredState), (case, state)
    mapping = _load(NODE_ROLES)
    # The lab's gateway is read from its state directory: the rack's own, given here.
    group = {**_group_vars(files), "racklift_vrack_gateway": LAB_GATEWAY}
    return {**group, **mapping, "racklift_desired": desired_vars(state, context)}


NODE = ["base_os", "nvidia_driver", "ofed", "container_runtime", "lab_hardware"]


@pytest.mark.parametrize("case", DESIRED)
@pytest.mark.parametrize("name", NODE)
def test_what_the_pipeline_gives_the_node_roles_validates(name: str, case: str,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setenv("RACKLIFT_STATE", "/var/lib/racklift-test")
    role = REPO_ROOT / "roles" / name
    given = {k: v for k, v in pipeline_vars(case).items() if k.startswith(f"{name}_")}
    values = render({**defaults(role), **given},
                    {**os_vars(role), **pipeline_vars(case)})
    assert validate(role, values) == []


def _node_vars(case: str) -> dict[str, Any]:
    everything = pipeline_vars(case)
    return render({k: v for k, v in everything.items() if k.split("_")[0] in
                   {n.split("_")[0] for n in NODE}}, everything)


def test_the_pipeline_gives_the_roles_what_the_mapping_says() -> None:
    # The cases above must reach the roles: a mapping that lost its variables would pass them.
    given = _node_vars("lab-gpu-server")
    assert given["nvidia_driver_fabricmanager"] is True
    assert given["container_runtime_toolkit_version"] == "1.17.3-1"
    assert given["ofed_source"] == "doca"
    vm = _node_vars("vrack-vm")
    assert vm["base_os_apt_proxy"] == f"http://{LAB_GATEWAY}:3142"
    assert vm["container_runtime_registry_mirrors"] == {
        "docker.io": [f"https://{RACK.gateway}:5000"]}


# The entry points other roles and playbooks include with `tasks_from`: each has a spec, the vars
# every such include passes are options of it and validate against it, and what its tasks read
# from the caller is in it.
ROLES_DIR = REPO_ROOT / "roles"
INCLUDES = {"ansible.builtin.include_role", "ansible.builtin.import_role", "include_role",
            "import_role"}
# Molecule files that pass bad values on purpose, to see them refused.
BAD_INPUT = {"bad-input.yml", "bad_input.yml"}
# Values only a run knows, as racklift gives them: the image stage's released hosts
# (racklift.pipeline.image_stage), the mirror servers an inventory query finds.
RUN_VALUES: dict[str, Any] = {
    "racklift_image_release": [{"name": "gpu-0001", "mac": "52:54:00:00:00:01"}],
    "registry_mirror_servers": ["mirror-0001"],
}


def _walk(node: Any, play_vars: dict[str, Any], found: list[tuple[dict[str, Any], dict[str, Any]]]
          ) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, play_vars, found)
    elif isinstance(node, dict):
        if "hosts" in node:  # a play: its vars are visible to its tasks' includes
            play_vars = {**play_vars, **(node.get("vars") or {})}
        for key in INCLUDES & set(node):
            if isinstance(node[key], dict) and "tasks_from" in node[key]:
                found.append((node, play_vars))
        for value in node.values():
            _walk(value, play_vars, found)


def _entry_calls() -> list[tuple[str, str, str, dict[str, Any], dict[str, Any]]]:
    """Every include/import of a role with tasks_from in roles/ and playbooks/: (where, role,
    entry point, the vars it passes, the play's vars)."""
    files = sorted([*ROLES_DIR.glob("*/tasks/*.yml"), *ROLES_DIR.glob("*/molecule/*/*.yml"),
                    *(REPO_ROOT / "playbooks").glob("*.yml")])
    calls = []
    for path in files:
        if path.name in BAD_INPUT:
            continue
        found: list[tuple[dict[str, Any], dict[str, Any]]] = []
        _walk(_load(path), {}, found)
        for task, play_vars in found:
            include = next(task[k] for k in INCLUDES if k in task)
            calls.append((str(path.relative_to(REPO_ROOT)), include["name"], include["tasks_from"],
                          task.get("vars") or {}, play_vars))
    return calls


CALLS = _entry_calls()
CALL_IDS = [f"{where}-{role}-{entry}-{i}" for i, (where, role, entry, _, _) in enumerate(CALLS)]


def test_the_entry_point_calls_are_read() -> None:
    # A reader that found none would pass below: the includes known to be there.
    called = {(role, entry) for _, role, entry, _, _ in CALLS}
    assert called >= {("apt_vendor", "repository"), ("apt_vendor", "packages"),
                      ("apt_vendor", "lists"), ("boot_server", "release"),
                      ("registry_mirror", "client"), ("ofed", "firmware")}
    assert sum(role == "apt_vendor" for _, role, _, _, _ in CALLS) >= 15


@pytest.mark.parametrize(("where", "name", "entry", "given", "play_vars"), CALLS, ids=CALL_IDS)
def test_each_included_entry_point_has_a_spec_naming_what_it_is_given(
        where: str, name: str, entry: str, given: dict[str, Any],
        play_vars: dict[str, Any]) -> None:
    role = ROLES_DIR / name
    assert entry in specs(role), f"{where}: roles/{name}/meta/argument_specs.yml has no `{entry}`"
    assert specs(role)[entry].get("short_description") and specs(role)[entry].get("description")
    unknown = sorted(k for k in given if k.startswith(f"{name}_") and k not in options(role, entry))
    assert unknown == [], f"{where}: passed to {name} {entry}, not in its spec"


def _caller_context(where: str) -> dict[str, Any]:
    """What a value passed from `where` may read: the calling role's defaults and vars (Debian
    12), what racklift's inventory gives a GPU server, and the values only a run knows."""
    context = {**pipeline_vars("lab-gpu-server"), **RUN_VALUES}
    parts = Path(where).parts
    if parts[0] == "roles":
        caller = ROLES_DIR / parts[1]
        context.update({**defaults(caller), **os_vars(caller),
                        **(_load(caller / "vars" / "Debian.yml") or {})})
    return context


# Passed values that read what the calling role's own tasks registered or set earlier in the run
# (dpkg's answer, the files found, the facts): not rendered here, left to the run (and to
# Molecule). Exactly these: a value that stops rendering fails the test until it is named here.
RUNTIME = {
    ("roles/base_os/tasks/Debian.yml", "apt_vendor_packages"),
    ("roles/nvidia_driver/tasks/Debian.yml", "apt_vendor_packages"),
    ("roles/nvidia_driver/tasks/Debian.yml", "apt_vendor_remove"),
    ("roles/ofed/tasks/Debian.yml", "apt_vendor_name"),
    ("roles/ofed/tasks/Debian.yml", "apt_vendor_packages"),
    ("roles/ofed/tasks/Debian.yml", "apt_vendor_version"),
    ("roles/ofed/tasks/Debian.yml", "apt_vendor_remove"),
    # The scenario's own host list, changed (its inventory's, read through hostvars).
    ("roles/boot_server/molecule/default/side_effect.yml", "boot_server_hosts"),
}


@pytest.mark.parametrize(("where", "name", "entry", "given", "play_vars"), CALLS, ids=CALL_IDS)
def test_what_each_include_passes_validates(where: str, name: str, entry: str,
                                            given: dict[str, Any], play_vars: dict[str, Any],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RACKLIFT_STATE", "/var/lib/racklift-test")
    role = ROLES_DIR / name
    context = {**_caller_context(where), **play_vars}
    rendered: dict[str, Any] = {}
    unrendered = set()
    for key, value in {**play_vars, **given}.items():
        try:
            rendered[key] = render({key: value}, {**context, **rendered})[key]
        except Exception:  # Ansible raises several kinds for an undefined variable
            if key in RUN_VALUES:
                rendered[key] = RUN_VALUES[key]
            else:
                unrendered.add(key)
    assert {k for k in unrendered if (where, k) not in RUNTIME} == set(), where
    values = render(defaults(role), {**os_vars(role), **context})
    values.update({k: v for k, v in rendered.items() if k in options(role, entry)})
    assert validate(role, values, entry) == [], where


# What an entry point's tasks read (its task file and those it includes, their templates, the
# role's vars/ they name), less what the role, the run or Ansible defines.
EXPRESSION_KEYS = {"when", "that", "failed_when", "changed_when", "until"}
MAGIC = {"inventory_hostname", "ansible_host", "ansible_check_mode", "ansible_facts", "hostvars",
         "groups", "role_path", "playbook_dir", "ansible_managed", "item", "omit", "lookup",
         "query", "q", "ansible_play_hosts", "loop", "range", "dict", "namespace"}


class _Any(dict):  # type: ignore[type-arg]
    """Every filter and test name exists (Ansible's and racklift's plugins are not loaded here)."""

    def __contains__(self, key: object) -> bool:
        return True

    def get(self, key: object, default: Any = None) -> Any:
        return lambda *args, **kwargs: None


def _jinja_names(text: str, expression: bool) -> set[str]:
    environment = Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])
    environment.filters = _Any()
    environment.tests = _Any()
    source = f"{{{{ {text} }}}}" if expression else text
    with warnings.catch_warnings():  # Jinja's own view of a regex's '\\S' in a string literal
        warnings.simplefilter("ignore", DeprecationWarning)
        return set(meta.find_undeclared_variables(environment.parse(source)))


def _reads(node: Any, key: str | None, reads: set[str], defined: set[str],
           task_files: list[str], template_files: list[str]) -> None:
    if isinstance(node, dict):
        for name in ("register", "loop_var"):
            if isinstance(node.get(name), str):
                defined.add(node[name])
        for name in ("vars", "ansible.builtin.set_fact", "set_fact"):
            if isinstance(node.get(name), dict):
                defined.update(node[name])
        for name in ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks"):
            target = node.get(name)
            target = target.get("file") if isinstance(target, dict) else target
            if isinstance(target, str) and not is_template(target):
                task_files.append(target)
        template = node.get("ansible.builtin.template")
        if isinstance(template, dict) and isinstance(template.get("src"), str):
            template_files.append(template["src"])
        for k, v in node.items():
            _reads(v, k, reads, defined, task_files, template_files)
    elif isinstance(node, list):
        for item in node:
            _reads(item, key, reads, defined, task_files, template_files)
    elif isinstance(node, str) and key in EXPRESSION_KEYS:
        reads.update(_jinja_names(node, expression=True))
    elif isinstance(node, str) and is_template(node):
        reads.update(_jinja_names(node, expression=False))


def entry_reads(role: Path, entry: str) -> tuple[set[str], set[str]]:
    """(read, defined) by the entry point's tasks: role vars/ named are followed to what they
    read; a name its tasks register, set or give as task vars is defined."""
    reads: set[str] = set()
    defined: set[str] = set()
    pending, seen = [f"{entry}.yml"], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        task_files: list[str] = []
        template_files: list[str] = []
        _reads(_load(role / "tasks" / name), None, reads, defined, task_files, template_files)
        pending.extend(task_files)
        for template in template_files:
            reads.update(_jinja_names((role / "templates" / template).read_text(), False))
    role_vars: dict[str, Any] = {}
    for path in sorted((role / "vars").glob("*.yml")):
        role_vars.update(_load(path) or {})
    followed: set[str] = set()
    while todo := (reads & set(role_vars)) - followed:
        for name in todo:
            followed.add(name)
            _reads({"v": role_vars[name]}, None, reads, defined, [], [])
    return reads, defined | set(role_vars)


ENTRY_POINTS = sorted({(role, entry) for _, role, entry, _, _ in CALLS})


@pytest.mark.parametrize(("name", "entry"), ENTRY_POINTS,
                         ids=[f"{r}-{e}" for r, e in ENTRY_POINTS])
def test_what_an_entry_point_reads_from_its_caller_is_in_its_spec(name: str, entry: str) -> None:
    role = ROLES_DIR / name
    reads, defined = entry_reads(role, entry)
    spec = options(role, entry)
    # Read, and given by no one but the caller: the spec must name it.
    from_caller = reads - defined - set(defaults(role)) - MAGIC
    assert sorted(from_caller - set(spec)) == []
    # And the spec names nothing the entry point does not read.
    assert sorted(set(spec) - reads) == []
