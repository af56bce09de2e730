"""The gate on real-world output (issue 18): tools that fail part-way still printed facts,
kernel messages over several lines, the endpoint a fatal PCIe AER took down, what an Xid's
message says of itself, a chassis record alone. Real captures from public sources
(tests/fixtures/real/SOURCES.md); the forms a capture was not found in are hand-made from the
real message and say so."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import emulated
from racklift.facts import host as host_facts
from racklift.facts.bundle import Output
from racklift.facts.parsers import (
    ParseError,
    ibstat_failure,
    parse_dmesg,
    parse_dmidecode,
    parse_ibstat,
    parse_nvidia_smi_xml,
)
from racklift.verify import health
from racklift.verify.compare import CRITICAL, WARNING
from racklift.verify.verdict import judge

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
IBPANIC = REAL / "ibstat_a100-azure_8-cas_ibpanic-mlx5_8_exit-255.txt"
LOST_GPU = REAL / "nvidia-smi-q-x_tesla-t4_515.105.01_handmade-lost-gpu.xml"
FALLEN = REAL / "dmesg_nvrm-fallen-off-bus-3-lines_open-570.158.01.txt"
AER = REAL / "dmesg-reltime_aer-fatal-gpu-cant-recover_xeon-e5.txt"
NVLINK5 = REAL / "kmsg_xid-144-145-149_nvlink5-gb200.txt"
XID45 = REAL / "syslog_xid45-caused-by-previous-xid_590.48.01.txt"
CHASSIS = REAL / "dmidecode-t3_lenovo-yoga-300_chassis-record.txt"


def verdict_with(**outputs: Output):
    """The emulated healthy host's verdict with these outputs in place of its own."""
    bundle = emulated.bundle(emulated.healthy_profile())
    bundle = replace(bundle, outputs={**bundle.outputs, **outputs})
    return judge(emulated.expected_host(), host_facts.from_bundle(bundle))


# ----------------------------------------------------------------- a tool that fails part-way

def test_ibstat_that_panics_after_eight_cas_gives_the_eight_and_its_error():
    text = IBPANIC.read_text()
    ports = parse_ibstat(text)
    assert [p.ca for p in ports] == [f"mlx5_{n}" for n in range(8)]
    assert {(p.state, p.rate_gbps) for p in ports} == {("Active", 200)}
    assert ibstat_failure(text) == ("ibpanic: [1400444] main: stat of IB device 'mlx5_8' "
                                    "failed: No such file or directory")
    with pytest.raises(ParseError, match=r"ibpanic: .* 'mlx5_an0' failed"):  # nothing before it
        parse_ibstat("ibpanic: [769778] main: stat of IB device 'mlx5_an0' failed: No such "
                     "file or directory\n")


def test_the_gate_keeps_the_cas_ibstat_printed_and_fails_the_host_on_its_error():
    text = IBPANIC.read_text()
    stdout, _, panic = text.rpartition("ibpanic:")
    facts = host_facts.from_bundle(replace(emulated.bundle(emulated.healthy_profile()), outputs={
        **emulated.bundle(emulated.healthy_profile()).outputs,
        "ibstat.txt": Output(stdout, rc=255, stderr=f"ibpanic:{panic}")}))
    assert len(facts.hca_ports) == 8 and not any(n.startswith("ibstat")
                                                 for n in facts.not_collected)
    assert facts.partial == (("ibstat.txt", "exit 255: ibpanic: [1400444] main: stat of IB "
                              "device 'mlx5_8' failed: No such file or directory"),)
    verdict = judge(emulated.expected_host(), facts)
    (tools,) = [m for m in verdict.mismatches if m.field == "tools.ibstat"]
    assert tools.severity == CRITICAL and "'mlx5_8' failed" in tools.observed
    assert "reseat or replace that HCA" in tools.hint and not verdict.passed


