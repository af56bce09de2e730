"""Property tests: every parser, fed random and adversarial text, returns facts or raises
ParseError, never anything else; the facts are plain JSON (no NaN, no infinity); and any
collector document, however shaped, ends in a verdict for its host, with no exception.

The inputs are generated here: random text and decoded bytes, lines built from the words the
parsers look for with hostile numbers in them (past 64 bits, Unicode digits), real captures
(tests/fixtures/real, tests/fixtures/lab) with such lines spliced in, XML with DTDs and
entities, JSON of any shape and depth. Sized to keep the unit tier fast.
"""

from __future__ import annotations

import dataclasses
import json
import re
import string
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import emulated
from racklift.facts import bundle as bundles
from racklift.facts import parsers
from racklift.facts.container_check import parse_container_check
from racklift.facts.host import from_bundle
from racklift.tasks.verify import PARSERS as PARSE_KINDS
from racklift.verify import gate as verify_gate
from racklift.verify.verdict import journal_text, judge

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# The same examples each run (a unit test that fails, fails again), none kept on disk.
PROPERTY = settings(max_examples=50, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Every text parser: `racklift parse`'s kinds, and those from_bundle uses besides.
TEXT_PARSERS: dict[str, Callable[[str], Any]] = {
    **PARSE_KINDS,
    "lscpu": parsers.parse_lscpu_json,
    "meminfo": parsers.parse_meminfo,
    "os-release": parsers.parse_os_release,
    "dmidecode-string": parsers.parse_dmidecode_string,
    "container-check": parse_container_check,
}
# Real outputs of each kind, the base that hostile lines are spliced into.
CAPTURES = {
    "nvidia-smi-xml": ["real/nvidia-smi-q-x_a100-sxm4-80gb_535.54.03_mig.xml",
                       "real/nvidia-smi-q-x_tesla-t4_515.105.01_v11.xml"],
    "nvidia-smi-csv": ["real/nvidia-smi-query-gpu-csv_h100-80gb-hbm3_590.48.01.csv"],
    "ibstat": ["real/ibstat_h100-node_cx7-ib_cx6-eth-down.txt"],
    "ibv-devinfo": ["real/ibv_devinfo_connectx3-mlx4_mlnx-ofed.txt"],
    "dmidecode": ["real/dmidecode_supermicro-sys-7049gp-trt_3.1.txt"],
    "lspci": ["real/lspci-vvv_dell-h100-cx7_3-devices.txt",
              "real/lspci_supermicro-amd-genoa_2x-h100l.txt"],
    "dmesg": ["real/dmesg_xid79_hgx.txt", "real/dmesg_aer_fatal_linux-pci-2020-12_bd-cpu18.txt"],
    "container-check": ["lab/container-check_molecule_pass.json"],
    "nvidia-smi-topo": ["real/nvidia-smi-topo-m_4x-h100-nv6_space_legend-cut.txt",
                        "real/nvidia-smi-topo-m_8x-rtx-4090-pcie_tab.txt"],
    "nvidia-smi-q": ["real/nvidia-smi-q_h200_550.90.12.txt"],
    "nvidia-smi-nvlink": ["real/nvidia-smi-nvlink-s_v100-sxm2-32gb_2-inactive.txt"],
    "lldpctl": ["real/lldpctl-json0_h3c-s5130-and-ubuntu-lldpd-neighbors_gpu-host.json"],
    "ibnetdiscover": ["real/ibnetdiscover_qdr-sun-dcs36_single-link.txt",
                      "real/ibnetdiscover-p_edr-osc-cluster_excerpt-with-unconnected-ports.txt"],
    "iblinkinfo": ["real/iblinkinfo_edr-sb7700-2-hosts_down-polling-ports-1-18_excerpt.txt"],
    "nvidia-smi-nvlink-e": ["real/nvidia-smi-nvlink-e_gb300_link0-excerpt-no-uuid.txt"],
    "dcgmi-diag": ["real/dcgmi-diag-r2_8x-rtx-3090_3.3.0_pcie-fail-all-cuda-driver-mismatch.txt"],
    "nccl-tests": ["real/nccl-tests-all_reduce_perf_8x-h100-80gb-hbm3_single-node.txt"],
    "perftest-bw": ["real/ib_write_bw_connectx6-ib-100g_a-sweep_report-gbits_client.txt"],
}
assert set(CAPTURES) <= set(TEXT_PARSERS)

# Characters of every kind the parsers may meet: ASCII, controls, NUL, no-break and line
# separators, right-to-left override, digits that are not ASCII, others. (An explicit alphabet:
# Hypothesis's full Unicode takes seconds to set up on a fresh checkout.)
CHARS = (string.printable + "\x00\x01\x1b\x7f\x85\u00a0\u2028\u202e\ufeff\ufffd"
         "²٣\uff11\U0001d7d9é中\U0001f600\ud800\udfff")  # and lone surrogates


def text(max_size: int | None = None, alphabet: str = CHARS) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, max_size=max_size)


