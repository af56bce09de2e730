"""What racklift's collector prints on a simulated host: the JSON document of
playbooks/files/collect.py (hostname, collected_at, sysfs_root, each command's output, the sysfs
files), made on the controller from the host's plan, its emulated hardware (racklift.lab.hwemu)
and the desired software, so that a simulated host answers the collector as a configured real
one would. Pure, but for the time in nvidia-smi's XML (hwemu's)."""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import ipaddress
import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import yaml

from racklift.ansible import script
from racklift.lab import hardware, hwemu, seed
from racklift.lab.hwemu.latency import REALISTIC, delay
from racklift.netbox import desired
from racklift.paths import REPO_ROOT
from racklift.verify import compare


def _collect_py(name: str) -> Any:
    """A constant of playbooks/files/collect.py (its commands, its sysfs globs), read from the
    file itself: it runs on hosts and is no module of this package."""
    tree = ast.parse(script("collect.py"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets
                                             if isinstance(t, ast.Name)] == [name]:
            return ast.literal_eval(node.value)
    raise LookupError(f"playbooks/files/collect.py has no {name}")


COMMANDS: dict[str, str] = _collect_py("COMMANDS")
SYSFS_GLOBS: tuple[str, ...] = _collect_py("SYSFS_GLOBS")
# The services collect.py asks systemctl about, in its order.
_ASKED = re.search(r"for s in ([^;]+);", COMMANDS["services.txt"])
SERVICES = tuple(_ASKED.group(1).split()) if _ASKED else ()
# glob's '*' never crosses a '/': the files collect.py would find in hwemu's sysfs tree.
_SYSFS = re.compile("|".join(re.escape(g).replace(r"\*", "[^/]*") for g in SYSFS_GLOBS))
NVLINK_E = "nvidia-smi-nvlink-e.txt"
NVLINK_GAP = 5.0  # collect.py's sleep between the two readings

# The OS racklift's image is (Debian 12), as its files and tools print it.
OS_RELEASE = """\
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
"""
KERNEL = "6.1.0-28-amd64"  # where the boot log names none
_BOOTED = re.compile(r"\] Linux version (\S+)")
# lscpu -J of util-linux 2.39+ (fields nested under the vendor), for a 2-socket Sapphire Rapids
LSCPU = json.dumps({"lscpu": [
    {"field": "Architecture:", "data": "x86_64"},
    {"field": "CPU(s):", "data": "224"},
    {"field": "Vendor ID:", "data": "GenuineIntel", "children": [
        {"field": "Model name:", "data": "Intel(R) Xeon(R) Platinum 8480+", "children": [
            {"field": "Core(s) per socket:", "data": "56"},
            {"field": "Socket(s):", "data": "2"}]}]}]})
MEMINFO = "MemTotal:       2113445472 kB\nMemFree:        2000000000 kB\n"
# df -P -B1 / /var: /var on the root file system, so both lines name it.
DF = "Filesystem 1-blocks Used Available Capacity Mounted on\n" + "".join(
    f"/dev/nvme0n1p2 1919850381312 214748364800 1607432990720 12% {mount}\n"
    for mount in ("/", "/"))
NOT_FOUND = 127  # sh's exit status for a command it cannot find

# Debian 12's packages every host has, and the ones racklift's roles install beside theirs:
# what dpkg-query lists besides the roles' pinned sets below.
BASE_PACKAGES = {"openssh-server": "1:9.2p1-2+deb12u3", "lldpd": "1.0.16-1+deb12u1",
                 "docker.io": "20.10.24+dfsg1-1+deb12u1", "containerd": "1.6.20~ds1-1+deb12u1"}
INBOX_RDMA = "44.0-2"  # Debian 12's rdma-core (roles/ofed/vars/Debian-12.yml)
# The ofed role's stand-ins for NVIDIA's repositories: what DOCA-OFED and MLNX_OFED install
# beside their metapackages, at the vendor's own numbering.
OFED_STANDINS = REPO_ROOT / "roles" / "ofed" / "molecule" / "default" / "standin-packages.yml"

HELD, INSTALLED = "hi ", "ii "  # dpkg's status: the roles hold what they pin

# What lldpd 1.0.16 prints (lldpctl -f json) for one neighbour: the shape of the lab capture
# tests/fixtures/lab/lldpctl-json_lab-u01-01-eno2_leaf-u01-swp2.json (a lab leaf, lldpd with
# racklift.lab.leaf's settings), its switch, port and MAC substituted per neighbour.
LLDP_NEIGHBOUR: dict[str, Any] = {
    "via": "LLDP",
    "rid": "1",
    "age": "0 day, 00:00:02",
    "chassis": {"SWITCH": {
        "id": {"type": "mac", "value": "MAC"},
        "descr": "Debian GNU/Linux 12 (bookworm) Linux 6.18.44-fc-v1045 #1 SMP "
                 "PREEMPT_DYNAMIC @0 x86_64",
        "mgmt-ip": "MGMT_IP",
        "mgmt-iface": "2",
        "capability": [{"type": "Bridge", "enabled": False},
                       {"type": "Router", "enabled": True},
                       {"type": "Wlan", "enabled": False},
                       {"type": "Station", "enabled": False}]}},
    "port": {
        "id": {"type": "ifname", "value": "PORT"},
        "descr": "PORT",
        "ttl": "8",
        "auto-negotiation": {
            "supported": False, "enabled": False,
            "current": "10GbaseT - Four-pair Category 6A or better, full duplex mode only"}},
}


def profile_for(host: seed.HostPlan, faults: Sequence[str] = (),
                seed_value: int = 1) -> hwemu.Profile:
    """The host's emulated hardware: healthy, its HCAs cabled as planned, then each fault."""
    profile = hwemu.cabled(hwemu.generate_profile(host.name, host.serial, seed=seed_value),
                           hardware.ib_cables(host.links))
    for kind in faults:
        profile = hwemu.inject(profile, kind)
    return profile


def collector_document(host: seed.HostPlan, profile: hwemu.Profile,
                       software: Mapping[str, Any], *, collected_at: float) -> dict[str, Any]:
    """collect.py's document from `host` with this hardware, configured as `software` (the
    config context's `racklift` value) asks. The board is the seed's device type, whose
    context (`hardware`) NetBox renders in unless `software` has its own."""
    state, _ = desired.read({"hardware": seed.DEVICE_TYPE["hardware"], **software})
    packages = _packages(state)
    # As on a lab host, nvidia-smi answers with the installed driver (but under the
    # driver-version-wrong fault); a copy only where that changes the profile.
    installed = hwemu.installed_driver(packages)
    if installed != profile.driver_version:
        profile = hwemu.with_installed_driver(profile, installed)
    given: dict[str, Callable[[], str]] = {
        "ip-link.json": lambda: json.dumps(_links(host, profile)),
        "ip-addr.json": lambda: json.dumps(_addresses(host, profile, state)),
        "lscpu.json": lambda: LSCPU,
        "meminfo.txt": lambda: MEMINFO,
        "os-release.txt": lambda: OS_RELEASE,
        "uname.txt": lambda: f"{_kernel(profile)}\n",
        "packages.txt": lambda: packages,
        "services.txt": lambda: _services(state),
        "df.txt": lambda: DF,
        "lldpctl.json": lambda: _lldp(host, profile),
    }
    outputs = {}
    for name, command in COMMANDS.items():
        if name in given:
            outputs[name] = _output(command, given[name]())
        elif name == NVLINK_E:
            outputs[name] = _nvlink_errors(profile, command, collected_at)
        else:
            outputs[name] = _tool(profile, command)
    return {"hostname": host.name, "collected_at": collected_at, "sysfs_root": "/sys",
            "outputs": outputs,
            "sysfs": {k: v.strip() for k, v in hwemu.sysfs_tree(profile).items()
                      if _SYSFS.fullmatch(k)}}


def _output(command: str, stdout: str, rc: int = 0, stderr: str = "",
            seconds: float = 0.0) -> dict[str, Any]:
    return {"command": command, "rc": rc, "seconds": round(seconds, 3), "stdout": stdout,
            "stderr": stderr}


def _tool(profile: hwemu.Profile, command: str) -> dict[str, Any]:
    """A one-tool command as a lab host runs it (hwemu's tool: its output, exit status and
    stderr), taking as long as the real tool; a tool hwemu has not is not installed."""
    tool, *args = shlex.split(command)
    if tool not in hwemu.TOOLS:
        return _output(command, "", NOT_FOUND, f"sh: 1: {tool}: not found\n")
    seconds = delay(REALISTIC, tool, args)
    try:
        return _output(command, hwemu.TOOLS[tool](profile, args), seconds=seconds)
    except hwemu.ToolExit as exc:
        return _output(command, exc.stdout, exc.code, exc.stderr, seconds)


def _nvlink_errors(profile: hwemu.Profile, command: str, collected_at: float) -> dict[str, Any]:
    """The two readings NVLINK_GAP apart, the second as the document is made; the first
    failing ends the command (&&), as nvidia-smi fails (no driver, a GPU lost)."""
    first, _, _ = command.partition(" && ")
    run = _tool(profile, first)
    if run["rc"] != 0:
        return {**run, "command": command}
    readings = "".join(hwemu.nvidia_smi_nvlink_errors(profile, now=at)
                       for at in (collected_at - NVLINK_GAP, collected_at))
    return _output(command, readings, seconds=2 * run["seconds"] + NVLINK_GAP)


def _kernel(profile: hwemu.Profile) -> str:
    """The kernel the boot log says is running."""
    booted = next((m[1] for line in profile.kernel_log[:5] if (m := _BOOTED.search(line))),
                  None)
    return booted or KERNEL


def _nics(host: seed.HostPlan, profile: hwemu.Profile) -> list[tuple[str, str]]:
    """The host's NICs and their MACs (lower case, as ip prints them); under mac-swapped the
    provisioning NIC has the in-band one's, as if their cables were swapped (as in the lab)."""
    macs = dict(host.macs)
    if profile.mac_swapped and seed.INBAND in macs:
        macs[seed.PROVISIONING] = macs[seed.INBAND]
    return [(name, macs[name].lower()) for name in (seed.PROVISIONING, seed.INBAND)
            if name in macs]


def _links(host: seed.HostPlan, profile: hwemu.Profile) -> list[dict[str, Any]]:
    """ip -j link show (iproute2 6.1): the loopback, then the NICs."""
    loopback = {"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"],
                "mtu": 65536, "qdisc": "noqueue", "operstate": "UNKNOWN", "linkmode": "DEFAULT",
                "group": "default", "txqlen": 1000, "link_type": "loopback",
                "address": "00:00:00:00:00:00", "broadcast": "00:00:00:00:00:00"}
    return [loopback, *({"ifindex": index, "ifname": name,
                         "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"], "mtu": 1500,
                         "qdisc": "mq", "operstate": "UP", "linkmode": "DEFAULT",
                         "group": "default", "txqlen": 1000, "link_type": "ether",
                         "address": mac, "broadcast": "ff:ff:ff:ff:ff:ff"}
                        for index, (name, mac) in enumerate(_nics(host, profile), start=2))]


