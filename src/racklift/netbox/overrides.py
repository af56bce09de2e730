"""What a new config context would override: the keys it sets that existing contexts already
set for the devices it would apply to. Pure: NetBox's devices (with their rendered and local
context data) and config contexts in, the overridden keys and the contexts setting them out.

NetBox merges a device's contexts in order of weight, then name, the later winning key by key;
the device's local context data wins over all of them. A key is overridden on a device where
its rendered context has it, its local data does not, and an active context that applies to
it and sorts before the new one sets it. Whether a context applies is read from the device's
own site, role, device type, platform, tenant, cluster and tags; one scoped by a tree the
device's record does not show (regions, site groups, locations, tenant groups, cluster types
and groups) is counted as applying: a refusal too many, never an override unnamed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# A context's assignment → the device field it matches by id.
_BY_ID = {"sites": "site", "roles": "role", "device_types": "device_type",
          "platforms": "platform", "tenants": "tenant", "clusters": "cluster"}
_TREES = ("regions", "site_groups", "locations", "tenant_groups", "cluster_types",
          "cluster_groups")


@dataclass(frozen=True)
class Override:
    """A key (dotted path) the new context would set over what `context` sets on `devices`."""

    context: str
    key: str
    devices: tuple[str, ...]

    def __str__(self) -> str:
        return (f"{self.key} set by config context {self.context!r} "
                f"({len(self.devices)} devices: {', '.join(self.devices[:3])}"
                f"{', ...' if len(self.devices) > 3 else ''})")


def leaves(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every path to a value that is not a mapping (an empty mapping is a value)."""
    return [path for key, value in data.items()
            for path in (leaves(value, (*prefix, key)) if isinstance(value, dict) and value
                         else [(*prefix, key)])]


def sets(data: Any, path: tuple[str, ...]) -> bool:
    """Whether `data` holds something a deep merge setting `path` replaces: the path's value,
    or a value that is not a mapping on the way to it."""
    for key in path:
        if not isinstance(data, dict):
            return True
        if key not in data:
            return False
        data = data[key]
    return True


def _ids(refs: Any) -> set[Any]:
    return {r.get("id") if isinstance(r, dict) else r for r in refs or ()}


def _tags(refs: Any) -> set[Any]:
    return {r.get("slug") if isinstance(r, dict) else r for r in refs or ()}


def may_apply(context: dict[str, Any], device: dict[str, Any]) -> bool:
    """Whether an existing context applies to the device, as NetBox decides it (an empty
    assignment matches every device); a tree assignment is taken as matching."""
    if not context.get("is_active", True):
        return False
    for assigned, field in _BY_ID.items():
        ids = _ids(context.get(assigned))
        if ids and (device.get(field) or {}).get("id") not in ids:
            return False
    tags = _tags(context.get("tags"))
    return not tags or bool(tags & _tags(device.get("tags")))


def overrides(new: dict[str, Any], new_order: tuple[int, str], devices: Iterable[dict],
              contexts: Iterable[dict]) -> tuple[Override, ...]:
    """The keys of `new` (a context's data, merged at `new_order`: its weight and name) that
    existing `contexts` set on `devices` (with `config_context` and `local_context_data`),
    per context, in the order of the contexts and keys."""
    earlier = [c for c in contexts if (c.get("weight", 1000), c.get("name", "")) < new_order]
    found: dict[tuple[str, str], list[str]] = {}
    for device in devices:
        for path in leaves(new):
            if not sets(device.get("config_context") or {}, path) \
                    or sets(device.get("local_context_data") or {}, path):
                continue
            for context in earlier:
                if sets(context.get("data") or {}, path) and may_apply(context, device):
                    found.setdefault((context["name"], ".".join(path)), []).append(
                        device.get("name") or f"device-{device.get('id')}")
    return tuple(Override(context, key, tuple(names))
                 for (context, key), names in found.items())