HOSTILE_NUMBERS = ["9" * 25, "9" * 400, "9" * 5000, "-" + "9" * 30, "99999.9" + "9" * 400,
                   "²", "٣", "\uff11", "\U0001d7d9", "1.2.3", ".", "-", "1e999", "nan", "inf", "0x",
                   "0x" + "f" * 40, "00", "-1", "4294967295", "18446744073709551616"]
NUMBERS = st.one_of(st.sampled_from(HOSTILE_NUMBERS), st.integers(-(10**25), 10**25).map(str))
# Pieces of the lines each parser looks for.
WORDS = st.sampled_from([
    "CA '", "mlx5_0", "'", "Port ", "Rate: ", "Base lid: ", "State: ", "Active",
    "Physical state: ", "LinkUp", "Link layer: ", "InfiniBand", "CA type: MT", "hca_id:",
    "port:", "active_width:", "X", "active_speed:", " Gbps", "vendor_part_id:", "port_lid:",
    "PORT_ACTIVE (", "Handle 0x0001, DMI type ", ", 27 bytes", "System Information",
    "Base Board Information", "\tSerial Number: ", "\tUUID: ", "0000:18:00.0 ",
    "3D controller [0302]: ", "NVIDIA Corporation [10de:2330]", " (rev a1)", "(prog-if 00 [",
    "\tLnkSta:\tSpeed ", "GT/s, Width x", "\tKernel driver in use: ", "[", "] ",
    "NVRM: Xid (PCI:0000:01:00): ", "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): ", ", Fatal",
    "0000:00:01.0: AER: Corrected error received: 0000:01:00.0", "PCIe Bus Error: ",
    "Jan  3 07:39:44 host kernel: ", "MemTotal:", " kB", "NAME=", '"', "ID=", "#",
    "name, memory.total [MiB]", "[N/A]", "N/A", "No devices were found", "ibpanic:",
    "<nvidia_smi_log>", "</nvidia_smi_log>", "<gpu>", "</gpu>", "<total>", "</total>",
    '{"lscpu": [', '{"field": "CPU(s):", "data": ', "}", "]", ",", ":", " ", "\t", "\r",
    "\x00", "\u00a0", "\u202e", "(", ")",
])
LINES = st.lists(st.one_of(WORDS, NUMBERS, text(max_size=4)), max_size=12).map("".join)
SOUP = st.lists(LINES, max_size=25).map("\n".join)
RANDOM = st.one_of(text(), st.binary().map(lambda b: b.decode("utf-8", "replace")), SOUP)


@st.composite
def spliced(draw: st.DrawFn, kind: str) -> str:
    """A real capture of ``kind`` with its numbers swapped for hostile ones (most often: that is
    where parsers convert), hostile lines put in, or its tail cut."""
    lines = (FIXTURES / draw(st.sampled_from(CAPTURES[kind]))).read_text().split("\n")
    for _ in range(draw(st.integers(1, 8))):
        change = draw(st.sampled_from(["number", "number", "number", "insert", "cut"]))
        numbered = [i for i, line in enumerate(lines) if re.search(r"[0-9]", line)]
        if change == "number" and numbered:
            at = draw(st.sampled_from(numbered))
            run = draw(st.sampled_from(list(re.finditer(r"[0-9]+(?:\.[0-9]+)?", lines[at]))))
            lines[at] = lines[at][:run.start()] + draw(NUMBERS) + lines[at][run.end():]
        elif change == "insert":
            lines.insert(draw(st.integers(0, len(lines))), draw(LINES))
        elif change == "cut":
            lines = lines[:draw(st.integers(1, len(lines)))]
    return "\n".join(lines)


def kind_inputs(kind: str) -> st.SearchStrategy[str]:
    return st.one_of(RANDOM, spliced(kind), spliced(kind)) if kind in CAPTURES else RANDOM


def plain_json(facts: Any) -> str:
    """The facts as `racklift parse` and the reports print them: JSON, and strictly so."""
    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return dataclasses.asdict(value)
        return [plain(v) for v in value] if isinstance(value, list | tuple) else value
    return json.dumps(plain(facts), allow_nan=False)


def test_every_racklift_parse_kind_is_here():
    from racklift.tasks.verify import PARSERS  # the whole command line: imported here only

    assert PARSERS.items() <= TEXT_PARSERS.items()


@pytest.mark.parametrize("kind", sorted(TEXT_PARSERS))
def test_every_parser_returns_facts_or_parse_error(kind):
    @PROPERTY
    @given(kind_inputs(kind))
    def holds(text: str) -> None:
        try:
            facts = TEXT_PARSERS[kind](text)
        except parsers.ParseError:
            return
        plain_json(facts)
    holds()


