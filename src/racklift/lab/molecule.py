"""Run roles' Molecule scenarios on the lab host image, with racklift's podman settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from racklift.errors import LabError
from racklift.lab import podman
from racklift.paths import REPO_ROOT

ROLES = REPO_ROOT / "roles"


def roles_with_scenarios() -> list[str]:
    return sorted(p.parent.parent.parent.name for p in ROLES.glob("*/molecule/*/molecule.yml"))


def run(role: str, command: str = "test", scenario: str = "default") -> subprocess.CompletedProcess:
    """`molecule COMMAND -s SCENARIO` in the role's directory; output goes to the caller."""
    role_dir = ROLES / role
    if not (role_dir / "molecule" / scenario / "molecule.yml").exists():
        raise LabError(f"role {role} has no Molecule scenario {scenario!r} "
                       f"(roles with scenarios: {', '.join(roles_with_scenarios())})")
    bindir = Path(sys.executable).parent
    env = {**podman.env(), "RACKLIFT_LAB_IMAGE": podman.host_image(),
           # Molecule calls ansible-* by name: the ones beside this Python.
           "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
           "ANSIBLE_FORCE_COLOR": "false", "PY_COLORS": "0"}
    return subprocess.run([str(bindir / "molecule"), command, "-s", scenario], cwd=role_dir,
                          env=env)
