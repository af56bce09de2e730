"""Lab hardware emulator: an 8x H100 HGX server's GPU, HCA and DMI tools, one module per tool.

Stdlib only, Python 3.11, relative imports only: the package is copied verbatim onto lab hosts
as ``/usr/local/lib/racklift-lab/hwemu/`` beside the launcher ``hwemu-tool`` (the
lab_hardware role's), and the tools ``nvidia-smi``, ``ibstat``, ``ibv_devinfo``, ``dmidecode``,
``dmesg`` and the acceptance stage's ``dcgmi``, ``all_reduce_perf`` and ``ib_write_bw`` are
links to the launcher (dispatch on the program name); ``hwemu-tool
<subcommand>`` (``profile``, ``write-sysfs ROOT``, ``generate``, ``inject``, ``heal``, or any
tool name) and, on the controller, ``python -m racklift.lab.hwemu <subcommand>`` run the rest.
The hardware is described by a JSON profile read from ``$RACKLIFT_HW_PROFILE`` (default
``/etc/racklift-lab/hardware.json``); its latency table (latency.py) makes a tool take as long
as the real one (benchmarks), empty by default. On lab hosts the driver is not the profile's
but the installed package's (``Profile.driver_from_packages``).

Output formats follow real captures (see ``tests/fixtures/real/SOURCES.md``):

* ``nvidia-smi -q -x`` / ``-q``: the R550 layout (DTD ``nvsmi_device_v12.dtd``, tab
  indentation, Hopper ECC/row-remapper/T.Limit elements) as printed by driver 550.x on
  H100/H200/GH200.
* ``nvidia-smi --query-gpu``: canonical field names in the header, units in brackets,
  ``[N/A]`` for unsupported values, ``Field "x" is not a valid field to query.`` + exit 2.
* ``nvidia-smi topo -m`` / ``nvlink -s``: the HGX H100 capture's tab-separated matrix with
  affinity columns and NIC Legend; link lines indented by a tab and a space (topology.py).
* ``ibstat`` / ``ibv_devinfo``: infiniband-diags / rdma-core layouts for ConnectX-7.
* ``dmidecode`` 3.4, sysfs value formats (``4: ACTIVE``, ``400 Gb/sec (4X NDR)``), and
  ``dmesg`` lines with ``[%5d.%06d]`` timestamps and the NVRM Xid format.
* ``dcgmi diag -r N [-j]``: DCGM 3.3.x's table, NVVS's JSON (dcgm.py); ``all_reduce_perf``:
  nccl-tests 2.13 (nccl_tests.py); ``ib_write_bw``: perftest as MLNX_OFED 24.10 ships it, a
  server and a client over TCP (perftest.py).
"""

import importlib
from typing import Any

# What the package offers, by the module that has it: imported on first use (PEP 562), so
# that a tool call on a lab host, which imports hwemu.cli, loads only its own tool's module.
_EXPORTS = {
    "TOOLS": "cli",
    "main": "cli",
    "ToolExit": "command",
    "dcgmi_diag": "dcgm",
    "dmidecode": "dmi",
    "dmidecode_string": "dmi",
    "ibnetdiscover": "fabric",
    "ETHERNET_FAULTS": "faults",
    "inband_port": "faults",
    "FAULTS": "faults",
    "heal": "faults",
    "inject": "faults",
    "generate_profile": "generate",
    "ibstat": "infiniband",
    "ibv_devinfo": "infiniband",
    "dmesg": "kernel",
    "sysfs_tree": "kernel",
    "write_sysfs": "kernel",
    "AllReduceRun": "nccl_tests",
    "all_reduce_perf_output": "nccl_tests",
    "parse_all_reduce_perf": "nccl_tests",
    "nvidia_smi_list": "nvidia_smi",
    "nvidia_smi_q": "nvidia_smi",
    "nvidia_smi_summary": "nvidia_smi",
    "nvidia_smi_version": "nvidia_smi",
    "nvidia_smi_xml": "nvidia_smi",
    "DEFAULT_DRIVER": "profile",
    "GPU": "profile",
    "HCAPort": "profile",
    "HGX_H100_BUSES": "profile",
    "NVIDIA_SMI_NO_DRIVER": "profile",
    "PROFILE_ENV": "profile",
    "Profile": "profile",
    "System": "profile",
    "cabled": "profile",
    "installed_driver": "profile",
    "load_profile": "profile",
    "save_profile": "profile",
    "with_installed_driver": "profile",
    "InvalidQueryField": "query_gpu",
    "nvidia_smi_query": "query_gpu",
    "nvidia_smi_nvlink": "topology",
    "nvidia_smi_nvlink_errors": "topology",
    "nvidia_smi_topo": "topology",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


__all__ = [
    "DEFAULT_DRIVER", "ETHERNET_FAULTS", "FAULTS", "GPU", "HGX_H100_BUSES",
    "NVIDIA_SMI_NO_DRIVER", "PROFILE_ENV",
    "TOOLS", "AllReduceRun", "HCAPort", "InvalidQueryField", "Profile", "System", "ToolExit",
    "all_reduce_perf_output", "cabled", "dcgmi_diag", "dmesg", "dmidecode",
    "dmidecode_string", "generate_profile", "heal", "ibnetdiscover", "ibstat", "ibv_devinfo",
    "inband_port",
    "inject", "installed_driver", "load_profile", "main", "nvidia_smi_list", "nvidia_smi_nvlink",
    "nvidia_smi_nvlink_errors",
    "nvidia_smi_q", "nvidia_smi_query", "nvidia_smi_summary", "nvidia_smi_topo",
    "nvidia_smi_version", "nvidia_smi_xml", "parse_all_reduce_perf", "save_profile",
    "sysfs_tree", "with_installed_driver", "write_sysfs",
]