ELEMENT = st.sampled_from(["gpu", "fb_memory_usage", "total", "pci", "pci_bus_id",
                           "attached_gpus", "driver_version", "ecc_errors", "volatile",
                           "dram_uncorrectable", "temperature", "gpu_temp", "serial"])
XML_TREE = st.recursive(
    st.one_of(NUMBERS, text(max_size=8, alphabet=CHARS.replace("<", "").replace("&", ""))),
    lambda inner: st.tuples(ELEMENT, st.lists(inner, max_size=4)).map(
        lambda t: f"<{t[0]}>{''.join(t[1])}</{t[0]}>"),
    max_leaves=20)
DOCTYPES = st.sampled_from([
    "", '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
    '<!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]>',
    '<!DOCTYPE nvidia_smi_log [<!ENTITY x SYSTEM "file:///etc/passwd">]>',
    '<!DOCTYPE nvidia_smi_log SYSTEM "http://169.254.169.254/latest/meta-data/">',
    '<!DOCTYPE nvidia_smi_log PUBLIC "-//x//EN" "x.dtd" [<!ELEMENT a ANY>]>',
    '<!DOCTYPE nvidia_smi_log SYSTEM "a.dtd"><!DOCTYPE nvidia_smi_log [<!ENTITY c "c">]>'])
ENTITY_REFS = st.sampled_from(["", "&a;", "&b;", "&x;", "&#65;", "&#x110000;", "&lt;"])


@PROPERTY
@given(DOCTYPES, XML_TREE, ENTITY_REFS, st.sampled_from(["", '<?xml version="1.0"?>\n',
                                                         '<?xml version="1.0" encoding="x"?>']))
def test_nvidia_smi_xml_of_any_tree_dtd_and_entities(doctype, tree, entity, declaration):
    text = f"{declaration}{doctype}\n<nvidia_smi_log>{entity}{tree}</nvidia_smi_log>"
    try:
        facts = parsers.parse_nvidia_smi_xml(text)
    except parsers.ParseError:
        return
    # What was read followed no DTD of the host's own, and no entity it declared.
    assert "[" not in doctype and entity in ("", "&#65;", "&lt;")
    plain_json(facts)


JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), text(max_size=8),
              st.sampled_from(HOSTILE_NUMBERS)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(text(max_size=8), inner, max_size=4)),
    max_leaves=25)
IP_KEYS = st.sampled_from(["ifname", "link_type", "address", "operstate", "addr_info",
                           "local", "prefixlen"])
IP_JSON = st.recursive(JSON, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(IP_KEYS, inner, max_size=5)), max_leaves=20)


@st.composite
def documents(draw: st.DrawFn) -> str:
    """A collector's stdout: its document with outputs of any text and fields of any shape."""
    if draw(st.booleans()):
        return draw(st.one_of(RANDOM, JSON.map(json.dumps), st.integers(1, 3000).map(
            lambda n: "[" * n)))
    outputs = {}
    for name in draw(st.lists(st.sampled_from(sorted(bundles.OUTPUTS)), max_size=6)):
        stdout = draw(kind_inputs("container-check") if name == bundles.CONTAINER_CHECK else
                      st.one_of(RANDOM, IP_JSON.map(json.dumps)))
        outputs[name] = {"stdout": stdout, "rc": draw(st.one_of(st.integers(-300, 300), JSON)),
                         "stderr": draw(text(max_size=20)), "command": "x"}
    sysfs = draw(st.dictionaries(
        st.one_of(st.sampled_from(["class/infiniband/mlx5_0/ports/1/rate",
                                   "class/infiniband/mlx5_0/ports/1/lid",
                                   "class/infiniband/mlx5_0/fw_ver", "class/net/eno1/speed"]),
                  text(max_size=40).map(lambda t: "class/infiniband/" + t)),
        st.one_of(NUMBERS, text(max_size=10), JSON), max_size=6))
    return json.dumps({"hostname": draw(JSON), "outputs": outputs, "sysfs": sysfs})


EXPECTED = emulated.expected_host()


@settings(PROPERTY, max_examples=40)
@given(documents())
def test_any_collector_document_ends_in_a_verdict_for_its_host(stdout):
    expected = EXPECTED
    got = verify_gate.host_bundle(expected.name, stdout, {"stdout": "{}", "rc": 0})
    if isinstance(got, str):  # refused: the host fails with why
        assert got.startswith(f"{expected.name}: the collector's ")
        return
    # No net here: from_bundle and the checks take whatever the document held.
    verdict = judge(expected, from_bundle(got))
    assert verdict.host == expected.name and not verdict.passed
    assert "\x00" not in journal_text(verdict)


@PROPERTY
@given(st.dictionaries(st.one_of(text(max_size=30), text(max_size=30).map(
    lambda t: f"class/infiniband/{t}")), st.one_of(NUMBERS, text(max_size=12)), max_size=8))
def test_sysfs_infiniband_of_any_files(files):
    with suppress(parsers.ParseError):
        plain_json(parsers.parse_sysfs_infiniband(files))
