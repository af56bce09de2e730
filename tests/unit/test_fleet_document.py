"""A simulated fleet host's collector document (racklift.lab.fleet.document): collect.py's
document, which the gate reads as it reads a real host's, passing a healthy host configured as
its context asks and failing a faulty one on the right check."""

from __future__ import annotations

import importlib.util
import json
from types import ModuleType
from typing import Any

import pytest

import emulated
from racklift.facts.bundle import from_collector
from racklift.facts.host import from_bundle
from racklift.lab import tags
from racklift.lab.fleet import document, plan
from racklift.paths import REPO_ROOT
from racklift.verify.verdict import HostVerdict, judge

FLEET = plan.plan(8)
HOST = FLEET.hosts[0]


def _collect_py() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "collect", REPO_ROOT / "playbooks" / "files" / "collect.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _document(faults: tuple[str, ...] = (),
              software: dict[str, Any] | None = None) -> dict[str, Any]:
    return document.collector_document(HOST, document.profile_for(HOST, faults),
                                       plan.SOFTWARE if software is None else software,
                                       collected_at=emulated.COLLECTED_AT)


def _verdict(faults: tuple[str, ...] = (), software: dict[str, Any] | None = None) -> HostVerdict:
    software = plan.SOFTWARE if software is None else software
    expected = emulated.expected_host(plan=HOST, software=software,
                                      site=FLEET.site_of(HOST.name), tags=(tags.LAB, tags.SIM))
    facts = from_bundle(from_collector(HOST.name, _document(faults, software)))
    return judge(expected, facts)


def test_a_healthy_fleet_host_passes_the_gate() -> None:
    v = _verdict()
    assert v.passed and v.failures == [] and v.warnings == [], v.failures
    assert v.not_collected == ("lspci.txt: exit 127: sh: 1: lspci: not found",)
    # The software the gate checks was there to check: doca-ofed, the toolkit, fabric manager.
    facts = from_bundle(from_collector(HOST.name, _document()))
    assert facts.packages["doca-ofed"] == plan.SOFTWARE["ofed"]["version"]
    assert facts.packages["nvidia-container-toolkit"] == "1.17.3-1"
    assert facts.services["nvidia-fabricmanager"] == "active"
    assert {n.interface for n in facts.lldp or ()} == {"eno1", "eno2"}


@pytest.mark.parametrize("software", [
    {"nvidia_driver": {"branch": "535", "version": "535.183.01",
                       "kernel_modules": "proprietary"}},
    {"nvidia_driver": {"branch": "550", "version": None, "fabricmanager": False}},
    {"ofed": {"source": "mlnx_ofed", "version": "24.10-OFED.24.10.1.1.4.1"}},
    {"ofed": {"source": "inbox", "version": "44.0-2*"}, "container_toolkit": {"version": None}},
    {"ofed": {"source": "doca", "version": "24.10-*"}},
], ids=["proprietary-535", "newest-no-fabricmanager", "mlnx_ofed", "inbox-no-toolkit",
        "doca-pattern"])
def test_the_host_shows_the_software_its_context_asks(software: dict[str, Any]) -> None:
    v = _verdict(software={**plan.SOFTWARE, **software})
    assert v.passed and v.failures == [], v.failures


@pytest.mark.parametrize(("faults", "caught"), [
    (("xid-79",), {"kernel.gpu_errors"}),
    (("ib-port-down",), {"ib.links"}),
    (("wrong-system-serial",), {"system.serial"}),
    (("mac-swapped",), {"interfaces.eno1.mac"}),
    (("driver-version-wrong",), {"software.nvidia_driver"}),
    (("xid-79", "ib-port-down", "wrong-system-serial"),
     {"kernel.gpu_errors", "ib.links", "system.serial"}),
])
def test_a_faulty_fleet_host_fails_on_the_right_check(faults: tuple[str, ...],
                                                       caught: set[str]) -> None:
    v = _verdict(faults)
    assert not v.passed
    assert caught <= {line.split(": ")[0] for line in v.failures}, v.failures


def test_a_lost_gpu_fails_nvidia_smi_as_on_a_lab_host() -> None:
    outputs = _document(("gpu-lost",))["outputs"]
    assert {n for n, o in outputs.items() if o["rc"] == 15} == {
        "nvidia-smi-q-x.xml", "nvidia-smi-topo.txt", "nvidia-smi-nvlink.txt",
        "nvidia-smi-nvlink-e.txt"}
    assert "gpus.lost[0000:ab:00.0]" in {line.split(": ")[0]
                                         for line in _verdict(("gpu-lost",)).failures}


def test_the_document_is_collect_py_s() -> None:
    collect = _collect_py()
    assert document.SERVICES == ("nvidia-fabricmanager", "nvidia-persistenced", "docker",
                                 "containerd")
    made = _document()
    assert list(made) == ["hostname", "collected_at", "sysfs_root", "outputs", "sysfs"]
    assert (made["hostname"], made["sysfs_root"]) == (HOST.name, "/sys")
    assert {name: o["command"] for name, o in made["outputs"].items()} == collect.COMMANDS
    assert all(set(o) == {"command", "rc", "seconds", "stdout", "stderr"}
               for o in made["outputs"].values())
    # Only what collect.py's globs find: the HCAs' and the DMI files, none of hwemu's others.
    assert made["sysfs"]["devices/virtual/dmi/id/product_serial"] == HOST.serial
    assert "class/infiniband/mlx5_0/ports/1/state" in made["sysfs"]
    assert not any(path.endswith(("/lid", "/gids/0", "/board_id")) for path in made["sysfs"])


def test_one_host_s_document_is_under_2_mib() -> None:
    assert len(json.dumps(_document()).encode()) < 2 * 2**20
