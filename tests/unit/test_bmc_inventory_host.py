"""`racklift bmc.inventory --host H`: the BMC of a NetBox device, reached as the image stage and
verify reach it (its OOB IP in NetBox, port, CA and credentials from its Ansible vars), here a
stand-in BMC serving a real tree (a Dell R750's iDRAC 9) over HTTPS; NetBox and the inventory
stood in for."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from invoke import Context
from invoke.exceptions import Exit

import emulated
from racklift.bmc.inventory import read_inventory
from racklift.bmc.redfish import BmcError
from racklift.tasks import bmc as bmc_tasks
from redfish_trees import DELL, Tree
from standin_bmc import PASSWORD, USER

SETTINGS = object()  # the NetBox settings the inventory is read with




class Inventory:
    """NetBox (its devices by name) and the Ansible inventory (each host's vars, or why none)
    stood in for; records what was asked."""

    def __init__(self, monkeypatch: Any, devices: list[Any], hostvars: dict[str, Any]) -> None:
        self.asked: list[tuple[str, ...]] = []
        self.netbox = SimpleNamespace(settings=SETTINGS)
        monkeypatch.setattr(bmc_tasks, "read_hosts", lambda netbox, selection: [
            d for d in devices if d.name in selection.names])
        monkeypatch.setattr(bmc_tasks, "read_hostvars", self._hostvars)
        monkeypatch.setattr(bmc_tasks, "connect", lambda: self.netbox)
        self.hostvars = hostvars

    def _hostvars(self, names: list[str], settings: Any) -> dict[str, Any]:
        assert settings is SETTINGS
        self.asked.append(tuple(names))
        return {n: self.hostvars[n] for n in names}


def device(name: str = "gpu-01", oob_ip: str | None = "127.0.0.1/32") -> Any:
    return replace(emulated.expected_host(), name=name, oob_ip=oob_ip)


def test_the_hosts_vars_give_port_ca_and_credentials_and_beat_the_environment(
        dell, tls, monkeypatch, capsys):
    monkeypatch.setenv("RACKLIFT_BMC_USERNAME", "someone-else")
    monkeypatch.setenv("RACKLIFT_BMC_PASSWORD", "env-Pa55")
    inventory = Inventory(monkeypatch, [device()], {"gpu-01": {
        "racklift_bmc_port": dell.port, "racklift_bmc_ca_bundle": str(tls[0]),
        "racklift_bmc_username": USER, "racklift_bmc_password": PASSWORD}})
    bmc_tasks.inventory(Context(), host="gpu-01", json=True)
    shown = capsys.readouterr()
    assert json.loads(shown.out) == json.loads(json.dumps(
        bmc_tasks.inventory_json(read_inventory(Tree(DELL)))))
    assert inventory.asked == [("gpu-01",)]
    assert set(dell.users) == {USER}  # never the environment's
    assert PASSWORD not in shown.out + shown.err


def test_the_environment_gives_the_credentials_the_hosts_vars_do_not(dell, tls, monkeypatch,
                                                                      capsys):
    monkeypatch.setenv("RACKLIFT_BMC_USERNAME", USER)
    monkeypatch.setenv("RACKLIFT_BMC_PASSWORD", PASSWORD)
    Inventory(monkeypatch, [device()], {"gpu-01": {"racklift_bmc_port": dell.port,
                                                   "racklift_bmc_ca_bundle": str(tls[0])}})
    bmc_tasks.inventory(Context(), host="gpu-01")
    shown = capsys.readouterr().err
    assert "BMC at gpu-01" in shown and "CNIVC0014M0388" in shown and "everything read" in shown


def test_a_host_netbox_does_not_have_is_named_with_the_field(monkeypatch):
    inventory = Inventory(monkeypatch, [device()], {})
    with pytest.raises(BmcError) as refused:
        bmc_tasks.read_host_bmc(inventory.netbox, "gpu-09")
    assert str(refused.value) == ("gpu-09: no device of that name in NetBox (field name): give "
                                  "the name of a device NetBox has")
    assert inventory.asked == []  # nothing asked of Ansible


def test_a_host_without_an_oob_ip_is_named_with_the_field(monkeypatch):
    inventory = Inventory(monkeypatch, [device(oob_ip=None)], {})
    with pytest.raises(Exit) as refused:
        bmc_tasks.inventory(Context(), host="gpu-01")
    assert str(refused.value.message).startswith(
        "error: gpu-01: no OOB (BMC) IP in NetBox (field oob_ip): assign the BMC's address")
    assert refused.value.code == 1 and inventory.asked == []


def test_a_host_the_ansible_inventory_lacks_is_named(monkeypatch):
    inventory = Inventory(monkeypatch, [device()], {"gpu-01": (
        "racklift.hostvars did not run (exit 1): Unable to parse the inventory: "
        "inventory/netbox.racklift.yml")})
    with pytest.raises(BmcError) as refused:
        bmc_tasks.read_host_bmc(inventory.netbox, "gpu-01")
    assert str(refused.value).startswith(
        "gpu-01: its BMC settings and credentials could not be read from the Ansible "
        "inventory: racklift.hostvars did not run")


def test_a_bmc_refusing_the_hosts_credentials_names_the_host_and_what_to_do(dell, tls,
                                                                             monkeypatch):
    inventory = Inventory(monkeypatch, [device()], {"gpu-01": {
        "racklift_bmc_port": dell.port, "racklift_bmc_ca_bundle": str(tls[0]),
        "racklift_bmc_username": USER, "racklift_bmc_password": "stale-Pa55"}})
    with pytest.raises(BmcError) as refused:
        bmc_tasks.read_host_bmc(inventory.netbox, "gpu-01")
    assert str(refused.value).startswith(
        f"gpu-01: BMC at https://127.0.0.1:{dell.port} rejected the credentials (HTTP 401)")
    assert "stale-Pa55" not in str(refused.value)


@pytest.mark.parametrize("given", [{}, {"url": "https://10.32.0.5", "host": "gpu-01"},
                                   {"host": "gpu-01", "ca": "bmc-ca.pem"}],
                         ids=["neither", "both", "ca-with-host"])
def test_exactly_one_of_url_and_host_and_ca_only_with_url(given, monkeypatch):
    monkeypatch.setattr(bmc_tasks, "connect", lambda: pytest.fail("NetBox was asked"))
    with pytest.raises(Exit) as refused:
        bmc_tasks.inventory(Context(), **given)
    assert refused.value.code == 2
    assert "--url" in str(refused.value.message) and "--host" in str(refused.value.message)
