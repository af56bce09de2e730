"""The fleet's addresses: a network namespace that owns the whole of the fleet's ranges
(`ip route add local`: every address in them is its own, with no interface per host), joined to
this machine by one veth pair, and a route here that sends the ranges there. One listening
socket in the namespace then answers for every simulated host, and sees which host was asked
from the address the connection came to."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from racklift.lab.fleet import plan
from racklift.lab.vrack.commands import _run

LINK = ipaddress.ip_network("10.47.255.0/30")


@dataclass(frozen=True)
class FleetNet:
    netns: str = "racklift-fleet"
    veth: str = "rlfleet0"  # this machine's end; the namespace's is rlfleet1
    link: ipaddress.IPv4Network = LINK
    ranges: tuple[ipaddress.IPv4Network, ...] = (plan.PROVISIONING_NET, plan.OOB_NET)

    @property
    def peer(self) -> str:
        return self.veth[:-1] + "1"

    @property
    def here(self) -> str:
        return str(self.link.network_address + 1)

    @property
    def there(self) -> str:
        return str(self.link.network_address + 2)


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
    if _run("ip", "link", "show", net.veth, check=False).returncode != 0:
        _run("ip", "link", "add", net.veth, "type", "veth", "peer", "name", net.peer,
             "netns", net.netns)
    _run("ip", "addr", "replace", f"{net.here}/{net.link.prefixlen}", "dev", net.veth)
    _run("ip", "link", "set", net.veth, "up")
    _in_ns(net, "ip", "addr", "replace", f"{net.there}/{net.link.prefixlen}", "dev", net.peer)
    _in_ns(net, "ip", "link", "set", net.peer, "up")
    for cidr in net.ranges:
        _in_ns(net, "ip", "route", "replace", "local", str(cidr), "dev", "lo")
        _run("ip", "route", "replace", str(cidr), "via", net.there, "dev", net.veth)


def down(net: FleetNet = NET) -> None:
    """The namespace and everything in it (the veth pair and routes go with it)."""
    if is_up(net):
        _run("ip", "netns", "delete", net.netns)
