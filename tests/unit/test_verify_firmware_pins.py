"""verify reads the firmware and BIOS pins again: the gate's check `firmware.pins`
(racklift.verify.firmware_pins) on a real BMC's inventory (a Dell R750's iDRAC 9), and the gate's
edge (read_pinned_bmcs) reading it over HTTPS from a stand-in BMC that serves that tree."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import emulated
from racklift.bmc.inventory import BmcInventory, read_inventory
from racklift.bmc.reading import read_whole
from racklift.bmc.redfish import BmcCredentials, BmcEndpoint, BmcError, RedfishClient
from racklift.facts.host import from_bundle
from racklift.netbox.expected import ExpectedHost
from racklift.verify import gate as verify_gate
from racklift.verify import health, verdict_report
from racklift.verify.check import CRITICAL, NOT_CHECKED, OK, UNKNOWN, CheckResult
from racklift.verify.failures import verdict_failures
from racklift.verify.firmware_pins import NAME, NO_BMC, firmware_pins
from racklift.verify.verdict import HostVerdict, journal_text, judge
from redfish_trees import DELL, Tree
from standin_bmc import PASSWORD, USER, StandinBmc

# What the Dell R750's iDRAC reports, pinned.
PINS = {"firmware": {"BMC": "6.00.30.00", "BIOS": "1.8.2"},
        "bios": {"SysProfile": "PerfOptimized", "ProcVirtualization": "Enabled"}}
DELL_INVENTORY = read_inventory(Tree(DELL))
PASSED = "firmware and BIOS as pinned (2 components, 2 BIOS attributes)"
FIX_HINT = ": update them, or change the pins (racklift.firmware, racklift.bios) in NetBox"


def pinned(name: str = "gpu-01", oob_ip: str | None = "127.0.0.1/32",
           **pins: Any) -> ExpectedHost:
    """The lab host as `name`, its device type's context with these pins (PINS unless given)."""
    host = emulated.expected_host()
    return replace(host, name=name, oob_ip=oob_ip, config={**host.config, **(pins or PINS)})


def verdict(host: ExpectedHost, check: CheckResult | None) -> HostVerdict:
    """The gate's verdict of the healthy lab host with this check."""
    facts = from_bundle(emulated.bundle(emulated.healthy_profile()))
    return judge(host, facts, (check,) if check else ())


# ---------------------------------------------------------------------------------------------
# The check (pure)


def test_a_host_without_pins_gets_no_check_and_its_bmc_is_not_asked():
    host = emulated.expected_host()
    assert firmware_pins(host, {}) is None  # {}: nothing read, nothing looked up
    assert firmware_pins(replace(host, oob_ip=None), {}) is None  # no "not checked" noise
    assert not verify_gate.asks_bmc(host)


def test_pins_the_bmc_meets_pass_naming_how_many():
    host = pinned()
    check = firmware_pins(host, {host.name: DELL_INVENTORY})
    assert check == CheckResult(NAME, OK, PASSED)
    v = verdict(host, check)
    assert v.passed and v.checks[-1] == check and len(v.checks) == len(health.CHECKS) + 1
    assert verdict_report.table([v], "t").columns[4]._cells == [
        f"{len(v.checks)}/{len(v.checks)} OK"]


@pytest.mark.parametrize("pins, finding", [
    ({"firmware": {"BMC": "7.10.30.00"}},
     "firmware BMC (Installed-25227-6.00.30.00__iDRAC.Embedded.1-1): found 6.00.30.00, "
     "wanted 7.10.30.00"),
    ({"bios": {"SysProfile": "Custom"}},
     'BIOS attribute SysProfile: found "PerfOptimized", wanted "Custom"'),
    ({"bios": {"AcPwrRcvryUserDelay": "120"}},  # 120 is not "120"
     'BIOS attribute AcPwrRcvryUserDelay: found 120, wanted "120"'),
    ({"firmware": {"GPU": "96.00.89.00.01"}}, "firmware GPU: found not reported, "
                                              "wanted 96.00.89.00.01"),
    ({"bios": {"NoSuchAttribute": "On"}},
     'BIOS attribute NoSuchAttribute: found not reported, wanted "On"'),
], ids=["version", "bios-value", "bios-kind", "component-not-reported",
        "attribute-not-reported"])
def test_each_finding_fails_the_host_naming_component_found_and_wanted(pins, finding):
    host = pinned(**pins)
    check = firmware_pins(host, {host.name: DELL_INVENTORY})
    why = f"its firmware and BIOS are not as its device type pins them: {finding}{FIX_HINT}"
    assert check == CheckResult(NAME, CRITICAL, why)
    v = verdict(host, check)
    assert not v.passed and v.failed and v.failures == [f"{NAME}: CRITICAL: {why}"]
    failure, = verdict_failures(v.to_dict())  # report.json's views, NetBox's racklift_result
    assert (failure.check, failure.found) == (NAME, f"CRITICAL: {why}")


