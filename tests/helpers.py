"""Paths the tests share."""

from pathlib import Path

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
