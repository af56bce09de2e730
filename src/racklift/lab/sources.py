"""The lab's Ansible inventory source (inventory/lab.yml here, with the group_vars beside it):
how Ansible reaches the lab's hosts and what the lab puts on them (its keys, no host key
checking, the hardware emulation). Only lab runs name it: the production inventory
(inventory/, ansible.cfg) does not, so a device a production NetBox tags as a lab host gets
none of it."""

from __future__ import annotations

import os
from pathlib import Path

from racklift.pipeline.image_plan import NETBOX_INVENTORY

LAB_SOURCE = Path(__file__).resolve().parent / "inventory" / "lab.yml"


def lab_inventory() -> dict[str, str]:
    """The environment of an Ansible run against lab hosts: NetBox's source, then the lab's."""
    return {"ANSIBLE_INVENTORY": f"{NETBOX_INVENTORY},{LAB_SOURCE}"}


def use_lab_inventory() -> None:
    """Every Ansible run this process starts from now on gets the lab's source: production's
    pipeline and gate pass their environment on to Ansible, so a lab task (or a lab test) that
    runs them on lab hosts calls this first."""
    os.environ.update(lab_inventory())
