"""The ofed role's controller-side filters (roles/ofed/filter_plugins/ofed.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "ofed_filters", ROOT / "roles/ofed/filter_plugins/ofed.py")
assert _spec and _spec.loader
ofed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ofed)


def test_hca_firmware_one_entry_per_hca_from_a_real_capture() -> None:
    """2x ConnectX-3 with two ports each (MLNX_OFED; tests/fixtures/real)."""
    text = (ROOT / "tests/fixtures/real/ibv_devinfo_connectx3-mlx4_mlnx-ofed.txt").read_text()
    assert ofed.hca_firmware(text) == [{"ca": "mlx4_1", "firmware": "2.42.5000"},
                                       {"ca": "mlx4_0", "firmware": "2.42.5000"}]


def test_hca_firmware_no_devices_and_not_ibv_devinfo() -> None:
    assert ofed.hca_firmware("No IB devices found\n") == []
    with pytest.raises(Exception, match="ibv_devinfo"):
        ofed.hca_firmware("bash: ibv_devinfo: command not found\n")


# package_facts' shape: name -> [{"version": ...}, ...]
FACTS = {"rdma-core": [{"version": "2410mlnx54-1.2410068"}],
         "ibverbs-utils": [{"version": "44.0-2"}],
         "doca-ofed": [{"version": "2.9.1-1"}]}


def test_installed_matching_tells_vendor_builds_from_the_distribution() -> None:
    names = ["rdma-core", "ibverbs-utils", "infiniband-diags"]
    assert ofed.installed_matching(FACTS, names, "mlnx") == ["rdma-core"]
    assert ofed.installed_matching(FACTS, names, "mlnx", match=False) == ["ibverbs-utils"]


def test_not_at_version_with_apt_wildcards() -> None:
    assert ofed.not_at_version(FACTS, ["doca-ofed"], "2.9.1-*") == []
    assert ofed.not_at_version(FACTS, ["doca-ofed"], "2.10.0-1") == ["doca-ofed"]
    assert ofed.not_at_version(FACTS, ["doca-ofed", "mlnx-tools"], "") == ["mlnx-tools"]
