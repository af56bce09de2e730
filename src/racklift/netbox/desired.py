"""The desired state of a host, typed: what racklift makes of it, read once from NetBox.

NetBox keeps it in the device's rendered config context under `racklift`: the desired software
in contexts scoped by role, site or platform; what the hardware is (`hardware`) in a context
assigned to the device type; what is the device's own (`os_disk`) in its local context data.
`parse` checks every value it knows against what racklift accepts and fills in the defaults:
the defaults of the dataclasses below, and nowhere else. The gate, the pipeline and the node
roles' variables (through the inventory's `racklift_desired`) read only its result. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from functools import cache
from typing import Any

from racklift.facts.observed import DCGM_TEST_LEVELS
from racklift.imaging.deploy_data import DISK_HINT, IMAGE_NAME_RE, disk_identity
from racklift.imaging.diskimage import IMAGE_NAME

CONTEXT_KEY = "racklift"  # where the desired state lives in a device's rendered config context
# The device role netbox.bootstrap makes for the switches GPU servers are cabled to.
ROLE_LEAF_SWITCH = "leaf-switch"
FIELD_PREFIX = f"config_context.{CONTEXT_KEY}"
# What the device type (`hardware`, its firmware and BIOS pins: racklift.bmc.firmware) or the
# device itself (`os_disk`) records: not desired software, so no context for the host's role,
# site or platform is one of these alone.
RECORD_KEYS = frozenset({"hardware", "firmware", "bios", "os_disk"})


@dataclass(frozen=True)
class Rule:
    """What a value must be: `accepts` it, or it is null where null means "not managed"."""

    accepts: Callable[[Any], bool]
    fix: str  # what to do about a value it does not accept
    nullable: bool = False


def text(pattern: str, wanted: str, nullable: bool = False) -> Rule:
    """A string matching `pattern` in full; `wanted` says what that is."""
    compiled = re.compile(pattern)
    return Rule(lambda v: isinstance(v, str) and compiled.fullmatch(v) is not None,
                f"set it to {wanted}", nullable)


def flag(wanted: str, nullable: bool = False) -> Rule:
    return Rule(lambda v: isinstance(v, bool), f"set it to {wanted}", nullable)


def seconds(low: int, high: int) -> Rule:
    return Rule(lambda v: type(v) is int and low <= v <= high,
                f"set it to whole seconds from {low} to {high}")


def _is_disk(value: Any) -> bool:
    """A whole disk the deploy ramdisk can find (deploy_data.disk_identity)."""
    if not isinstance(value, str):
        return False
    try:
        disk_identity(value)
    except ValueError:
        return False
    return True


def setting(default: Any, rule: Rule) -> Any:
    """A field of the desired state: its default, and the rule a context's value must meet."""
    return field(default=default, metadata={"rule": rule})


# Jinja's markers: a value that becomes a command or a URL on a host is refused with one, so
# no Ansible that templates a variable (ansible-core before 2.19 did, for plugin values) runs it.
TEMPLATE_MARKERS = ("{{", "{%", "{#")


def _is_command(value: Any) -> bool:
    """An argv: words, never a shell line (the host runs it without a shell) or a template."""
    return (isinstance(value, list | tuple) and 0 < len(value) <= 16
            and all(isinstance(w, str) and 0 < len(w) <= 256 and "\0" not in w
                    and not any(m in w for m in TEMPLATE_MARKERS) for w in value))


# An apt source's URL from a NetBox record: https (the record is only as safe as its least
# careful editor; the controller's own group vars may use http or file:), and nothing that
# could end the sources line (whitespace, quotes), add options to it ('[') or be a template
# ('{', '}': never unencoded in a URL).
URL = r"https://[^\s\"'\\\[\]{}]+"
DRIVER_VERSION = r"[0-9]+\.[0-9]+\.[0-9]+"