def test_every_finding_is_told_with_what_kept_the_inventory_from_being_read():
    def no_bios(path: str) -> Any:
        if path.endswith("/Bios"):
            raise OSError("connection reset")
        return Tree(DELL)(path)

    inventory = read_inventory(no_bios)
    host = pinned(firmware={"BMC": "7.10.30.00", "BIOS": "1.8.2"},
                  bios={"SysProfile": "PerfOptimized"})
    check = firmware_pins(host, {host.name: inventory})
    assert check is not None and check.status == CRITICAL
    assert check.detail.startswith(
        "its firmware and BIOS are not as its device type pins them: firmware BMC "
        "(Installed-25227-6.00.30.00__iDRAC.Embedded.1-1): found 6.00.30.00, wanted 7.10.30.00; "
        "BIOS attribute SysProfile: found not reported, wanted \"PerfOptimized\" (reading the "
        "BMC's inventory: ")
    assert "connection reset" in check.detail and check.detail.endswith(FIX_HINT)


def test_a_bmc_that_cannot_be_read_refuses_the_host_saying_why():
    host = pinned()
    why = ("gpu-01: BMC at https://127.0.0.1:443 rejected the credentials (HTTP 401) while "
           "reading /redfish/v1: check the BMC credentials source")
    check = firmware_pins(host, {host.name: why})
    assert check == CheckResult(NAME, UNKNOWN, f"its BMC could not be read: {why}")
    v = verdict(host, check)
    assert not v.passed and v.failed
    assert v.failures == [f"{NAME}: UNKNOWN: its BMC could not be read: {why}"]
    assert [f.check for f in verdict_failures(v.to_dict())] == [NAME]


def test_a_pinned_host_without_a_bmc_address_is_not_checked_and_says_what_to_do():
    host = pinned(oob_ip=None)
    check = firmware_pins(host, {})  # nothing read: nothing looked up
    assert check == CheckResult(NAME, NOT_CHECKED, NO_BMC)
    assert NO_BMC == ("no BMC address (OOB IP) in NetBox: set it to have verify read firmware "
                      "and BIOS")
    v = verdict(host, check)
    line = f"{NAME}: NOT CHECKED: {NO_BMC}"
    # Not a failure: the host's health passed; told wherever a warning is.
    assert v.passed and v.failures == [] and v.warnings == [line]
    assert verdict_failures(v.to_dict()) == []
    assert f"- warning: {line}" in journal_text(v)
    # Not a pass either: the table counts it out of OK and shows it.
    cells = [str(c._cells[0]) for c in verdict_report.table([v], "t").columns]
    assert cells[4] == f"{len(v.checks) - 1}/{len(v.checks)} OK" and cells[5] == line
    report = verdict_report.to_json([v], "t")["hosts"][0]
    assert report["checks"][-1] == {"name": NAME, "status": "NOT CHECKED", "detail": NO_BMC}
    assert report["warnings"] == [line] and report["failures"] == []
    # A host whose checks all went unchecked passes nothing.
    alone = HostVerdict(host.name, host.netbox_id, host.status, checks=(check,))
    assert not alone.passed and alone.failed


# ---------------------------------------------------------------------------------------------
# The edge: the gate reads the pinned hosts' BMCs over Redfish, with their inventory vars




def _client(server: StandinBmc, ca: Path, password: str = PASSWORD) -> RedfishClient:
    return RedfishClient(BmcEndpoint("gpu-01", "127.0.0.1", server.port, ca),
                         BmcCredentials(USER, password), attempts=1)


def test_what_is_read_over_https_is_what_the_reader_reads_from_the_files(dell, tls):
    assert read_whole(_client(dell, tls[0])) == DELL_INVENTORY


def test_a_bmc_nothing_is_read_from_raises_its_own_error(dell, tls):
    with pytest.raises(BmcError) as refused:
        read_whole(_client(dell, tls[0], password="wrong"))
    assert str(refused.value).startswith(
        f"gpu-01: BMC at https://127.0.0.1:{dell.port} rejected the credentials (HTTP 401) "
        "while reading /redfish/v1: check the BMC credentials source")
    dell.resources = {"/redfish/v1": {"Id": "RootService"}}  # answers, lists nothing
    with pytest.raises(BmcError, match=rf"nothing read from the BMC at https://127.0.0.1:"
                                       rf"{dell.port}: .*Systems"):
        read_whole(_client(dell, tls[0]))


def _healthy(name: str) -> Any:
    return replace(emulated.bundle(emulated.healthy_profile()), host=name)