def test_a_gpu_nvidia_smi_cannot_reach_comes_out_by_its_bus_id_beside_the_others():
    facts = parse_nvidia_smi_xml(LOST_GPU.read_text())
    assert (facts.attached_gpus, len(facts.gpus)) == (2, 1)
    assert facts.gpus[0].pci_bus_id == "0000:00:1e.0"
    assert facts.lost_gpus == ("0000:0b:00.0",)
    # Every GPU lost: no document at all, only nvidia-smi's lines (real form, no space).
    alone = parse_nvidia_smi_xml("Unable to determine the device handle for GPU0000:20:00.0: "
                                 "Unknown Error\n")
    assert (alone.gpus, alone.lost_gpus) == ((), ("0000:20:00.0",))
    with pytest.raises(ParseError, match="no <nvidia_smi_log> document"):  # quoted in prose
        parse_nvidia_smi_xml("nvidia-smi said: Unable to determine the device handle for GPU "
                             "0000:0B:00.0: Unknown Error\nand then it hung\n")


def test_the_gate_names_the_lost_gpu_whatever_nvidia_smis_exit_code():
    profile = emulated.healthy_profile()
    xml = ("Unable to determine the device handle for GPU 0000:DB:00.0: Unknown Error\n"
           + emulated.bundle(profile).outputs["nvidia-smi-q-x.xml"].stdout)
    verdict = verdict_with(**{"nvidia-smi-q-x.xml": Output(xml, rc=15)})
    lost = [m for m in verdict.mismatches if m.field.startswith("gpus.lost")]
    assert [(m.field, m.severity) for m in lost] == [("gpus.lost[0000:db:00.0]", CRITICAL)]
    assert "reseat or RMA" in lost[0].hint and not verdict.passed


# ----------------------------------------------------------------- multi-line kernel messages

def test_the_open_modules_three_line_fallen_off_the_bus_is_one_critical_event():
    (event,) = parse_dmesg(FALLEN.read_text())
    assert (event.kind, event.code, event.device, event.severity) == (
        "nvrm", None, "0000:b3:00.0", CRITICAL)
    assert event.timestamp == 1843.308145 and event.line.count("\n") == 2
    assert event.name == "GPU has fallen off the bus"


# Hand-made: the real message above as journalctl -k, syslog and dmesg -T print it (each line
# its own prefix in the first two; dmesg -T indents the continuation as dmesg does).
FALLEN_FORMS = {
    "journalctl -k -o short-iso": "\n".join(
        f"2025-10-25T10:12:03+0000 gpu-17 kernel: NVRM: {part}" for part in (
            "The NVIDIA GPU 0000:b3:00.0", "(PCI ID: 10de:26b5) installed in this system has",
            "fallen off the bus and is not responding to commands.")),
    "syslog": "\n".join(f"Oct 25 10:12:03 gpu-17 kernel: NVRM: {part}" for part in (
        "The NVIDIA GPU 0000:b3:00.0", "(PCI ID: 10de:26b5) installed in this system has",
        "fallen off the bus and is not responding to commands.")),
    "dmesg -T": ("[Sat Oct 25 10:12:03 2025] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
                 "                           NVRM: (PCI ID: 10de:26b5) installed in this "
                 "system has\n                           NVRM: fallen off the bus and is not "
                 "responding to commands."),
}


@pytest.mark.parametrize("form", FALLEN_FORMS)
def test_continuation_lines_belong_to_the_message_they_continue(form):
    (event,) = parse_dmesg(FALLEN_FORMS[form])
    assert (event.kind, event.device, event.severity) == ("nvrm", "0000:b3:00.0", CRITICAL)


def test_a_new_nvrm_message_is_not_taken_for_a_continuation():
    # Real lines (open-gpu-kernel-modules, RmInitAdapter failures), here at one timestamp.
    log = ("[   21.238204] NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0\n"
           "[   21.238204] NVRM: osInitNvMapping: *** Cannot attach gpu\n"
           "[   21.238204] NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, "
           "GPU has fallen off the bus.\n")
    (event,) = parse_dmesg(log)
    assert (event.kind, event.code, event.line.count("\n")) == ("xid", 79, 0)


