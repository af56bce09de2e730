"""The simulated fleet's hosts: sites of racks of 8-GPU servers, numbered across the whole
fleet (names, serials, MACs, addresses and switches are unique in one NetBox), each site with
its own rail groups, modelled by the lab's seed (racklift.lab.seed)."""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass
from typing import Any

from racklift.lab import seed, tags
from racklift.lab.fleet import bmc

# The fleet's own ranges, routed into its namespace (racklift.lab.fleet.network): clear of the
# lab's container network (10.89.0.0/24), the virtual rack (10.90.0.0/24) and the seed's
# address-only hosts (10.16.0.0/16, 10.32.0.0/16).
PROVISIONING_NET = ipaddress.ip_network("10.48.0.0/16")
OOB_NET = ipaddress.ip_network("10.49.0.0/16")
SITE_PREFIX = "sim"
HOST_PREFIX = "sim-"  # of hosts and switches
MAC_BASE = 0x200000  # the seed's MAC numbering from here: clear of the lab's and the seed's
# What a simulated host runs, as production asks it (the collector's document shows exactly
# this), the firmware and BIOS its BMC must report, and the HGX node's acceptance tests
# (racklift.lab.fleet.tools answers them); no registry mirror, which the simulator does not
# answer yet.
SOFTWARE: dict[str, Any] = {
    **seed.DESIRED_SOFTWARE,
    # The disk an image stage writes (the simulated ramdisk writes none).
    "os_disk": "/dev/nvme0n1",
    "registry_mirror": {"url": None},
    "acceptance": seed.HGX_ACCEPTANCE,
    **bmc.PINS,
}
CONTEXT_NAME = "racklift-lab-fleet"


@dataclass(frozen=True)
class FleetPlan:
    sites: tuple[seed.SeedPlan, ...]

    @property
    def hosts(self) -> tuple[seed.HostPlan, ...]:
        return tuple(h for s in self.sites for h in s.hosts)

    def site_of(self, host: str) -> str:
        return next(s.site for s in self.sites for h in s.hosts if h.name == host)


def site_name(number: int) -> str:
    return f"{SITE_PREFIX}{number}"


def _address(network: ipaddress.IPv4Network, index: int) -> str:
    # As the seed numbers them: .1 to .250 of each /24.
    return f"{network.network_address + (index // 250) * 256 + index % 250 + 1}/{network.prefixlen}"


def _simulated(host: seed.HostPlan) -> seed.HostPlan:
    """The seed's host under the fleet's own names, serials, MACs, addresses and switches, so
    none is another lab record's (the seed numbers from 1 in every NetBox)."""
    index = int(host.serial[1:]) - 1
    return dataclasses.replace(
        host, name=f"{HOST_PREFIX}{index + 1:05d}", serial=f"SIM{index + 1:08d}",
        macs={iface: seed.mac_for(MAC_BASE + index, port)
              for port, iface in enumerate((seed.BMC, seed.PROVISIONING, seed.INBAND))},
        primary_ip=_address(PROVISIONING_NET, index), oob_ip=_address(OOB_NET, index),
        links={iface: (f"{HOST_PREFIX}{switch}", port)
               for iface, (switch, port) in host.links.items()})


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def plan(hosts: int, sites: int = 1, hosts_per_rack: int = seed.HOSTS_PER_RACK) -> FleetPlan:
    """`hosts` simulated hosts over at most `sites` sites, each of whole rail groups (its
    InfiniBand leaves are its own); the last rack may be short."""
    if hosts < 1 or sites < 1 or seed.RAIL_GROUP % hosts_per_rack:
        raise ValueError(f"a fleet of {hosts} hosts over {sites} sites, {hosts_per_rack} per "
                         f"rack: need hosts and sites >= 1, and racks that divide a rail group "
                         f"of {seed.RAIL_GROUP}")
    racks = _ceil(hosts, hosts_per_rack)
    group = seed.RAIL_GROUP // hosts_per_rack  # racks per rail group
    per_site = _ceil(_ceil(racks, sites), group) * group
    planned = []
    for s in range(sites):
        first = s * per_site + 1  # racks numbered across the fleet: R01.. at sim1, then on
        count = min(per_site, racks - s * per_site)
        if count < 1:
            break
        site = seed.plan(count, hosts_per_rack, site_name(s + 1), first_rack=first)
        taken = hosts - (first - 1) * hosts_per_rack
        members = [_simulated(h) for h in site.hosts[:taken]]
        planned.append(dataclasses.replace(
            site, racks=tuple(sorted({h.rack for h in members})), hosts=tuple(members),
            software=SOFTWARE, context_name=CONTEXT_NAME, tags=(tags.LAB, tags.SIM),
            context_tags=(tags.SIM,), context_weight=3000))
    return FleetPlan(tuple(planned))
