"""Support bundles: a directory per host holding the raw outputs racklift collects.

Layout of `<bundle>/<host>/`:

    nvidia-smi-q-x.xml   nvidia-smi -q -x
    nvidia-smi-topo.txt  nvidia-smi topo -m
    nvidia-smi-nvlink.txt nvidia-smi nvlink -s
    nvidia-smi-nvlink-e.txt nvidia-smi nvlink -e, twice, 5 s apart
    lspci.txt            lspci -D -nn -vv
    ibstat.txt           ibstat
    ibv_devinfo.txt      ibv_devinfo
    dmidecode.txt        dmidecode -t 0,1,3
    dmesg.txt            dmesg
    ip-link.json         ip -j link show
    ip-addr.json         ip -j addr show
    lscpu.json           lscpu -J
    meminfo.txt          /proc/meminfo
    os-release.txt       /etc/os-release
    uname.txt            uname -r
    packages.txt         dpkg-query -W (package, version, status)
    services.txt         systemctl is-active of fabric manager, persistenced, docker, containerd
    df.txt               df -P -B1 / /var
    lldpctl.json         lldpctl -f json (the Ethernet neighbours lldpd heard); a bundle
                         made by hand may hold -f keyvalue there (netbox-agent's)
    ibnetdiscover.txt    ibnetdiscover (the InfiniBand fabric map, this host's links in it)
    container-check.json verify only: container_check.py's steps (a GPU container pulled
                         through the registry mirror, run with the nvidia runtime)
    sysfs.json           InfiniBand, NIC speed and DMI files from sysfs: {relative path: value}
    commands.json        for each output above: the command, its exit code, stderr, seconds
    meta.json            hostname, collection time, sysfs root

The live collector (playbooks/files/collect.py) produces one JSON document per host; the
same files can be made by hand with the commands above, which is what `racklift facts --from`
reads to diagnose a host offline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from racklift import names
from racklift.errors import RackliftError

CONTAINER_CHECK = "container-check.json"
# The outputs a bundle holds, named as above: the collector's (playbooks/files/collect.py
# COMMANDS) and the gate's container check. A host's document names its outputs, and a name is
# a file under the controller's bundle directory: only these are taken.
OUTPUTS = frozenset({
    "nvidia-smi-q-x.xml", "nvidia-smi-topo.txt", "nvidia-smi-nvlink.txt",
    "nvidia-smi-nvlink-e.txt", "lspci.txt",
    "ibstat.txt", "ibv_devinfo.txt", "dmidecode.txt", "dmesg.txt", "ip-link.json",
    "ip-addr.json", "lscpu.json", "meminfo.txt", "os-release.txt", "uname.txt", "packages.txt",
    "services.txt", "df.txt", "lldpctl.json", "ibnetdiscover.txt", CONTAINER_CHECK})
# Per output: a real 8-GPU host's largest (nvidia-smi -q -x, lspci -vv, a full dmesg ring) are
# a few MiB. A host sending more is refused, not read.
MAX_OUTPUT = 16 * 2**20
META = ("hostname", "collected_at", "sysfs_root")


@dataclass(frozen=True)
class Output:
    """One command's result: its stdout, exit code, and stderr."""

    stdout: str
    rc: int = 0
    stderr: str = ""
    command: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0


@dataclass(frozen=True)
class Bundle:
    host: str
    outputs: dict[str, Output]
    sysfs: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def output(self, name: str) -> Output | None:
        return self.outputs.get(name)


