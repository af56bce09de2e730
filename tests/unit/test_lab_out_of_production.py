"""The lab stays out of production's paths: the production inventory holds none of the lab's
settings (they are the lab's inventory source's, racklift.lab.sources), and the `racklift`
program loads no lab module, nor offers the lab NetBox, until a lab task runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from racklift.lab.sources import LAB_SOURCE, lab_inventory
from racklift.paths import REPO_ROOT
from racklift.tasks import common, lab_netbox

LOADED = """
import json, sys
import racklift.cli
from racklift.tasks import common
print(json.dumps({"lab": sorted(m for m in sys.modules if m.startswith("racklift.lab")),
                  "offered": len(common._fallbacks)}))
"""


def test_the_production_inventory_holds_nothing_of_the_lab() -> None:
    assert not [p for p in (REPO_ROOT / "inventory").rglob("*") if "lab" in p.name]
    assert {p.name for p in (LAB_SOURCE.parent / "group_vars").glob("*.yml")} == {
        "tag_racklift_lab_host.yml", "tag_racklift_lab_prov.yml", "tag_racklift_lab_sim.yml",
        "tag_racklift_lab_vm.yml"}
    assert lab_inventory()["ANSIBLE_INVENTORY"].split(",") == [
        str(REPO_ROOT / "inventory" / "netbox.racklift.yml"), str(LAB_SOURCE)]


def test_the_program_loads_no_lab_module_until_a_lab_task_runs() -> None:
    got = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")},
                         check=True, timeout=60)
    assert json.loads(got.stdout) == {"lab": [], "offered": 0}


def test_a_lab_task_offers_the_lab_netbox_and_the_lab_source(monkeypatch) -> None:
    monkeypatch.setattr(common, "_fallbacks", [])
    monkeypatch.delenv("ANSIBLE_INVENTORY", raising=False)
    lab_netbox.lab_session()
    assert common._fallbacks == [lab_netbox.running_lab]
    assert os.environ["ANSIBLE_INVENTORY"] == lab_inventory()["ANSIBLE_INVENTORY"]
