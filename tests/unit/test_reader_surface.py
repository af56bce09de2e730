"""The NetBox read's modules (racklift.netbox.reader, the front door, and its parts: selection,
raw_records, graphql_records, bulk_reads, expected_hosts) each have a public surface, their
`__all__`: what other modules (the inventory's lighter read, the warm inventory, the tasks,
tests, benchmarks) take from one is listed there, so a change to its internals breaks no other
module unseen. Each defines what it offers; only the reader re-exports, on purpose, the
`Selection` that `read_hosts` takes, for the callers that read hosts."""

import ast
from pathlib import Path
from types import ModuleType

import pytest

from helpers import REPO
from racklift.netbox import (
    bulk_reads,
    expected_hosts,
    graphql_records,
    raw_records,
    reader,
    selection,
)

MODULES = (reader, selection, raw_records, graphql_records, bulk_reads, expected_hosts)
# What a module's `__all__` offers that another module defines: the reader's front door.
RE_EXPORTS = {reader: {"Selection"}}


def taken_from(path: Path, module: str) -> set[str]:
    """The names `path` imports from `module`, or reads off it as a module attribute."""
    package, _, short = module.rpartition(".")
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == module:
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == package:
            aliases |= {a.asname or a.name for a in node.names if a.name == short}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases):
            names.add(node.attr)
    return names


def defined_in(module: ModuleType) -> set[str]:
    """The names a module's own top level defines (not those it imports)."""
    tree = ast.parse(Path(module.__file__).read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _outside(module: ModuleType) -> list[Path]:
    return [p for d in ("src", "plugins", "benchmarks", "tests") for p in (REPO / d).rglob("*.py")
            if p not in (Path(module.__file__).resolve(), Path(__file__).resolve())]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rpartition(".")[2])
def test_other_modules_take_only_a_modules_public_surface(module):
    public = set(module.__all__)
    taken = {(p.relative_to(REPO).as_posix(), name)
             for p in _outside(module) for name in taken_from(p, module.__name__)}
    assert taken, f"no module takes anything from {module.__name__}: the walk is broken"
    assert {(p, n) for p, n in taken if n not in public} == set()


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rpartition(".")[2])
def test_every_public_name_is_defined_there_and_documented(module):
    assert set(module.__all__) - defined_in(module) == RE_EXPORTS.get(module, set())
    for name in module.__all__:
        value = getattr(module, name)
        if callable(value) and not isinstance(value, type | dict):
            assert value.__doc__, f"{module.__name__}.{name} has no docstring"


def test_selection_is_taken_from_the_reader_only_with_read_hosts():
    """The re-export serves callers that read hosts; one that only names a selection takes it
    from racklift.netbox.selection, where it is defined."""
    alone = [p.relative_to(REPO).as_posix() for p in _outside(reader)
             if (names := taken_from(p, reader.__name__)) and "Selection" in names
             and "read_hosts" not in names]
    assert alone == []
