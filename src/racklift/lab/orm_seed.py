"""Seed hosts through NetBox's own ORM, inside the lab NetBox's `netbox shell` (lab only).

The API costs ~0.65 s per host (device + 19 components + 3 MACs + 2 IPs, each validated,
serialized and change-logged); Device.save() in the shell still costs ~0.27 s (each inventory
item saved alone, signals per component). This script creates devices, their components from
the device type's templates, leaf switches, MACs, IPs, cables and tags with bulk inserts. What
it skips: change-log records, NetBox's global search index for these objects (`netbox reindex`
rebuilds it) and the cables' traced paths (`netbox trace_paths` builds them).
One transaction: an error leaves NetBox as it was.
Not imported by racklift: netbox_server.run_in_netbox() executes it with the payload path
in RACKLIFT_PAYLOAD and writes what it created to RACKLIFT_RESULT.
"""

import json
import os
import time

from dcim.models import (
    Cable,
    CableTermination,
    Device,
    DeviceType,
    Interface,
    InventoryItem,
    MACAddress,
    Rack,
)
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
    created = {"racks": 0, "devices": 0, "switches": 0, "mac addresses": 0, "ip addresses": 0,
               "cables": 0}
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
    new_devices = _create_devices(
        DeviceType.objects.get(pk=payload["type_id"]), payload["role_id"], site_id, racks,
        payload["status"], [h for h in hosts if h["name"] not in devices])
    devices.update({d.name: d for d in new_devices})
    _tag(new_devices, Device, tag_ids)
    created["devices"] = len(new_devices)

    switches = {d.name: d for d in Device.objects.filter(site_id=site_id, name__in=[
        s["name"] for s in payload["switches"]])}
    new_switches = []
    for kind, type_id in payload["switch_types"].items():
        new_switches += _create_devices(
            DeviceType.objects.get(pk=type_id), payload["switch_role_id"], site_id, racks,
            "active", [s for s in payload["switches"]
                       if s["kind"] == kind and s["name"] not in switches])
    switches.update({d.name: d for d in new_switches})
    _tag(new_switches, Device, [payload["lab_tag_id"]])
    created["switches"] = len(new_switches)

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
    created["cables"] = _cable(hosts, devices, switches, iface_type)
    return created


def _create_devices(device_type, role_id, site_id, racks, status, specs):
    """What Device.save() does for new devices, in bulk: the devices, then their components
    from the device type's templates."""
    iface_templates = list(device_type.interfacetemplates.all())
    item_templates = list(device_type.inventoryitemtemplates.all())
    new = [
        Device(name=d["name"], device_type=device_type, role_id=role_id, site_id=site_id,
               rack=racks[d["rack"]], position=d.get("position"),
               face="front" if d.get("position") else "", status=status,
               serial=d.get("serial") or "", asset_tag=d.get("asset_tag"),
               airflow=device_type.airflow, platform=device_type.default_platform,
               # Device.save() would count these as it creates them; bulk_create does not.
               interface_count=len(iface_templates), inventory_item_count=len(item_templates))
        for d in specs]
    Device.objects.bulk_create(new, batch_size=1000)
    for templates, model in ((iface_templates, Interface), (item_templates, InventoryItem)):
        components = []
        for device in new:
            for template in templates:
                component = template.instantiate(device=device)
                component._site_id, component._rack_id = device.site_id, device.rack_id
                component._location_id = device.location_id
                components.append(component)
        model.objects.bulk_create(components, batch_size=2000)
    DeviceType.objects.filter(pk=device_type.pk).update(
        device_count=Device.objects.filter(device_type=device_type).count())
    return new


def _cable(hosts, devices, switches, iface_type):
    """The planned cables whose host port has none, with their terminations, and each port's
    cached cable end, as CableTermination.save() leaves them. Not traced: NetBox's cable paths
    for these are built by `manage.py trace_paths` (racklift reads the terminations)."""
    ids = [d.pk for d in (*devices.values(), *switches.values())]
    ports = {(i.device_id, i.name): i for i in Interface.objects.filter(device_id__in=ids)}
    wanted = [(ports[(devices[h["name"]].pk, name)], ports[(switches[switch].pk, port)])
              for h in hosts for name, (switch, port) in h["links"].items()
              if ports[(devices[h["name"]].pk, name)].cable_id is None]
    cables = [Cable(status="connected") for _ in wanted]
    Cable.objects.bulk_create(cables, batch_size=2000)
    terminations, changed = [], []
    for cable, pair in zip(cables, wanted, strict=True):
        for end, port in zip("AB", pair, strict=True):
            terminations.append(CableTermination(
                cable=cable, cable_end=end, termination_type=iface_type,
                termination_id=port.pk, _device_id=port.device_id, _rack_id=port._rack_id,
                _location_id=port._location_id, _site_id=port._site_id))
            port.cable, port.cable_end = cable, end
            changed.append(port)
    CableTermination.objects.bulk_create(terminations, batch_size=2000)
    Interface.objects.bulk_update(changed, ["cable", "cable_end"], batch_size=2000)
    return len(cables)


def main():
    with open(os.environ["RACKLIFT_PAYLOAD"]) as handle:
        payload = json.load(handle)
    started = time.monotonic()
    with transaction.atomic():
        created = seed(payload)
    with open(os.environ["RACKLIFT_RESULT"], "w") as handle:
        json.dump({"created": created, "seconds": time.monotonic() - started}, handle)


main()
