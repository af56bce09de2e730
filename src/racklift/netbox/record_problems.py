"""What a host's NetBox record lacks for racklift: the reader's validation of each host it
builds (ExpectedHost, or the inventory's lighter InventoryHost), every problem at once, each
naming the host, the field and what to do. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from racklift import names
from racklift.bmc import firmware
from racklift.netbox import desired
from racklift.netbox.expected import CONTEXT_KEY, GPU_ROLE, ExpectedHost, InventoryHost, Problem

Json = dict[str, Any]


def choice_value(choice: Any) -> str:
    """A NetBox choice field's value ({"value": ..., "label": ...}), or the value itself."""
    return choice.get("value") if isinstance(choice, Mapping) else str(choice)


def with_problems[H: (ExpectedHost, InventoryHost)](host: H, device_type: Json,
                                                    iface_templates: list[Json],
                                                    gpu_slots: int,
                                                    identity: Iterable[Problem] = ()) -> H:
    problems = find_problems(host, has_context=desired.has_software(host.config),
                             type_name=device_type_name(device_type),
                             iface_templates=iface_templates, gpu_templates=gpu_slots)
    # The same context: its parse carries over.
    return replace(host, problems=(*identity, *problems), parsed=host.desired)


def device_type_name(device_type: Json) -> str:
    return str(device_type.get("slug") or device_type.get("model") or "")


def find_problems(host: ExpectedHost | InventoryHost, *, has_context: bool, type_name: str,
                  iface_templates: list[Json], gpu_templates: int) -> list[Problem]:
    """Everything racklift needs that this host's record lacks; every one, not the first."""
    n = host.name
    problems: list[Problem] = []

    def add(field: str, message: str) -> None:
        problems.append(Problem(n, field, message))

    if not names.is_hostname(n):
        add("name", f"{n!r} is {names.HOSTNAME_HINT}")
    if not host.serial:
        add("serial", "no serial number: set the chassis serial on the device in NetBox")
    if not host.primary_ip:
        add("primary_ip4", "no primary IP: assign an IP to the provisioning interface "
            f"({host.provisioning_interface}) and mark it primary")
    elif not host.primary_ip_interface:
        add("primary_ip4", f"primary IP {host.primary_ip} is not assigned to an interface of "
            "this device: assign it to the provisioning interface")
    if not host.oob_ip:
        add("oob_ip", "no OOB (BMC) IP: assign the BMC's IP to the mgmt-only interface and "
            "set it as the device's OOB IP")
    if host.has_interface(host.provisioning_interface) is False:
        add(f"interfaces.{host.provisioning_interface}",
            "the provisioning interface does not exist on the device: create it, or set "
            f"{CONTEXT_KEY}.provisioning_interface in the config context")
    elif not host.provisioning_mac:
        add(f"interfaces.{host.provisioning_interface}.primary_mac_address",
            "no MAC address on the provisioning interface: add a MAC address object and make "
            "it the interface's primary MAC")
    if not has_context:
        add(f"config_context.{CONTEXT_KEY}", "no racklift desired-software config context "
            "applies to this device (a device type's racklift.hardware or the device's own "
            "racklift.os_disk alone is not one): scope one to its site, role or platform")
    if host.desired is None:  # rare: parsed again for what is wrong
        problems.extend(Problem(n, i.field, i.message) for i in desired.read(host.config)[1])
    problems.extend(Problem(n, i.field, i.message) for i in firmware.read(host.config)[1])
    if not any(t.get("mgmt_only") for t in iface_templates):
        add("device_type.interface_templates", f"device type {type_name} has no mgmt-only "
            "(BMC) interface template: add one")
    if not any(choice_value(t.get("type")).startswith("infiniband-") for t in iface_templates):
        add("device_type.interface_templates", f"device type {type_name} has no InfiniBand "
            "interface templates: add one per HCA port")
    if gpu_templates == 0:
        add("device_type.inventory_item_templates", f"device type {type_name} has no "
            f"inventory item templates with role '{GPU_ROLE}', and the device no GPU modules "
            "(module type profile GPU): add one template per GPU, or install the GPU modules")
    return problems
