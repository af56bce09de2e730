"""Which of racklift's packages may import which.

Production code never imports the lab. The lab (racklift.lab, the lab_hardware role) and the
command line's lab tasks may use production code; nothing an operator runs against real racks
may depend on the lab, directly or through a lab task module.

The layers below the pipeline: the gate (racklift.verify) never imports the pipeline
(racklift.pipeline), which runs it; a host's lifecycle in NetBox (racklift.lifecycle) imports
neither, both record through it."""

from __future__ import annotations

import ast
from pathlib import Path

import racklift
from racklift.paths import REPO_ROOT

PACKAGE = Path(racklift.__file__).resolve().parent
# The lab's tasks, and the command line (racklift.cli, racklift.tasks) that puts production's
# and the lab's tasks together: production may import none of them.
LAB_TASKS = {"racklift.tasks.lab", "racklift.tasks.lab_netbox", "racklift.tasks.vrack",
             "racklift.tasks.fleet",
             "racklift.cli", "racklift.tasks"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_lab(name: str) -> bool:
    return name == "racklift.lab" or name.startswith("racklift.lab.") or name in LAB_TASKS


def imported(source: str, module: str = "") -> set[str]:
    """Every module name `source` imports, relative imports resolved against `module`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")[: len(module.split(".")) - node.level]
                base = ".".join([*parent, *([base] if base else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def production_sources() -> dict[str, Path]:
    sources = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    sources = {name: path for name, path in sources.items() if not is_lab(name)}
    for path in [*REPO_ROOT.glob("plugins/*/*.py"), *REPO_ROOT.glob("roles/*/*_plugins/*.py")]:
        if "lab_hardware" not in path.parts:
            sources[str(path.relative_to(REPO_ROOT))] = path
    return sources


def test_no_production_module_imports_the_lab():
    sources = production_sources()
    assert {"racklift.pipeline.provision", "racklift.imaging.diskimage", "racklift.tasks.common",
            "racklift.tasks.netbox", "plugins/inventory/racklift_netbox.py"} <= set(sources)
    offenders = {name: sorted(filter(is_lab, imported(path.read_text(), name)))
                 for name, path in sources.items()}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_check_sees_each_way_of_importing_the_lab():
    planted = {
        "from racklift.lab import podman": "racklift.lab",
        "import racklift.lab.vrack": "racklift.lab.vrack",
        "from racklift import lab": "racklift.lab",
        "from ..lab.hosts import LAB": "racklift.lab.hosts",
        "def f():\n    from racklift.tasks import lab_netbox": "racklift.tasks.lab_netbox",
    }
    for source, name in planted.items():
        assert name in set(filter(is_lab, imported(source, "racklift.pipeline.provision"))), source
    assert not set(filter(is_lab, imported("from racklift.netbox import lab_tags_free",
                                           "racklift.pipeline.provision")))


def is_in(package: str, name: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def package_sources(package: str) -> dict[str, Path]:
    """Every module of the package (racklift.verify: racklift.verify.gate, ...), by name."""
    return {name: path for name, path in
            ((module_name(p), p) for p in PACKAGE.rglob("*.py")) if is_in(package, name)}


def importing(package: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    """The package's modules that import any of the forbidden packages, with what they import."""
    found = {name: sorted(i for i in imported(path.read_text(), name)
                          if any(is_in(f, i) for f in forbidden))
             for name, path in package_sources(package).items()}
    return {name: names for name, names in found.items() if names}


def test_the_gate_never_imports_the_pipeline():
    assert {"racklift.verify", "racklift.verify.verdict", "racklift.verify.record_verdicts",
            "racklift.verify.gate"} <= set(package_sources("racklift.verify"))
    assert importing("racklift.verify", ("racklift.pipeline",)) == {}


def test_the_lifecycle_imports_neither_the_gate_nor_the_pipeline():
    assert {"racklift.lifecycle", "racklift.lifecycle.stages", "racklift.lifecycle.lock",
            "racklift.lifecycle.state", "racklift.lifecycle.result"} <= set(
        package_sources("racklift.lifecycle"))
    assert importing("racklift.lifecycle", ("racklift.pipeline", "racklift.verify")) == {}


def test_the_layer_check_sees_each_way_of_importing_a_package_above():
    planted = ["from racklift.pipeline import plan", "import racklift.pipeline.state",
               "from racklift import pipeline", "from ..pipeline.lock import Ticket",
               "def f():\n    from racklift.pipeline.provision import run"]
    for source in planted:
        assert any(is_in("racklift.pipeline", name) for name in
                   imported(source, "racklift.verify.gate")), source
    assert not any(is_in("racklift.pipeline", name) for name in
                   imported("from racklift.pipelines import x\nimport racklift.lifecycle",
                            "racklift.verify.gate"))
