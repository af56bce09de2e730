"""Planted attacks: a pool host may be compromised, so all it sends is hostile data (issue 16).
Each test plants one; the parser refuses it with a ParseError naming the tool and the field,
and the gate fails that host alone, naming it. The hostile inputs are made here, from real
captures (tests/fixtures/real) or the emulator; none of them is a capture.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import emulated
from helpers import REPO, load_script
from racklift.facts import bundle as bundles
from racklift.facts import parsers
from racklift.facts.bundle import Bundle, Output
from racklift.facts.container_check import parse_container_check
from racklift.facts.host import from_bundle
from racklift.facts.parsers import ParseError
from racklift.lifecycle.result import RESULT_FIELD, of_stage_failure
from racklift.lifecycle.state import Transition, apply
from racklift.pipeline.rack_record import failure_transitions
from racklift.text import JOURNAL_LINE
from racklift.verify import gate as verify_gate
from racklift.verify.verdict import journal_text, not_verified

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
HUGE = "9" * 5000  # past CPython's 4300-digit int() limit, and float("9" * 400) is inf
A100_XML = (REAL / "nvidia-smi-q-x_a100-sxm4-80gb_535.54.03_mig.xml").read_text()
IBSTAT = (REAL / "ibstat_h100-node_cx7-ib_cx6-eth-down.txt").read_text()
DMIDECODE = (REAL / "dmidecode_supermicro-sys-7049gp-trt_3.1.txt").read_text()
LSPCI_VVV = (REAL / "lspci-vvv_dell-h100-cx7_3-devices.txt").read_text()
DMESG = (REAL / "dmesg_xid79_hgx.txt").read_text()
# A synthetic `ibv_devinfo -v` excerpt, as in test_parse_infiniband.py.
IBV_VERBOSE = ("hca_id:\tmlx5_0\n\tvendor_part_id:\t\t\t4129\n\t\tport:\t1\n"
               "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tactive_width:\t\t4X (2)\n"
               "\t\t\tactive_speed:\t\t{speed} Gbps (128)\n")


def planted(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def healthy() -> Bundle:
    return emulated.bundle(emulated.healthy_profile())


def with_outputs(bundle: Bundle, **outputs: str) -> Bundle:
    """``bundle`` with outputs replaced (name with '_' for '-' and '.', as in ip_link_json)."""
    names = {n.replace("-", "_").replace(".", "_"): n for n in bundle.outputs}
    return replace(bundle, outputs={**bundle.outputs,
                                    **{names[k]: Output(v) for k, v in outputs.items()}})


# --- 1. numbers: past 64 bits, or not ASCII digits ---------------------------------------------

BIG_NUMBERS: dict[str, tuple[Callable[[Any], Any], Any, str]] = {
    # planted where each parser once raised OverflowError or ValueError
    "xml memory": (parsers.parse_nvidia_smi_xml, planted(
        A100_XML, "<total>81920 MiB</total>", f"<total>{HUGE} MiB</total>"),
        "nvidia-smi-xml: fb_memory_usage/total"),
    "xml power": (parsers.parse_nvidia_smi_xml, planted(
        A100_XML, "<power_draw>67.03 W</power_draw>", f"<power_draw>{HUGE}.5 W</power_draw>"),
        "nvidia-smi-xml: gpu_power_readings/power_draw"),
    "ibstat rate": (parsers.parse_ibstat, planted(IBSTAT, "Rate: 400", f"Rate: {HUGE}"),
                    "ibstat: Rate"),
    "ibv_devinfo speed": (parsers.parse_ibv_devinfo, IBV_VERBOSE.format(speed="9" * 400),
                          "ibv_devinfo: active_speed"),
    "dmidecode type": (parsers.parse_dmidecode, planted(DMIDECODE, "DMI type 1,",
                                                        f"DMI type {HUGE},"),
                       "dmidecode: DMI type"),
    "lspci width": (parsers.parse_lspci, planted(LSPCI_VVV, "Width x1 ", f"Width x{HUGE} "),
                    "lspci: link width"),
    "dmesg xid": (parsers.parse_dmesg, planted(DMESG, "): 79, ", f"): {HUGE}, "),
                  "dmesg: Xid code"),
    "dmesg timestamp": (parsers.parse_dmesg, f"[{HUGE}.5] hello\n", "dmesg: timestamp"),
    "lscpu": (parsers.parse_lscpu_json, json.dumps({"lscpu": [
        {"field": "CPU(s):", "data": HUGE}]}), "lscpu: CPU(s)"),
    "meminfo": (parsers.parse_meminfo, f"MemTotal: {HUGE} kB\n", "meminfo: MemTotal"),
    "sysfs rate": (parsers.parse_sysfs_infiniband,
                   {"class/infiniband/mlx5_0/ports/1/rate": f"{HUGE} Gb/sec"},
                   "sysfs-infiniband: rate"),
}


@pytest.mark.parametrize("case", sorted(BIG_NUMBERS))
def test_a_number_past_64_bits_is_a_parse_error_naming_the_field(case):
    parse, text, where = BIG_NUMBERS[case]
    with pytest.raises(ParseError) as err:
        parse(text)
    assert str(err.value).startswith(where), err.value
    assert "out of range" in str(err.value) and len(str(err.value)) < 200


@pytest.mark.parametrize("digits", ["²", "٣", "\uff11\uff12"])  # superscript, Arabic, full width
def test_digits_other_than_ascii_are_no_numbers(digits):
    # '²'.isdigit() is true and int('²') raises; int('٣') is 3. A tool prints ASCII digits.
    assert parsers.to_int(f"{digits} MiB", "t", "f") is None
    with pytest.raises(ParseError, match="MemTotal"):
        parsers.parse_meminfo(f"MemTotal: {digits} kB\n")
    cpu = parsers.parse_lscpu_json(json.dumps({"lscpu": [{"field": "CPU(s):", "data": digits}]}))
    assert cpu.threads is None
    assert parsers.parse_sysfs_infiniband(
        {f"class/infiniband/mlx5_0/ports/{digits}/state": "4: ACTIVE"}) == []
    df = f"Filesystem 1-blocks Used Available Capacity Mounted on\n/dev/x {digits} 1 {digits} 1 /\n"
    sysfs = {**healthy().sysfs, "class/net/eno1/speed": digits}
    facts = from_bundle(replace(with_outputs(healthy(), df_txt=df), sysfs=sysfs))
    assert facts.disks == () and facts.nic("eno1").speed_mbps is None


# --- 1. the NIC reader on malformed ip -j output -----------------------------------------------

@pytest.mark.parametrize(("link", "addr", "where"), [
    ('[{"link_type": "ether"}]', "[]", "ip-link.json: ip-link: an interface without ifname"),
    ('{"ifname": "eno1"}', "[]", "ip-link.json: ip-link: not a JSON list of objects"),
    ("[1, 2]", "[]", "ip-link.json: ip-link: not a JSON list of objects"),
    ('[{"ifname": ["eno1"]}]', "[]", "ip-link.json: ip-link: ifname is list, not str"),
    ("[" * 100_000, "[]", "ip-link.json: ip-link: not JSON"),
    ("[]", '[{"ifname": "eno1", "addr_info": [{"local": "10.0.0.1"}]}]',
     "ip-addr.json: ip-addr: an address without local or prefixlen"),
    ("[]", '[{"ifname": "eno1", "addr_info": [{"local": "10.0.0.1", "prefixlen": true}]}]',
     "ip-addr.json: ip-addr: prefixlen is bool, not int"),
])
def test_malformed_ip_json_is_not_collected_and_names_the_output(link, addr, where):
    facts = from_bundle(with_outputs(healthy(), ip_link_json=link, ip_addr_json=addr))
    assert any(n.startswith(where) for n in facts.not_collected), facts.not_collected
    assert facts.nics == () or where.startswith("ip-addr")


# --- 2. XML without DTD and entities -----------------------------------------------------------

LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaaaaaaaa">'
          + "".join(f'<!ENTITY {b} "{("&" + a + ";") * 10}">'
                    for a, b in zip("abcdefgh", "bcdefghi", strict=True))
          + "]>\n<nvidia_smi_log><driver_version>&i;</driver_version></nvidia_smi_log>")
EXTERNAL = ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY x SYSTEM '
            '"file:///etc/passwd">]>\n<nvidia_smi_log><driver_version>&x;</driver_version>'
            "</nvidia_smi_log>")
SOME_DTD = A100_XML.replace('SYSTEM "nvsmi_device_v12.dtd"', 'SYSTEM "http://evil.example/x"'
                            ' [<!ELEMENT nvidia_smi_log ANY>]')


@pytest.mark.parametrize("text", [LAUGHS, EXTERNAL, SOME_DTD], ids=["laughs", "external",
                                                                    "internal-subset"])
def test_xml_with_a_dtd_of_its_own_or_entities_is_refused(text):
    with pytest.raises(ParseError, match=r"^nvidia-smi-xml: refused: "):
        parsers.parse_nvidia_smi_xml(text)


def test_the_dtd_nvidia_smi_writes_is_still_read():
    smi = parsers.parse_nvidia_smi_xml(A100_XML)
    assert smi.schema == "nvsmi_device_v12.dtd" and smi.gpus[0].memory_total_mib == 81920


# --- 2. input that costs more than its size ----------------------------------------------------

@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Fail the test when the block runs longer: a parser quadratic in a line's length takes
    minutes on these inputs, a linear one milliseconds."""
    def expire(*_: Any) -> None:
        raise TimeoutError(f"took over {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


RUN = 256 * 1024


@pytest.mark.parametrize(("parse", "text"), [
    (parsers.parse_lspci, "0000:00:00.0 a" + " " * RUN + "b"),
    (parsers.parse_lspci, "0000:00:00.0 VGA: a" + " " * RUN + "b"),
    (parsers.parse_lspci, "0000:00:00.0 VGA: " + "(prog-if 00 [" * (RUN // 13)),
    (parsers.parse_nvidia_smi_csv, "name" + "[" * RUN + "\nx\n"),
    (parsers.parse_nvidia_smi_csv, '"' + "x" * RUN + "\n"),  # over csv's field size limit
    (parsers.parse_dmesg, "NVRM: Xid (" + "0" * RUN),
    (parsers.parse_ibstat, "CA '" + "x" * RUN + "' x"),
], ids=["lspci-class", "lspci-rest", "lspci-prog-if", "csv-header", "csv-field", "dmesg",
        "ibstat"])
def test_a_long_hostile_line_is_read_in_linear_time(parse, text):
    with within(10), suppress(ParseError):
        parse(text)


def test_deep_json_is_a_parse_error_and_deep_children_are_read():
    with pytest.raises(ParseError, match=r"^lscpu: not JSON"):
        parsers.parse_lscpu_json('{"lscpu": ' + "[" * 100_000)
    entry: dict[str, Any] = {"field": "CPU(s):", "data": "8"}
    for _ in range(500):  # deep for the decoder's recursion, deeper for a recursive flatten
        entry = {"field": "x", "data": "", "children": [entry]}
    text = json.dumps({"lscpu": [entry]})
    assert parsers.parse_lscpu_json(text).threads == 8


@pytest.mark.parametrize(("step", "why"), [
    ({"seconds": "fast"}, "step engine: seconds is not a duration"),
    ({"seconds": 10**400}, "step engine: seconds is not a duration"),
    ({"rc": "0"}, "step engine: rc is not an exit code"),
    ({"command": []}, "step engine command is empty"),
    ({"stdout": [[["x"]]]}, "step engine stdout is not text"),
])
def test_a_container_check_value_of_the_wrong_type_is_refused(step, why):
    document = {"mirror": "http://m", "image": "i", "command": ["true"], "gpus": False,
                "steps": [{"step": "engine", "ok": True, "why": "", "command": ["docker"],
                           "rc": 0, "stdout": "", "stderr": "", "seconds": 1, **step}]}
    with pytest.raises(ParseError, match=f"^container-check: .*{why}"):
        parse_container_check(json.dumps(document))


# --- 2. output size: capped on the host, refused again on the controller -----------------------

def test_the_collector_sends_no_output_over_its_limit(monkeypatch):
    collect = load_script(REPO / "playbooks/files/collect.py", "collect")
    assert collect.MAX_OUTPUT == 8 * 2**20
    monkeypatch.setattr(collect, "MAX_OUTPUT", 2**20)
    assert len(collect.run("head -c 1048576 /dev/zero")["stdout"]) == 2**20
    got = collect.run("head -c 1048577 /dev/zero")
    assert (got["rc"], got["stdout"]) == (1, "")
    assert got["stderr"] == ("output of 1048577 bytes (stderr 0) is over the collector's limit "
                             "of 1 MiB: not sent")


NOT_JSON = "gpu-01: the collector's output is not JSON"
UNREADABLE = "gpu-01: the collector's document"  # from_collector says what was wrong


@pytest.mark.parametrize(("stdout", "why"), [
    (None, NOT_JSON),
    ("Traceback (most recent call last):", f"{NOT_JSON}: Traceback"),
    ("[" * 100_000, f"{NOT_JSON}: [[["),
    ('{"outputs": {"dmesg.txt": {"stdout": "x", "rc": ' + "9" * 5000 + "}}}", NOT_JSON),
    ('{"outputs": {"dmesg.txt": {"stdout": "\\ud800"}}}',
     "gpu-01: the collector's output holds text that is not UTF-8 (a lone surrogate)"),
    ("[]", UNREADABLE),
    ('{"outputs": []}', UNREADABLE),
    ('{"outputs": {"dmesg.txt": {"stdout": "x", "rc": "x"}}}', UNREADABLE),
    ('{"outputs": {"dmesg.txt": "x"}}', UNREADABLE),
    ('{"outputs": {"dmesg.txt": {"stdout": 1}}}', UNREADABLE),
    ('{"sysfs": ["x"]}', UNREADABLE),
])
def test_a_malformed_collector_document_fails_that_host_with_why(stdout, why):
    got = verify_gate.host_bundle("gpu-01", stdout, {"stdout": "{}", "rc": 0, "cmd": ["x"]})
    assert isinstance(got, str) and got.startswith(why), got


def test_a_document_over_the_limit_is_refused_before_it_is_decoded(monkeypatch):
    monkeypatch.setattr(verify_gate, "MAX_DOCUMENT", 2**20)
    got = verify_gate.host_bundle("gpu-01", json.dumps({"outputs": {"dmesg.txt": {
        "stdout": "x" * 2**20}}}))
    assert got == ("gpu-01: the collector's output is 1 MiB, over racklift's limit of 1 MiB: "
                   "refused, not read")


def test_a_document_and_the_container_check_make_a_bundle():
    document = {"hostname": "gpu-01", "outputs": {"uname.txt": {"stdout": "6.8.0\n", "rc": 0}}}
    got = verify_gate.host_bundle("gpu-01", json.dumps(document),
                                 {"stdout": "{}", "rc": 3, "stderr": "e", "cmd": ["python3", "-"]})
    assert isinstance(got, Bundle)
    assert got.outputs[bundles.CONTAINER_CHECK] == Output("{}", 3, "e", "python3 -")
    assert got.outputs["uname.txt"].stdout == "6.8.0\n"


# --- 1. containment: an unforeseen failure fails its host alone --------------------------------

def _boom(text: str) -> list[Any]:
    raise OverflowError("a parser bug this hostile lspci found")


def test_an_unforeseen_parser_failure_fails_its_host_naming_host_and_output(monkeypatch):
    monkeypatch.setattr(parsers, "parse_lspci", _boom)
    host = emulated.expected_host()
    verdict, facts = verify_gate.judge_bundle(host, with_outputs(healthy(), lspci_txt="x"))
    assert facts is None and not verdict.passed and verdict.failed
    assert verdict.failures == [
        f"collection: {host.name}: its facts could not be judged: lspci.txt could not be "
        "read: OverflowError: a parser bug this hostile lspci found (a racklift bug, or "
        "output no tool writes)"]


def test_one_hostile_host_fails_alone_and_the_others_are_judged(monkeypatch, tmp_path):
    hosts = [replace(emulated.expected_host(), name=f"gpu-0{n}", netbox_id=n) for n in (1, 2, 3)]
    collected = {  # what collect() makes of each host's collector output
        "gpu-01": verify_gate.host_bundle("gpu-01", json.dumps(
            {"outputs": {"dmesg.txt": {"stdout": "x", "rc": ["0"]}}})),
        "gpu-02": replace(healthy(), host="gpu-02"),
        "gpu-03": with_outputs(replace(healthy(), host="gpu-03"), lspci_txt="x"),
    }
    monkeypatch.setattr(verify_gate, "collect", lambda *_, **__: collected)
    # The healthy bundle has no lspci output (the emulated host lacks lspci).
    monkeypatch.setattr(parsers, "parse_lspci", _boom)
    verdicts = {v.host: v for v in verify_gate.gate(None, hosts, tmp_path, write=False)}
    assert list(verdicts) == ["gpu-01", "gpu-02", "gpu-03"]
    assert verdicts["gpu-02"].passed
    assert verdicts["gpu-01"].failures[0].startswith(f"collection: {UNREADABLE}")
    assert verdicts["gpu-03"].failures == [
        "collection: gpu-03: its facts could not be judged: lspci.txt could not be read: "
        "OverflowError: a parser bug this hostile lspci found (a racklift bug, or output no "
        "tool writes)"]


def test_a_hosts_text_cannot_break_the_journal():
    host = emulated.expected_host()
    text = journal_text(not_verified(host, "nvidia-smi said \x00\x1b[2J" + "x" * 5000))
    assert "\x00" not in text and "\x1b" not in text
    assert max(map(len, text.splitlines())) == JOURNAL_LINE + len(" [...]")


# Planted: one host's failure text (the deploy ramdisk's report, a module's message) carries a
# NUL, an OSC 52 clipboard write and newlines; NetBox refuses a NUL, and a rack's failures go
# in one request.
PLANTED_FAILURE = "x\x00\x1b]52;c;ZXZpbA==\x07\nfake line\n" + "y" * 5000


def _printable_and_bounded(text: str) -> bool:
    return all(line.isprintable() and len(line) <= JOURNAL_LINE + len(" [...]")
               for line in text.split("\n"))


def test_one_hosts_failure_text_cannot_stop_its_racks_journal():
    entries = failure_transitions({"gpu-01": 1, "gpu-02": 2},
                                  {"gpu-01": PLANTED_FAILURE, "gpu-02": "no route to host"},
                                  "racklift provision (run r1)", "image", "r1")
    hostile, other = entries
    assert hostile.journal is not None and _printable_and_bounded(hostile.journal)
    # The host's text stays on its line of the entry, its characters written out.
    assert hostile.journal.split("\n")[1].startswith("- x\\x00\\x1b]52;c;ZXZpbA==\\x07\\nfake")
    assert replace(other, result=None) == Transition(
        2, "racklift provision (run r1): image failed.\n- no route to host", kind="danger",
        status="failed")
    # The device's result says the same, for NetBox's plugin (escaped there).
    assert other.result is not None and other.result["last"]["failures"] == [
        {"check": "stage.image", "cause": "stage.image", "found": "no route to host",
         "wanted": "-", "todo": "-"}]
    assert other.result["last"]["run"] == "r1"


class _Recorder:
    """A NetBox that keeps what it is sent."""

    def __init__(self) -> None:
        self.sent: dict[str, list[dict[str, Any]]] = {}

    def create(self, endpoint: str, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.sent.setdefault(endpoint, []).extend(objects)
        return objects

    def update(self, endpoint: str, objects: list[dict[str, Any]]) -> None:
        self.sent.setdefault(endpoint, []).extend(objects)

    def get_for_ids(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return []  # no device has a racklift_result yet


def test_every_result_is_written_printable_whoever_built_it():
    # Planted: a deploy report with a NUL, an escape sequence and a newline, in a device's
    # racklift_result (PostgreSQL refuses a NUL in JSON as in text).
    netbox = _Recorder()
    apply(netbox, [Transition(1, None, result=of_stage_failure("image", PLANTED_FAILURE, "r1"))])
    (device,) = netbox.sent["dcim/devices"]
    value = device["custom_fields"][RESULT_FIELD]
    (failure,) = value["last"]["failures"]
    assert _printable_and_bounded(failure["found"]) and failure["cause"] == "stage.image"
    assert failure["found"].startswith("x\\x00\\x1b]52;c;ZXZpbA==\\x07")
    assert "\\u0000" not in json.dumps(value)


def test_every_journal_entry_is_written_printable_whoever_built_it():
    # Planted: a lock's holder fields, or any builder that forgot journal_line.
    netbox = _Recorder()
    apply(netbox, [Transition(1, f"racklift lock taken by {PLANTED_FAILURE}"),
                   Transition(2, "racklift verify: passed.\n- warning: fine")])
    hostile, other = netbox.sent["extras/journal-entries"]
    assert _printable_and_bounded(hostile["comments"])
    assert other["comments"] == "racklift verify: passed.\n- warning: fine"
