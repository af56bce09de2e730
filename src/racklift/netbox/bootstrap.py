"""Create what racklift relies on in NetBox, idempotently, never overwriting existing objects."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from racklift.errors import RackliftError
from racklift.lifecycle.result import RESULT_FIELD
from racklift.lifecycle.state import ACCEPTANCE_FIELD, IMAGE_FIELD, STAGE_FIELD, VERIFIED_FIELD
from racklift.netbox.client import NetBox
from racklift.netbox.desired import CONTEXT_KEY, ROLE_LEAF_SWITCH, has_software
from racklift.netbox.expected import GPU_ROLE
from racklift.netbox.overrides import Override, overrides

TAG_MANAGED = "racklift"
ROLE_GPU_SERVER = "gpu-server"

# (endpoint, lookup, defaults): the objects racklift needs. Existing ones are left untouched.
REQUIREMENTS: tuple[tuple[str, dict[str, Any], dict[str, Any]], ...] = (
    ("extras/tags", {"slug": TAG_MANAGED},
     {"name": "racklift", "color": "2196f3",
      "description": "Provisioned and verified by racklift"}),
    ("dcim/device-roles", {"slug": ROLE_GPU_SERVER},
     {"name": "GPU server", "color": "4caf50", "vm_role": False}),
    # The default of racklift.cabling.switch_roles: `verify --record-cables` takes a far end
    # only among these devices.
    ("dcim/device-roles", {"slug": ROLE_LEAF_SWITCH},
     {"name": "Leaf switch", "color": "2196f3", "vm_role": False}),
    ("dcim/inventory-item-roles", {"slug": GPU_ROLE},
     {"name": "GPU", "color": "8bc34a"}),
    ("extras/custom-fields", {"name": IMAGE_FIELD},
     {"type": "text", "object_types": ["dcim.device"], "label": "racklift image",
      "description": "OS image and build id racklift last deployed (its image marker)",
      "required": False, "group_name": "racklift", "ui_editable": "no"}),
    ("extras/custom-fields", {"name": STAGE_FIELD},
     {"type": "text", "object_types": ["dcim.device"], "label": "racklift stage",
      "description": "The last pipeline stage racklift completed on this host (imaged, "
                     "configured, verified): a re-run resumes after it",
      "required": False, "group_name": "racklift", "ui_editable": "no"}),
    ("extras/custom-fields", {"name": VERIFIED_FIELD},
     {"type": "datetime", "object_types": ["dcim.device"], "label": "racklift verified",
      "description": "When the gate last admitted this host: it matched its NetBox "
                     "record and passed every health check",
      "required": False, "group_name": "racklift", "ui_editable": "no"}),
    ("extras/custom-fields", {"name": ACCEPTANCE_FIELD},
     {"type": "text", "object_types": ["dcim.device"], "label": "racklift acceptance",
      "description": "The last acceptance tests' figures against their thresholds, with the "
                     "date: drift over months shows here",
      "required": False, "group_name": "racklift", "ui_editable": "no"}),
    ("extras/custom-fields", {"name": RESULT_FIELD},
     {"type": "json", "object_types": ["dcim.device"], "label": "racklift result",
      "description": "racklift's last result, verdict (every mismatch and health check) and "
                     "acceptance figures on this host; racklift's NetBox plugin shows it",
      "required": False, "group_name": "racklift", "ui_editable": "no"}),
)


@dataclass(frozen=True)
class BootstrapResult:
    endpoint: str
    key: str
    created: bool
    overrides: tuple[Override, ...] = ()  # what existing contexts set that it overrides


def bootstrap(netbox: NetBox) -> list[BootstrapResult]:
    results = []
    for endpoint, lookup, defaults in REQUIREMENTS:
        _, created = netbox.get_or_create(endpoint, lookup, defaults)
        results.append(BootstrapResult(endpoint, next(iter(lookup.values())), created))
    # Journal entries need no setup, but racklift records every state change in them:
    # fail here, early, if this token may not read them.
    netbox.count("extras/journal-entries", {"assigned_object_type": "dcim.device"})
    return results


# A context that states nothing is managed yet: every version null. It needs no guess (a driver
# branch, a provisioning interface would be one), and the operator fills it in.
UNMANAGED = {"nvidia_driver": {"version": None}, "ofed": {"version": None},
             "container_toolkit": {"version": None}, "registry_mirror": {"url": None}}


# What adoption's role context is merged at: its weight, and its name's prefix.
ROLE_CONTEXT_WEIGHT = 1000
DEVICE_FIELDS = ("id", "name", "site", "role", "device_type", "platform", "tenant", "cluster",
                 "tags", "config_context", "local_context_data")


@dataclass(frozen=True)
class RoleContext:
    """The racklift context adoption would create for a role (`role_id` None: one that says
    anything of racklift's applies already, so none), and what of the role's devices'
    existing contexts it would override."""

    role: str
    role_id: int | None
    overrides: tuple[Override, ...] = ()

    @property
    def name(self) -> str:
        return f"racklift-{self.role}"


def plan_role_context(netbox: NetBox, role: str) -> RoleContext:
    """Reads only: whether a role context is needed, and what it would override."""
    found = netbox.get_all("dcim/device-roles", {"slug": role}, fields=("id", "slug"))
    if not found:
        raise RackliftError(f"no device role {role!r} in NetBox: --role takes a role's slug")
    role_id = found[0]["id"]
    existing = netbox.get_all("extras/config-contexts", {"device_role_id": role_id})
    if any(has_software((c.get("data") or {}).get(CONTEXT_KEY)) for c in existing):
        return RoleContext(role, None)
    devices = netbox.get_all("dcim/devices", {"role_id": role_id}, fields=DEVICE_FIELDS)
    contexts = netbox.get_all("extras/config-contexts") if devices else []
    plan = RoleContext(role, role_id)
    return replace(plan, overrides=overrides(
        {CONTEXT_KEY: UNMANAGED}, (ROLE_CONTEXT_WEIGHT, plan.name), devices, contexts))


def create_role_context(netbox: NetBox, plan: RoleContext, force: bool = False
                        ) -> BootstrapResult:
    """The planned context; refused where it would override an existing context's keys
    (nulling a driver version a site context sets changes what the hosts run), unless
    `force`: then the result names them."""
    if plan.role_id is None:
        return BootstrapResult("extras/config-contexts", plan.name, False)
    refuse_overrides(plan, force)
    netbox.create("extras/config-contexts", [{
        "name": plan.name, "weight": ROLE_CONTEXT_WEIGHT, "roles": [plan.role_id],
        "data": {CONTEXT_KEY: UNMANAGED},
        "description": "racklift: nothing managed yet; set the driver and OFED versions, the "
                       "container toolkit and the registry mirror here"}])
    return BootstrapResult("extras/config-contexts", plan.name, True, plan.overrides)


def refuse_overrides(plan: RoleContext, force: bool) -> None:
    if plan.overrides and not force:
        raise RackliftError(
            f"config context {plan.name!r} (weight {ROLE_CONTEXT_WEIGHT}, role {plan.role}) "
            "would override what existing config contexts set: "
            + "; ".join(map(str, plan.overrides))
            + ". Nothing was created: set racklift's values in those contexts, or --force")


def ensure_role_context(netbox: NetBox, role: str, force: bool = False) -> BootstrapResult:
    """A racklift config context scoped to the device role, unless one that says anything of
    racklift's already applies to it; never changes an existing one, and overrides none's
    keys unless `force`."""
    return create_role_context(netbox, plan_role_context(netbox, role), force)
