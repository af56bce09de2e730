"""The Redfish client against a real BMC emulator (sushy-tools over TLS, basic auth) in front of
a real libvirt VM (QEMU, TCG, UEFI) in a test namespace: what the client does is what libvirt
shows. The namespace, libvirtd, VM and emulator are removed afterwards, also on failure."""

from __future__ import annotations

import ipaddress
import logging
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator

import pytest

from racklift.bmc.redfish import BmcCredentials, BmcError, RedfishClient, endpoint_for
from racklift.lab import vrack

pytestmark = pytest.mark.vm

RACK = vrack.Vrack("rlbmc-prov", "rlbmc0", ipaddress.ip_network("10.92.0.0/24"),
                   ipaddress.ip_network("fd52:4c92::/64"), ipaddress.ip_network("127.0.79.0/24"),
                   rack="V92", mac_base=0x5900, memory_mib=512, disk_gib=1)


@pytest.fixture(scope="module")
def vm() -> Iterator[vrack.VmPlan]:
    started = time.monotonic()
    try:
        result = vrack.start_vms(RACK, 1)
        print(f"\n[vrack] namespace, libvirtd, 1 VM and its BMC in "
              f"{time.monotonic() - started:.1f} s")
        yield result.vms[0]
    finally:
        vrack.down(None, RACK)


def _client(vm: vrack.VmPlan, password: str | None = None) -> RedfishClient:
    endpoint = endpoint_for(vm.name, f"{vm.bmc}/32", {
        "racklift_bmc_port": vrack.BMC_PORT, "racklift_bmc_ca_bundle": str(vrack.ca_bundle())})
    return RedfishClient(endpoint, BmcCredentials(vrack.BMC_USERNAME,
                                                  password or vrack.bmc_password(RACK)))


def _libvirt_state(vm: vrack.VmPlan) -> str:
    return vrack.virsh("domstate", vm.name).stdout.strip()


def _boot_first(vm: vrack.VmPlan) -> str:
    """The device libvirt boots first: 'network' or 'disk'."""
    tree = ET.fromstring(vrack.virsh("dumpxml", "--inactive", vm.name).stdout)
    for device in tree.iterfind("devices/*"):
        boot = device.find("boot")
        if boot is not None and boot.get("order") == "1":
            return "network" if device.tag == "interface" else device.get("device", "?")
    return "?"


def _wait_for(predicate: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def test_the_bmc_manages_exactly_its_vm(vm):
    with _client(vm) as bmc:
        system = bmc.system()
    assert system["UUID"] == vm.uuid and system["Name"] == vm.name


def test_power_and_one_time_network_boot_show_in_libvirt(vm):
    with _client(vm) as bmc:
        bmc.power_off()
        assert _libvirt_state(vm) == "shut off" and bmc.power_state() == "Off"

        override = bmc.network_boot_once()  # Pxe, then power on (it was off)
        assert override.target == "Pxe"
        assert _boot_first(vm) == "network"
        assert _libvirt_state(vm) == "running" and bmc.power_state() == "On"
        # UEFI firmware runs iPXE, which asks for DHCP with the VM's NetBox MAC: proof the
        # VM really booted from the network (no boot server here, so it keeps asking).
        console = vrack.console_log(RACK, vm.name)
        asked = f"Configuring (net0 {vm.mac.lower()})"
        assert _wait_for(lambda: asked in console.read_text(errors="replace"), 60), \
            console.read_text(errors="replace")[-2000:]

        domain_id = vrack.virsh("domid", vm.name).stdout.strip()
        bmc.reset("ForceRestart")
        assert _libvirt_state(vm) == "running"
        assert vrack.virsh("domid", vm.name).stdout.strip() != domain_id  # a new QEMU

        # sushy-tools keeps "Once" forever (the documented quirk): disk boot set back.
        assert bmc.boot_override().enabled == "Continuous"
        assert bmc.boot_from_disk().target == "Hdd"
        assert _boot_first(vm) == "disk"

        bmc.power_off()
        assert _libvirt_state(vm) == "shut off"


def test_a_reset_type_the_emulator_does_not_list_is_refused(vm):
    with _client(vm) as bmc, pytest.raises(BmcError) as caught:
        bmc.reset("PushPowerButton")
    assert "ForceRestart" in str(caught.value)  # what it offers instead
    assert _libvirt_state(vm) == "shut off"


def test_wrong_password_names_host_and_credentials_never_the_password(vm, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "not-the-Lab-passw0rd"
    with _client(vm, password=wrong) as bmc, pytest.raises(BmcError) as caught:
        bmc.power_on()
    message = str(caught.value)
    assert vm.name in message and vm.bmc in message and "credentials" in message
    assert "HTTP 401" in message
    for secret in (wrong, vrack.bmc_password(RACK)):
        assert secret not in message and secret not in repr(caught.value)
        assert secret not in caplog.text
    assert _libvirt_state(vm) == "shut off"


def test_a_bmc_that_does_not_answer_fails_clearly_in_bounded_time(vm):
    silent = str(RACK.bmc_net.network_address + 250)  # nothing listens there
    endpoint = endpoint_for("vm-ghost", f"{silent}/32", {"racklift_bmc_port": vrack.BMC_PORT})
    started = time.monotonic()
    with RedfishClient(endpoint, BmcCredentials("racklift", "x"), attempts=3,
                       backoff_base=0.2) as bmc, pytest.raises(BmcError) as caught:
        bmc.power_state()
    seconds = time.monotonic() - started
    message = str(caught.value)
    assert re.search(r"vm-ghost: BMC at https://127\.0\.79\.250:8443 is unreachable", message)
    assert "3 attempts" in message and "OOB" in message
    assert 0.5 <= seconds < 10  # it did wait between attempts, and not forever
