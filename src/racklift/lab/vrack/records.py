"""The virtual rack in NetBox: device types, the VMs standing in for GPU servers, the boot
server, their addresses and config context."""

from __future__ import annotations

from typing import Any

from racklift.imaging import diskimage
from racklift.lab import seed, tags
from racklift.lab.vrack.layout import (
    BOOT_SERVER_TYPE,
    ROLE_BOOT_SERVER,
    VM_CONTEXT_WEIGHT,
    VM_GPUS,
    VM_NIC,
    VM_TYPE,
    VmPlan,
    Vrack,
    ib_links,
)
from racklift.lab.vrack.services import mirror_url
from racklift.netbox.bootstrap import ROLE_GPU_SERVER, bootstrap
from racklift.netbox.client import NetBox
from racklift.netbox.expected import CONTEXT_KEY, GPU_ROLE

VM_IB_PORTS = seed.IB_PORTS[:VM_GPUS]


def ensure_types(netbox: NetBox) -> dict[str, int]:
    maker, _ = netbox.get_or_create("dcim/manufacturers", {"slug": "qemu"}, {"name": "QEMU"})
    ids = {}
    for slug, interfaces in (
            (VM_TYPE, [{"name": seed.BMC, "type": "1000base-t", "mgmt_only": True,
                        "label": "BMC (sushy-emulator)"},
                       {"name": VM_NIC, "type": "1000base-t",
                        "label": "provisioning"}]),
            (BOOT_SERVER_TYPE, [{"name": seed.PROVISIONING, "type": "1000base-t",
                                 "label": "provisioning"}])):
        device_type, _ = netbox.get_or_create(
            "dcim/device-types", {"slug": slug},
            {"manufacturer": maker["id"], "model": slug, "u_height": 1})
        have = {t["name"]: t["id"] for t in netbox.get_all(
            "dcim/interface-templates", {"device_type_id": device_type["id"]},
            fields=("id", "name"))}
        netbox.create("dcim/interface-templates", [{**i, "device_type": device_type["id"]}
                                                   for i in interfaces if i["name"] not in have])
        # An older racklift named the VMs' NIC eno1: the type now has the name the OS gives.
        stale = have.get(seed.PROVISIONING) if slug == VM_TYPE else None
        if stale is not None:
            netbox.delete("dcim/interface-templates", [stale])
        ids[slug] = int(device_type["id"])
    return ids


def _drop_stale_vms(netbox: NetBox, vms: tuple[VmPlan, ...]) -> None:
    """VM devices an older racklift registered without an interface the type has now (the NIC
    the OS names, VM_NIC; the InfiniBand ports) go, so they are registered again as `up`
    registers them now: templates reach only devices created after them."""
    found = netbox.get_all("dcim/devices", {"tag": tags.VM, "name": [vm.name for vm in vms]},
                           fields=("id",))
    if not found:
        return
    wanted = [VM_NIC, *VM_IB_PORTS]
    have: dict[int, int] = {}
    for iface in netbox.get_all("dcim/interfaces", {"device_id": [d["id"] for d in found],
                                                    "name": wanted}, fields=("id", "device")):
        have[iface["device"]["id"]] = have.get(iface["device"]["id"], 0) + 1
    stale = [d["id"] for d in found if have.get(d["id"], 0) < len(wanted)]
    _delete_cables(netbox, stale)
    netbox.delete("dcim/devices", stale)


def _delete_cables(netbox: NetBox, device_ids: list[int]) -> None:
    """The lab's cables on these devices, which go before the devices do: NetBox keeps a
    cable whose one end is deleted."""
    if device_ids:
        netbox.delete("dcim/cables", [c["id"] for c in netbox.get_all(
            "dcim/cables", {"device_id": device_ids, "tag": tags.LAB}, fields=("id",))])


