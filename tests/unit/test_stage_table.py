"""docs/architecture.md's stage table is the code's: the stages of racklift.lifecycle.stages.STAGES
in that order, the playbooks each stage's code hands Ansible in the order it runs them, and the
roles each playbook's plays apply (playbooks/*.yml read as data, `racklift_roles` from
inventory/group_vars/all)."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from typing import Any

import yaml

from racklift import hostvars
from racklift.lifecycle.stages import ACCEPT, CONFIGURE, IMAGE, STAGES, VERIFY
from racklift.paths import REPO_ROOT
from racklift.pipeline import (
    accept_run,
    accept_stage,
    boot_server_waits,
    image_stage,
    rack_stages,
)
from racklift.verify import gate as gate_module

DOC = REPO_ROOT / "docs" / "architecture.md"
HEADING = "### Stages, playbooks and roles"
PLAYBOOKS = REPO_ROOT / "playbooks"
GROUP_VARS = REPO_ROOT / "inventory" / "group_vars" / "all"
# Where each stage's playbooks are run: a module, the one stage runner of a rack that runs the
# stage's playbook itself, or the functions that run them in the order the stage does (the image
# stage's boot server waits are a module of their own). test_each_stage_runs_the_code_read_here
# ties it to rack_stages and to the image stage's modules.
IMAGE_MODULES = (image_stage, boot_server_waits)
STAGE_CODE: dict[str, Any] = {
    IMAGE: (image_stage._hostvars, image_stage._serve, boot_server_waits,
            image_stage._check, image_stage._remove),
    CONFIGURE: rack_stages.run_configure,
    VERIFY: (gate_module, hostvars),  # the BMCs' settings and credentials, after collecting
    ACCEPT: accept_run,  # for hosts not reached over plain ssh; the others over SSH clients
}
INCLUDES = {f"{prefix}{verb}_role" for prefix in ("", "ansible.builtin.")
            for verb in ("include", "import")}
SECTIONS = ("pre_tasks", "roles", "tasks", "post_tasks")  # the order Ansible runs a play's parts


def _tree(code: Any) -> ast.AST:
    return ast.parse(textwrap.dedent(inspect.getsource(code)))


def _calls(tree: ast.AST) -> list[ast.Call]:
    """Every call in the tree, in source order."""
    return sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)),
                  key=lambda n: (n.lineno, n.col_offset))


def _called(code: Any) -> list[str]:
    """The names of the functions and methods `code` calls, in source order."""
    return [c.func.id if isinstance(c.func, ast.Name) else c.func.attr
            for c in _calls(_tree(code)) if isinstance(c.func, ast.Name | ast.Attribute)]


def code_playbooks(code: Any) -> list[str]:
    """The playbooks `code` runs (run_playbook("x.yml", ...), or its image stage's
    run.playbook("x.yml", ...)), each once, in source order (a tuple of code: in its order)."""
    found: list[str] = []
    parts = code if isinstance(code, tuple) else (code,)
    for call in [c for part in parts for c in _calls(_tree(part))]:
        name = (call.func.id if isinstance(call.func, ast.Name) else
                call.func.attr if isinstance(call.func, ast.Attribute) else None)
        if (name in ("run_playbook", "playbook") and call.args
                and isinstance(call.args[0], ast.Constant)
                and str(call.args[0].value).endswith(".yml")
                and call.args[0].value not in found):
            found.append(call.args[0].value)
    return found


def _group_var(name: str) -> Any:
    for path in sorted(GROUP_VARS.glob("*.yml")):
        values = yaml.safe_load(path.read_text()) or {}
        if name in values:
            return values[name]
    raise AssertionError(f"{name} is in no file of {GROUP_VARS}")


def _jinja_name(value: str) -> str | None:
    match = re.fullmatch(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", value.strip())
    return match.group(1) if match else None


def _task_roles(task: dict[str, Any]) -> list[str]:
    for key in ("block", "rescue", "always"):
        if key in task:
            return [r for t in task[key] for r in _task_roles(t)]
    include = next((task[k] for k in INCLUDES if k in task), None)
    if include is None:
        return []
    name = include["name"] if isinstance(include, dict) else include
    looped = _jinja_name(name)
    if looped is None:
        return [name]
    # A role named by the loop's item: the list the loop runs over, from the group vars.
    loop_var = task.get("loop_control", {}).get("loop_var", "item")
    listed = _jinja_name(str(task.get("loop", "")))
    assert looped == loop_var and listed, f"cannot tell which roles {task.get('name')} applies"
    return list(_group_var(listed))


def playbook_roles(playbook: str) -> list[str]:
    """The roles the playbook's plays apply, in the order they run (each once)."""
    found: list[str] = []
    for play in yaml.safe_load((PLAYBOOKS / playbook).read_text()):
        for section in SECTIONS:
            for entry in play.get(section) or []:
                if section == "roles":
                    names = [entry if isinstance(entry, str) else
                             entry.get("role", entry.get("name"))]
                else:
                    names = _task_roles(entry)
                found += [n for n in names if n not in found]
    return found


