"""Every role's Molecule scenario, on the local lab image: create, converge, idempotence,
verify, destroy."""

import pytest

from racklift.lab import molecule


@pytest.mark.parametrize("role", molecule.roles_with_scenarios())
def test_role_scenario_passes(role):
    assert molecule.run(role, "test").returncode == 0, f"molecule test failed for {role}"


def test_every_role_has_a_scenario():
    from racklift.paths import REPO_ROOT
    roles = sorted(p.name for p in (REPO_ROOT / "roles").iterdir() if p.is_dir())
    assert roles == molecule.roles_with_scenarios()
