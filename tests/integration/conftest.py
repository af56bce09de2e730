"""A real NetBox for the tests: its own instance (port 18001, database racklift_test), so
running the tests never touches the lab NetBox. Seeded once, then reset from a snapshot.

RACKLIFT_TEST_NETBOX (instance name, hence database) with RACKLIFT_TEST_NETBOX_PORT and
RACKLIFT_TEST_REDIS_BASE let two test sessions run side by side on one machine."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from racklift.lab import netbox_server, seed, services
from racklift.lab.sources import lab_inventory
from racklift.netbox.client import NetBox, NetBoxSettings

TEST_NAME = os.environ.get("RACKLIFT_TEST_NETBOX", "test")
TEST_PORT = int(os.environ.get("RACKLIFT_TEST_NETBOX_PORT", 18001))
TEST_REDIS_BASE = int(os.environ.get("RACKLIFT_TEST_REDIS_BASE", 2))
SEEDED = "seeded"
# NetBox's own demonstration data (tests/fixtures/netbox-demo/README.md): a NetBox racklift
# did not write.
DEMO_DATA = (Path(__file__).resolve().parents[1] / "fixtures" / "netbox-demo"
             / "netbox-demo-v4.1.sql.gz")


INSTANCE = netbox_server.NetBoxInstance(TEST_NAME, TEST_PORT, redis_base=TEST_REDIS_BASE)
_coming_up: list[Future] = []  # the session's NetBox, started when collection ends


def _demo_data_dump() -> Path:
    return netbox_server.ensure_dump(services.ensure_postgres(),
                                     replace(INSTANCE, data=DEMO_DATA))


def pytest_collection_finish(session) -> None:
    """Start the test NetBox now when a selected test needs it: the first time on a machine,
    its migration (minutes) runs while the tests that need no NetBox, ordered first, run; then
    NetBox's demo data is migrated, while the modules that need only the test NetBox run
    (tests/conftest.py orders the demo data's last)."""
    if not any(item.get_closest_marker("netbox") for item in session.items):
        return
    background = ThreadPoolExecutor(1, "netbox-up")
    _coming_up.append(background.submit(netbox_server.up, INSTANCE))
    if any("demo_data_netbox" in getattr(item, "fixturenames", ()) for item in session.items):
        background.submit(_demo_data_dump)  # cached: the fixture finds it, or waits its lock


@pytest.fixture(scope="session")
def instance() -> netbox_server.NetBoxInstance:
    inst = INSTANCE
    result = _coming_up[0].result() if _coming_up else netbox_server.up(inst)
    print(f"\n[netbox] test NetBox up in {result.seconds:.1f} s "
          f"(already running: {result.already_running})")
    netbox_server.reset(inst)
    return inst


@pytest.fixture(scope="session", autouse=True)
def _lab_inventory() -> Iterator[None]:
    """The hosts here are the lab's: every Ansible run gets the lab's inventory source, as a lab
    task's do (a test of production without it takes ANSIBLE_INVENTORY away)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in lab_inventory().items():
            patch.setenv(name, value)
        yield


@pytest.fixture(scope="session")
def settings(instance) -> NetBoxSettings:
    return NetBoxSettings(instance.url, instance.token)


@pytest.fixture(scope="session")
def demo_plan() -> seed.SeedPlan:
    return seed.plan(racks=1)


@pytest.fixture(scope="session")
def _seeded_snapshot(instance, settings, demo_plan) -> None:
    netbox_server.reset(instance)  # whatever the module before it left: the demo rack alone
    started = time.monotonic()
    seed.apply(NetBox.connect(settings), demo_plan)
    print(f"\n[netbox] seeded {len(demo_plan.hosts)} hosts in {time.monotonic() - started:.1f} s")
    netbox_server.snapshot(instance, SEEDED)


@pytest.fixture(scope="module")
def netbox(instance, settings) -> NetBox:
    """A freshly migrated NetBox shared by one test module's tests (a lab rack's module)."""
    netbox_server.reset(instance)
    return NetBox.connect(settings)


@pytest.fixture
def empty_netbox(instance, settings) -> NetBox:
    """A freshly migrated NetBox with nothing in it."""
    netbox_server.reset(instance)
    return NetBox.connect(settings)


@pytest.fixture
def seeded_netbox(instance, settings, _seeded_snapshot) -> NetBox:
    """The demo rack (R01, 8 hosts) seeded; each test gets its own fresh copy."""
    netbox_server.reset(instance, SEEDED)
    return NetBox.connect(settings)


@pytest.fixture(scope="module")
def demo_data_netbox(instance, settings) -> NetBox:
    """The test NetBox holding NetBox's demo data, migrated once and cached like the lab's own
    dump; shared by one module's tests."""
    seconds = netbox_server.switch_data(instance, DEMO_DATA)
    print(f"\n[netbox] demo data in the test NetBox in {seconds:.1f} s")
    yield NetBox.connect(settings)
    netbox_server.switch_data(instance, None)  # the next module's NetBox numbers its own way
