"""Support bundles: a directory per host holding the raw outputs racklift collects.

Layout of `<bundle>/<host>/`:

    nvidia-smi-q-x.xml   nvidia-smi -q -x
    lspci.txt            lspci -D -nn -vv
    ibstat.txt           ibstat
    ibv_devinfo.txt      ibv_devinfo
    dmidecode.txt        dmidecode -t 0,1
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from racklift.errors import RackliftError

CONTAINER_CHECK = "container-check.json"


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


def from_collector(host: str, document: dict[str, Any]) -> Bundle:
    """The collector's JSON document → a Bundle."""
    outputs = {name: Output(stdout=o.get("stdout", ""), rc=int(o.get("rc", 0)),
                            stderr=o.get("stderr", ""), command=o.get("command", ""))
               for name, o in document.get("outputs", {}).items()}
    meta = {k: document.get(k) for k in ("hostname", "collected_at", "sysfs_root")}
    return Bundle(host, outputs, dict(document.get("sysfs", {})), meta)


def write(bundle: Bundle, directory: Path) -> Path:
    """Write `bundle` as `<directory>/<host>/...`; returns the host's directory."""
    host_dir = directory / bundle.host
    host_dir.mkdir(parents=True, exist_ok=True)
    commands = {}
    for name, out in bundle.outputs.items():
        (host_dir / name).write_text(out.stdout)
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
    commands = _json(host_dir / "commands.json", {})
    outputs = {}
    for path in sorted(host_dir.iterdir()):
        if path.name in ("commands.json", "meta.json", "sysfs.json") or not path.is_file():
            continue
        info = commands.get(path.name, {})
        outputs[path.name] = Output(stdout=path.read_text(errors="replace"),
                                    rc=int(info.get("rc", 0)), stderr=info.get("stderr", ""),
                                    command=info.get("command", ""))
    meta = _json(host_dir / "meta.json", {})
    return Bundle(meta.get("hostname") or host_dir.name, outputs,
                  _json(host_dir / "sysfs.json", {}), meta)


def _json(path: Path, default: Any) -> Any:
    if not path.exists():
        return default
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise RackliftError(f"{path}: not valid JSON ({exc})") from None
