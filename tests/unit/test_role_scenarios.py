"""Every role has a Molecule scenario (tests/integration/test_molecule.py runs them)."""

from racklift.lab import molecule
from racklift.paths import REPO_ROOT


def test_every_role_has_a_scenario():
    roles = sorted(p.name for p in (REPO_ROOT / "roles").iterdir() if p.is_dir())
    assert roles == molecule.roles_with_scenarios()
