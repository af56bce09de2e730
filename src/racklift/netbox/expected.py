"""The expected state of a host, as NetBox records it: typed, immutable, free of pynetbox."""

from __future__ import annotations

from dataclasses import InitVar, asdict, dataclass, field
from typing import Any

from racklift.netbox.desired import CONTEXT_KEY as CONTEXT_KEY
from racklift.netbox.desired import DesiredState, parse

GPU_ROLE = "gpu"  # inventory item role slug of GPU inventory items and their templates


@dataclass(frozen=True)
class Problem:
    """A record that is incomplete for racklift: which host, which field, what to do."""

    host: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.host}: {self.field}: {self.message}"


@dataclass(frozen=True)
class DeviceTypeRef:
    manufacturer: str
    model: str
    slug: str
    part_number: str | None = None


# NetBox InfiniBand interface types → the speed a 4X link of the type trains at, as the fabric
# tools name it, and its rate in Gb/s, as ibstat reports it.
IB_LINK_TYPES = {"infiniband-sdr": ("SDR", 10), "infiniband-ddr": ("DDR", 20),
                 "infiniband-qdr": ("QDR", 40), "infiniband-fdr10": ("FDR10", 40),
                 "infiniband-fdr": ("FDR", 56), "infiniband-edr": ("EDR", 100),
                 "infiniband-hdr": ("HDR", 200), "infiniband-ndr": ("NDR", 400),
                 "infiniband-xdr": ("XDR", 800)}


@dataclass(frozen=True)
class LinkPeer:
    """The far end of an interface's cable in NetBox: a switch (or other device) port."""

    device: str
    port: str
    wwn: str | None = None  # an InfiniBand switch's GUID, where NetBox keeps it on the port

    def __str__(self) -> str:
        return f"{self.device} {self.port}"


@dataclass(frozen=True)
class ExpectedInterface:
    name: str
    type: str
    mgmt_only: bool
    enabled: bool
    mac: str | None  # the interface's primary MAC address object, upper case
    ips: tuple[str, ...] = ()  # addresses with prefix length, e.g. "10.16.0.11/16"
    peer: LinkPeer | None = None  # where its cable ends; None: NetBox records no cable
    label: str | None = None  # e.g. the CA's name where the interface is named by netdev
    wwn: str | None = None  # an InfiniBand port's GUID, where NetBox keeps it ("WWN")

    @property
    def is_infiniband(self) -> bool:
        return self.type.startswith("infiniband-")


@dataclass(frozen=True)
class ExpectedGPU:
    """One GPU slot of the device type; the serial once NetBox records it on the device."""

    name: str
    manufacturer: str
    part_id: str
    serial: str | None = None


class Reachable:
    """A host record with a primary IP (with its prefix length, as NetBox keeps it)."""

    primary_ip: str | None

    @property
    def address(self) -> str | None:
        """The primary IP without its prefix length: what Ansible connects to."""
        return self.primary_ip.split("/")[0] if self.primary_ip else None


class Desired:
    """A host record with its config context, whose desired state it parses on creation (so
    the state always is its context's): `parsed`, where given, is that parse done already
    (the reader's, when it adds the problems it found to the host)."""

    config: dict[str, Any]
    desired: DesiredState | None

    def __post_init__(self, parsed: DesiredState | None) -> None:
        if parsed is None:
            state = parse(self.config)
            parsed = state if isinstance(state, DesiredState) else None
        object.__setattr__(self, "desired", parsed)


@dataclass(frozen=True)
class ExpectedHost(Reachable, Desired):
    name: str
    netbox_id: int
    status: str
    site: str
    rack: str | None
    position: float | None
    role: str | None
    platform: str | None
    device_type: DeviceTypeRef
    serial: str | None
    asset_tag: str | None
    primary_ip: str | None
    primary_ip_interface: str | None
    oob_ip: str | None
    oob_interface: str | None
    provisioning_interface: str
    interfaces: tuple[ExpectedInterface, ...]
    gpus: tuple[ExpectedGPU, ...]
    config: dict[str, Any] = field(default_factory=dict)  # the context's `racklift` value
    tags: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    # What `config` asks for, typed and with racklift's defaults, parsed from it on creation;
    # None when it does not parse (`problems` say why).
    desired: DesiredState | None = field(init=False)
    parsed: InitVar[DesiredState | None] = None

    @property
    def provisioning_mac(self) -> str | None:
        iface = self.interface(self.provisioning_interface)
        return iface.mac if iface else None

    def has_interface(self, name: str) -> bool | None:
        return self.interface(name) is not None

    @property
    def ib_ports(self) -> tuple[ExpectedInterface, ...]:
        return tuple(i for i in self.interfaces if i.is_infiniband)

    def interface(self, name: str) -> ExpectedInterface | None:
        return next((i for i in self.interfaces if i.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["address"] = self.address
        data["provisioning_mac"] = self.provisioning_mac
        data["problems"] = [asdict(p) for p in self.problems]
        return data


@dataclass(frozen=True)
class InventoryHost(Reachable, Desired):
    """What Ansible needs of a host, a lighter read than ExpectedHost: who and where it is, how
    to reach it, its MAC and IP addresses by interface, and its desired state. Only
    interfaces holding an address are read, so neither their types nor the GPUs are known."""

    name: str
    netbox_id: int
    status: str
    site: str
    rack: str | None
    role: str | None
    platform: str | None
    serial: str | None
    primary_ip: str | None
    primary_ip_interface: str | None
    oob_ip: str | None
    provisioning_interface: str
    macs: dict[str, str] = field(default_factory=dict)  # interface → primary MAC, upper case
    ips: dict[str, tuple[str, ...]] = field(default_factory=dict)  # interface → addresses
    config: dict[str, Any] = field(default_factory=dict)  # as ExpectedHost's
    tags: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    desired: DesiredState | None = field(init=False)  # as ExpectedHost's
    parsed: InitVar[DesiredState | None] = None

    @property
    def provisioning_mac(self) -> str | None:
        return self.macs.get(self.provisioning_interface)

    def has_interface(self, name: str) -> bool | None:
        """True for an interface holding an address; None (unknown) for any other name."""
        return True if name in self.macs or name in self.ips else None