def _addresses(host: seed.HostPlan, profile: hwemu.Profile,
               state: desired.DesiredState) -> list[dict[str, Any]]:
    """ip -j addr show: each link as ip link shows it, with its addresses: the loopback's,
    and the primary IP on the provisioning interface."""
    forever = {"valid_life_time": 4294967295, "preferred_life_time": 4294967295}
    primary = ipaddress.ip_interface(host.primary_ip)
    held = {"lo": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8, "scope": "host",
                    "label": "lo", **forever}],
            state.provisioning_interface: [{
                "family": "inet", "local": str(primary.ip), "prefixlen": primary.network.prefixlen,
                "broadcast": str(primary.network.broadcast_address), "scope": "global",
                "label": state.provisioning_interface, **forever}]}
    return [{**{k: v for k, v in link.items() if k != "linkmode"},
             "addr_info": held.get(link["ifname"], [])}
            for link in _links(host, profile)]


def _packages(state: desired.DesiredState) -> str:
    """dpkg-query's lines for what the roles installed as `state` asks (Debian 12, as
    roles/*/vars/Debian-12.yml name them) beside the base system's: the driver (its branch's
    metapackage for the kernel modules asked, the driver's parts, fabric manager where wanted),
    the RDMA stack of the OFED source (its own package, the one the gate reads the pin from:
    racklift.verify.compare.OFED_PACKAGE) and the container toolkit where managed."""
    driver = state.nvidia_driver
    version = f"{_driver_version(driver)}-1"  # NVIDIA's CUDA repository's revision
    held = {("nvidia-open-" if driver.kernel_modules == "open" else "cuda-drivers-")
            + driver.branch: version}
    parts = {"nvidia-kernel-open-dkms" if driver.kernel_modules == "open"
             else "nvidia-kernel-dkms": version,
             "nvidia-driver": version, "nvidia-smi": version, "libcuda1": version,
             "nvidia-persistenced": version}
    if state.fabric_manager:
        held[f"nvidia-fabricmanager-{driver.branch}"] = version
    ofed = state.ofed
    if ofed.source == "inbox":
        held |= dict.fromkeys(("rdma-core", "ibverbs-utils", "infiniband-diags"),
                              _concrete(ofed.version) if ofed.version else INBOX_RDMA)
    elif ofed.version:  # doca and mlnx_ofed need one (preflight)
        # The source's metapackage at its pin, and what it brings at the vendor's own
        # numbering (the ofed role's Molecule stand-ins, shaped on NVIDIA's repositories).
        held |= {compare.OFED_PACKAGE[ofed.source]: _concrete(ofed.version)}
        held |= _vendor_rdma()
    toolkit = state.container_toolkit.version
    if toolkit:  # NVIDIA's revision, as inventory/group_vars/all/node_roles.yml pins it
        held |= dict.fromkeys(("nvidia-container-toolkit", "nvidia-container-toolkit-base",
                               "libnvidia-container1", "libnvidia-container-tools"),
                              f"{toolkit}-1")
    rows = {**{p: (v, INSTALLED) for p, v in (BASE_PACKAGES | parts).items()},
            **{p: (v, HELD) for p, v in held.items()}}
    return "".join(f"{p}\t{v}\t{status}\n" for p, (v, status) in sorted(rows.items()))