def doc_table() -> list[tuple[str, str, tuple[str, ...]]]:
    """The table's rows: stage, playbook (its file name) and the roles, in the doc's order."""
    lines = DOC.read_text().splitlines()
    assert HEADING in lines, f"{DOC.name} has no section {HEADING!r}"
    start = lines.index(HEADING)
    rows = []
    table = False
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if table:
                break
            continue
        table = True
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "Stage" or set(cells[0]) <= {"-", ":"}:
            continue  # the header, the separator
        playbook = re.fullmatch(r"`playbooks/([a-z_]+\.yml)`", cells[1])
        assert playbook, f"not a playbook: {cells[1]!r}"
        roles = tuple(re.findall(r"`([a-z_]+)`", cells[2]))
        assert roles or cells[2] == "—", f"roles: {cells[2]!r}"
        rows.append((cells[0].strip("`"), playbook.group(1), roles))
    assert rows, f"no table under {HEADING!r}"
    return rows


def test_each_stage_runs_the_code_read_here() -> None:
    assert list(STAGE_CODE) == list(STAGES)
    # A rack's batch runs the stages in STAGES' order, one runner each.
    assert [n for n in _called(rack_stages.run_rack) if n.startswith("run_")] == [
        f"run_{s}" for s in STAGES]
    # The image stage is the one the command line hands the pipeline; verify and accept call
    # the modules read above.
    from racklift.tasks import pipeline as tasks_pipeline
    assert tasks_pipeline.image_hosts is image_stage.image_hosts
    # The image stage's code read above is every playbook its modules run.
    assert sorted(code_playbooks(STAGE_CODE[IMAGE])) == sorted(
        {p for module in IMAGE_MODULES for p in code_playbooks(module)})
    assert "gate" in _called(rack_stages.run_verify)
    # The gate reads the hosts' vars (for their BMCs) after collecting their facts.
    called = _called(gate_module.gate)
    assert called.index("collect") < called.index("read_pinned_bmcs")
    assert "read_hostvars" in _called(gate_module.read_pinned_bmcs)
    assert rack_stages.gate is gate_module.gate
    assert "accept" in _called(rack_stages.run_accept)
    assert rack_stages.accept is accept_stage.accept
    assert "AcceptRunner" in _called(accept_stage.accept)
    # Verify and acceptance reach the rack's hosts as one Ansible process found them.
    for runner, callee in ((rack_stages.run_verify, "gate"), (rack_stages.run_accept, "accept")):
        (call,) = [c for c in _calls(_tree(runner))
                   if isinstance(c.func, ast.Name) and c.func.id == callee]
        assert "reached=batch.reached" in [ast.unparse(k) for k in call.keywords], callee


def test_the_code_runs_a_playbook_in_every_stage() -> None:
    for stage, code in STAGE_CODE.items():
        assert code_playbooks(code), stage


def test_the_architecture_stage_table_is_the_code_and_the_playbooks() -> None:
    expected = [(stage, playbook, tuple(playbook_roles(playbook)))
                for stage in STAGES for playbook in code_playbooks(STAGE_CODE[stage])]
    assert doc_table() == expected


def test_the_role_reader_sees_roles_tasks_and_loops() -> None:
    assert playbook_roles("image_boot.yml") == ["boot_server"]
    assert playbook_roles("image_release.yml") == ["boot_server"]  # include_role, tasks_from
    assert playbook_roles("configure.yml") == _group_var("racklift_roles")
    assert playbook_roles("registry_mirror.yml") == ["registry_mirror", "container_runtime"]
    assert playbook_roles("collect.yml") == []
