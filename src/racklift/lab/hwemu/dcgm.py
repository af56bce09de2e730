"""``dcgmi diag -r N [-j]``: DCGM 3.3.9's diagnostic of the emulated GPUs.

The table is the 3.3.x layout of the real captures in tests/fixtures/real (H200 ``-r 3``,
A100 ``-r 2``): Metadata and Deployment, then from level 2 Integration, Hardware and Stress,
a test's result "Pass - All" or split by GPU ("Pass - GPUs: 0, 1   " over "Fail - GPU: 4   ")
with its warnings cut every 45 characters below it (dcgmi/Diag.cpp at v3.3.9). ``-j`` is the
NVVS JSON of the real 3.1.0 capture: jsoncpp's tab layout, a deployment test's one result for
every GPU, a null after each deployment and skipped test (NVVS advances its index twice), a
plugin's results one per GPU. The tests of a level are DCGM 3.3.9's (nvvs
NvidiaValidationSuite::fillTestVectors): 1 the deployment checks; 2 adds PCIe and GPU Memory;
3 Diagnostic, Targeted Stress, Targeted Power, Memory Bandwidth and the EUD (not installed:
skipped, as in the H200 capture); 4 Pulse Test and Memtest. On GPUs it does not support
(Profile.dcgm_supports_gpus) every test is skipped and the Diagnostic has no row, as DCGM
3.3.9 printed it for two RTX PRO 6000 Blackwell (the real capture
dcgmi-diag-r3_2x-rtx-pro-6000-blackwell-server_3.3.9_skip-all-printed-twice.txt)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .command import ToolExit, read_options
from .profile import GPU, Profile

DCGM_VERSION = "3.3.9"


# dcgmi's exit status is its dcgmReturn_t: DCGM_ST_NVVS_ERROR (-30) when a test failed,
# DCGM_ST_GROUP_IS_EMPTY (-35) when it found no GPU.
EXIT_TEST_FAILED = -30 & 0xFF


EXIT_NO_GPUS = -35 & 0xFF


# DCGM_GROUP_ALL_GPUS, the group dcgmi diag runs on unless told otherwise.
_ALL_GPUS_GROUP = 0x7FFFFFFF


NO_GPUS = (f"Error: Unable to complete diagnostic for group {_ALL_GPUS_GROUP}. Return: (-35) "
           "The specified group is empty, and this operation is incompatible with an empty "
           "group.")


# The deployment checks as the table names them and as NVVS's JSON does.
_DEPLOYMENT = (
    ("Denylist", "Denylist"),
    ("NVML Library", "NVML Library"),
    ("CUDA Main Library", "CUDA Main Library"),
    ("Permissions and OS Blocks", "Permissions and OS-related Blocks"),
    ("Persistence Mode", "Persistence Mode"),
    ("Environment Variables", "Environmental Variables"),
    ("Page Retirement/Row Remap", "Page Retirement/Row Remap"),
    ("Graphics Processes", "Graphics Processes"),
    ("Inforom", "Inforom"),
)


@dataclass(frozen=True)
class _Plugin:
    name: str  # in the table
    section: str  # the table's section
    plugin: str  # NVVS's name, in the JSON
    category: str  # NVVS's test class, the JSON's category
    level: int  # the least run level that runs it


# In the table's order (Diag.cpp: Integration, Hardware, Stress).
_PLUGINS = (
    _Plugin("PCIe", "Integration", "pcie", "Integration", 2),
    _Plugin("GPU Memory", "Hardware", "memory", "Hardware", 2),
    _Plugin("Diagnostic", "Hardware", "diagnostic", "Hardware", 3),
    _Plugin("Pulse Test", "Hardware", "pulse_test", "Hardware", 4),
    _Plugin("Targeted Stress", "Stress", "targeted_stress", "Stress", 3),
    _Plugin("Targeted Power", "Stress", "targeted_power", "Stress", 3),
    _Plugin("Memory Bandwidth", "Stress", "memory_bandwidth", "Stress", 3),
    _Plugin("Memtest", "Stress", "memtest", "Hardware", 4),
    _Plugin("EUD Test", "Stress", "eud", "Hardware", 3),
)


_SECTIONS = ("Integration", "Hardware", "Stress")


# The order NVVS runs them in, the JSON's: by test class, then fillTestVectors' order.
_RUN_ORDER = ("memory", "diagnostic", "eud", "memtest", "pulse_test", "pcie",
              "memory_bandwidth", "targeted_stress", "targeted_power")


_RULE = "+---------------------------+------------------------------------------------+"
_HEADER = [_RULE, "| Diagnostic                | Result                                         |",
           "+===========================+================================================+"]


_BANNERS = {
    "Metadata": "|-----  Metadata  ----------+------------------------------------------------|",
    "Deployment": "|-----  Deployment  --------+------------------------------------------------|",
    "Integration": "+-----  Integration  -------+------------------------------------------------+",
    "Hardware": "+-----  Hardware  ----------+------------------------------------------------+",
    "Stress": "+-----  Stress  ------------+------------------------------------------------+",
}


# DCGM_FR_THERMAL_VIOLATIONS_TS (41; its category and severity, dcgm_errors.h), worded as in
# the real capture of a failed GPU Memory test.
_MEMORY_FAILURE_CODES = {"error_category": 9, "error_id": 41, "error_severity": 1}


def _memory_failure(g: GPU) -> str:
    return (f"GPU {g.index} Thermal violations totaling 13.3 seconds started at 9.7 seconds into "
            f"the test for GPU {g.index} Verify that the cooling on this machine is functional, "
            "including external, thermal material interface, fans, and any other components.")


def _ran(p: Profile, level: int) -> list[_Plugin]:
    """The tests of the level that the run reports, in the table's order."""
    return [plugin for plugin in _PLUGINS if plugin.level <= level
            and (p.dcgm_supports_gpus or plugin.plugin != "diagnostic")]


