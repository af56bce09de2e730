"""Parsers for what racklift collects from GPU hosts: pure functions, text in, facts out, one
module per tool.

They run on the controller (never on hosts) and on support bundles offline. Each one raises
:class:`ParseError` only when its input is not that tool's output at all (an error message
instead of a report, an empty answer, garbage); output that is merely partial or odd gives
``None`` fields. Formats follow real captures, see ``tests/fixtures/real/SOURCES.md``.

Every input is a host's word, and a pool host may be compromised: whatever the text, a parser
returns facts or raises ParseError, nothing else. So numbers are ASCII digits within 64 bits
(``to_int``), XML comes without DTD or entities, JSON nesting and regex backtracking are
bounded.
"""

from racklift.facts.parsers.common import (
    ParseError,
    load_json,
    normalize_guid,
    normalize_pci_address,
    to_int,
)
from racklift.facts.parsers.dcgmi import parse_dcgmi_diag
from racklift.facts.parsers.dmidecode import parse_dmidecode, parse_dmidecode_string
from racklift.facts.parsers.iblinkinfo import parse_iblinkinfo
from racklift.facts.parsers.ibnetdiscover import parse_ibnetdiscover
from racklift.facts.parsers.infiniband import (
    ibstat_failure,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_sysfs_infiniband,
)
from racklift.facts.parsers.kernel_log import parse_dmesg
from racklift.facts.parsers.lldp import parse_lldpctl, parse_lldpctl_json
from racklift.facts.parsers.lspci import nvidia_gpus_on_pci, parse_lspci
from racklift.facts.parsers.nccl_tests import parse_nccl_tests
from racklift.facts.parsers.nvidia_smi import (
    lost_gpus,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_xml,
)
from racklift.facts.parsers.nvidia_smi_text import parse_nvidia_smi_q
from racklift.facts.parsers.nvlink_errors import parse_nvidia_smi_nvlink_errors
from racklift.facts.parsers.perftest import parse_perftest_bw
from racklift.facts.parsers.system import parse_lscpu_json, parse_meminfo, parse_os_release
from racklift.facts.parsers.topology import parse_nvidia_smi_nvlink, parse_nvidia_smi_topo

__all__ = [
    "ParseError",
    "ibstat_failure",
    "load_json",
    "lost_gpus",
    "normalize_guid",
    "normalize_pci_address",
    "nvidia_gpus_on_pci",
    "parse_dcgmi_diag",
    "parse_dmesg",
    "parse_dmidecode",
    "parse_dmidecode_string",
    "parse_iblinkinfo",
    "parse_ibnetdiscover",
    "parse_ibstat",
    "parse_ibv_devinfo",
    "parse_lldpctl",
    "parse_lldpctl_json",
    "parse_lscpu_json",
    "parse_lspci",
    "parse_meminfo",
    "parse_nccl_tests",
    "parse_nvidia_smi_csv",
    "parse_nvidia_smi_nvlink",
    "parse_nvidia_smi_nvlink_errors",
    "parse_nvidia_smi_q",
    "parse_nvidia_smi_topo",
    "parse_nvidia_smi_xml",
    "parse_os_release",
    "parse_perftest_bw",
    "parse_sysfs_infiniband",
    "to_int",
]