# ----------------------------------------------------------------- PCIe AER names the endpoint

def test_a_fatal_aer_names_the_gpu_that_could_not_recover_and_the_port_that_reported_it():
    before, fatal = parse_dmesg(AER.read_text())
    # The capture starts with the end of an earlier error: its endpoint, on its own.
    assert (before.device, before.endpoint, before.severity) == (
        "0000:03:00.0", "nvidia 0000:03:00.0", CRITICAL)
    assert (fatal.device, fatal.endpoint) == ("0000:03:00.0", "nvidia 0000:03:00.0")
    assert fatal.message == "Multiple Uncorrected (Fatal) error"
    assert fatal.reported_by == "0000:00:03.0"
    assert "also snd_hda_intel 0000:03:00.1" in fatal.notes
    assert "[14] CmpltTO                (First)" in fatal.notes
    facts = host_facts.HostFacts(host="h", kernel_events=(fatal,))
    result = health.kernel_log(emulated.expected_host(), facts)
    assert result.status == health.CRITICAL
    assert result.detail.startswith("AER on nvidia 0000:03:00.0 (reported by 0000:00:03.0): "
                                    "Multiple Uncorrected (Fatal) error")


# ----------------------------------------------------------------- Xid detail

def test_nvlink5_xids_take_their_severity_from_their_message():
    events = parse_dmesg(NVLINK5.read_text())
    assert [(e.code, e.severity) for e in events] == [
        (144, WARNING), (149, CRITICAL), (149, CRITICAL), (145, WARNING)]


def test_an_xid_45_names_the_xid_that_caused_it():
    events = parse_dmesg(XID45.read_text())
    assert [(e.code, e.device, e.caused_by) for e in events] == [
        (45, "0000:dc:00", 149), (45, "0000:ed:00", 145), (45, "0000:ba:00", 145),
        (45, "0000:97:00", 145)]
    text = health._event_text(events[0])
    assert text.startswith("XID 45 on 0000:dc:00 (caused by Xid 149): Ch 00000001")


# ----------------------------------------------------------------- a chassis record alone

def test_a_chassis_record_alone_gives_the_chassis_serial_and_identifies_the_host():
    system = parse_dmidecode(CHASSIS.read_text())
    assert (system.serial, system.chassis_serial, system.chassis_asset_tag) == (
        None, "P2009YWF", None)  # "No Asset Tag" is a placeholder
    expected = replace(emulated.expected_host(), serial="P2009YWF")
    bundle = emulated.bundle(emulated.healthy_profile())
    bundle = replace(bundle, outputs={**bundle.outputs,
                                      "dmidecode.txt": Output(CHASSIS.read_text())})
    verdict = judge(expected, host_facts.from_bundle(bundle))
    assert not [m for m in verdict.mismatches if m.field == "system.serial"]
    other = judge(replace(expected, serial="P0000000"), host_facts.from_bundle(bundle))
    assert [m.field for m in other.mismatches if m.field == "system.serial"] == ["system.serial"]


# ----------------------------------------------------------------- held packages

def test_held_packages_count_as_installed():
    """racklift's roles hold what they install ("hi"): the gate must see those packages. Found
    by the whole pipeline on a VM: the held container toolkit read as missing."""
    packages = ("nvidia-container-toolkit\t1.17.3-1\thi \n"
                "docker.io\t20.10.24+dfsg1-1+deb12u1\tii \n"
                "nvidia-driver\t535.183.01-1\trc \n")
    bundle = emulated.bundle(emulated.healthy_profile())
    bundle = replace(bundle, outputs={**bundle.outputs, "packages.txt": Output(packages)})
    assert host_facts.from_bundle(bundle).packages == {
        "nvidia-container-toolkit": "1.17.3-1", "docker.io": "20.10.24+dfsg1-1+deb12u1"}
