"""A host's observed facts, assembled from a support bundle by the pure parsers.

Each output is parsed on its own: one the parser says is not its tool's (ParseError) is
recorded as not collected; any other exception is a parser meeting input it did not foresee (a
racklift bug, or a hostile host) and becomes a RackliftError naming the output, for the gate to
fail that host alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from racklift.errors import RackliftError
from racklift.facts import parsers
from racklift.facts.bundle import CONTAINER_CHECK, Bundle
from racklift.facts.container_check import ContainerCheck, parse_container_check
from racklift.facts.observed import (
    CPUFacts,
    HCAPortFacts,
    IbLink,
    KernelEvent,
    LldpNeighbor,
    NvidiaSmiFacts,
    NvlinkErrors,
    NvlinkFacts,
    PCIDeviceFacts,
    SystemFacts,
    TopologyFacts,
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
    # Tools that failed part-way: (output, what it said); the facts printed before are used.
    partial: tuple[tuple[str, str], ...] = ()
    topology: TopologyFacts | None = None  # nvidia-smi topo -m; None: not collected
    nvlinks: tuple[NvlinkFacts, ...] | None = None  # per GPU; (): no NVLink; None: not collected
    # nvidia-smi nvlink -e, read twice (reading 0, then 1); (): no NVLink; None: not collected
    nvlink_errors: tuple[NvlinkErrors, ...] | None = None
    lldp: tuple[LldpNeighbor, ...] | None = None  # lldpctl (json, keyvalue); None: not collected
    # Each local CA's port in the fabric map (ibnetdiscover), its link or none, by CA name:
    # found by the node or port GUID the host's own ibstat gives (own_links). None: no map.
    ib_links: dict[str, IbLink] | None = None

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
    try:
        # A GPU NVML cannot reach fails the run, yet the others are listed (and the lost one
        # named): read what it printed whatever its exit code.
        facts = _contained("nvidia-smi-q-x.xml", parsers.parse_nvidia_smi_xml,
                           f"{out.stdout}\n{out.stderr}")
    except parsers.ParseError as exc:
        if out.ok:
            return None, str(exc)
        message = (out.stdout or out.stderr).strip().splitlines()
        reason = message[0] if message else f"exit {out.rc}"
        return None, "nvidia-smi is not installed" if out.rc == 127 else reason
    return facts, None


def _ibstat(bundle: Bundle, missing: list[str],
            partial: list[tuple[str, str]]) -> list[HCAPortFacts]:
    """ibstat's ports; one that stopped at a CA it could not read gives the CAs before it, and
    its error goes to ``partial``."""
    out = bundle.output("ibstat.txt")
    if out is None or out.ok:
        return _parsed(parsers.parse_ibstat, bundle, "ibstat.txt", missing, [])
    text = f"{out.stdout}\n{out.stderr}"
    failure = parsers.ibstat_failure(text) or f"exit {out.rc}"
    try:
        ports = _contained("ibstat.txt", parsers.parse_ibstat, text)
    except parsers.ParseError as exc:
        missing.append(f"ibstat.txt: exit {out.rc}: {exc}")
        return []
    partial.append(("ibstat.txt", f"exit {out.rc}: {failure}"))
    return ports


def _ip_entries(text: str, kind: str) -> list[dict[str, Any]]:
    """``ip -j``'s list of objects, one per interface."""
    entries = parsers.load_json(text, kind)
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise parsers.ParseError(kind, "not a JSON list of objects")
    return entries


def _ip_field[T](entry: dict[str, Any], key: str, of: type[T], what: str) -> T | None:
    """``entry[key]`` when absent or of type ``of`` (exactly: a bool is no prefix length)."""
    value = entry.get(key)
    if value is None or type(value) is of:
        return value
    raise parsers.ParseError(what, f"{key} is {type(value).__name__}, not {of.__name__}")


def _ifname(entry: dict[str, Any], what: str) -> str:
    name = _ip_field(entry, "ifname", str, what)
    if not name:
        raise parsers.ParseError(what, "an interface without ifname")
    return name


def _address(info: Any) -> str:
    """One of ``addr_info``: "10.16.0.11/16"."""
    if not isinstance(info, dict):
        raise parsers.ParseError("ip-addr", "an addr_info entry is not an object")
    local = _ip_field(info, "local", str, "ip-addr")
    prefix = _ip_field(info, "prefixlen", int, "ip-addr")
    if local is None or prefix is None:
        raise parsers.ParseError("ip-addr", "an address without local or prefixlen")
    return f"{local}/{prefix}"


def _addresses(text: str) -> dict[str, tuple[str, ...]]:
    """``ip -j addr show``: interface -> its addresses with prefix length."""
    return {_ifname(entry, "ip-addr"): tuple(
                map(_address, _ip_field(entry, "addr_info", list, "ip-addr") or ()))
            for entry in _ip_entries(text, "ip-addr")}


def _nics(text: str, addresses: dict[str, tuple[str, ...]],
          sysfs: dict[str, str]) -> tuple[NICFacts, ...]:
    """``ip -j link show``, with each NIC's addresses and its speed from sysfs."""
    nics = []
    for link in _ip_entries(text, "ip-link"):
        name = _ifname(link, "ip-link")
        if _ip_field(link, "link_type", str, "ip-link") != "ether":
            continue  # loopback, IPoIB and tunnels are not NICs NetBox models by MAC
        speed_file = f"class/net/{name}/speed"
        # The kernel says -1 for a speed it does not know.
        speed = parsers.to_int(sysfs.get(speed_file), "sysfs", speed_file)
        nics.append(NICFacts(
            name=name, mac=(_ip_field(link, "address", str, "ip-link") or "").upper() or None,
            state=_ip_field(link, "operstate", str, "ip-link"),
            speed_mbps=speed if speed and speed > 0 else None,
            addresses=addresses.get(name, ())))
    return tuple(nics)


