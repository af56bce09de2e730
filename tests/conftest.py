import sys
from pathlib import Path

import pytest

# Let test modules import the shared helpers module.
sys.path.insert(0, str(Path(__file__).resolve().parent))

HERE = Path(__file__).resolve().parent
# Tiers (pyproject.toml's markers) beyond unit and netbox, which are applied here: an
# integration module names its own with `pytestmark`.
TIERS = ("netbox", "containers", "vm", "molecule", "slurm", "ansible", "redfish")
NETBOX_FIXTURES = {"instance", "settings", "netbox", "empty_netbox", "seeded_netbox",
                   "demo_data_netbox"}


def pytest_collection_modifyitems(config, items):
    untiered = []
    for item in items:
        if HERE / "unit" in Path(item.fspath).parents:
            item.add_marker(pytest.mark.unit)
            continue
        if NETBOX_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.netbox)
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            untiered.append(item.nodeid)
    if untiered:
        raise pytest.UsageError(f"tests outside tests/unit without a tier marker "
                                f"({', '.join(TIERS)}): {', '.join(untiered[:5])}; give their "
                                "module a pytestmark")
    # Modules that need no NetBox first, in their usual order, and those on NetBox's demo data
    # last: on a machine with no cached NetBox dumps they run while the session's NetBox, then
    # the demo data, migrate (integration/conftest.py starts both at the end of collection).
    # A module stays whole: its fixtures are module-scoped.
    needs_netbox = {item.module for item in items if item.get_closest_marker("netbox")}
    needs_demo = {item.module for item in items
                  if "demo_data_netbox" in getattr(item, "fixturenames", ())}
    items.sort(key=lambda item: (item.module in needs_netbox, item.module in needs_demo))