def test_the_gate_reads_each_pinned_bmc_and_one_bad_bmc_fails_its_host_alone(
        dell, tls, monkeypatch, tmp_path):
    hosts = [pinned("gpu-01"), pinned("gpu-02", firmware={"BIOS": "2.0.0"}),
             pinned("gpu-03", oob_ip=None), replace(emulated.expected_host(), name="gpu-04"),
             pinned("gpu-05"), pinned("gpu-06")]
    hosts = [replace(h, netbox_id=n) for n, h in enumerate(hosts, 1)]
    monkeypatch.setattr(verify_gate, "collect",
                        lambda netbox, chosen, *_, **__: {h.name: _healthy(h.name)
                                                          for h in chosen})
    asked: list[list[str]] = []
    port = {"racklift_bmc_port": dell.port, "racklift_bmc_ca_bundle": str(tls[0])}

    def hostvars(names: list[str], settings: Any, **_: Any) -> dict[str, Any]:
        asked.append(names)
        return {"gpu-01": {**port, "racklift_bmc_username": USER,
                           "racklift_bmc_password": PASSWORD},
                "gpu-02": {**port, "racklift_bmc_username": USER,
                           "racklift_bmc_password": PASSWORD},
                "gpu-05": {**port, "racklift_bmc_username": USER,
                           "racklift_bmc_password": "wrong-Pa55"},
                "gpu-06": "Attempting to decrypt but no vault secrets found"}

    monkeypatch.setattr(verify_gate, "read_hostvars", hostvars)
    said: list[str] = []
    verdicts = {v.host: v for v in verify_gate.gate(SimpleNamespace(settings=None), hosts,
                                                    tmp_path, write=False,
                                                    progress=said.append)}
    # Only the pinned hosts with a BMC address, once, all in one inventory read.
    assert asked == [["gpu-01", "gpu-02", "gpu-05", "gpu-06"]]
    assert "reading the firmware and BIOS of 4 hosts from their BMCs" in said
    pins = {name: [c for c in v.checks if c.name == NAME] for name, v in verdicts.items()}
    assert pins["gpu-01"] == [CheckResult(NAME, OK, PASSED)] and verdicts["gpu-01"].passed
    assert pins["gpu-02"] == [CheckResult(NAME, CRITICAL, (
        "its firmware and BIOS are not as its device type pins them: firmware BIOS "
        f"(Installed-159-1.8.2__BIOS.Setup.1-1): found 1.8.2, wanted 2.0.0{FIX_HINT}"))]
    assert pins["gpu-03"] == [CheckResult(NAME, NOT_CHECKED, NO_BMC)]
    assert verdicts["gpu-03"].passed
    assert pins["gpu-04"] == [] and verdicts["gpu-04"].passed
    (unread,) = pins["gpu-05"]
    assert unread.status == UNKNOWN and unread.detail.startswith(
        f"its BMC could not be read: gpu-05: BMC at https://127.0.0.1:{dell.port} rejected "
        "the credentials (HTTP 401)")
    assert pins["gpu-06"] == [CheckResult(NAME, UNKNOWN, (
        "its BMC could not be read: gpu-06: its BMC settings and credentials could not be read "
        "from the Ansible inventory: Attempting to decrypt but no vault secrets found"))]
    assert [n for n, v in verdicts.items() if v.failed] == ["gpu-02", "gpu-05", "gpu-06"]
    # Each host's own credentials (its vars, not the environment's), the password never told.
    # (gpu-05's BMC refused basic auth: the client asked it for a Redfish session, with no
    # basic auth, its own user in the body.)
    assert {u for u in dell.users if u} == {USER}
    assert {b["UserName"] for m, p, b in dell.received if m == "POST"} == {USER}
    assert PASSWORD not in json.dumps(verdict_report.to_json(list(verdicts.values()), "t"))


def test_a_host_whose_facts_were_not_collected_still_shows_its_firmware(
        dell, tls, monkeypatch, tmp_path):
    host = pinned(firmware={"BIOS": "2.0.0"})
    monkeypatch.setattr(verify_gate, "collect",
                        lambda *_, **__: {host.name: f"{host.name}: unreachable over SSH"})
    monkeypatch.setattr(verify_gate, "read_hostvars", lambda names, settings, **_: {
        host.name: {"racklift_bmc_port": dell.port, "racklift_bmc_ca_bundle": str(tls[0]),
                    "racklift_bmc_username": USER, "racklift_bmc_password": PASSWORD}})
    (v,) = verify_gate.gate(SimpleNamespace(settings=None), [host], tmp_path, write=False)
    assert v.failures[0] == f"collection: {host.name}: unreachable over SSH"
    assert v.failures[1].startswith(f"{NAME}: CRITICAL: its firmware and BIOS are not as")


def test_no_pinned_host_no_inventory_read(monkeypatch, tmp_path):
    hosts = [emulated.expected_host(), pinned(oob_ip=None)]
    monkeypatch.setattr(verify_gate, "collect",
                        lambda *_, **__: {h.name: _healthy(h.name) for h in hosts})

    def never(*_: Any, **__: Any) -> BmcInventory:
        raise AssertionError("the inventory was read")

    monkeypatch.setattr(verify_gate, "read_hostvars", never)
    verify_gate.gate(None, hosts, tmp_path, write=False)  # type: ignore[arg-type]
