"""Seed hosts through NetBox's own ORM, inside the lab NetBox's `netbox shell` (lab only).

The API costs ~0.65 s per host (device + 19 components + 3 MACs + 2 IPs, each validated,
serialized and change-logged); Device.save() in the shell still costs ~0.27 s (each inventory
item saved alone, signals per component). This script creates devices, their components from
the device type's templates, MACs, IPs and tags with bulk inserts. What it skips: change-log
records and NetBox's global search index for these objects (`netbox reindex` rebuilds it).
One transaction: an error leaves NetBox as it was.
Not imported by racklift: netbox_server.run_in_netbox() executes it with the payload path
in RACKLIFT_PAYLOAD and writes what it created to RACKLIFT_RESULT.
"""

import json
import os
import time

from dcim.models import Device, DeviceType, Interface, InventoryItem, MACAddress, Rack
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from extras.models import TaggedItem
from ipam.models import IPAddress
from netaddr import IPNetwork


def _tag(objects, model, tag_ids):
    content_type = ContentType.objects.get_for_model(model)
    TaggedItem.objects.bulk_create(
        [TaggedItem(content_type=content_type, object_id=o.pk, tag_id=tag_id)
         for o in objects for tag_id in tag_ids],
        ignore_conflicts=True)


def seed(payload):
    created = {"racks": 0, "devices": 0, "mac addresses": 0, "ip addresses": 0}
    site_id, tag_ids = payload["site_id"], payload["tag_ids"]
    hosts = payload["hosts"]

    racks = {r.name: r for r in Rack.objects.filter(site_id=site_id)}
    new_racks = []
    for name in payload["racks"]:
        if name not in racks:
            rack = Rack(name=name, site_id=site_id, status="active", u_height=42, width=19)
            rack.save()
            racks[name] = rack
            new_racks.append(rack)
    _tag(new_racks, Rack, [payload["lab_tag_id"]])
    created["racks"] = len(new_racks)

    devices = {d.name: d for d in Device.objects.filter(site_id=site_id, name__in=[
        h["name"] for h in hosts])}
    device_type = DeviceType.objects.get(pk=payload["type_id"])
    iface_templates = list(device_type.interfacetemplates.all())
    item_templates = list(device_type.inventoryitemtemplates.all())
    new_devices = [
        Device(name=h["name"], device_type=device_type, role_id=payload["role_id"],
               site_id=site_id, rack=racks[h["rack"]], position=h["position"],
               face="front" if h["position"] else "", status=payload["status"],
               serial=h["serial"], asset_tag=h["asset_tag"],
               airflow=device_type.airflow, platform=device_type.default_platform,
               # Device.save() would count these as it creates them; bulk_create does not.
               interface_count=len(iface_templates), inventory_item_count=len(item_templates))
        for h in hosts if h["name"] not in devices]
    Device.objects.bulk_create(new_devices, batch_size=1000)
    # What Device.save() does for a new device, in bulk: components from the device type.
    for templates, model in ((iface_templates, Interface), (item_templates, InventoryItem)):
        components = []
        for device in new_devices:
            for template in templates:
                component = template.instantiate(device=device)
                component._site_id, component._rack_id = device.site_id, device.rack_id
                component._location_id = device.location_id
                components.append(component)
        model.objects.bulk_create(components, batch_size=2000)
    DeviceType.objects.filter(pk=device_type.pk).update(
        device_count=Device.objects.filter(device_type=device_type).count())
    devices.update({d.name: d for d in new_devices})
    _tag(new_devices, Device, tag_ids)
    created["devices"] = len(new_devices)

    device_ids = [devices[h["name"]].pk for h in hosts]
    interfaces = {(i.device_id, i.name): i for i in Interface.objects.filter(
        device_id__in=device_ids)}
    iface_type = ContentType.objects.get_for_model(Interface)
    macs = []
    for h in hosts:
        for name, mac in h["macs"].items():
            iface = interfaces[(devices[h["name"]].pk, name)]
            if iface.primary_mac_address_id is None:
                macs.append(MACAddress(mac_address=mac, assigned_object_type=iface_type,
                                       assigned_object_id=iface.pk))
    MACAddress.objects.bulk_create(macs)
    changed = []
    by_id = {i.pk: i for i in interfaces.values()}
    for mac in macs:
        iface = by_id[mac.assigned_object_id]
        iface.primary_mac_address_id = mac.pk
        changed.append(iface)
    Interface.objects.bulk_update(changed, ["primary_mac_address"], batch_size=2000)
    created["mac addresses"] = len(macs)

    existing = {str(ip.address): ip for ip in IPAddress.objects.filter(
        interface__device_id__in=device_ids)}
    ips = []
    for h in hosts:
        for address, name in ((h["primary_ip"], payload["provisioning_interface"]),
                              (h["oob_ip"], payload["bmc_interface"])):
            if address not in existing:
                ip = IPAddress(address=IPNetwork(address), status="active",
                               assigned_object_type=iface_type,
                               assigned_object_id=interfaces[(devices[h["name"]].pk, name)].pk)
                ips.append(ip)
                existing[address] = ip
    IPAddress.objects.bulk_create(ips)
    _tag(ips, IPAddress, [payload["lab_tag_id"]])
    created["ip addresses"] = len(ips)

    updates = []
    for h in hosts:
        device = devices[h["name"]]
        primary, oob = existing[h["primary_ip"]].pk, existing[h["oob_ip"]].pk
        if (device.primary_ip4_id, device.oob_ip_id) != (primary, oob):
            device.primary_ip4_id, device.oob_ip_id = primary, oob
            updates.append(device)
    Device.objects.bulk_update(updates, ["primary_ip4", "oob_ip"], batch_size=2000)
    return created


def main():
    with open(os.environ["RACKLIFT_PAYLOAD"]) as handle:
        payload = json.load(handle)
    started = time.monotonic()
    with transaction.atomic():
        created = seed(payload)
    with open(os.environ["RACKLIFT_RESULT"], "w") as handle:
        json.dump({"created": created, "seconds": time.monotonic() - started}, handle)


main()
