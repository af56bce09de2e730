"""The real Redfish trees (tests/fixtures/real/redfish, their sources in
tests/fixtures/real/SOURCES.md) and a `get` that reads one, for the BMC tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TREES = Path(__file__).resolve().parent / "fixtures" / "real" / "redfish"
DELL = TREES / "dell-poweredge-r750_idrac9-6.00.30.00"
HPE = TREES / "hpe-proliant-dl385-gen10plus-v2_ilo5-2.72"
LENOVO = TREES / "lenovo-thinksystem-sr670-v2_xcc-2.83"
SUPERMICRO = TREES / "supermicro-sys-821ge-tnhr_bmc-11.01.01"
DGX = TREES / "nvidia-dgx-h100_ami-bmc-23.11.20"
GIGABYTE = TREES / "gigabyte-h262-z63_ami-megarac-12.84.13"
OPENBMC = TREES / "openbmc-2.15.0-dev_stock-build-hardware-unstated"
ALL = (DELL, HPE, LENOVO, SUPERMICRO, DGX, GIGABYTE, OPENBMC)


class Tree:
    """`get` over a captured tree: path -> <tree>/<path>/index.json. It reads nothing outside
    the tree whatever it is asked, and records every path asked for."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.calls: list[str] = []

    def __call__(self, path: str) -> Any:
        self.calls.append(path)
        file = self.root.joinpath(*path.strip("/").split("/"), "index.json").resolve()
        if self.root not in file.parents:
            raise PermissionError(f"{path} is outside the tree")
        return json.loads(file.read_text(encoding="utf-8"))
