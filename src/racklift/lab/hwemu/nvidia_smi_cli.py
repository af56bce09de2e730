"""``nvidia-smi``'s command line: which output the arguments ask for, and its exit codes."""

from __future__ import annotations

from .command import ToolExit
from .nvidia_smi import (
    _select_gpus,
    nvidia_smi_list,
    nvidia_smi_q,
    nvidia_smi_summary,
    nvidia_smi_version,
    nvidia_smi_xml,
)
from .profile import NVIDIA_SMI_NO_DRIVER, Profile
from .query_gpu import InvalidQueryField, nvidia_smi_query
from .topology import nvidia_smi_nvlink, nvidia_smi_nvlink_errors, nvidia_smi_topo


def _opt_value(args: list[str], i: int) -> tuple[str, int]:
    """Value of ``--name=V`` / ``--name V`` / ``-n V`` at args[i]; returns (value, next i)."""
    arg = args[i]
    if "=" in arg and arg.startswith("--"):
        return arg.split("=", 1)[1], i + 1
    if i + 1 >= len(args):
        raise ToolExit(2, NVSMI_BAD_ARGS)
    return args[i + 1], i + 2


NVSMI_BAD_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n"


# nvidia-smi's exit code when a GPU is lost ("fallen off the bus or otherwise inaccessible").
NVSMI_GPU_LOST = 15


def cli_nvidia_smi(p: Profile, args: list[str]) -> str:
    # Without a driver package a real host has no nvidia-smi at all; this link stays in PATH,
    # so it answers as nvidia-smi does when no driver is loaded.
    if not p.driver_version:
        raise ToolExit(9, NVIDIA_SMI_NO_DRIVER + "\n\n")
    output = _nvidia_smi_output(p, args)
    if any(g.lost for g in p.gpus) and "--version" not in args:
        raise ToolExit(NVSMI_GPU_LOST, output)
    return output


def _nvidia_smi_output(p: Profile, args: list[str]) -> str:
    if args[:1] in (["topo"], ["nvlink"]):
        if args in (["topo", "-m"], ["topo", "--matrix"]):
            return nvidia_smi_topo(p)
        if args in (["nvlink", "-s"], ["nvlink", "--status"]):
            return nvidia_smi_nvlink(p)
        if args in (["nvlink", "-e"], ["nvlink", "--errorcounters"]):
            return nvidia_smi_nvlink_errors(p)
        raise ToolExit(2, NVSMI_BAD_ARGS)
    query = xml = list_gpus = version = False
    query_gpu: str | None = None
    fmt: str | None = None
    ids: str | None = None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-q", "--query"):
            query, i = True, i + 1
        elif a in ("-x", "--xml-format"):
            xml, i = True, i + 1
        elif a in ("-L", "--list-gpus"):
            list_gpus, i = True, i + 1
        elif a == "--version":
            version, i = True, i + 1
        elif a == "--query-gpu" or a.startswith("--query-gpu="):
            query_gpu, i = _opt_value(args, i)
        elif a == "--format" or a.startswith("--format="):
            fmt, i = _opt_value(args, i)
        elif a in ("-i", "--id") or a.startswith("--id="):
            ids, i = _opt_value(args, i)
        else:
            raise ToolExit(2, NVSMI_BAD_ARGS)
    try:
        gpus = _select_gpus(p, ids)
    except LookupError as exc:
        raise ToolExit(6, f"No devices were found matching the id: {exc.args[0]}\n") from None
    if version:
        return nvidia_smi_version(p)
    if list_gpus and not (query or xml or query_gpu):
        return nvidia_smi_list(p)
    if query_gpu is not None:
        opts = [o.strip() for o in (fmt or "").split(",") if o.strip()]
        if "csv" not in opts or query or xml:
            raise ToolExit(2, NVSMI_BAD_ARGS)
        try:
            return nvidia_smi_query(p, query_gpu.split(","), "noheader" in opts,
                                    "nounits" in opts, gpus)
        except InvalidQueryField as exc:
            raise ToolExit(2, f"{exc}\n\n") from None
    if fmt is not None:
        raise ToolExit(2, NVSMI_BAD_ARGS)
    if query:
        return nvidia_smi_xml(p, gpus) if xml else nvidia_smi_q(p, gpus)
    if xml:
        raise ToolExit(2, NVSMI_BAD_ARGS)
    return nvidia_smi_summary(p)
