"""The simulated fleet's boot servers (lab only): a real one per site, as the virtual rack's,
so the image stage runs on simulated hosts as it does on real ones. Each is a lab host
container (systemd, sshd) in a namespace of its own, its eth0 the site's provisioning link
(racklift.lab.fleet.network), registered in NetBox as its site's active `boot-server` device
with that address as its primary IP. The image stage's playbooks set it up (the boot_server
role: dnsmasq, nginx, the deploy API); its packages come from the Debian mirror through the
uplink proxy in the fleet's namespace, as the virtual rack's do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from racklift import podman
from racklift.lab import tags
from racklift.lab.fleet import network
from racklift.lab.fleet.plan import FleetPlan
from racklift.lab.vrack import records
from racklift.lab.vrack.commands import _terminate, _wait
from racklift.lab.vrack.layout import BOOT_SERVER_TYPE, ROLE_BOOT_SERVER
from racklift.lab.vrack.network import UPLINK, apt_proxy_conf, ensure_uplink
from racklift.lab.vrack.services import run_boot_server
from racklift.netbox.client import NetBox

LABEL = "racklift.fleet"  # =boot on the fleet's boot server containers
UPLINK_PID = "uplink.pid"  # in the fleet's directory


@dataclass(frozen=True)
class BootServer:
    number: int  # its site's
    site: str

    @property
    def name(self) -> str:
        return f"sim-boot{self.number}"

    @property
    def address(self) -> str:
        return network.NET.boot_address(self.number)


def boot_servers(fleet: FleetPlan) -> list[BootServer]:
    return [BootServer(number, site.site) for number, site in enumerate(fleet.sites, 1)]


def containers() -> list[str]:
    out = podman.podman("ps", "-a", "--filter", f"label={LABEL}=boot", "--format", "json")
    return [c["Names"][0] for c in json.loads(out or "[]")]


def _ensure_container(server: BootServer, have: list[str], directory: Path) -> None:
    if server.name in have:
        podman.podman("start", server.name)
    else:
        apt_conf = directory / "apt-uplink.conf"
        apt_conf.write_text(apt_proxy_conf(network.GATEWAY))
        run_boot_server(server.name, Path("/run/netns") / network.NET.boot_netns(server.number),
                        [f"{LABEL}=boot"], apt_conf)


def up(netbox: NetBox, fleet: FleetPlan, directory: Path,
       answers: Callable[[str], bool]) -> list[BootServer]:
    """Each site's boot server running (`answers` its address: SSH greets there) and
    registered; idempotent. `directory`: the fleet's own."""
    servers = boot_servers(fleet)
    ensure_uplink(network.NET.netns, directory / UPLINK_PID)
    have = containers()
    for server in servers:
        network.boot_link_up(server.number)
        _ensure_container(server, have, directory)
    for server in servers:
        _wait(f"SSH of the boot server {server.name} at {server.address}",
              lambda s=server: answers(s.address), 120, f"see `podman logs {server.name}`")
    register(netbox, servers)
    return servers


def register(netbox: NetBox, servers: list[BootServer]) -> None:
    """Each boot server as its site's active boot-server device, its address the primary IP
    on its provisioning interface."""
    types = records.ensure_types(netbox)
    role, _ = netbox.get_or_create("dcim/device-roles", {"slug": ROLE_BOOT_SERVER},
                                   {"name": "Boot server", "color": "ff9800"})
    for server in servers:
        site = netbox.get_all("dcim/sites", {"slug": server.site}, fields=("id",))[0]
        device, _ = netbox.get_or_create(
            "dcim/devices", {"name": server.name, "site_id": site["id"]},
            {"name": server.name, "site": site["id"], "device_type": types[BOOT_SERVER_TYPE],
             "role": role["id"], "status": "active",
             "tags": [{"slug": tags.LAB}, {"slug": tags.SIM}]})
        records.assign_primary_ip(netbox, int(device["id"]),
                                  f"{server.address}/{network.plan.PROVISIONING_NET.prefixlen}")


def down(directory: Path) -> None:
    """The boot server containers and the uplink proxy (their namespaces go with the fleet's)."""
    for name in containers():
        podman.podman("rm", "-f", "-t", "0", name)
    _terminate("the fleet's uplink proxy", directory / UPLINK_PID, UPLINK)