def _result(p: Profile, plugin: _Plugin, g: GPU) -> str:
    # The EUD is a package of its own, not installed.
    if plugin.plugin == "eud" or not p.dcgm_supports_gpus:
        return "Skip"
    if plugin.plugin == "memory" and g.memory_test_fails:
        return "Fail"
    return "Pass"


def _warnings(p: Profile, plugin: _Plugin, g: GPU) -> list[str]:
    return [_memory_failure(g)] if _result(p, plugin, g) == "Fail" else []


def _row(name: str, value: str) -> str:
    return f"| {name:<25} | {value:<46} |"


def _cut(name: str, message: str) -> list[str]:
    """A message over rows of 45 characters, its name on the first (DisplayVerboseInfo)."""
    return [_row(name if at == 0 else "", message[at:at + 45])
            for at in range(0, len(message), 45)]


def _plugin_rows(p: Profile, plugin: _Plugin) -> list[str]:
    gpus = p.gpus
    results = [_result(p, plugin, g) for g in gpus]
    if len(set(results)) == 1:
        rows = [_row(plugin.name, f"{results[0]} - All")]
    else:
        rows = []
        for word in ("Pass", "Fail", "Skip"):
            ids = [str(g.index) for g, r in zip(gpus, results, strict=True) if r == word]
            if ids:
                label = f"{word} - GPU{'s' if len(ids) > 1 else ''}: {', '.join(ids)}   "
                rows.append(_row("" if rows else plugin.name, label))
    return rows + [line for g in gpus for w in _warnings(p, plugin, g)
                   for line in _cut("Warning", w)]


def _table(p: Profile, level: int) -> str:
    lines = ["Successfully ran diagnostic for group.", *_HEADER, _BANNERS["Metadata"],
             _row("DCGM Version", DCGM_VERSION),
             _row("Driver Version Detected", p.driver_version or ""),
             _row("GPU Device IDs Detected",
                  ",".join(g.pci_device_id[:4].lower() for g in p.gpus)),
             _BANNERS["Deployment"], *(_row(name, "Pass") for name, _ in _DEPLOYMENT)]
    if level >= 2:  # level 1 runs no GPU test: dcgmi then prints no section below
        for section in _SECTIONS:
            lines.append(_BANNERS[section])
            for plugin in _ran(p, level):
                if plugin.section == section:
                    lines += _plugin_rows(p, plugin)
    return "\n".join([*lines, _RULE]) + "\n"


