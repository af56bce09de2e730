"""The Ansible inventory racklift builds from NetBox's expected model.

`build_inventory` is pure: hosts in, the `ansible-inventory --list` JSON shape out. The
`racklift_netbox` inventory plugin (plugins/inventory) and `racklift inventory` both use it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from racklift.netbox.client import NetBox, NetBoxSettings
from racklift.netbox.model import ExpectedHost
from racklift.netbox.reader import Selection, read_hosts

INCOMPLETE_GROUP = "racklift_incomplete"


def group_name(kind: str, value: str) -> str:
    """Ansible group names allow letters, digits and underscores: 'R12' → 'rack_r12'."""
    return f"{kind}_" + re.sub(r"[^a-z0-9_]", "_", value.lower())


def host_groups(host: ExpectedHost) -> list[str]:
    groups = [group_name("site", host.site), group_name("status", host.status)]
    for kind, value in (("rack", host.rack), ("role", host.role), ("platform", host.platform)):
        if value:
            groups.append(group_name(kind, value))
    groups.extend(group_name("tag", tag) for tag in host.tags)
    if host.problems:
        groups.append(INCOMPLETE_GROUP)
    return groups


def host_vars(host: ExpectedHost) -> dict[str, Any]:
    # Ansible copies every value of every host var, and --list writes each: the config
    # context is in racklift_config, so racklift_expected leaves it out.
    expected = host.to_dict()
    del expected["config"]
    variables: dict[str, Any] = {
        "netbox_id": host.netbox_id,
        "netbox_status": host.status,
        "racklift_expected": expected,
        "racklift_config": host.config,
        "racklift_problems": [str(p) for p in host.problems],
    }
    if host.address:
        variables["ansible_host"] = host.address
    return variables


def build_inventory(hosts: Iterable[ExpectedHost]) -> dict[str, Any]:
    groups: dict[str, list[str]] = defaultdict(list)
    hostvars: dict[str, dict[str, Any]] = {}
    for host in hosts:
        hostvars[host.name] = host_vars(host)
        for group in host_groups(host):
            groups[group].append(host.name)
    inventory: dict[str, Any] = {
        "_meta": {"hostvars": hostvars},
        "all": {"children": sorted(["ungrouped", *groups])},
        "ungrouped": {"hosts": []},
    }
    for group, members in sorted(groups.items()):
        inventory[group] = {"hosts": sorted(members)}
    return inventory


def load(settings: NetBoxSettings, selection: Selection) -> dict[str, Any]:
    return build_inventory(read_hosts(NetBox.connect(settings), selection))


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
