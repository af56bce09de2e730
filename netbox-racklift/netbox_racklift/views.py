"""The tabs: racklift on each device, racklift bring-up on each site and rack. Each reads
NetBox's own objects as the viewing user may see them (restrict) and hands plain values to
reading.py; the templates escape everything (Django's autoescape, never |safe)."""

from __future__ import annotations

from typing import Any

from dcim.models import Device, Rack, Site
from django.contrib.contenttypes.models import ContentType
from django.db.models import QuerySet
from extras.models import JournalEntry, SavedFilter
from netbox.plugins import get_plugin_config
from netbox.views import generic
from utilities.views import ViewTab, register_model_view

from netbox_racklift import reading

PLUGIN = "netbox_racklift"
# racklift's own names in NetBox (racklift.lifecycle.state, .lock, .result).
STAGE_FIELD = "racklift_stage"
VERIFIED_FIELD = "racklift_verified"
RESULT_FIELD = "racklift_result"
ACCEPTANCE_FIELD = "racklift_acceptance"
LOCK_PREFIX = "racklift-lock-"  # + the device id: the saved filter that is the lock
LOCK_HOLDER = "racklift_lock"  # the holder record in its parameters
JOURNAL_PREFIX = "racklift"


def _roles() -> list[str]:
    return list(get_plugin_config(PLUGIN, "roles"))


def _lock(request: Any, device: Device) -> dict[str, Any] | None:
    saved = (SavedFilter.objects.restrict(request.user, "view")
             .filter(slug=f"{LOCK_PREFIX}{device.pk}").first())
    if saved is None:
        return None
    params = saved.parameters if isinstance(saved.parameters, dict) else {}
    holder = params.get(LOCK_HOLDER) if isinstance(params.get(LOCK_HOLDER), dict) else {}
    return {"since": saved.created, "run": holder.get("run"), "owner": holder.get("owner"),
            "pid": holder.get("pid"), "verb": holder.get("verb")}


def _journal(request: Any, device: Device) -> QuerySet:
    return (JournalEntry.objects.restrict(request.user, "view")
            .filter(assigned_object_type=ContentType.objects.get_for_model(Device),
                    assigned_object_id=device.pk, comments__startswith=JOURNAL_PREFIX)
            .order_by("-created", "-pk")[:get_plugin_config(PLUGIN, "journal_entries")])


def _ports(device: Device, verdict: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each cabled port (or one the verdict found something on): NetBox's far end, and what
    the gate saw there."""
    findings = reading.port_findings(verdict)
    rows = []
    for iface in device.interfaces.all().order_by("_name"):
        if iface.cable is None and iface.name not in findings:
            continue
        peers = [f"{getattr(p, 'device', '')} {p}".strip() for p in iface.link_peers]
        rows.append({"name": iface.name, "type": iface.get_type_display(), "cable": iface.cable,
                     "peers": peers, "findings": findings.get(iface.name, [])})
    return rows


@register_model_view(Device, name="racklift", path="racklift")
class DeviceRackliftView(generic.ObjectView):
    """What racklift knows of one host."""

    queryset = Device.objects.all()
    template_name = "netbox_racklift/device.html"
    tab = ViewTab(label="racklift", weight=2100)

    def get_extra_context(self, request: Any, instance: Device) -> dict[str, Any]:
        fields = instance.custom_field_data or {}
        result = reading.result(fields.get(RESULT_FIELD))
        journal = list(_journal(request, instance))
        return {
            "state": reading.state(instance.status),
            "stage": fields.get(STAGE_FIELD),
            "verified": fields.get(VERIFIED_FIELD),
            "acceptance_line": fields.get(ACCEPTANCE_FIELD),
            "lock": _lock(request, instance),
            "result": result,
            "ports": _ports(instance, result.verdict),
            "last_run": reading.last_run(e.comments for e in journal),
            "journal": journal,
        }


def _hosts(devices: QuerySet) -> list[reading.Host]:
    roles = set(_roles())
    return [reading.Host(
        name=d.name or str(d), url=d.get_absolute_url(), rack=d.rack.name if d.rack else None,
        position=float(d.position) if d.position is not None else None,
        height=max(int(d.device_type.u_height or 1), 1), status=d.status,
        stage=(d.custom_field_data or {}).get(STAGE_FIELD),
        ours=d.role is not None and d.role.slug in roles,
        result=reading.result((d.custom_field_data or {}).get(RESULT_FIELD)))
        for d in devices.select_related("rack", "device_type", "role")]


def _bringup(racks: list[Rack], hosts: list[reading.Host]) -> dict[str, Any]:
    ours = [h for h in hosts if h.ours]
    return {
        "counts": reading.counts(ours),
        "total": len(ours),
        "causes": reading.causes(ours),
        "racks": [reading.draw(r.name, int(r.u_height), [h for h in hosts if h.rack == r.name])
                  for r in racks],
        "legend": [*reading.STATES.values(), reading.NOT_OURS],
    }


@register_model_view(Rack, name="racklift", path="racklift")
class RackBringupView(generic.ObjectView):
    """One rack's bring-up."""

    queryset = Rack.objects.all()
    template_name = "netbox_racklift/bringup.html"
    tab = ViewTab(label="racklift bring-up", weight=2100)

    def get_extra_context(self, request: Any, instance: Rack) -> dict[str, Any]:
        devices = Device.objects.restrict(request.user, "view").filter(rack=instance)
        return _bringup([instance], _hosts(devices))


@register_model_view(Site, name="racklift", path="racklift")
class SiteBringupView(generic.ObjectView):
    """A site's bring-up: every rack of it."""

    queryset = Site.objects.all()
    template_name = "netbox_racklift/bringup.html"
    tab = ViewTab(label="racklift bring-up", weight=2100)

    def get_extra_context(self, request: Any, instance: Site) -> dict[str, Any]:
        racks = list(Rack.objects.restrict(request.user, "view").filter(site=instance)
                     .order_by("name"))
        devices = Device.objects.restrict(request.user, "view").filter(site=instance)
        return _bringup(racks, _hosts(devices))
