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

from .cli import TOOLS, main
from .command import ToolExit
from .dcgm import dcgmi_diag
from .dmi import dmidecode, dmidecode_string
from .fabric import ibnetdiscover
from .faults import ETHERNET_FAULTS, FAULTS, heal, inject
from .generate import generate_profile
from .infiniband import ibstat, ibv_devinfo
from .kernel import dmesg, sysfs_tree, write_sysfs
from .nccl_tests import AllReduceRun, all_reduce_perf_output, parse_all_reduce_perf
from .nvidia_smi import (
    nvidia_smi_list,
    nvidia_smi_q,
    nvidia_smi_summary,
    nvidia_smi_version,
    nvidia_smi_xml,
)
from .profile import (
    DEFAULT_DRIVER,
    GPU,
    HGX_H100_BUSES,
    NVIDIA_SMI_NO_DRIVER,
    PROFILE_ENV,
    HCAPort,
    Profile,
    System,
    cabled,
    installed_driver,
    load_profile,
    save_profile,
    with_installed_driver,
)
from .query_gpu import InvalidQueryField, nvidia_smi_query
from .topology import nvidia_smi_nvlink, nvidia_smi_nvlink_errors, nvidia_smi_topo

__all__ = [
    "DEFAULT_DRIVER", "ETHERNET_FAULTS", "FAULTS", "GPU", "HGX_H100_BUSES",
    "NVIDIA_SMI_NO_DRIVER", "PROFILE_ENV",
    "TOOLS", "AllReduceRun", "HCAPort", "InvalidQueryField", "Profile", "System", "ToolExit",
    "all_reduce_perf_output", "cabled", "dcgmi_diag", "dmesg", "dmidecode",
    "dmidecode_string", "generate_profile", "heal", "ibnetdiscover", "ibstat", "ibv_devinfo",
    "inject", "installed_driver", "load_profile", "main", "nvidia_smi_list", "nvidia_smi_nvlink",
    "nvidia_smi_nvlink_errors",
    "nvidia_smi_q", "nvidia_smi_query", "nvidia_smi_summary", "nvidia_smi_topo",
    "nvidia_smi_version", "nvidia_smi_xml", "parse_all_reduce_perf", "save_profile",
    "sysfs_tree", "with_installed_driver", "write_sysfs",
]
