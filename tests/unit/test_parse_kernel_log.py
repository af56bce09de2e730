"""The kernel log (src/racklift/facts/parsers/kernel_log.py): real Xid, SXid and PCIe AER lines
with their several timestamp and prefix forms, driver-version variants, severities, the lab
emulator's dmesg under every fault, and text that holds no events. One of the parsers' test
files, one per module of src/racklift/facts/parsers (and facts/xid.py), named
test_parse_<module>.py."""

from __future__ import annotations

import dataclasses

import parse_support
import pytest
from parse_support import (
    DMESG_AER_CORRECTED,
    DMESG_AER_FATAL,
    DMESG_XID79,
    DMESG_XID119,
    IBSTAT_IB_ETH,
    real,
)

from racklift.facts.observed import KernelEvent
from racklift.facts.parsers import parse_dmesg
from racklift.lab import hwemu

profile = parse_support.profile


# --------------------------------------------------------------------------- kernel log


def test_dmesg_real_xid79_and_sxid_hgx_leptonai_gpud() -> None:
    """HGX node: GPU 0000:91:00 falls off the bus, then NVSwitch SXid 20034 (leptonai/gpud)."""
    events = parse_dmesg(real(DMESG_XID79))
    assert [(e.kind, e.code) for e in events] == [("xid", 79), ("sxid", 20034), ("sxid", 20034)]
    fell = events[0]
    assert (fell.device, fell.severity) == ("0000:91:00", "critical")
    assert fell.timestamp == 6781741.548779
    assert fell.message == "GPU has fallen off the bus."
    assert fell.name == "GPU has fallen off the bus"
    assert fell.line.startswith("[6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>'")
    switch = events[2]
    assert (switch.device, switch.severity, switch.notes) == (
        "0000:05:00.0", "critical", ("nvidia-nvswitch0",))
    assert switch.message == "Fatal, Link 63 LTSSM Fault Up"


def test_dmesg_real_human_timestamps_xid119_dell_xe9680() -> None:
    """``dmesg -T`` of a Dell XE9680: GSP RPC timeouts, Xid 119 (leptonai/gpud testdata)."""
    events = parse_dmesg(real(DMESG_XID119))
    assert [e.code for e in events] == [119] * 5
    first = events[0]
    assert (first.kind, first.device, first.severity) == ("xid", "0000:9b:00", "critical")
    assert (first.timestamp, first.wallclock) == (None, "Sun Feb 23 16:24:18 2025")
    assert first.message.startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    assert "pid=" not in first.message


def test_dmesg_real_aer_fatal_linux_pci_list() -> None:
    """CentOS 7 / 5.9 syslog lines: a real and an injected Uncorrected (Fatal) completion
    timeout at a root port (linux-pci list, Dec 2020)."""
    events = parse_dmesg(real(DMESG_AER_FATAL))
    assert [(e.kind, e.severity, e.device) for e in events] == [
        ("aer", "critical", "0000:00:01.0"), ("aer", "critical", "0000:00:01.0")]
    old, injected = events
    assert old.wallclock == "Dec 1 02:16:37" and old.timestamp is None
    assert old.notes[0] == "source id=0008"  # old kernels name a requester id
    assert "[14] Completion Timeout     (First)" in old.notes
    assert injected.notes[-1] == "[14] CmpltTO"
    assert injected.message == "Uncorrected (Fatal) error"


def test_dmesg_real_aer_corrected_linux_pci_list() -> None:
    """Syslog + uptime prefix, a Corrected RxErr at an NVMe drive (linux-pci list, 2021)."""
    (event,) = parse_dmesg(real(DMESG_AER_CORRECTED))
    assert (event.kind, event.severity, event.device) == ("aer", "warning", "0000:02:00.0")
    assert (event.timestamp, event.wallclock) == (46.675818, "Jan 1 23:30:53")
    assert event.notes == (
        "PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
        "device [15b7:5006] error status/mask=00000001/0000e000", "[ 0] RxErr")


