"""An emulated lab host as pure data: its expected NetBox record and the support bundle its
tools would produce, for testing the gate without containers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from racklift.facts.bundle import Bundle, from_collector
from racklift.lab import hosts, hwemu, seed
from racklift.lab.fleet import document
from racklift.netbox.expected import (
    DeviceTypeRef,
    ExpectedGPU,
    ExpectedHost,
    ExpectedInterface,
    LinkPeer,
)

PLAN = hosts.plan(1, "U01").hosts[0]
# When the emulated collector ran: nvlink -e's two readings at 1.8e9 and 5 s later.
COLLECTED_AT = 1.8e9 + 5


def expected_host(gpu_serials: dict[int, str] | None = None, plan: seed.HostPlan = PLAN,
                  software: Mapping[str, Any] = hosts.LAB_SOFTWARE, site: str = "lab1",
                  tags: tuple[str, ...] = ("racklift-lab", "racklift-lab-host")) -> ExpectedHost:
    """What NetBox expects of a seeded host (the lab host by default), as the reader builds it
    from the seed, its config context's `racklift` value being `software`."""
    dt = seed.DEVICE_TYPE
    interfaces = tuple(sorted(
        (ExpectedInterface(t["name"], t["type"], bool(t.get("mgmt_only")), True,
                           plan.macs.get(t["name"]),
                           (plan.primary_ip,) if t["name"] == seed.PROVISIONING else
                           (plan.oob_ip,) if t["name"] == seed.BMC else (),
                           LinkPeer(*plan.links[t["name"]]) if t["name"] in plan.links else None)
         for t in dt["interfaces"]), key=lambda i: i.name))
    gpus = tuple(ExpectedGPU(g["name"], g["manufacturer"], g["part_id"],
                             (gpu_serials or {}).get(n)) for n, g in enumerate(dt["gpus"]))
    # The device type's context (the HGX board: NVSwitches, its links) rendered in, as NetBox
    # does.
    config = {**software, "hardware": dt["hardware"]}
    return ExpectedHost(
        name=plan.name, netbox_id=1, status="staged", site=site, rack=plan.rack,
        position=plan.position, role="gpu-server", platform=None,
        device_type=DeviceTypeRef(dt["manufacturer"], dt["model"], dt["slug"],
                                  dt["part_number"]),
        serial=plan.serial, asset_tag=plan.asset_tag, primary_ip=plan.primary_ip,
        primary_ip_interface=seed.PROVISIONING, oob_ip=plan.oob_ip, oob_interface=seed.BMC,
        provisioning_interface=seed.PROVISIONING, interfaces=interfaces, gpus=gpus,
        config=config, tags=tags)


def healthy_profile() -> hwemu.Profile:
    return document.profile_for(PLAN)


def bundle(profile: hwemu.Profile, plan: seed.HostPlan = PLAN,
           software: Mapping[str, Any] = hosts.LAB_SOFTWARE) -> Bundle:
    """The support bundle the collector brings back from a host with this hardware: the
    simulated fleet's document (racklift.lab.fleet.document), read as the gate reads it."""
    return from_collector(plan.name, document.collector_document(
        plan, profile, software, collected_at=COLLECTED_AT))


def with_fault(kind: str) -> hwemu.Profile:
    return hwemu.inject(healthy_profile(), kind)