@dataclass(frozen=True)
class NvidiaDriver:
    branch: str = setting("550", text(r"[0-9]+", "a driver branch, digits only, e.g. \"550\""))
    # None: the newest of the branch, and the gate does not check the version.
    version: str | None = setting(None, text(
        DRIVER_VERSION, "an exact driver version of the branch, e.g. \"550.127.08\", or null "
        "for the newest of the branch", nullable=True))
    kernel_modules: str = setting("open", text("open|proprietary", "open or proprietary"))
    # None: fabric manager where the device type has NVSwitches (see fabric_manager).
    fabricmanager: bool | None = setting(None, flag(
        "true or false, or null for the device type's racklift.hardware.nvswitch",
        nullable=True))


@dataclass(frozen=True)
class Ofed:
    source: str = setting("inbox", text("inbox|doca|mlnx_ofed", "inbox (the distribution's "
                                        "rdma-core), doca (DOCA-OFED) or mlnx_ofed (MLNX_OFED)"))
    # None: inbox's rdma-core of the OS release; the gate does not check it.
    version: str | None = setting(None, text(
        r"[0-9][0-9A-Za-z.+~:-]*\*?", "the apt version of the source's own package (doca: "
        "doca-ofed, e.g. \"2.9.1-1\"; mlnx_ofed: mlnx-ofed-basic, e.g. "
        "\"24.10-OFED.24.10.1.1.4.1\"; inbox: rdma-core) ('*' at the end allowed), or null",
        nullable=True))
    repo_url: str | None = setting(None, text(
        URL, "the vendor's apt repository as an https URL, or null", nullable=True))
    repo_key_url: str | None = setting(None, text(
        URL, "the repository's signing key as an https URL, or null", nullable=True))
    # Required with repo_url: the key is installed only when it is this one (apt_vendor).
    repo_key_fingerprint: str | None = setting(None, text(
        r"[0-9A-F]{40}|[0-9A-F]{64}", "the signing key's fingerprint as the vendor publishes "
        "it, 40 (or 64) upper-case hex digits without spaces, or null", nullable=True))
    # The HCAs' firmware is pinned with the rest of the firmware: racklift.firmware.HCA
    # (racklift.bmc.firmware), one place for the BMC's view and the host's.


@dataclass(frozen=True)
class ContainerToolkit:
    # None: the toolkit is not managed on this host (neither installed nor checked).
    version: str | None = setting("1.17.3", text(
        r"[0-9]+(\.[0-9]+)+(~rc\.[0-9]+)?", "the NVIDIA container toolkit version, e.g. "
        "\"1.17.3\", or null where racklift does not manage it", nullable=True))


@dataclass(frozen=True)
class RegistryMirror:
    # None: no mirror; pulls go to the upstream registries.
    url: str | None = setting(None, text(
        r"https?://[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?/?",
        "the mirror as http(s)://host[:port] with no path (what "
        "Docker and containerd take), e.g. \"https://mirror.example:5000\", or null",
        nullable=True))
    # The gate's GPU container through the mirror: a Docker Hub image (Docker mirrors Docker
    # Hub only, so no registry host), the command it runs, and whether with --gpus all.
    check_image: str = setting("nvidia/cuda:12.4.1-base-ubuntu22.04", text(
        r"(docker\.io/)?[a-z0-9][a-z0-9_-]*(/[a-z0-9][a-z0-9._-]*)*"
        r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?",
        "a Docker Hub image, e.g. \"nvidia/cuda:12.4.1-base-ubuntu22.04\""))
    check_command: tuple[str, ...] = setting(("nvidia-smi", "-L"), Rule(
        _is_command, "set it to the command as a list of 1 to 16 words, e.g. "
        "[\"nvidia-smi\", \"-L\"]"))
    check_gpus: bool = setting(True, flag("true to run it with --gpus all (GPU servers), or "
                                          "false"))


