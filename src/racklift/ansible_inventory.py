"""The Ansible inventory racklift builds from NetBox.

`build_inventory` is pure: hosts in, the `ansible-inventory --list` JSON shape out. The
`racklift_netbox` inventory plugin (plugins/inventory) and `racklift netbox.inventory` both use it.
Host vars hold what playbooks and operators use, not the whole expected model: Ansible copies
every value of every host var on the way in and writes each one out for `--list`, which at
10,000 hosts was most of the time. verify reads the expected model from NetBox itself.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from racklift.bmc import firmware
from racklift.netbox.client import NetBox, NetBoxSettings
from racklift.netbox.desired import DesiredState, role_vars
from racklift.netbox.expected import InventoryHost
from racklift.netbox.identity import has_identity
from racklift.netbox.inventory_hosts import build_inventory_hosts, read_inventory_hosts
from racklift.netbox.selection import Selection
from racklift.netbox.warm_inventory import sync

INCOMPLETE_GROUP = "racklift_incomplete"


def group_name(kind: str, value: str) -> str:
    """Ansible group names allow letters, digits and underscores: 'R12' → 'rack_r12'."""
    return f"{kind}_" + re.sub(r"[^a-z0-9_]", "_", value.lower())


def host_groups(host: InventoryHost) -> list[str]:
    groups = [group_name("site", host.site), group_name("status", host.status)]
    for kind, value in (("rack", host.rack), ("role", host.role), ("platform", host.platform)):
        if value:
            groups.append(group_name(kind, value))
    groups.extend(group_name("tag", tag) for tag in host.tags)
    if host.problems:
        groups.append(INCOMPLETE_GROUP)
    return groups


def desired_vars(state: DesiredState, config: Any) -> dict[str, Any]:
    """`racklift_desired`: the desired state's part for the node roles, and the HCA firmware
    the ofed role checks on the host, which the firmware pins hold (racklift.firmware.HCA)."""
    desired = role_vars(state)
    desired["ofed"]["hca_firmware_version"] = firmware.host_version(firmware.read(config)[0])
    return desired


def host_vars(host: InventoryHost) -> dict[str, Any]:
    variables: dict[str, Any] = {
        "netbox_id": host.netbox_id,
        "netbox_status": host.status,
        "racklift_expected": {
            "serial": host.serial, "rack": host.rack, "tags": list(host.tags),
            "oob_ip": host.oob_ip, "provisioning_interface": host.provisioning_interface,
            "provisioning_mac": host.provisioning_mac,
            "macs": host.macs, "ips": {name: list(ips) for name, ips in host.ips.items()},
        },
        "racklift_problems": [str(p) for p in host.problems],
    }
    # None where the context does not parse: without racklift_desired the roles' variables
    # are undefined, so a play on that host stops instead of configuring it from defaults.
    if host.desired is not None:
        variables["racklift_desired"] = desired_vars(host.desired, host.config)
    if host.address:
        variables["ansible_host"] = host.address
    return variables


def build_inventory(hosts: Iterable[InventoryHost]) -> dict[str, Any]:
    """The inventory of `hosts`. A device without a usable name is no Ansible host: a name
    several devices share would point one host's variables at another's address, a name that
    is no host name is syntax to Ansible, and an unnamed device's `device-<id>` could be a
    real device's name. Those devices are listed under `_meta.racklift_refused`, with why;
    every other host is in, incomplete or not."""
    groups: dict[str, list[str]] = defaultdict(list)
    hostvars: dict[str, dict[str, Any]] = {}
    refused = []
    for host in hosts:
        if not has_identity(host.problems):
            refused.append({"name": host.name, "netbox_id": host.netbox_id, "site": host.site,
                            "problems": [str(p) for p in host.problems]})
            continue
        hostvars[host.name] = host_vars(host)
        for group in host_groups(host):
            groups[group].append(host.name)
    inventory: dict[str, Any] = {
        "_meta": {"hostvars": hostvars, "racklift_refused": refused},
        "all": {"children": sorted(["ungrouped", *groups])},
        "ungrouped": {"hosts": []},
    }
    for group, members in sorted(groups.items()):
        inventory[group] = {"hosts": sorted(members)}
    return inventory


def load(settings: NetBoxSettings, selection: Selection) -> dict[str, Any]:
    return build_inventory(read_inventory_hosts(NetBox.connect(settings), selection))


def load_warm(settings: NetBoxSettings, selection: Selection, kept: Path, *,
              max_age: float) -> tuple[dict[str, Any], str]:
    """The inventory from the model kept in `kept`, brought up to date from NetBox's change
    log (racklift.netbox.warm_inventory); and how it was read."""
    synced = sync(NetBox.connect(settings), selection, kept, max_age=max_age)
    return build_inventory(build_inventory_hosts(synced.raw)), synced.how


def without_unsafe(value: Any) -> Any:
    """An inventory as `ansible-inventory --list` prints it, with plain strings: it writes every
    string an inventory plugin gave as {"__ansible_unsafe": "..."}."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: without_unsafe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_unsafe(v) for v in value]
    return value