@pytest.mark.parametrize(("line", "code", "device", "severity", "message"), [
    # Older driver form without "PCI:" (as in public logs of pre-R400 drivers).
    ("[  269.517039] NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff",
     3, "0000:01:00", "warning", "C 00000005 SC 00000007 M 00001ffc Data ffffffff"),
    # Without pid/name, journal prefix.
    ("May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
     79, "0000:2b:00", "critical", "GPU has fallen off the bus."),
    # pid without name.
    ("[ 12.000000] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for "
     "remapping, reset gpu to activate.", 63, "0000:10:1c", "warning",
     "Row Remapper: New row marked for remapping, reset gpu to activate."),
    ("NVRM: Xid (PCI:0000:9a:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double "
     "bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
     48, "0000:9a:00", "critical", "An uncorrectable double bit error (DBE) has been detected "
     "on GPU in the framebuffer at partition 6, subpartition 0."),
    ("[1.0] NVRM: Xid (PCI:0000:9a:00): 999, pid=1, name=x, something new", 999, "0000:9a:00",
     "warning", "something new"),
])
def test_dmesg_xid_variants(line: str, code: int, device: str, severity: str,
                            message: str) -> None:
    (event,) = parse_dmesg(line + "\n")
    assert (event.kind, event.code, event.device, event.severity, event.message) == (
        "xid", code, device, severity, message)


def test_dmesg_aer_newer_kernel_wording() -> None:
    """Kernels since 2024 say "error message received from" (lines quoted in a linux-pci
    patch, Kai-Heng Feng, Jul 2024, HP Thunderbolt Dock G4)."""
    text = ("pcieport 0000:00:1d.0: AER: Correctable error message received from 0000:09:04.0\n"
            "pcieport 0000:09:04.0: PCIe Bus Error: severity=Correctable, type=Data Link Layer, "
            "(Receiver ID)\n"
            "pcieport 0000:09:04.0:   device [8086:0b26] error status/mask=00000080/00002000\n"
            "pcieport 0000:09:04.0:    [ 7] BadDLLP\n")
    (event,) = parse_dmesg(text)
    assert (event.severity, event.device, event.message) == (
        "warning", "0000:09:04.0", "Corrected error")
    assert event.notes[-1] == "[ 7] BadDLLP"


@pytest.mark.parametrize(("line", "severity"), [
    ("pcieport 0000:00:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:01:00.0",
     "critical"),
    ("pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0", "critical"),
    ("pcieport 0000:00:1c.5: AER: Multiple Corrected error received: 0000:00:1c.5", "warning"),
    ("pcieport 0000:00:01.0: AER: Uncorrectable (Non-Fatal) error message received from "
     "0000:01:00.0", "critical"),
    ("nvidia-nvswitch3: SXid (PCI:0000:c5:00.0): 19084, Non-fatal, Link 10 AN1 Heartbeat "
     "Timeout Error (First)", "warning"),
    ("nvidia-nvswitch2: SXid (PCI:0000:c4:00.0): 10002, Severity 5 Engine instance 00 "
     "Sub-engine instance 00", "critical"),
])
def test_dmesg_aer_and_sxid_severity(line: str, severity: str) -> None:
    (event,) = parse_dmesg(line)
    assert event.severity == severity
    if event.kind == "aer":
        assert event.device in ("0000:01:00.0", "0000:00:1c.5")


@pytest.mark.parametrize("fault", [None, *hwemu.FAULTS])
def test_dmesg_emulator_every_fault(fault: str | None, profile: hwemu.Profile) -> None:
    p = profile if fault is None else hwemu.inject(profile, fault)
    events = parse_dmesg(hwemu.dmesg(p))
    if fault == "xid-79":
        (event,) = events
        assert (event.kind, event.code, event.severity) == ("xid", 79, "critical")
        assert event.device == "0000:9a:00"  # GPU 4 of the HGX board
        assert event.timestamp is not None and event.timestamp > 86400
    elif fault in KERNEL_FORMS:  # test_hwemu_real_forms reads them in detail
        assert {e.kind for e in events} == {KERNEL_FORMS[fault]}
    else:
        assert events == []


# The lab's real-world kernel-log faults and the kind of event each is.
KERNEL_FORMS = {"aer-gpu-endpoint": "aer", "xid-nvlink5-nonfatal": "xid",
                "gpu-off-bus-open-module": "nvrm"}


def test_dmesg_unrelated_text_has_no_events() -> None:
    assert parse_dmesg("") == []
    assert parse_dmesg(real(IBSTAT_IB_ETH)) == []


def test_kernel_event_is_frozen() -> None:
    (event,) = parse_dmesg(real(DMESG_AER_CORRECTED))
    assert isinstance(event, KernelEvent)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.severity = "info"  # type: ignore[misc]