@dataclass(frozen=True)
class Hardware:
    """What the device type has (a config context assigned to the device type)."""

    nvswitch: bool = setting(False, flag("true for HGX/DGX boards with NVSwitches, else false"))
    # Power-on to the network boot's DHCP request: the firmware's POST, minutes on HGX
    # servers. The image stage waits this long for the request, and again for the reboot
    # into the image.
    boot_timeout: int = setting(180, seconds(10, 3600))
    # What the gate expects of the board's links (nvidia-smi topo -m and nvlink -s); null: not
    # checked. A new SKU is a config context, not code.
    gpu_link: str | None = setting(None, text(
        r"NV[0-9]{1,3}|PIX|PXB|PHB|NODE|SYS", "how every pair of GPUs is connected, as "
        "`nvidia-smi topo -m` prints it, e.g. \"NV18\" on an HGX H100 board, or null",
        nullable=True))
    nic_affinity: str | None = setting(None, text(
        "PIX|PXB|PHB|NODE", "the farthest each GPU's nearest NIC may be, as `nvidia-smi topo "
        "-m` prints it, e.g. \"PXB\" (a GPU and its HCA behind one PCIe switch), or null",
        nullable=True))
    nvlinks: int | None = setting(None, Rule(
        lambda v: type(v) is int and 1 <= v <= 64,
        "set it to the active NVLinks per GPU, 1 to 64 (18 on H100 SXM), or null", True))
    nvlink_speed: float | None = setting(None, Rule(
        lambda v: type(v) in (int, float) and 0 < v <= 1000,
        "set it to each NVLink's speed in GB/s as `nvidia-smi nvlink -s` prints it, e.g. "
        "26.562, or null", True))
    # Xids a host of this type may have logged and still be admitted: at admission any other
    # Xid outside NVIDIA's RESTART_APP bucket refuses the host (racklift.facts.xid).
    tolerated_xids: tuple[int, ...] = setting((), Rule(
        lambda v: isinstance(v, list) and len(v) <= 64
        and all(type(x) is int and 0 < x < 1000 for x in v),
        "set it to a list of at most 64 Xid numbers that a host of this type may have logged "
        "and still be admitted, e.g. [144, 145], or []"))
    # Whether the switches this type's Ethernet ports are cabled to speak LLDP: then a port
    # whose link is up and hears no one refuses the host, as does no LLDP collected. True
    # unless set: a cable the gate cannot check is no cable it admits.
    lldp_switches: bool = setting(True, flag(
        "true where the Ethernet switches of this type's hosts send LLDP, false where they "
        "do not (a silent port then warns)"))


_SLUG = re.compile(r"[-a-zA-Z0-9_]{1,100}")  # a NetBox slug, as its SlugField takes one


@dataclass(frozen=True)
class Cabling:
    """Where a host's cables may end (a context scoped to the site or the role)."""

    # The device roles (slugs) of the switches the hosts' ports are cabled to: `verify
    # --record-cables` takes a far end only among the devices of these roles in the host's own
    # site, so a host naming another server (or a switch elsewhere) gets no cable to it. The
    # default is the role netbox.bootstrap makes (the lab seeds its switches with it); []
    # records no cable.
    switch_roles: tuple[str, ...] = setting((ROLE_LEAF_SWITCH,), Rule(
        lambda v: isinstance(v, list) and len(v) <= 32
        and all(isinstance(s, str) and _SLUG.fullmatch(s) for s in v),
        "set it to a list of at most 32 device role slugs of the switches hosts are cabled "
        "to, e.g. [\"leaf-switch\", \"ib-leaf\"], or [] to record no cable"))


def _positive(high: float) -> Callable[[Any], bool]:
    return lambda v: type(v) in (int, float) and 0 < v <= high


