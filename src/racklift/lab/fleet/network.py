"""The fleet's addresses: a network namespace that owns the fleet's hosts' ranges (`ip route
add local`: every address in them is its own, with no interface per host), joined to this
machine by one veth pair, and a route here that sends the ranges there. One listening socket in
the namespace then answers for every simulated host, and sees which host was asked from the
address the connection came to.

Each site's boot server (racklift.lab.fleet.boot_servers) has a namespace of its own, its
provisioning link a veth pair to the fleet's: the site's hosts' DHCP goes out there, and the
boot server is at BOOT_NET's address of its site number, inside the provisioning network but
outside the hosts' own half of it. The fleet's namespace routes between this machine and the
boot servers, and owns GATEWAY, their way to this machine (and to the uplink proxy there)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from racklift.lab.fleet import plan
from racklift.lab.vrack.commands import _run

LINK = ipaddress.ip_network("10.47.255.0/30")
# The hosts' half of the provisioning network (plan: .1-.250 of each /24, 31,750 hosts at most).
HOSTS_NET = ipaddress.ip_network("10.48.0.0/17")
BOOT_NET = ipaddress.ip_network("10.48.255.0/24")  # boot server N at .N
GATEWAY = "10.48.254.254"


@dataclass(frozen=True)
class FleetNet:
    netns: str = "racklift-fleet"
    veth: str = "rlfleet0"  # this machine's end; the namespace's is rlfleet1
    link: ipaddress.IPv4Network = LINK
    ranges: tuple[ipaddress.IPv4Network, ...] = (plan.PROVISIONING_NET, plan.OOB_NET)
    local: tuple[ipaddress.IPv4Network, ...] = (HOSTS_NET, plan.OOB_NET)  # the hosts' own

    @property
    def peer(self) -> str:
        return self.veth[:-1] + "1"

    @property
    def here(self) -> str:
        return str(self.link.network_address + 1)

    @property
    def there(self) -> str:
        return str(self.link.network_address + 2)

    def boot_netns(self, site: int) -> str:
        return f"{self.netns}-boot{site}"

    def boot_link(self, site: int) -> str:
        """The fleet's end of site `site`'s provisioning link (the boot server's is eth0)."""
        return f"rlboot{site}"

    @staticmethod
    def boot_address(site: int) -> str:
        return str(BOOT_NET.network_address + site)


NET = FleetNet()


def _in_ns(net: FleetNet, *cmd: str, check: bool = True) -> None:
    _run("ip", "netns", "exec", net.netns, *cmd, check=check)


def is_up(net: FleetNet = NET) -> bool:
    return (Path("/run/netns") / net.netns).exists()


def up(net: FleetNet = NET) -> None:
    """The namespace, its link and the routes; idempotent."""
    if not is_up(net):
        _run("ip", "netns", "add", net.netns)
    _in_ns(net, "ip", "link", "set", "lo", "up")
    # It forwards between this machine and the boot servers, and is their gateway.
    _in_ns(net, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
    _in_ns(net, "ip", "addr", "replace", f"{GATEWAY}/32", "dev", "lo")
    if _run("ip", "link", "show", net.veth, check=False).returncode != 0:
        _run("ip", "link", "add", net.veth, "type", "veth", "peer", "name", net.peer,
             "netns", net.netns)
    _run("ip", "addr", "replace", f"{net.here}/{net.link.prefixlen}", "dev", net.veth)
    _run("ip", "link", "set", net.veth, "up")
    _in_ns(net, "ip", "addr", "replace", f"{net.there}/{net.link.prefixlen}", "dev", net.peer)
    _in_ns(net, "ip", "link", "set", net.peer, "up")
    # An older fleet owned the whole provisioning range.
    _in_ns(net, "ip", "route", "del", "local", str(plan.PROVISIONING_NET), "dev", "lo",
           "table", "local", check=False)
    for cidr in net.local:
        _in_ns(net, "ip", "route", "replace", "local", str(cidr), "dev", "lo")
    for cidr in net.ranges:
        _run("ip", "route", "replace", str(cidr), "via", net.there, "dev", net.veth)


def boot_link_up(site: int, net: FleetNet = NET) -> None:
    """Site `site`'s boot server namespace and its link to the fleet's; idempotent."""
    ns, link = net.boot_netns(site), net.boot_link(site)
    if not (Path("/run/netns") / ns).exists():
        _run("ip", "netns", "add", ns)
    if _run("ip", "netns", "exec", net.netns, "ip", "link", "show", link,
            check=False).returncode != 0:
        _in_ns(net, "ip", "link", "add", link, "type", "veth", "peer", "name", "eth0",
               "netns", ns)
    _in_ns(net, "ip", "link", "set", link, "up")
    _in_ns(net, "ip", "route", "replace", f"{net.boot_address(site)}/32", "dev", link)
    for cmd in (("ip", "link", "set", "lo", "up"),
                ("ip", "addr", "replace",
                 f"{net.boot_address(site)}/{plan.PROVISIONING_NET.prefixlen}", "dev", "eth0"),
                ("ip", "link", "set", "eth0", "up"),
                ("ip", "route", "replace", "default", "via", GATEWAY, "dev", "eth0")):
        _run("ip", "netns", "exec", ns, *cmd)


def boot_netns_up(net: FleetNet = NET) -> list[str]:
    return sorted(p.name for p in Path("/run/netns").glob(f"{net.netns}-boot*"))


def down(net: FleetNet = NET) -> None:
    """The namespaces, the boot servers' too, and everything in them (the veth pairs and
    routes go with them)."""
    for ns in boot_netns_up(net):
        _run("ip", "netns", "delete", ns)
    if is_up(net):
        _run("ip", "netns", "delete", net.netns)