def _packages(text: str) -> dict[str, str]:
    """dpkg-query's "name, version, status" lines: the installed packages, held ones ("hi", as
    racklift's roles leave theirs) included; removed ones ("rc") are not."""
    installed = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[2][1:2] == "i":
            installed[parts[0]] = parts[1]
    return installed


def _services(text: str) -> dict[str, str]:
    return dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)


def _disks(text: str) -> tuple[DiskFacts, ...]:
    """``df -P -B1``: per mount point, its size and the bytes available, both in bytes."""
    disks = {}
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 6:
            continue
        size = parsers.to_int(cols[1], "df", f"{cols[5]} size")
        available = parsers.to_int(cols[3], "df", f"{cols[5]} available")
        if size is not None and available is not None:
            disks[cols[5]] = DiskFacts(cols[5], size, available)
    return tuple(disks.values())


def _contained[A, T](name: str, parse: Callable[[A], T], data: A) -> T:
    """``parse(data)``, where ``data`` is the host's output ``name``. ParseError passes as it
    is; any other exception becomes a RackliftError that names the output."""
    try:
        return parse(data)
    except parsers.ParseError:
        raise
    except Exception as exc:
        raise RackliftError(f"{name} could not be read: {type(exc).__name__}: {exc} (a "
                            "racklift bug, or output no tool writes)") from exc


def _parsed[T](parse: Callable[[str], T], bundle: Bundle, name: str, missing: list[str],
            default: T) -> T:
    """Parse one output; a missing, failed or unparsable one is recorded, not raised."""
    text = _text(bundle, name, missing)
    if text is None:
        return default
    try:
        return _contained(name, parse, text)
    except parsers.ParseError as exc:
        missing.append(f"{name}: {exc}")
        return default


def _sysfs_ports(sysfs: dict[str, str], missing: list[str]) -> list[HCAPortFacts]:
    """The InfiniBand ports as the kernel shows them under /sys/class/infiniband."""
    ib = {k: v for k, v in sysfs.items() if k.startswith("class/infiniband/")}
    try:
        return _contained("sysfs.json", parsers.parse_sysfs_infiniband, ib)
    except parsers.ParseError as exc:
        missing.append(f"sysfs.json: {exc}")
        return []


def own_links(fabric: tuple[IbLink, ...] | None,
              ports: list[HCAPortFacts]) -> dict[str, IbLink] | None:
    """The links of this host's CAs in a fabric map: the GUID (the node's, or the port's as
    `ibnetdiscover -p` prints a CA port's) and port number that its own ibstat gives pick the
    record. A node description is what a host says of itself, so it never picks one. A port
    the map shows without a link is kept as such; of a CA's ports, a linked one is its link."""
    if fabric is None:
        return None
    ours = {(guid, p.port): p.ca for p in ports if not p.is_vf
            for guid in (p.node_guid, p.port_guid) if guid}
    found: dict[str, IbLink] = {}
    for link in fabric:
        ca = ours.get((link.node_guid, link.port)) if link.node_type == "ca" else None
        if ca is not None and (link.linked or ca not in found):
            found[ca] = link
    return found


def from_bundle(bundle: Bundle) -> HostFacts:
    missing: list[str] = []
    partial: list[tuple[str, str]] = []
    nvidia, nvidia_error = _nvidia(bundle, missing)
    pci = _parsed(parsers.parse_lspci, bundle, "lspci.txt", missing, [])
    ports = _ibstat(bundle, missing, partial)
    if not ports:
        # No infiniband-diags on the host: the kernel's view is as good for state and rate.
        ports = _sysfs_ports(bundle.sysfs, missing)
    addresses = _parsed(_addresses, bundle, "ip-addr.json", missing, {})
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
        nics=_parsed(lambda text: _nics(text, addresses, bundle.sysfs), bundle,
                     "ip-link.json", missing, ()),
        os=_parsed(parsers.parse_os_release, bundle, "os-release.txt", missing, {}),
        kernel=uname.strip() if uname else None,
        packages=_parsed(_packages, bundle, "packages.txt", missing, {}),
        services=_parsed(_services, bundle, "services.txt", [], {}),
        disks=_parsed(_disks, bundle, "df.txt", missing, ()),
        kernel_events=tuple(_parsed(parsers.parse_dmesg, bundle, "dmesg.txt", missing, [])),
        # Only verify runs the container check: a bundle without it lacks nothing.
        container_check=(_parsed(parse_container_check, bundle, CONTAINER_CHECK, missing, None)
                         if bundle.output(CONTAINER_CHECK) else None),
        topology=_parsed(parsers.parse_nvidia_smi_topo, bundle, "nvidia-smi-topo.txt", missing,
                         None),
        nvlinks=_parsed(parsers.parse_nvidia_smi_nvlink, bundle, "nvidia-smi-nvlink.txt",
                        missing, None),
        nvlink_errors=_parsed(parsers.parse_nvidia_smi_nvlink_errors, bundle,
                              "nvidia-smi-nvlink-e.txt", missing, None),
        lldp=_parsed(parsers.parse_lldpctl, bundle, "lldpctl.json", missing, None),
        ib_links=own_links(_parsed(parsers.parse_ibnetdiscover, bundle, "ibnetdiscover.txt",
                                   missing, None), ports),
        not_collected=tuple(missing),
        partial=tuple(partial),
    )
