"""The command line: the program's name (a tool's link to the launcher) selects the tool;
otherwise a subcommand (profile, write-sysfs, generate, inject, heal)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from .command import ToolExit
from .dcgm import dcgmi
from .dmi import (
    _DMI_STRING_KEYWORDS,
    _DMI_TYPE_KEYWORDS,
    DMIDECODE_VERSION,
    dmidecode,
    dmidecode_string,
)
from .fabric import ibnetdiscover
from .faults import FAULTS, heal, inject
from .generate import generate_profile
from .infiniband import _sorted_hcas, ibstat, ibv_devinfo
from .kernel import dmesg, write_sysfs
from .latency import delay
from .nccl_tests import all_reduce_perf
from .nvidia_smi import (
    _select_gpus,
    nvidia_smi_list,
    nvidia_smi_q,
    nvidia_smi_summary,
    nvidia_smi_version,
    nvidia_smi_xml,
)
from .perftest import ib_write_bw
from .profile import (
    DPKG_QUERY,
    NVIDIA_SMI_NO_DRIVER,
    Profile,
    installed_driver,
    load_profile,
    save_profile,
    with_installed_driver,
)
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


def _cli_nvidia_smi(p: Profile, args: list[str]) -> str:
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


def _cli_ibstat(p: Profile, args: list[str]) -> str:
    if args and args[0] in ("-l", "--list_of_cas"):
        return "".join(h.ca + "\n" for h in _sorted_hcas(p))
    if args and args[0] in ("-p", "--port_list"):
        return "".join(h.port_guid + "\n" for h in _sorted_hcas(p))
    if any(a.startswith("-") for a in args) or len(args) > 2:
        raise ToolExit(255, "", "Usage: ibstat [-d(ebug) -l(ist_of_cas) -s(hort) -p(ort_list) "
                            "-V(ersion)] <ca_name> [portnum]\n")
    ca = args[0] if args else None
    port = int(args[1]) if len(args) > 1 and args[1].isdigit() else None
    try:
        return ibstat(p, ca, port)
    except LookupError:
        raise ToolExit(255, "", f"ibpanic: [{os.getpid()}] main: stat of IB device '{ca}' failed: "
                             "No such file or directory\n") from None


def _cli_ibv_devinfo(p: Profile, args: list[str]) -> str:
    device: str | None = None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-l", "--list"):
            names = [h.ca for h in _sorted_hcas(p)]
            return f"{len(names)} HCAs found:\n" + "".join(f"\t{n}\n" for n in names)
        if a in ("-d", "--ib-dev") or a.startswith("--ib-dev="):
            if "=" in a:
                device, i = a.split("=", 1)[1], i + 1
            elif i + 1 < len(args):
                device, i = args[i + 1], i + 2
            else:
                raise ToolExit(1, "", "ibv_devinfo: option requires an argument -- 'd'\n")
        else:
            raise ToolExit(1, "", f"ibv_devinfo: unrecognized option '{a}'\n")
    try:
        return ibv_devinfo(p, device)
    except LookupError:
        raise ToolExit(255, "", f"IB device '{device}' wasn't found\n") from None


def _dmi_usage_error(kind: str, bad: str, valid: list[str]) -> ToolExit:
    return ToolExit(2, "", f"Invalid {kind} keyword: {bad}\nValid {kind} keywords are:\n"
                        + "".join(f"  {v}\n" for v in valid))


def _cli_dmidecode(p: Profile, args: list[str]) -> str:
    if not args:
        return dmidecode(p)
    a = args[0]
    value = args[1] if len(args) > 1 else None
    if a.startswith("--type=") or a.startswith("--string="):
        a, value = a.split("=", 1)
    if a in ("-t", "--type"):
        if value is None:
            raise ToolExit(2, "", "dmidecode: option requires an argument -- 't'\n")
        try:
            return dmidecode(p, value)
        except ValueError:
            raise _dmi_usage_error("type", value, list(_DMI_TYPE_KEYWORDS)) from None
    if a in ("-s", "--string"):
        if value is None:
            raise ToolExit(2, "", "dmidecode: option requires an argument -- 's'\n")
        try:
            return dmidecode_string(p, value)
        except ValueError:
            raise _dmi_usage_error("string", value, list(_DMI_STRING_KEYWORDS)) from None
    if a in ("-V", "--version"):
        return DMIDECODE_VERSION + "\n"
    raise ToolExit(2, "", f"dmidecode: unrecognized option '{a}'\n")


def _cli_dmesg(p: Profile, args: list[str]) -> str:
    for a in args:
        if a in ("--nopager", "-P"):
            continue
        if a.startswith("--"):
            msg = f"dmesg: unrecognized option '{a}'\n"
        else:
            msg = f"dmesg: invalid option -- '{a.lstrip('-')[:1]}'\n"
        raise ToolExit(1, "", msg + "Try 'dmesg --help' for more information.\n")
    return dmesg(p)


def _cli_ibnetdiscover(p: Profile, args: list[str]) -> str:
    if args:
        raise ToolExit(1, "", "ibnetdiscover: the lab emulates the plain map only, not "
                              f"{args[0]}\n")
    return ibnetdiscover(p)


TOOLS: dict[str, Callable[[Profile, list[str]], str]] = {
    "nvidia-smi": _cli_nvidia_smi,
    "ibnetdiscover": _cli_ibnetdiscover,
    "ibstat": _cli_ibstat,
    "ibv_devinfo": _cli_ibv_devinfo,
    "dmidecode": _cli_dmidecode,
    "dmesg": _cli_dmesg,
    # What the acceptance stage runs under load.
    "dcgmi": dcgmi,
    "all_reduce_perf": all_reduce_perf,
    "ib_write_bw": ib_write_bw,
}


_USAGE = (
    "usage: hwemu-tool {profile | write-sysfs ROOT | generate HOSTNAME SERIAL SEED [PATH] |\n"
    "                 inject KIND... | heal | TOOL [ARGS...]}\n"
    f"tools: {', '.join(TOOLS)}\nfault kinds: {', '.join(FAULTS)}\n"
)


# dpkg's database, and where the driver read from it is kept: every tool call needs the
# installed driver, and asking dpkg-query each time was most of a call's CPU. The entry is
# keyed by the database's change time and size, which every install or removal changes.
DPKG_STATUS = "/var/lib/dpkg/status"
DRIVER_CACHE = "/run/racklift-lab/installed-driver"


def _installed_driver() -> str | None:
    stat = os.stat(DPKG_STATUS)
    key = f"{stat.st_mtime_ns} {stat.st_size}"
    try:
        with open(DRIVER_CACHE) as f:
            cached_key, _, value = f.read().partition("\n")
        if cached_key == key:
            return value or None
    except OSError:
        pass
    import subprocess  # here: only when the database changed

    done = subprocess.run(DPKG_QUERY, capture_output=True, text=True)
    if done.returncode != 0:
        raise OSError(f"dpkg-query exited {done.returncode}: {done.stderr.strip()[:200]}")
    packages = done.stdout
    installed = installed_driver(packages)
    try:  # whole or not at all: tools run at once
        os.makedirs(os.path.dirname(DRIVER_CACHE), exist_ok=True)
        partial = f"{DRIVER_CACHE}.{os.getpid()}"
        with open(partial, "w") as f:
            f.write(f"{key}\n{installed or ''}")
        os.replace(partial, DRIVER_CACHE)
    except OSError:
        pass  # not kept: the next call asks dpkg-query again
    return installed


def _host_profile() -> Profile:
    """The profile, with the installed driver where it says so (lab hosts)."""
    profile = load_profile()
    if not profile.driver_from_packages:
        return profile
    return with_installed_driver(profile, _installed_driver())


def _run_tool(name: str, args: list[str]) -> int:
    try:
        profile = _host_profile()
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"{name}: cannot read the hardware profile or packages: {exc}\n")
        return 1
    time.sleep(delay(profile.latency, name, args))  # idle, as the real tool waits
    try:
        sys.stdout.write(TOOLS[name](profile, args))
    except ToolExit as exc:
        sys.stdout.write(exc.stdout)
        sys.stderr.write(exc.stderr)
        sys.stdout.flush()
        return exc.code
    sys.stdout.flush()
    return 0


def _run_subcommand(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(_USAGE)
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd in TOOLS:
        return _run_tool(cmd, rest)
    try:
        if cmd == "profile" and not rest:
            sys.stdout.write(load_profile().to_json())
            return 0
        if cmd == "write-sysfs" and len(rest) == 1:
            write_sysfs(load_profile(), rest[0])
            return 0
        if cmd == "generate" and len(rest) in (3, 4):
            profile = generate_profile(rest[0], rest[1], int(rest[2]))
            if len(rest) == 4:
                save_profile(profile, rest[3])
            else:
                sys.stdout.write(profile.to_json())
            return 0
        if cmd == "inject" and rest:
            profile = load_profile()
            for kind in rest:
                profile = inject(profile, kind)
            save_profile(profile)
            return 0
        if cmd == "heal" and not rest:
            save_profile(heal(load_profile()))
            return 0
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"hwemu: {exc}\n")
        return 1
    sys.stderr.write(_USAGE)
    return 2


def main(argv: list[str] | None = None) -> int:
    """Entry point; ``argv[0]`` (the program name) selects the emulated tool."""
    argv = list(sys.argv if argv is None else argv)
    prog = os.path.basename(argv[0]) if argv else "hwemu-tool"
    if prog in TOOLS:
        return _run_tool(prog, argv[1:])
    return _run_subcommand(argv[1:])
