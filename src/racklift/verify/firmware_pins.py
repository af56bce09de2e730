"""The gate's check of a host's firmware and BIOS against its device type's pins
(racklift.bmc.firmware), on the inventory the controller read from the host's BMC over Redfish
(racklift.verify.gate reads it: racklift.bmc.reading). Pure.

A host whose device type pins nothing gets no check at all. A pinned host without a BMC address
in NetBox is NOT CHECKED, saying so: neither a pass nor a failure. A BMC that could not be read
is UNKNOWN: whether the pins are met is not known, and the host is refused."""

from __future__ import annotations

from collections.abc import Mapping

from racklift.bmc import firmware
from racklift.bmc.inventory import BmcInventory
from racklift.netbox.expected import ExpectedHost
from racklift.verify.check import CRITICAL, NOT_CHECKED, OK, UNKNOWN, CheckResult

NAME = "firmware.pins"
NO_BMC = "no BMC address (OOB IP) in NetBox: set it to have verify read firmware and BIOS"


def asks_bmc(host: ExpectedHost) -> bool:
    """Whether verify reads the host's BMC: its device type pins firmware or BIOS, and NetBox
    has its BMC's address."""
    return bool(host.oob_ip) and firmware.read(host.config)[0].pinned


def firmware_pins(host: ExpectedHost,
                  reads: Mapping[str, BmcInventory | str]) -> CheckResult | None:
    """The host's check, or None where nothing is pinned. `reads`: the inventory of each BMC
    verify read, or why it could not be read (naming the host and what to do), by host; every
    host `asks_bmc` answers for is in it."""
    pins = firmware.read(host.config)[0]  # the reader refused hosts whose pins are wrong
    if not pins.pinned:
        return None
    if not host.oob_ip:
        return CheckResult(NAME, NOT_CHECKED, NO_BMC)
    read = reads[host.name]
    if isinstance(read, str):
        return CheckResult(NAME, UNKNOWN, f"its BMC could not be read: {read}")
    if findings := firmware.compare(pins, read):
        return CheckResult(NAME, CRITICAL, firmware.failure(findings, read.problems))
    return CheckResult(NAME, OK, firmware.met(pins))
