"""Every role's Molecule scenario, on the local lab image: dry run, converge, idempotence, side
effect, verify, destroy.

Scenarios spend most of their time waiting on apt and systemd, so they run three at a time
(container names are per role); each test waits for its role's run and shows its log when it
failed. Only the selected roles' scenarios run (`-k apt_vendor` runs one), so `invoke test`
splits them between its two lanes (tests/lanes.py): the roles in VM_LANE run beside the VM
tier, the others beside the rest.
"""

from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from racklift.lab import molecule

pytestmark = pytest.mark.molecule

AT_ONCE = 3
# The roles whose scenarios run beside the VM tier (tests/lanes.py says how the lanes are evened).
VM_LANE = frozenset({"apt_vendor", "nvidia_driver", "ofed", "lab_hardware",
                     "container_runtime"})


def _role(role: str):
    return pytest.param(role, marks=[pytest.mark.vm_lane] if role in VM_LANE else [])


@pytest.fixture(scope="module")
def scenario_runs(request, tmp_path_factory):
    logs = tmp_path_factory.mktemp("molecule")
    roles = [item.callspec.params["role"] for item in request.session.items
             if item.module is request.module and hasattr(item, "callspec")]
    for role in roles:  # the image and stand-in repositories, built once, before the runs
        molecule.environment(role)
    with ThreadPoolExecutor(AT_ONCE) as pool:
        runs: dict[str, tuple[Future, object]] = {
            role: (pool.submit(molecule.run, role, "test", log=logs / f"{role}.log"),
                   logs / f"{role}.log")
            for role in roles}
        yield runs


@pytest.mark.parametrize("role", [_role(r) for r in molecule.roles_with_scenarios()])
def test_role_scenario_passes(role, scenario_runs):
    future, log = scenario_runs[role]
    result = future.result()
    if result.returncode != 0:
        pytest.fail(f"molecule test failed for {role}; the end of its log ({log}):\n"
                    + "\n".join(log.read_text(errors="replace").splitlines()[-80:]))
