"""Paths and small tools the tests share."""

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
BIN = REPO / ".venv" / "bin"


def _test_net():
    import ipaddress

    from racklift.lab.hosts import LabNet

    # The tests' own lab: its own podman network and addresses, never the developer's lab; and
    # one per lane (tests/lanes.py sets RACKLIFT_TEST_NET), as container modules run in both.
    lane = int(os.environ.get("RACKLIFT_TEST_NET", "0"))
    return LabNet("racklift-test" + (f"{lane}" if lane else ""),
                  ipaddress.ip_network(f"10.89.{1 + lane}.0/24"),
                  ipaddress.ip_network(f"10.33.{1 + lane}.0/24"), mac_base=0x5000 + lane * 0x200)


TEST_NET = _test_net()


def load_script(path: Path, name: str) -> ModuleType:
    """A script that is not a module (no .py, or under playbooks/), imported for its functions."""
    loader = SourceFileLoader(name, str(path))
    spec = spec_from_loader(loader.name, loader)
    assert spec is not None
    module = module_from_spec(spec)
    loader.exec_module(module)
    return module


# In a host's own context data (which wins over the lab's context): no acceptance tests, for
# tests about verify and the pipeline around it, not about acceptance.
NO_ACCEPTANCE = {"acceptance": {"dcgm_level": None, "nccl_busbw": None, "rdma_gbps": None}}


def without_acceptance(netbox, names) -> None:
    netbox.update("dcim/devices", [
        {"id": d["id"], "local_context_data": {"racklift": NO_ACCEPTANCE}}
        for d in netbox.get_all("dcim/devices", {"name": list(names)}, fields=("id",))])


@contextmanager
def planned_lab(netbox, count: int, rack: str, runs: Path, acceptance: bool = False):
    """`count` lab hosts in `rack` on the tests' network, `planned` in NetBox as a new rack
    arrives, runs written under `runs`; removed afterwards. Without `acceptance`, their
    context asks for no acceptance tests."""
    from racklift.lab import rack as lab_rack

    os.environ["RACKLIFT_RUNS"] = str(runs)
    lab_rack.down(netbox, TEST_NET)  # leftovers of an interrupted run
    result = lab_rack.up(netbox, count, rack, net=TEST_NET)
    lab_rack.replan(netbox, [h.name for h in result.hosts])
    if not acceptance:
        without_acceptance(netbox, [h.name for h in result.hosts])
    try:
        yield result
    finally:
        lab_rack.down(netbox, TEST_NET)
        os.environ.pop("RACKLIFT_RUNS")


@contextmanager
def http_served(server) -> Iterator[str]:
    """`server` (a socketserver HTTP server on loopback) serving on a thread: its base URL;
    shut down and closed after."""
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