def _ensure_devices(netbox: NetBox, wanted: list[dict]) -> dict[str, int]:
    names = [d["name"] for d in wanted]
    existing = {d["name"]: d["id"] for d in netbox.get_all(
        "dcim/devices", {"name": names}, fields=("id", "name"))}
    created = netbox.create("dcim/devices", [d for d in wanted if d["name"] not in existing])
    return {**existing, **{d["name"]: d["id"] for d in created}}


def vm_software(rack: Vrack) -> dict[str, Any]:
    """What the VMs should run, whole (it outweighs the GPU servers' context, which asks for
    DOCA and a mirror the rack does not have): the stand-in driver and toolkit, inbox OFED,
    the rack's own registry mirror, and the OS image on the VMs' one virtio disk (the same on
    each, so here where a server records its own disk on its device), and the GPU container
    check run through the rack's mirror."""
    return {**seed.DESIRED_SOFTWARE, "provisioning_interface": VM_NIC,
            "os_image": diskimage.IMAGE_NAME, "os_disk": "/dev/vda",
            "ofed": {"source": "inbox", "version": None},
            # The stand-in runtime runs containers without a GPU: no --gpus all, and a command
            # the image (busybox, playbooks/lab_registry_upstream.yml) has.
            "registry_mirror": {"url": mirror_url(rack), "check_image": "rackhello:1.0",
                                "check_command": ["/bin/busybox", "uname", "-s"],
                                "check_gpus": False}}


def _stand_in_for_gpu_servers(netbox: NetBox, rack: Vrack, device_type_id: int) -> None:
    """What a GPU server's record has and a VM's would lack, so the pipeline takes the VMs as
    the GPU servers they stand in for: VM_GPUS GPUs and as many InfiniBand port templates on
    their device type (the lab emulates both on the VM), the hardware context of the lab's
    GPU server type (NVSwitch, NVLink topology, NIC affinity), and a `racklift` config context
    (vm_software)."""
    # The GPU role is bootstrap's (register runs it first).
    gpu_role = netbox.get_all("dcim/inventory-item-roles", {"slug": GPU_ROLE})[0]
    maker, _ = netbox.get_or_create("dcim/manufacturers", {"slug": "nvidia"},
                                    {"name": "NVIDIA"})
    for number, port in enumerate(VM_IB_PORTS):
        netbox.get_or_create("dcim/interface-templates",
                             {"device_type_id": device_type_id, "name": port},
                             {"device_type": device_type_id, "name": port,
                              "type": "infiniband-ndr"})
        netbox.get_or_create("dcim/inventory-item-templates",
                             {"device_type_id": device_type_id, "name": f"GPU{number}"},
                             {"device_type": device_type_id, "name": f"GPU{number}",
                              "role": gpu_role["id"], "manufacturer": maker["id"],
                              "part_id": seed.GPU_PART})
    seed.ensure_hardware_context(netbox, device_type_id, VM_TYPE, seed.DEVICE_TYPE["hardware"])
    data = {CONTEXT_KEY: vm_software(rack)}
    context, _ = netbox.get_or_create("extras/config-contexts", {"name": "racklift-lab-vm"},
                                      {"name": "racklift-lab-vm", "tags": [tags.VM],
                                       "weight": VM_CONTEXT_WEIGHT, "data": data})
    if (context["data"], context["weight"]) != (data, VM_CONTEXT_WEIGHT):
        # An older racklift's, or another rack's mirror: this rack's now.
        netbox.update("extras/config-contexts", [{"id": context["id"], "data": data,
                                                  "weight": VM_CONTEXT_WEIGHT}])