@dataclass(frozen=True)
class Acceptance:
    """What a host must show under load before it joins: a config context, usually on the
    device type, so a SKU's thresholds are data. Null: that test is not run."""

    dcgm_level: int | None = setting(None, Rule(
        lambda v: type(v) is int and 1 <= v <= 4,
        "set it to `dcgmi diag`'s run level, 1 (seconds) to 4 (hours), or null", True))
    nccl_busbw: float | None = setting(None, Rule(
        _positive(10_000), "set it to the least average bus bandwidth in GB/s that nccl-tests' "
        "all_reduce_perf must reach across the host's GPUs (e.g. 350 on 8x H100 SXM), or null",
        True))
    rdma_gbps: float | None = setting(None, Rule(
        _positive(10_000), "set it to the least average bandwidth in Gb/s that ib_write_bw "
        "must reach on each HCA port (e.g. 370 on NDR), or null", True))
    # The DCGM tests that must run and pass, by the names `dcgmi diag -r` takes: DCGM skips a
    # test it cannot run (on some GPUs, or without its package), and a skip is no pass.
    # Null: the level's DCGM_DEFAULTS.
    dcgm_required: tuple[str, ...] | None = setting(None, Rule(
        lambda v: isinstance(v, list) and len(v) <= 16
        and all(isinstance(t, str) and t in DCGM_TEST_LEVELS for t in v),
        f"set it to a list of DCGM's test names ({', '.join(DCGM_TEST_LEVELS)}), e.g. "
        "[\"software\", \"pcie\"], or null for the level's defaults", True))
    # dcgm_required's default at each level, with the levels below it: what DCGM 3.x and 4.x
    # run on every datacenter GPU (not the EUD, a package of its own, nor 2.x's SM Stress).
    DCGM_DEFAULTS = (("software",), ("pcie", "memory"),
                     ("diagnostic", "targeted_stress", "targeted_power", "memory_bandwidth"),
                     ("pulse_test", "memtest"))

    @property
    def dcgm_tests(self) -> tuple[str, ...]:
        """The DCGM tests that must run and pass: dcgm_required, else the level's defaults."""
        if self.dcgm_level is None:
            return ()
        if self.dcgm_required is not None:
            return self.dcgm_required
        return tuple(t for level in self.DCGM_DEFAULTS[:self.dcgm_level] for t in level)

    @property
    def asks(self) -> bool:
        """Whether any test is to run: a host whose context asks none is admitted on verify."""
        return any(v is not None for v in (self.dcgm_level, self.nccl_busbw, self.rdma_gbps))


@dataclass(frozen=True)
class DesiredState:
    provisioning_interface: str = setting("eno1", text(
        r"[A-Za-z0-9][A-Za-z0-9_./:-]{0,63}", "the name of the device's interface that "
        "network-boots and holds the primary IP, e.g. \"eno1\""))
    os_image: str = setting(IMAGE_NAME, text(
        IMAGE_NAME_RE.pattern, f"the name of the image racklift builds, \"{IMAGE_NAME}\", or "
        "of an OS installer racklift runs, e.g. \"installer-debian-12\""))
    # The disk the image is written to, in the device's local context data; None: not
    # recorded, and the image stage refuses the host.
    os_disk: str | None = setting(None, Rule(_is_disk, DISK_HINT, nullable=True))
    nvidia_driver: NvidiaDriver = NvidiaDriver()
    ofed: Ofed = Ofed()
    container_toolkit: ContainerToolkit = ContainerToolkit()
    registry_mirror: RegistryMirror = RegistryMirror()
    hardware: Hardware = Hardware()
    cabling: Cabling = Cabling()
    acceptance: Acceptance = Acceptance()

    @property
    def fabric_manager(self) -> bool:
        """Whether the host runs NVIDIA fabric manager: the context's override, else whether
        the device type has NVSwitches."""
        override = self.nvidia_driver.fabricmanager
        return self.hardware.nvswitch if override is None else override


@dataclass(frozen=True)
class Invalid:
    """A value of the context racklift cannot take: the field's path and what to do."""

    field: str
    message: str


