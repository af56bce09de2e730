"""The Xid and SXid table (src/racklift/facts/xid.py) the kernel-log parser classes events by: the
published codes, severities as NVIDIA's catalog gives them, unknown codes and an NVSwitch SXid
classed by the driver's own word. One of the parsers' test files, one per module of
src/racklift/facts/parsers (and facts/xid.py), named test_parse_<module>.py."""

from __future__ import annotations

import pytest

from racklift.facts import xid

# --------------------------------------------------------------------------- xid table


REQUIRED_XIDS = [8, 13, 31, 32, 43, 45, 46, 48, 54, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95,
                 109, 119, 120, 121, 136, 137, 140, 143, *range(144, 151), *range(154, 159)]


@pytest.mark.parametrize("code", REQUIRED_XIDS)
def test_xid_table_has_published_codes(code: int) -> None:
    info = xid.classify_xid(code)
    assert info.known and info.code == code
    assert info.severity in xid.SEVERITIES
    assert info.name and info.action and info.mnemonic and info.bucket


def test_xid_severities_follow_the_catalog() -> None:
    assert xid.classify_xid(79).severity == "critical"  # RESTART_BM
    assert xid.classify_xid(48).severity == "critical"
    assert xid.classify_xid(95).severity == "critical"  # RESET_GPU
    assert xid.classify_xid(13).severity == "warning"  # RESTART_APP
    assert xid.classify_xid(94).severity == "warning"
    assert xid.classify_xid(43).severity == "info"  # IGNORE
    assert xid.classify_xid(79).mnemonic == "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
    assert xid.CATALOG_URL.startswith("https://docs.nvidia.com/deploy/xid-errors/")


def test_unknown_xid_and_sxid() -> None:
    unknown = xid.classify_xid(4242)
    assert (unknown.severity, unknown.known) == ("warning", False)
    assert "unknown" in unknown.name and "4242" in unknown.action
    assert xid.classify_sxid(20034, "Fatal, Link 48 LTSSM Fault Up").severity == "critical"
    assert xid.classify_sxid(19084, "Non-fatal, Link 29").severity == "warning"
    assert xid.classify_sxid(1, "").severity == "critical"


def test_an_unknown_xid_keeps_its_code_and_a_missing_one_is_minus_one() -> None:
    assert xid.classify_xid(4242).code == 4242
    assert xid.classify_xid(None).code == -1 and not xid.classify_xid(None).known


@pytest.mark.parametrize(("message", "severity", "note"), [
    ("Fatal, Link 48 LTSSM Fault Up", "critical", "fatal per the driver"),
    ("Non-fatal, Link 29", "warning", "non-fatal per the driver"),
    ("Nonfatal, Link 29, a b", "warning", "non-fatal per the driver"),
    ("Link 29 LTSSM Fault Up", "critical", "no class in the message"),
])
def test_an_sxid_is_classed_by_the_drivers_word_and_named_with_it(message, severity,
                                                                  note) -> None:
    info = xid.classify_sxid(20034, message)
    assert (info.code, info.severity, info.known) == (20034, severity, False)
    assert info.name.startswith(f"NVSwitch SXid 20034 ({note}")
    assert xid.classify_sxid(None, message).code == -1
