"""A host's observed facts, assembled from a support bundle by the pure parsers."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from racklift.facts import parsers
from racklift.facts.bundle import CONTAINER_CHECK, Bundle
from racklift.facts.container_check import ContainerCheck, parse_container_check
from racklift.facts.model import (
    CPUFacts,
    HCAPortFacts,
    KernelEvent,
    NvidiaSmiFacts,
    PCIDeviceFacts,
    SystemFacts,
)

MELLANOX = "15b3"


@dataclass(frozen=True)
class NICFacts:
    name: str
    mac: str | None  # upper case
    state: str | None  # UP / DOWN / UNKNOWN, as `ip` reports the operational state
    speed_mbps: int | None
    addresses: tuple[str, ...] = ()  # with prefix length


@dataclass(frozen=True)
class DiskFacts:
    mount: str
    size_bytes: int
    available_bytes: int

    @property
    def free_fraction(self) -> float:
        return self.available_bytes / self.size_bytes if self.size_bytes else 0.0


@dataclass(frozen=True)
class HostFacts:
    host: str
    system: SystemFacts | None = None
    cpu: CPUFacts | None = None
    memory_mib: int | None = None
    nvidia: NvidiaSmiFacts | None = None
    nvidia_error: str | None = None  # why nvidia-smi gave no facts
    pci_gpus: tuple[PCIDeviceFacts, ...] = ()
    pci_hcas: tuple[PCIDeviceFacts, ...] = ()
    hca_ports: tuple[HCAPortFacts, ...] = ()
    nics: tuple[NICFacts, ...] = ()
    os: dict[str, str] = field(default_factory=dict)
    kernel: str | None = None
    packages: dict[str, str] = field(default_factory=dict)  # installed package → version
    services: dict[str, str] = field(default_factory=dict)  # unit → is-active answer
    disks: tuple[DiskFacts, ...] = ()
    kernel_events: tuple[KernelEvent, ...] = ()
    container_check: ContainerCheck | None = None  # verify's container check; None: not run
    not_collected: tuple[str, ...] = ()  # outputs missing or failed, with the reason

    def nic(self, name: str) -> NICFacts | None:
        return next((n for n in self.nics if n.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _text(bundle: Bundle, name: str, missing: list[str]) -> str | None:
    out = bundle.output(name)
    if out is None:
        missing.append(f"{name}: not collected")
        return None
    if not out.ok:
        reason = (out.stderr or out.stdout).strip().splitlines()
        missing.append(f"{name}: exit {out.rc}: {reason[0] if reason else 'no output'}")
        return None
    return out.stdout


def _nvidia(bundle: Bundle, missing: list[str]) -> tuple[NvidiaSmiFacts | None, str | None]:
    out = bundle.output("nvidia-smi-q-x.xml")
    if out is None:
        missing.append("nvidia-smi-q-x.xml: not collected")
        return None, "nvidia-smi output not collected"
    if not out.ok:
        message = (out.stdout or out.stderr).strip().splitlines()
        reason = message[0] if message else f"exit {out.rc}"
        if out.rc == 127:
            reason = "nvidia-smi is not installed"
        return None, reason
    try:
        return parsers.parse_nvidia_smi_xml(out.stdout), None
    except parsers.ParseError as exc:
        return None, str(exc)


def _nics(link_json: str | None, addr_json: str | None,
          sysfs: dict[str, str]) -> tuple[NICFacts, ...]:
    if not link_json:
        return ()
    addresses: dict[str, list[str]] = {}
    for entry in json.loads(addr_json or "[]"):
        addresses[entry["ifname"]] = [f"{a['local']}/{a['prefixlen']}"
                                      for a in entry.get("addr_info", [])]
    nics = []
    for link in json.loads(link_json):
        name = link["ifname"]
        if link.get("link_type") != "ether":
            continue  # loopback, IPoIB and tunnels are not NICs NetBox models by MAC
        speed = sysfs.get(f"class/net/{name}/speed")
        nics.append(NICFacts(
            name=name, mac=(link.get("address") or "").upper() or None,
            state=link.get("operstate"),
            speed_mbps=int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0
            else None,
            addresses=tuple(addresses.get(name, ()))))
    return tuple(nics)


def _packages(text: str | None) -> dict[str, str]:
    installed = {}
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[2].startswith("ii"):
            installed[parts[0]] = parts[1]
    return installed


def _services(text: str | None) -> dict[str, str]:
    return dict(line.split("\t", 1) for line in (text or "").splitlines() if "\t" in line)


def _disks(text: str | None) -> tuple[DiskFacts, ...]:
    disks = {}
    for line in (text or "").splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 6 and cols[1].isdigit():
            disks[cols[5]] = DiskFacts(cols[5], int(cols[1]), int(cols[3]))
    return tuple(disks.values())


def _parsed[T](parse: Callable[[str], T], bundle: Bundle, name: str, missing: list[str],
            default: T) -> T:
    """Parse one output; a missing, failed or unparsable one is recorded, not raised."""
    text = _text(bundle, name, missing)
    if text is None:
        return default
    try:
        return parse(text)
    except parsers.ParseError as exc:
        missing.append(f"{name}: {exc}")
        return default


def from_bundle(bundle: Bundle) -> HostFacts:
    missing: list[str] = []
    nvidia, nvidia_error = _nvidia(bundle, missing)
    pci = _parsed(parsers.parse_lspci, bundle, "lspci.txt", missing, [])
    ports = _parsed(parsers.parse_ibstat, bundle, "ibstat.txt", missing, [])
    ib_sysfs = {k: v for k, v in bundle.sysfs.items() if k.startswith("class/infiniband/")}
    if not ports and ib_sysfs:
        # No infiniband-diags on the host: the kernel's view is as good for state and rate.
        ports = parsers.parse_sysfs_infiniband(ib_sysfs)
    uname = _text(bundle, "uname.txt", missing)
    return HostFacts(
        host=bundle.host,
        system=_parsed(parsers.parse_dmidecode, bundle, "dmidecode.txt", missing, None),
        cpu=_parsed(parsers.parse_lscpu_json, bundle, "lscpu.json", missing, None),
        memory_mib=_parsed(parsers.parse_meminfo, bundle, "meminfo.txt", missing, None),
        nvidia=nvidia, nvidia_error=nvidia_error,
        pci_gpus=tuple(parsers.nvidia_gpus_on_pci(pci)),
        pci_hcas=tuple(d for d in pci if d.vendor_id == MELLANOX),
        hca_ports=tuple(ports),
        nics=_nics(_text(bundle, "ip-link.json", missing),
                   _text(bundle, "ip-addr.json", missing), bundle.sysfs),
        os=_parsed(parsers.parse_os_release, bundle, "os-release.txt", missing, {}),
        kernel=uname.strip() if uname else None,
        packages=_packages(_text(bundle, "packages.txt", missing)),
        services=_services(_text(bundle, "services.txt", [])),
        disks=_disks(_text(bundle, "df.txt", missing)),
        kernel_events=tuple(_parsed(parsers.parse_dmesg, bundle, "dmesg.txt", missing, [])),
        # Only verify runs the container check: a bundle without it lacks nothing.
        container_check=(_parsed(parse_container_check, bundle, CONTAINER_CHECK, missing, None)
                         if bundle.output(CONTAINER_CHECK) else None),
        not_collected=tuple(missing),
    )
