"""Which devices a read takes (`Selection`), and the REST filters of NetBox's device list that
select them (`device_params`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from racklift.errors import NetBoxError
from racklift.netbox.client import NetBox

__all__ = ["Selection", "device_params"]


@dataclass(frozen=True)
class Selection:
    """Which devices: every field narrows the selection; empty fields select everything."""

    sites: tuple[str, ...] = ()  # site slugs
    racks: tuple[str, ...] = ()  # rack names
    roles: tuple[str, ...] = ()  # device role slugs
    statuses: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    @classmethod
    def of(cls, **values: str | Iterable[str] | None) -> Selection:
        """From CLI flags or plugin options: each a comma-separated string or a list."""
        def split(value: str | Iterable[str] | None) -> tuple[str, ...]:
            items = value.split(",") if isinstance(value, str) else (value or ())
            return tuple(v.strip() for v in items if v and v.strip())

        return cls(**{key: split(value) for key, value in values.items()})

    def describe(self) -> str:
        parts = [f"{key}={','.join(values)}" for key, values in vars(self).items() if values]
        return " ".join(parts) or "all devices"


def _rack_ids(netbox: NetBox, selection: Selection) -> list[int]:
    params: dict[str, Any] = {"name": list(selection.racks)}
    if selection.sites:
        params["site"] = list(selection.sites)
    racks = netbox.get_all("dcim/racks", params, fields=("id", "name"))
    unknown = set(selection.racks) - {r["name"] for r in racks}
    if unknown:
        where = f" at site {','.join(selection.sites)}" if selection.sites else ""
        raise NetBoxError(f"no rack named {', '.join(sorted(unknown))}{where} in NetBox "
                          f"at {netbox.url}: check the rack name")
    return [r["id"] for r in racks]


def device_params(netbox: NetBox, selection: Selection) -> dict[str, Any]:
    """The REST filters of `dcim/devices` that select `selection` (racks by id, so a rack name
    another site shares is not mixed in); raises NetBoxError for a rack NetBox lacks."""
    params: dict[str, Any] = {}
    for key, values in (("site", selection.sites), ("role", selection.roles),
                        ("status", selection.statuses), ("name", selection.names),
                        ("tag", selection.tags)):
        if values:
            params[key] = list(values)
    if selection.racks:
        params["rack_id"] = _rack_ids(netbox, selection)
    return params