def read(context: Any) -> tuple[DesiredState, list[Invalid]]:
    """The desired state in a rendered config context's `racklift` value (None: no context),
    and every value that is wrong in it, each left at its default in the state. Keys racklift
    does not know are left alone."""
    problems: list[Invalid] = []
    state = _section(DesiredState, {} if context is None else context, FIELD_PREFIX, problems)
    version = state.nvidia_driver.version
    if version and not version.startswith(f"{state.nvidia_driver.branch}."):
        problems.append(Invalid(f"{FIELD_PREFIX}.nvidia_driver.version", (
            f"{version} is not a version of branch {state.nvidia_driver.branch}: set the "
            "branch and the version together")))
    ofed = state.ofed
    if ofed.repo_url and not (ofed.repo_key_url and ofed.repo_key_fingerprint):
        problems.append(Invalid(f"{FIELD_PREFIX}.ofed.repo_key_fingerprint", (
            "a repository from NetBox needs its signing key pinned: set repo_key_url and "
            "repo_key_fingerprint (the fingerprint the vendor publishes) with repo_url")))
    return state, problems


def parse(context: Any) -> DesiredState | list[Invalid]:
    """The desired state, or what is wrong in the context (see `read`)."""
    state, problems = read(context)
    return problems or state


def setting_of(context: Any, name: str) -> Any:
    """One top-level value of a context (not a section) where its rule takes it, else its
    default: what the reader needs before the state (`read` says what is wrong)."""
    rule, default = _top_level()[name]
    value = context.get(name, default) if isinstance(context, dict) else default
    return value if (value is None and rule.nullable) or rule.accepts(value) else default


@cache
def _top_level() -> dict[str, tuple[Rule, Any]]:
    return {f.name: (f.metadata["rule"], f.default) for f in fields(DesiredState)
            if "rule" in f.metadata}


# A field of a section: its name, and the rule its value must meet or the section it is.
Spec = tuple[str, Rule | None, type | None]


@cache
def _specs(cls: type) -> tuple[Spec, ...]:
    return tuple((f.name, f.metadata.get("rule"),
                  type(f.default) if is_dataclass(f.default) else None) for f in fields(cls))


def _section[T](cls: type[T], data: Any, path: str, problems: list[Invalid]) -> T:
    if not isinstance(data, dict):  # JSON's mappings
        problems.append(Invalid(path, f"is {data!r}: make it a mapping of keys to values, or "
                                      "remove it for racklift's defaults"))
        return cls()
    values: dict[str, Any] = {}
    for name, rule, section in _specs(cls):
        if name not in data:
            continue  # the default
        value = data[name]
        if section is not None:
            values[name] = _section(section, value, f"{path}.{name}", problems)
        elif (value is None and rule.nullable) or (value is not None and rule.accepts(value)):
            values[name] = tuple(value) if isinstance(value, list) else value  # immutable
        else:  # the default stands; the problem says why
            problems.append(Invalid(f"{path}.{name}", f"is {value!r}: {rule.fix}"))
    return cls(**values)


def has_software(context: Any) -> bool:
    """Whether a context says anything of the desired software (not only what the device
    type or the device records)."""
    return isinstance(context, dict) and bool(set(context) - RECORD_KEYS)


def role_vars(state: DesiredState) -> dict[str, Any]:
    """What the node roles read of the desired state, as plain data (the inventory's host var
    `racklift_desired`; inventory/group_vars/all/node_roles.yml maps it onto the roles'
    variables). The image stage's part (OS image and disk, boot timeout) is not theirs."""
    driver = asdict(replace(state.nvidia_driver, fabricmanager=state.fabric_manager))
    return {"nvidia_driver": driver, "ofed": asdict(state.ofed),
            "container_toolkit": asdict(state.container_toolkit),
            # Lists, not tuples: Ansible's templates add lists to it.
            "registry_mirror": {**asdict(state.registry_mirror),
                                "check_command": list(state.registry_mirror.check_command)},
            "hardware": {"nvswitch": state.hardware.nvswitch}}
