"""dmidecode as the lab emulates it (src/racklift/lab/hwemu/dmi.py): the System Information record
laid out as the real Supermicro dump, the other types apart, and `-s` strings with the real
errors for an unknown keyword or type. One of the emulator's test files, one per module of
src/racklift/lab/hwemu, named test_hwemu_<module>.py."""

from __future__ import annotations

import re

import hwemu_support
import pytest
from hwemu_support import REAL

from racklift.lab import hwemu

profile = hwemu_support.profile


DMIDECODE = REAL / "dmidecode_supermicro-sys-7049gp-trt_3.1.txt"


# --------------------------------------------------------------------------- dmidecode


def test_dmidecode_system_matches_real_layout(profile: hwemu.Profile) -> None:
    out = hwemu.dmidecode(profile, "system")
    lines = out.splitlines()
    assert lines[:3] == ["# dmidecode 3.4", "Getting SMBIOS data from sysfs.",
                         "SMBIOS 3.3.0 present."]
    real = DMIDECODE.read_text().split("System Information\n")[1].split("\n\n")[0]
    real_keys = [ln.split(":")[0].strip() for ln in real.splitlines()]
    block = out.split("System Information\n")[1].split("\n\n")[0].splitlines()
    assert [ln.split(":")[0].strip() for ln in block] == real_keys
    assert all(ln.startswith("\t") for ln in block)
    assert "Handle 0x0001, DMI type 1, 27 bytes\nSystem Information\n" in out
    assert "\tManufacturer: Supermicro\n\tProduct Name: SYS-421GE-TNHR2-LCC\n" in out
    assert "\tSerial Number: S421GE0001X0001\n" in out
    assert re.search(r"\tUUID: [0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}\n", out)
    assert "System Boot Information\n\tStatus: No errors detected\n" in out
    assert out.endswith("\n\n")
    assert "BIOS Information" not in out
    assert "BIOS Information\n\tVendor: American Megatrends" in hwemu.dmidecode(profile, "bios")


def test_dmidecode_strings(profile: hwemu.Profile) -> None:
    assert hwemu.dmidecode_string(profile, "system-serial-number") == "S421GE0001X0001\n"
    assert hwemu.dmidecode_string(profile, "system-manufacturer") == "Supermicro\n"
    assert hwemu.dmidecode_string(profile, "system-product-name") == "SYS-421GE-TNHR2-LCC\n"
    assert hwemu.dmidecode_string(profile, "bios-version") == "2.1\n"
    with pytest.raises(ValueError):
        hwemu.dmidecode_string(profile, "system-serial")
    with pytest.raises(ValueError):
        hwemu.dmidecode(profile, "gpu")