def from_collector(host: str, document: Any) -> Bundle:
    """The collector's JSON document → a Bundle. The document is the host's word: anything but
    the outputs racklift collects, in the types it writes, within MAX_OUTPUT, is refused with a
    RackliftError naming the host and what was wrong (that host is not verified)."""
    def refuse(what: str) -> RackliftError:
        return RackliftError(f"{host}: the collector's document {what}: the host is not "
                             "verified (a host's output is data racklift checks; see "
                             "`racklift bundle --host` and the host's collect.py)")

    if not isinstance(document, Mapping):
        raise refuse("is not a JSON object")
    raw_outputs = document.get("outputs", {})
    sysfs = document.get("sysfs", {})
    if not isinstance(raw_outputs, Mapping) or not isinstance(sysfs, Mapping):
        raise refuse("has outputs or sysfs that are not JSON objects")
    outputs = {}
    for name, o in raw_outputs.items():
        if name not in OUTPUTS:
            raise refuse(f"names an output racklift does not collect: {str(name)[:100]!r}")
        if not (isinstance(o, Mapping) and _texts(o, "stdout", "stderr", "command")
                and type(o.get("rc", 0)) is int):
            raise refuse(f"has a malformed {name} (stdout, stderr and command are text, rc "
                         "a whole number)")
        if len(o.get("stdout", "")) + len(o.get("stderr", "")) > MAX_OUTPUT:
            raise refuse(f"has a {name} over racklift's limit of {MAX_OUTPUT // 2**20} MiB")
        outputs[name] = Output(stdout=o.get("stdout", ""), rc=o.get("rc", 0),
                               stderr=o.get("stderr", ""), command=o.get("command", ""))
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in sysfs.items()):
        raise refuse("has sysfs values that are not text")
    if sum(len(k) + len(v) for k, v in sysfs.items()) > MAX_OUTPUT:
        raise refuse(f"has sysfs values over racklift's limit of {MAX_OUTPUT // 2**20} MiB")
    meta = {k: document.get(k) if isinstance(document.get(k), str) else None for k in META}
    return Bundle(host, outputs, dict(sysfs), meta)


def _texts(output: Mapping[str, Any], *keys: str) -> bool:
    return all(isinstance(output.get(k, ""), str) for k in keys)


def write(bundle: Bundle, directory: Path) -> Path:
    """Write `bundle` as `<directory>/<host>/...`; returns the host's directory. Every file
    must land inside `directory` (the host name comes from NetBox, the output names from the
    host)."""
    directory.mkdir(parents=True, exist_ok=True)
    host_dir = names.inside(directory, bundle.host)
    host_dir.mkdir(exist_ok=True)
    commands = {}
    for name, out in bundle.outputs.items():
        if name not in OUTPUTS:
            raise RackliftError(f"{bundle.host}: refusing to write output {name!r}: not one "
                                "racklift collects")
        names.inside(host_dir, name).write_text(out.stdout)
        commands[name] = {"command": out.command, "rc": out.rc, "stderr": out.stderr}
    (host_dir / "sysfs.json").write_text(json.dumps(bundle.sysfs, indent=1, sort_keys=True))
    (host_dir / "commands.json").write_text(json.dumps(commands, indent=1, sort_keys=True))
    (host_dir / "meta.json").write_text(json.dumps(bundle.meta, indent=1, sort_keys=True))
    return host_dir


def read(host_dir: Path) -> Bundle:
    """A host's bundle directory → a Bundle. Files may be missing (a hand-made bundle):
    a missing output is absent, which the facts report as not collected."""
    if not host_dir.is_dir():
        raise RackliftError(f"{host_dir} is not a directory: a support bundle is a directory "
                            "per host (see racklift.facts.bundle)")
    document = {**_json(host_dir / "meta.json", {}), "sysfs": _json(host_dir / "sysfs.json", {}),
                "outputs": {}}
    commands = _json(host_dir / "commands.json", {})
    for name in sorted(OUTPUTS):
        path = host_dir / name
        if path.is_file():
            info = commands.get(name, {}) if isinstance(commands, Mapping) else {}
            document["outputs"][name] = {**info, "stdout": path.read_text(errors="replace")}
    # The directory names the host (a bundle from elsewhere may say anything in meta.json), and
    # its files are held to what the collector's document is.
    return from_collector(host_dir.name, document)


def _json(path: Path, default: Any) -> Any:
    if not path.exists():
        return default
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise RackliftError(f"{path}: not valid JSON ({exc})") from None
