"""Run roles' Molecule scenarios on the lab host image, with racklift's podman settings.

A scenario with a `standin-packages.yml` gets that stand-in apt repository (see
`standin_repo`) mounted read-only at /srv/racklift-standin in its containers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from racklift import podman
from racklift.errors import LabError
from racklift.lab import images, standin_repo
from racklift.paths import REPO_ROOT

ROLES = REPO_ROOT / "roles"


def roles_with_scenarios() -> list[str]:
    return sorted(p.parent.parent.parent.name for p in ROLES.glob("*/molecule/*/molecule.yml"))


def environment(role: str, scenario: str = "default") -> dict[str, str]:
    """What `molecule` runs with for ROLE: the lab image and the scenario's stand-in repository
    (both built here when missing, so call it once per role before running scenarios at once)."""
    role_dir = ROLES / role
    if not (role_dir / "molecule" / scenario / "molecule.yml").exists():
        raise LabError(f"role {role} has no Molecule scenario {scenario!r} "
                       f"(roles with scenarios: {', '.join(roles_with_scenarios())})")
    spec = role_dir / "molecule" / scenario / "standin-packages.yml"
    repo = standin_repo.build(spec) if spec.exists() else standin_repo.empty()
    bindir = Path(sys.executable).parent
    return {**podman.env(), "RACKLIFT_LAB_IMAGE": images.host_image(),
            # Container names are per role, so scenarios of different roles can run at once.
            "RACKLIFT_MOLECULE_INSTANCE": f"molecule-{role.replace('_', '-')}",
            "RACKLIFT_STANDIN_REPO": str(repo),
            # What a scenario pins the stand-in's key to (the key is made per machine).
            "RACKLIFT_STANDIN_FINGERPRINT": standin_repo.fingerprint(),
            # Molecule calls ansible-* by name: the ones beside this Python.
            "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
            "ANSIBLE_FORCE_COLOR": "false", "PY_COLORS": "0"}


def run(role: str, command: str = "test", scenario: str = "default",
        log: Path | None = None) -> subprocess.CompletedProcess:
    """`molecule COMMAND -s SCENARIO` in the role's directory; output goes to the caller, or
    to LOG."""
    env = environment(role, scenario)
    molecule = Path(sys.executable).parent / "molecule"
    if log is None:
        return subprocess.run([str(molecule), command, "-s", scenario], cwd=ROLES / role, env=env)
    with log.open("w") as out:
        return subprocess.run([str(molecule), command, "-s", scenario], cwd=ROLES / role,
                              env=env, stdout=out, stderr=subprocess.STDOUT)
