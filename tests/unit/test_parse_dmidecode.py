"""dmidecode (src/racklift/facts/parsers/dmidecode.py): a real Supermicro dump, the lab emulator's
records and `-s` strings (a wrong system serial among them), vendors' placeholders read as
nothing, and output that is not dmidecode's. One of the parsers' test files, one per module of
src/racklift/facts/parsers (and facts/xid.py), named test_parse_<module>.py."""

from __future__ import annotations

import parse_support
import pytest
from parse_support import DMIDECODE, real

from racklift.facts.observed import SystemFacts
from racklift.facts.parsers import ParseError, parse_dmidecode, parse_dmidecode_string
from racklift.lab import hwemu

profile = parse_support.profile


# --------------------------------------------------------------------------- dmidecode


def test_dmidecode_real_supermicro_fdio_csit() -> None:
    """Supermicro SYS-7049GP-TRT, dmidecode 3.1 full dump (FDio/csit testbed docs)."""
    assert parse_dmidecode(real(DMIDECODE)) == SystemFacts(
        vendor="Supermicro", product="SYS-7049GP-TRT", serial="S291427X8332242",
        bios_vendor="American Megatrends Inc.", bios_version="2.0",
        uuid="00000000-0000-0000-0000-ac1f6b8a8db6",
        version=None,  # "0123456789": Supermicro's placeholder
        sku=None, family=None,  # "To be filled by O.E.M."
        bios_date="11/29/2017", board_vendor="Supermicro", board_product="X11DPG-QT",
        board_serial="VM183S014930")


@pytest.mark.parametrize("type_", [None, "system", "bios,system", "1"])
def test_dmidecode_emulator(type_: str | None, profile: hwemu.Profile) -> None:
    facts = parse_dmidecode(hwemu.dmidecode(profile, type_))
    s = profile.system
    assert (facts.vendor, facts.product, facts.serial, facts.uuid) == (
        s.vendor, s.product, s.serial, s.uuid)
    assert facts.sku is None and facts.version is None
    if type_ in (None, "bios,system"):
        assert (facts.bios_vendor, facts.bios_version) == (s.bios_vendor, s.bios_version)
    else:
        assert facts.bios_vendor is None


def test_dmidecode_emulator_wrong_system_serial(profile: hwemu.Profile) -> None:
    faulted = hwemu.inject(profile, "wrong-system-serial")
    facts = parse_dmidecode(hwemu.dmidecode(faulted, "system"))
    assert facts.serial == faulted.system.serial != profile.system.serial
    assert parse_dmidecode_string(hwemu.dmidecode_string(faulted, "system-serial-number")) == (
        faulted.system.serial)


@pytest.mark.parametrize("value", ["To Be Filled By O.E.M.", "To be filled by O.E.M.",
                                   "Not Specified", "Default string", "0123456789", ""])
def test_dmidecode_placeholders_are_none(value: str) -> None:
    text = real(DMIDECODE).replace("Serial Number: S291427X8332242", f"Serial Number: {value}")
    assert parse_dmidecode(text).serial is None
    assert parse_dmidecode_string(value + "\n") is None


def test_dmidecode_string_and_errors(profile: hwemu.Profile) -> None:
    assert parse_dmidecode_string(hwemu.dmidecode_string(profile, "system-uuid")) == (
        profile.system.uuid)
    assert parse_dmidecode_string("# SMBIOS implementations newer than version 3.2.0 are not\n"
                                  "S421GE0001X0001\n") == "S421GE0001X0001"
    with pytest.raises(ParseError) as err:
        parse_dmidecode_string("Invalid string keyword: system-serial\n")
    assert err.value.kind == "dmidecode-string"
    with pytest.raises(ParseError) as err:
        parse_dmidecode("garbage\nmore garbage\n")
    assert err.value.kind == "dmidecode"
    # dmidecode's own answer when there is no table: facts, all None.
    empty = parse_dmidecode("# dmidecode 3.4\n# No SMBIOS nor DMI entry point found, sorry.\n")
    assert empty == SystemFacts(None, None, None, None, None, None)