@functools.cache
def _vendor_rdma() -> dict[str, str]:
    metapackages = {"doca-ofed", "mlnx-ofed-basic", "mlnx-ofed-all"}
    return {p["name"]: str(p["version"])
            for p in yaml.safe_load(OFED_STANDINS.read_text())["packages"]
            if p["name"] not in metapackages}


def _driver_version(driver: desired.NvidiaDriver) -> str:
    """The version the nvidia_driver role installs; without one, the newest of the branch:
    hwemu's driver where it is of the branch."""
    if driver.version:
        return driver.version
    if hwemu.DEFAULT_DRIVER.startswith(f"{driver.branch}."):
        return hwemu.DEFAULT_DRIVER
    return f"{driver.branch}.0.0"


def _concrete(pattern: str) -> str:
    """An apt version the pin `pattern` takes ("24.10-*" -> "24.10-0")."""
    prefix = pattern.removesuffix("*")
    return f"{prefix}0" if prefix[-1:] in "-.+~:" else prefix


def _services(state: desired.DesiredState) -> str:
    """systemctl is-active of each: fabric manager only where wanted (else no unit, which
    systemctl calls inactive); persistenced and the engine as the roles start them."""
    active = {"nvidia-persistenced", "docker", "containerd"}
    if state.fabric_manager:
        active.add("nvidia-fabricmanager")
    return "".join(f"{s}\t{'active' if s in active else 'inactive'}\n" for s in SERVICES)


