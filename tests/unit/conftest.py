"""Fixtures the unit modules share: the stand-in BMC's certificate, and a real vendor's tree
served by it (tests/standin_bmc.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from redfish_trees import DELL
from standin_bmc import PASSWORD, USER, StandinBmc, make_cert, serving_tree


@pytest.fixture(scope="session")
def tls(tmp_path_factory) -> tuple[Path, Path]:
    return make_cert(tmp_path_factory.mktemp("standin"))


@pytest.fixture
def dell(tls) -> Iterator[StandinBmc]:
    """The Dell R750's iDRAC tree over HTTPS, for the credentials USER, PASSWORD."""
    with serving_tree(DELL, tls, (USER, PASSWORD)) as server:
        yield server
