"""The command line: the program's name (a tool's link to the launcher) selects the tool;
otherwise a subcommand (profile, write-sysfs, generate, inject, heal)."""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable

from .command import ToolExit
from .latency import delay
from .profile import (
    DPKG_QUERY,
    Profile,
    installed_driver,
    load_profile,
    save_profile,
    with_installed_driver,
)

Tool = Callable[[Profile, list[str]], str]


def _lazy(module: str, function: str) -> Tool:
    """The tool, its module imported when it runs: a lab host starts a process for every tool
    call the collector makes, and importing every tool's module each time was a third of its
    CPU."""
    def tool(p: Profile, args: list[str]) -> str:
        run: Tool = getattr(importlib.import_module(f".{module}", __package__), function)
        return run(p, args)
    return tool


TOOLS: dict[str, Tool] = {
    "nvidia-smi": _lazy("nvidia_smi_cli", "cli_nvidia_smi"),
    "ibnetdiscover": _lazy("fabric", "cli_ibnetdiscover"),
    "ibstat": _lazy("infiniband", "cli_ibstat"),
    "ibv_devinfo": _lazy("infiniband", "cli_ibv_devinfo"),
    "dmidecode": _lazy("dmi", "cli_dmidecode"),
    "dmesg": _lazy("kernel", "cli_dmesg"),
    # What the acceptance stage runs under load.
    "dcgmi": _lazy("dcgm", "dcgmi"),
    "all_reduce_perf": _lazy("nccl_tests", "all_reduce_perf"),
    "ib_write_bw": _lazy("perftest", "ib_write_bw"),
}


def _usage() -> str:
    from .faults import FAULTS

    return ("usage: hwemu-tool {profile | write-sysfs ROOT | generate HOSTNAME SERIAL SEED "
            "[PATH] |\n                 inject KIND... | heal | TOOL [ARGS...]}\n"
            f"tools: {', '.join(TOOLS)}\nfault kinds: {', '.join(FAULTS)}\n")


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
        sys.stdout.write(_usage())
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd in TOOLS:
        return _run_tool(cmd, rest)
    # The subcommands set a host up: their modules are imported here, not by every tool call.
    from .faults import heal, inject
    from .generate import generate_profile
    from .kernel import write_sysfs

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
    sys.stderr.write(_usage())
    return 2


def main(argv: list[str] | None = None) -> int:
    """Entry point; ``argv[0]`` (the program name) selects the emulated tool."""
    argv = list(sys.argv if argv is None else argv)
    prog = os.path.basename(argv[0]) if argv else "hwemu-tool"
    if prog in TOOLS:
        return _run_tool(prog, argv[1:])
    return _run_subcommand(argv[1:])
