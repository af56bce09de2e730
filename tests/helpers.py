"""Paths and small tools the tests share."""

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

    # The tests' own lab: its own podman network and addresses, never the developer's lab.
    return LabNet("racklift-test", ipaddress.ip_network("10.89.1.0/24"),
                  ipaddress.ip_network("10.33.1.0/24"), mac_base=0x5000)


TEST_NET = _test_net()


def load_script(path: Path, name: str) -> ModuleType:
    """A script that is not a module (no .py, or under playbooks/), imported for its functions."""
    loader = SourceFileLoader(name, str(path))
    spec = spec_from_loader(loader.name, loader)
    assert spec is not None
    module = module_from_spec(spec)
    loader.exec_module(module)
    return module