def _switch_mac(switch: str) -> str:
    """A switch's chassis MAC: locally administered, the same for every host that hears it."""
    return ":".join(f"{b:02x}" for b in (0x4E, *hashlib.blake2b(
        switch.encode(), digest_size=5).digest()))


def _link_local(mac: str) -> str:
    """The EUI-64 link-local address lldpd gives as the switch's management address."""
    b = bytes.fromhex(mac.replace(":", ""))
    return str(ipaddress.IPv6Address(bytes([0xFE, 0x80, *[0] * 6, b[0] ^ 2, b[1], b[2],
                                            0xFF, 0xFE, b[3], b[4], b[5]])))


def _neighbour(switch: str, port: str) -> dict[str, Any]:
    body = copy.deepcopy(LLDP_NEIGHBOUR)
    chassis = body["chassis"].pop("SWITCH")
    mac = _switch_mac(switch)
    chassis["id"]["value"], chassis["mgmt-ip"] = mac, _link_local(mac)
    body["chassis"][switch] = chassis
    body["port"]["id"]["value"] = body["port"]["descr"] = port
    return body


def _heard(host: seed.HostPlan, profile: hwemu.Profile, name: str) -> tuple[str, str] | None:
    """The neighbour lldpd hears on `name`: as planned, but for the in-band cable under the
    lab's Ethernet faults (racklift.lab.hardware moves the real cable the same way)."""
    switch, port = host.links[name]
    if name == seed.INBAND:
        moved = hwemu.inband_port(port, profile.faults)
        return None if moved is None else (switch, moved)
    return switch, port


def _lldp(host: seed.HostPlan, profile: hwemu.Profile) -> str:
    """lldpctl -f json: each cabled Ethernet port's neighbour. lldpd's json collapses one
    interface to an object, several to a list of one-key objects."""
    heard = [{name: _neighbour(*peer)} for name in (seed.PROVISIONING, seed.INBAND)
             if name in host.links and (peer := _heard(host, profile, name))]
    interfaces: dict[str, Any] | list[dict[str, Any]] = heard[0] if len(heard) == 1 else heard
    return json.dumps({"lldp": {"interface": interfaces} if heard else {}}, indent=2) + "\n"