def register(netbox: NetBox, rack: Vrack, vms: tuple[VmPlan, ...]) -> dict[str, int]:
    """The VMs and the boot server as NetBox devices; returns their ids by name."""
    bootstrap(netbox)
    tags.ensure(netbox)
    role = netbox.get_all("dcim/device-roles", {"slug": ROLE_GPU_SERVER})[0]
    boot_role, _ = netbox.get_or_create("dcim/device-roles", {"slug": ROLE_BOOT_SERVER},
                                        {"name": "Boot server", "color": "ff9800"})
    site, _ = netbox.get_or_create("dcim/sites", {"slug": rack.site},
                                   {"name": rack.site, "status": "active"})
    nb_rack, _ = netbox.get_or_create("dcim/racks", {"site_id": site["id"], "name": rack.rack},
                                      {"site": site["id"], "name": rack.rack, "status": "active",
                                       "tags": [{"slug": tags.LAB}]})
    types = ensure_types(netbox)
    _drop_stale_vms(netbox, vms)
    _stand_in_for_gpu_servers(netbox, rack, types[VM_TYPE])
    common = {"site": site["id"], "rack": nb_rack["id"]}
    vm_tags = [{"slug": t} for t in (tags.LAB, tags.VM, tags.PROV)]
    devices = _ensure_devices(netbox, [
        *({"name": vm.name, "device_type": types[VM_TYPE], "role": role["id"],
           "status": "planned", "serial": vm.serial, "tags": vm_tags, **common} for vm in vms),
        {"name": rack.boot_server, "device_type": types[BOOT_SERVER_TYPE],
         "role": boot_role["id"], "status": "active", "tags": vm_tags[:1] + vm_tags[2:],
         **common}])
    # MACs and IPs the way the seed writes them (interface MAC objects, primary and OOB IPs).
    plan_ = seed.SeedPlan(site=rack.site, racks=(rack.rack,), hosts=tuple(
        seed.HostPlan(name=vm.name, rack=rack.rack, position=None, serial=vm.serial,
                      asset_tag="", macs={VM_NIC: vm.mac}, primary_ip=vm.ip,
                      oob_ip=f"{vm.bmc}/32", links=ib_links(rack, vm.slot))
        for vm in vms), provisioning_interface=VM_NIC)
    vm_ids = {vm.name: devices[vm.name] for vm in vms}
    seed._assign_macs(netbox, plan_, vm_ids)
    seed._assign_ips(netbox, plan_, vm_ids)
    switches, _ = seed.ensure_switches(netbox, plan_, site["id"], {rack.rack: nb_rack["id"]})
    seed.cable(netbox, plan_, vm_ids, switches)
    assign_primary_ip(netbox, devices[rack.boot_server], f"{rack.gateway}/{rack.subnet.prefixlen}")
    return devices


def assign_primary_ip(netbox: NetBox, device_id: int, address: str) -> None:
    """`address` on a lab device's provisioning interface, as its primary IP (a boot
    server's: the virtual rack's, the simulated fleet's)."""
    iface = netbox.get_all("dcim/interfaces", {"device_id": device_id,
                                               "name": seed.PROVISIONING})[0]
    ip, _ = netbox.get_or_create(
        "ipam/ip-addresses", {"address": address, "interface_id": iface["id"]},
        {"address": address, "status": "active", "assigned_object_type": "dcim.interface",
         "assigned_object_id": iface["id"], "tags": [{"slug": tags.LAB}]})
    netbox.update("dcim/devices", [{"id": device_id, "primary_ip4": ip["id"]}])


def _unregister(netbox: NetBox, names: list[str]) -> int:
    if not names or netbox.count("extras/tags", {"slug": tags.LAB}) == 0:
        return 0
    # Only devices the lab tagged, under the names this rack gave them.
    devices = [d["id"] for d in netbox.get_all("dcim/devices", {"tag": tags.LAB, "name": names},
                                               fields=("id",))]
    _delete_cables(netbox, devices)
    netbox.delete("dcim/devices", devices)
    return len(devices)


def _unregister_rack(netbox: NetBox, rack: Vrack) -> None:
    """The rack up() made, once nothing is left in it."""
    if netbox.count("extras/tags", {"slug": tags.LAB}) == 0:
        return
    racks = netbox.get_all("dcim/racks", {"tag": tags.LAB, "name": rack.rack, "site": rack.site},
                           fields=("id",))
    empty = [r["id"] for r in racks if netbox.count("dcim/devices", {"rack_id": r["id"]}) == 0]
    netbox.delete("dcim/racks", empty)


# up / down / status
