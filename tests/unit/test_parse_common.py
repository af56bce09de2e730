"""The parsers' common ground (src/racklift/facts/parsers/common.py and the facts they return): PCI
addresses and GUIDs normalised, and facts frozen and serialisable. One of the parsers' test
files, one per module of src/racklift/facts/parsers (and facts/xid.py), named
test_parse_<module>.py."""

from __future__ import annotations

import dataclasses

import pytest
from parse_support import A100_MIG_XML, DMIDECODE, real

from racklift.facts.parsers import (
    normalize_guid,
    normalize_pci_address,
    parse_dmidecode,
    parse_nvidia_smi_xml,
)


def test_normalize_pci_address_and_guid() -> None:
    assert normalize_pci_address("00000000:9A:00.0") == "0000:9a:00.0"
    assert normalize_pci_address("18:00.0") == "0000:18:00.0"
    assert normalize_pci_address("0001:00:00.0") == "0001:00:00.0"
    assert normalize_pci_address("N/A") is None
    assert normalize_guid("7cfe:9003:00a5:95c0") == "0x7cfe900300a595c0"
    assert normalize_guid("0x946DAE0300CDE72C") == "0x946dae0300cde72c"


def test_facts_are_frozen_and_serialise() -> None:
    facts = parse_dmidecode(real(DMIDECODE))
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.serial = "x"  # type: ignore[misc]
    assert facts.to_dict()["serial"] == "S291427X8332242"
    smi = parse_nvidia_smi_xml(real(A100_MIG_XML))
    assert smi.to_dict()["gpus"][0]["mig_devices"] == 4