def _jsoncpp(value: Any, indent: str = "") -> str:
    """`value` as jsoncpp's toStyledString writes it: tabs, `"key" : value`, an object or array
    value on the next line, each array element on a line of its own."""
    inner = indent + "\t"
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k)} : "
                 + (f"\n{inner}{_jsoncpp(v, inner)}" if isinstance(v, dict | list)
                    else json.dumps(v)) for k, v in sorted(value.items())]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list):
        return "[\n" + ",\n".join(inner + _jsoncpp(v, inner) for v in value) + f"\n{indent}]"
    return json.dumps(value)


def _plugin_results(p: Profile, plugin: _Plugin) -> list[dict[str, Any]]:
    results = []
    for g in p.gpus:
        status = _result(p, plugin, g)
        # A skipped plugin's ids are strings, a run one's numbers (NVVS JsonOutput::Result).
        entry: dict[str, Any] = {"gpu_ids": str(g.index) if status == "Skip" else g.index,
                                 "status": status.upper()}
        if warnings := _warnings(p, plugin, g):
            entry["warnings"] = [{**_MEMORY_FAILURE_CODES, "warning": w} for w in warnings]
        results.append(entry)
    return results


def _document(p: Profile, level: int) -> str:
    everyone = ",".join(str(g.index) for g in p.gpus)
    categories: dict[str, list[Any]] = {"Deployment": []}
    for _, name in _DEPLOYMENT:
        categories["Deployment"] += [{"name": name, "results": [
            {"gpu_ids": everyone, "status": "PASS"}]}, None]
    ran = {plugin.plugin: plugin for plugin in _ran(p, level)}
    for plugin in (ran[n] for n in _RUN_ORDER if n in ran):
        results = _plugin_results(p, plugin)
        skipped = all(r["status"] == "SKIP" for r in results)
        categories.setdefault(plugin.category, []).extend(
            [{"name": plugin.plugin, "results": results}] + [None] * skipped)
    # The index NVVS advanced past a category's last test holds nothing: no trailing null.
    document = {"DCGM GPU Diagnostic": {"test_categories": [
        {"category": name, "tests": tests[:-1] if tests[-1] is None else tests}
        for name, tests in categories.items()], "version": DCGM_VERSION}}
    return _jsoncpp(document) + "\n"


def dcgmi_diag(p: Profile, level: int, as_json: bool = False) -> str:
    """What ``dcgmi diag -r LEVEL`` (``-j``: as JSON) prints on a host with a driver."""
    return _document(p, level) if as_json else _table(p, level)


def _failed(p: Profile, level: int) -> bool:
    """Whether a test of the level fails (dcgmi then exits EXIT_TEST_FAILED)."""
    return any(_result(p, plugin, g) == "Fail" for plugin in _ran(p, level) for g in p.gpus)


def dcgmi(p: Profile, args: list[str]) -> str:
    """The ``dcgmi`` tool: ``diag -r 1..4 [-j]``. Without a driver DCGM sees no GPU."""
    options, operands = read_options("dcgmi", args, {"-r": "r", "--run": "r"},
                                     {"-j": "j", "--json": "j"})
    level = options.get("r", "")
    if operands != ["diag"] or level not in ("1", "2", "3", "4"):
        raise ToolExit(1, "", "dcgmi: the lab emulates `dcgmi diag -r 1..4 [-j]` only\n")
    as_json = "j" in options
    if not p.driver_version or not p.gpus:
        error = {"DCGM GPU Diagnostic": {"runtime_error": NO_GPUS, "version": DCGM_VERSION}}
        raise ToolExit(EXIT_NO_GPUS, _jsoncpp(error) + "\n\n" if as_json else NO_GPUS + "\n")
    output = dcgmi_diag(p, int(level), as_json)
    if _failed(p, int(level)):
        raise ToolExit(EXIT_TEST_FAILED, output)
    return output
