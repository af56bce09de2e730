"""The lab's Ethernet leaf switches (lab only), so the cabling gate hears real LLDP.

Each leaf the lab's cable plan names is a container with no network of its own, running lldpd
under the switch's NetBox name. A host's in-band port is one end of a veth pair whose other
end sits in the leaf's network namespace, named after the NetBox switch port (`swp4`): the
host's lldpd then hears `leaf-l01 swp4`, as it would from a real leaf. Recabling (faults, heal)
deletes the pair and makes it again, so the host's lldpd forgets the old neighbour at once.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from racklift import podman
from racklift.errors import LabError
from racklift.facts.parsers import ParseError, parse_lldpctl_json

LEAF_LABEL = "racklift.lab.leaf"  # its value: the switch's NetBox name
PLAN_LABEL = "racklift.lab.inband"  # on a host: its in-band port's planned leaf and port
# The port id is the port's name, as Cumulus and SONiC send it. Every 2 s rather than a
# switch's 30 s: a lab host hears its leaf (and a recabled port) within seconds.
LLDPD_CONF = ("configure system hostname {name}\n"
              "configure lldp portidsubtype ifname\n"
              "configure lldp tx-interval 2\n")
HEARD_TIMEOUT = 30.0


def container(net_name: str, leaf: str) -> str:
    return f"{net_name}-{leaf}"


def _pid(name: str) -> int:
    return int(podman.podman("inspect", name, "--format", "{{.State.Pid}}").strip())


def _in_netns(pid: int, *command: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["nsenter", "-t", str(pid), "-n", *command], capture_output=True,
                            text=True, check=False)
    if check and result.returncode != 0:
        raise LabError(f"{' '.join(command)} in the network namespace of process {pid}: "
                       f"{result.stderr.strip()}")
    return result


def ensure(leaves: Iterable[str], image: str, net_name: str, label: str) -> None:
    """Each leaf's container running, made from `image` (which has lldpd); one made from
    another image is made again."""
    for leaf in leaves:
        name = container(net_name, leaf)
        found = json.loads(podman.podman("ps", "-a", "--filter", f"name=^{name}$", "--format",
                                         "json") or "[]")
        if found and found[0].get("Image") != image:
            podman.podman("rm", "-f", "-t", "2", name)
            found = []
        if not found:
            podman.podman(
                "run", "-d", "--name", name, "--hostname", leaf, "--network", "none",
                "--label", f"{label}={net_name}", "--label", f"{LEAF_LABEL}={leaf}",
                "--stop-signal", "TERM", "--memory", "64m", image,
                "sh", "-c", f"printf '{LLDPD_CONF.format(name=leaf)}' "
                            "> /etc/lldpd.d/racklift-leaf.conf && exec lldpd -d")
        elif found[0]["State"] != "running":
            podman.podman("start", name)


def leaves(net_name: str, label: str) -> list[str]:
    """The NetBox names of the lab's leaf containers."""
    out = podman.podman("ps", "-a", "--filter", f"label={label}={net_name}", "--filter",
                        f"label={LEAF_LABEL}", "--format", "json")
    return sorted(c["Labels"][LEAF_LABEL] for c in json.loads(out or "[]"))


def plan_label(leaf: str, port: str) -> str:
    return f"{leaf}/{port}"


def planned(host: str) -> tuple[str, str]:
    """The leaf and port the host's in-band port is planned to, from its container's label."""
    labels = json.loads(podman.podman("inspect", host, "--format", "json"))[0]["Config"]["Labels"]
    if PLAN_LABEL not in (labels or {}):
        raise LabError(f"{host} has no planned in-band cable (label {PLAN_LABEL}): it was made "
                       "by an older lab; `invoke lab.down lab.up` makes it again")
    switch, _, port = labels[PLAN_LABEL].partition("/")
    return switch, port


def is_plugged(host: str, nic: str, net_name: str, leaf: str, port: str) -> bool:
    """Whether the host has the NIC and its leaf the port (both go when either container
    stops, since a veth pair dies with either namespace)."""
    return (_in_netns(_pid(host), "ip", "link", "show", nic, check=False).returncode == 0
            and _in_netns(_pid(container(net_name, leaf)), "ip", "link", "show", port,
                          check=False).returncode == 0)


def plug(host: str, nic: str, mac: str, net_name: str, leaf: str, port: str,
         link: bool = True) -> None:
    """Cable the host's `nic` (with this MAC) to the leaf's `port`, replacing whatever cable it
    had. `link=False`: the switch port stays down, as if the cable were pulled there."""
    host_pid, leaf_pid = _pid(host), _pid(container(net_name, leaf))
    if _in_netns(host_pid, "ip", "link", "show", nic, check=False).returncode == 0:
        _in_netns(host_pid, "ip", "link", "del", nic)  # takes the leaf's end with it
    _in_netns(host_pid, "ip", "link", "add", nic, "address", mac.lower(), "type", "veth",
              "peer", "name", port, "netns", str(leaf_pid))
    _in_netns(host_pid, "ip", "link", "set", nic, "up")
    if link:
        _in_netns(leaf_pid, "ip", "link", "set", port, "up")


def heard(host: str, nic: str) -> list[tuple[str | None, str | None]] | None:
    """(system name, port id) of each neighbour the host's lldpd hears on `nic`; None where
    lldpd does not answer (not installed or not running)."""
    result = subprocess.run(["podman", "exec", host, "lldpctl", "-f", "json"],
                            env=podman.env(), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return None
    try:
        neighbors = parse_lldpctl_json(result.stdout)
    except ParseError:
        return None
    return [(n.chassis_name, n.port_id) for n in neighbors if n.interface == nic]


def wait_heard(plugs: Iterable[tuple[str, str, str | None, str | None]]) -> None:
    """Wait until each (host, nic, leaf, port) host's lldpd hears exactly that neighbour
    (leaf None: none), so what the gate reads next is the new cabling. Hosts whose lldpd
    does not answer are not waited for."""
    def wait(host: str, nic: str, leaf: str | None, port: str | None) -> None:
        want = [] if leaf is None else [(leaf, port)]
        deadline = time.monotonic() + HEARD_TIMEOUT
        while (now := heard(host, nic)) is not None and now != want:
            if time.monotonic() > deadline:
                raise LabError(f"{host}'s lldpd hears {now} on {nic}, not {want}, after "
                               f"{HEARD_TIMEOUT:.0f} s: see `podman logs` of the leaf")
            time.sleep(0.5)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: wait(*p), plugs))
