"""racklift.netbox.reader's public surface is its `__all__`: what other modules (the
inventory's lighter read, the warm inventory, the tasks, tests, benchmarks) take from it is
listed there, so a change to the reader's internals breaks no other module unseen."""

import ast
from pathlib import Path

from helpers import REPO
from racklift.netbox import reader

MODULE = "racklift.netbox.reader"


def taken_from_reader(path: Path) -> set[str]:
    """The names `path` imports from the reader, or reads off it as a module attribute."""
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == MODULE:
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "racklift.netbox":
            aliases |= {a.asname or a.name for a in node.names if a.name == "reader"}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases):
            names.add(node.attr)
    return names


def test_other_modules_take_only_the_readers_public_surface():
    public = set(reader.__all__)
    outside = [p for d in ("src", "plugins", "benchmarks", "tests")
               for p in (REPO / d).rglob("*.py")
               if p not in (Path(reader.__file__).resolve(), Path(__file__).resolve())]
    taken = {(p.relative_to(REPO).as_posix(), name)
             for p in outside for name in taken_from_reader(p)}
    assert taken, "no module takes anything from the reader: the walk is broken"
    assert {(p, n) for p, n in taken if n not in public} == set()


def test_every_public_name_is_there_and_documented():
    for name in reader.__all__:
        value = getattr(reader, name)
        if callable(value) and not isinstance(value, type | dict):
            assert value.__doc__, f"{name} has no docstring"
