"""The warm inventory: the last full read, kept on disk and brought up to date from NetBox's
change log, so a re-run reads what changed, not 10,000 hosts again.

A read starts by asking NetBox for its newest change and its clock. A warm read then takes
the changes logged since the last read began (and OVERLAP before it: a change is stamped when
its transaction writes it, which can be before an earlier read saw it committed), finds the
devices they touch (racklift.netbox.changes), reads those devices again with the selection's
filters (a device that left the selection is dropped, one that joined it is added) and merges
them into the kept model. An object of a kind the inventory reads that was updated with no
change logged (NetBox logs none for an API write that changes nothing, nor for a script's
`save()` outside a request) counts as a change from where the kept model holds it to where it
is now; writes that leave `last_updated` alone (SQL, `QuerySet.update()`) only a full read
sees. It falls back to a full read, and says why, when it cannot be sure:

- nothing is kept for this NetBox, token and selection, or the racklift code that reads
  changed; the token sees no change log;
- the last full read is older than `max_age` (NetBox prunes its change log, and a bound on
  how long any missed write can live is worth one full read now and then);
- the change the last read saw as newest is gone from the log (NetBox restored from a backup);
- a tag was updated with no change logged (its devices are found by its old name), a tag the
  selection names changed, or NetBox counts another number of selected devices than the model
  holds (a deletion nobody logged);
- the changes touch what the selection or the groups are made of (a site, rack, role, ...), or
  too many devices for a partial read to pay.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from pathlib import Path

from racklift.netbox import (
    bulk_reads,
    expected_hosts,
    graphql_records,
    inventory_hosts,
    raw_records,
)
from racklift.netbox import changes as change_log
from racklift.netbox import selection as device_selection
from racklift.netbox.bulk_reads import FETCH_WORKERS, read_types
from racklift.netbox.client import NetBox
from racklift.netbox.inventory_hosts import RawInventory, fetch_devices, fetch_inventory
from racklift.netbox.raw_records import Json, ref_id
from racklift.netbox.selection import Selection, device_params
from racklift.paths import write_atomically

# Changes and updates are stamped when written, not when their transaction commits: both are
# read again this far before the last read began (what that read held is not taken again).
# NetBox's clock is read to the second, from its Date header.
OVERLAP = timedelta(minutes=5)
MAX_AGE = 3600.0  # seconds: the default age after which a full read is made again
PREFIX = "racklift-inventory-"
PRUNE_AGE = 7 * 86400.0
MAX_CHANGES = 5000  # more changes than this since the last read: a full read is cheaper
PARTIAL_SHARE = 0.25  # more of the model's devices touched than this: a full read
CHANGE_FIELDS = ("id", "time", "changed_object_type", "changed_object_id", "prechange_data",
                 "postchange_data")
# A kept model is only as good as the code that read it.
RECIPE = (Path(__file__), *(Path(m.__file__) for m in (
    change_log, inventory_hosts, device_selection, bulk_reads, graphql_records, raw_records,
    expected_hosts)))


@dataclass(frozen=True)
class Kept:
    """A model and where it stands."""

    raw: RawInventory
    read_at: str  # NetBox's clock when the read that made it began (ISO 8601)
    marker: tuple[int, str] | None  # NetBox's newest change then (id, time); None: none yet
    full_read_at: float  # this machine's clock at the last full read
    seen: tuple[int, ...] = ()  # the changes of the OVERLAP before `read_at` it holds
    covered: tuple[str, ...] = ()  # the updates of the OVERLAP before `read_at` it holds


@dataclass(frozen=True)
class Synced:
    raw: RawInventory
    how: str  # how it was read: "full read (why)" or what changed


def state_key(url: str, token: str, selection: Selection) -> str:
    """The kept model's name: NetBox, token (whose permissions decide what NetBox shows; only
    its hash is used), selection and the reading code."""
    recipe = hashlib.sha256()
    for path in RECIPE:
        recipe.update(path.read_bytes())
    token_hash = hashlib.sha256(token.encode()).hexdigest()
    return hashlib.sha256(f"{url}\n{token_hash}\n{selection!r}\n{recipe.hexdigest()}"
                          .encode()).hexdigest()


def state_path(directory: Path, url: str, token: str, selection: Selection) -> Path:
    return directory / f"{PREFIX}{state_key(url, token, selection)[:32]}.json"


def load(path: Path) -> Kept | None:
    """The kept model, or None where there is none or it cannot be read (a full read then)."""
    try:
        data = json.loads(path.read_text())
        marker = data["marker"]
        return Kept(RawInventory(**data["raw"]), str(data["read_at"]),
                    None if marker is None else (int(marker[0]), str(marker[1])),
                    float(data["full_read_at"]), tuple(int(i) for i in data["seen"]),
                    tuple(str(k) for k in data["covered"]))
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def save(path: Path, kept: Kept) -> None:
    """Written whole or not at all (two inventory runs at once each leave a complete file).
    Kept models of other selections or racklift versions unused for PRUNE_AGE go."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for old in path.parent.glob(f"{PREFIX}*.json"):
        try:
            if time.time() - old.stat().st_mtime > PRUNE_AGE:
                old.unlink()
        except OSError:  # another run pruned it first
            pass
    # One dumps (C) of the lists as they are: json.dump's chunked writer and asdict's deep
    # copy took seconds at 10,000 hosts.
    raw = {f.name: getattr(kept.raw, f.name) for f in fields(kept.raw)}
    write_atomically(path, json.dumps({"raw": raw, "read_at": kept.read_at,
                                       "marker": kept.marker, "full_read_at": kept.full_read_at,
                                       "seen": kept.seen, "covered": kept.covered}))


# ---------------------------------------------------------------------------------------------
# Pure


def merge(kept: RawInventory, fresh: RawInventory, touched: set[int]) -> RawInventory:
    """`kept` with the `touched` devices replaced by what `fresh` read of them (a touched
    device `fresh` lacks is gone, or left the selection). Device types stay `kept`'s."""
    def untouched(rows: list[Json], key: str) -> list[Json]:
        return [r for r in rows if ref_id(r, key) not in touched]

    kept_interfaces = untouched(kept.interfaces, "device")
    holders = {i["id"] for i in kept_interfaces}
    fresh_ips = {ip["id"] for ip in fresh.ip_addresses}
    return replace(kept, devices=[d for d in kept.devices if d["id"] not in touched]
                   + fresh.devices,
                   interfaces=kept_interfaces + fresh.interfaces,
                   ip_addresses=[ip for ip in kept.ip_addresses
                                 if ip["assigned_object_id"] in holders
                                 and ip["id"] not in fresh_ips] + fresh.ip_addresses,
                   modules=untouched(kept.modules, "device") + fresh.modules)


def _before(raw: RawInventory) -> dict[tuple[str, int], Json]:
    """What the kept model says of an object's holder, by (kind, id): an unlogged change's
    data before."""
    found: dict[tuple[str, int], Json] = {}
    for iface in raw.interfaces:
        found["dcim.interface", iface["id"]] = {"device": iface.get("device")}
        mac = iface.get("primary_mac_address") or {}
        if isinstance(mac.get("id"), int):
            found["dcim.macaddress", mac["id"]] = {"assigned_object_id": iface["id"]}
    for ip in raw.ip_addresses:
        found["ipam.ipaddress", ip["id"]] = {"assigned_object_id": ip["assigned_object_id"]}
    for module in raw.modules:
        found["dcim.module", module["id"]] = {"device": module.get("device")}
    return found


def update_keys(updated: Mapping[str, Iterable[Json]]) -> tuple[str, ...]:
    """Each update, by kind, id and time: one a read covered is not taken for a change again."""
    return tuple(f"{kind} {row['id']} {row.get('last_updated')}"
                 for kind, rows in sorted(updated.items()) for row in rows)


def unlogged(updated: Mapping[str, Iterable[Json]], changes: Iterable[Json],
             kept: RawInventory, covered: Iterable[str] = ()) -> list[Json]:
    """Change records for the objects `updated` (by kind) that have no change among
    `changes` and that the last read did not cover: NetBox logs nothing for a write that
    changes nothing, nor for one outside its API. Their data before is the kept model's, after
    what NetBox holds now; so the devices they were and are on are read again."""
    logged = {(str(c.get("changed_object_type")), c.get("changed_object_id")) for c in changes}
    known = set(covered)
    before = _before(kept)
    return [{"changed_object_type": kind, "changed_object_id": row["id"],
             "prechange_data": before.get((kind, row["id"]), {}), "postchange_data": row}
            for kind, rows in sorted(updated.items()) for row in rows
            if (kind, row["id"]) not in logged
            and f"{kind} {row['id']} {row.get('last_updated')}" not in known]


# ---------------------------------------------------------------------------------------------
# I/O


def _iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _newest_change(netbox: NetBox) -> tuple[tuple[int, str] | None, datetime]:
    body, now = netbox.get_dated("core/object-changes",
                                 {"limit": 1, "ordering": "-id", "fields": "id,time"})
    newest = body["results"][0] if body["results"] else None
    return (None if newest is None else (int(newest["id"]), str(newest["time"]))), now


def _updated_since(netbox: NetBox, since: datetime) -> dict[str, list[Json]]:
    """Every object of a kind the inventory reads updated since `since`: its id and what
    holds it."""
    params = {"last_updated__gte": _iso(since)}
    kinds = sorted(change_log.UPDATE_CHECKED.items())
    with ThreadPoolExecutor(FETCH_WORKERS) as pool:
        found = pool.map(lambda kind: netbox.get_all(kind[1][0], params,
                                                     ("id", "last_updated", *kind[1][1])),
                         kinds)
        return {kind: rows for (kind, _), rows in zip(kinds, found, strict=True)}


def _full(netbox: NetBox, selection: Selection, why: str, marker: tuple[int, str] | None,
          now: datetime) -> tuple[Synced, Kept]:
    # The changes already in what is read next: the next warm read need not read them again.
    recent = {"time_after": _iso(now - OVERLAP)}
    seen = (() if netbox.count("core/object-changes", recent) > MAX_CHANGES else
            tuple(c["id"] for c in netbox.get_all("core/object-changes", recent, ("id",))))
    covered = update_keys(_updated_since(netbox, now - OVERLAP))
    raw = fetch_inventory(netbox, selection)
    return Synced(raw, f"full read ({why})"), Kept(raw, _iso(now), marker, time.time(), seen,
                                                   covered)


def _why_full(netbox: NetBox, kept: Kept | None, max_age: float) -> str | None:
    if kept is None:
        return "nothing kept from an earlier read"
    if time.time() - kept.full_read_at > max_age:
        return f"the last full read is over {max_age:.0f} s old"
    if kept.marker is not None:
        found = netbox.get_all("core/object-changes", {"id": kept.marker[0]}, ("id", "time"))
        if not found or str(found[0]["time"]) != kept.marker[1]:
            return ("NetBox's change log no longer holds the newest change of the last read "
                    "(restored from a backup?)")
    return None


def sync(netbox: NetBox, selection: Selection, path: Path, *,
         max_age: float = MAX_AGE) -> Synced:
    """The raw inventory of `selection`, from the model kept at `path` and the changes since,
    or read in full (see the module's docstring); the model is kept again either way."""
    marker, now = _newest_change(netbox)
    kept = load(path)
    why = ("NetBox shows this token no change log (it needs core.view_objectchange)"
           if marker is None else _why_full(netbox, kept, max_age))
    if why is not None or kept is None:
        synced, kept = _full(netbox, selection, why or "", marker, now)
    else:
        synced, kept = _warm(netbox, selection, kept, marker, now)
    save(path, kept)
    return synced


def _warm(netbox: NetBox, selection: Selection, kept: Kept, marker: tuple[int, str] | None,
          now: datetime) -> tuple[Synced, Kept]:
    read_at = datetime.fromisoformat(kept.read_at)
    since = {"time_after": _iso(read_at - OVERLAP)}
    count = netbox.count("core/object-changes", since)
    if count > MAX_CHANGES:
        return _full(netbox, selection, f"{count} changes since the last read", marker, now)
    logged = netbox.get_all("core/object-changes", since, CHANGE_FIELDS)
    seen = set(kept.seen)
    changes = [c for c in logged if c["id"] not in seen]
    # An update the last read did not hold needs a change it did not hold either.
    updated = _updated_since(netbox, read_at - OVERLAP)
    missed = unlogged(updated, changes, kept.raw, kept.covered)
    touched = change_log.touched(changes + missed, kept.raw.devices)
    # A tag's devices are found by its old name, which only a logged change holds; and a tag
    # renamed to one the selection names brings devices the kept model does not hold.
    tag = next((c for c in missed if c["changed_object_type"] in change_log.TAG_KINDS), None)
    selected_tag = next((c for c in changes if c["changed_object_type"] in change_log.TAG_KINDS
                         and change_log.tag_names(c) & set(selection.tags)), None)
    why = (touched.full_read
           or (tag and f"NetBox holds extras.tag {tag['changed_object_id']} changed with no "
                       "change logged")
           or (selected_tag and f"a tag the selection names changed (object "
                                f"{selected_tag['changed_object_id']})"))
    if why:
        return _full(netbox, selection, why, marker, now)
    holders = {i["id"]: i for i in kept.raw.interfaces}
    devices = set(touched.devices)
    unknown = touched.interfaces - set(holders)
    for iface in [*(holders[i] for i in touched.interfaces & set(holders)),
                  *netbox.get_for_ids("dcim/interfaces", "id", unknown,
                                      fields=("id", "device"))]:
        if (device := ref_id(iface, "device")) is not None:
            devices.add(device)
    if len(devices) > max(100, PARTIAL_SHARE * len(kept.raw.devices)):
        return _full(netbox, selection, f"{len(devices)} devices changed", marker, now)
    params = device_params(netbox, selection)
    raw = kept.raw
    if devices:
        raw = merge(raw, fetch_devices(netbox, params, sorted(devices)), devices)
    if touched.types or {d["device_type"]["id"] for d in raw.devices} - {
            t["id"] for t in raw.device_types}:
        with ThreadPoolExecutor(FETCH_WORKERS) as pool:
            types = read_types(pool, netbox, raw.devices)
            raw = replace(raw, device_types=types.device_types.result(),
                          interface_templates=types.interface_templates.result(),
                          item_templates=types.item_templates.result())
    if touched.contexts:
        contexts = {d["id"]: d.get("config_context") or {}
                    for d in netbox.scan("dcim/devices", params, ("config_context",))}
        raw = replace(raw, devices=[{**d, "config_context": contexts.get(d["id"], {})}
                                    for d in raw.devices])
    selected = netbox.count("dcim/devices", params)
    if selected != len(raw.devices):
        return _full(netbox, selection, f"NetBox selects {selected} devices, the kept model "
                     f"{len(raw.devices)} (a deletion not logged?)", marker, now)
    how = (f"{len(changes)} changes since the last read"
           + (f", {len(missed)} objects updated with no change logged" if missed else "")
           + f": {len(devices)} devices read again"
           + (", device types" if touched.types else "")
           + (", config contexts" if touched.contexts else ""))
    window = now - OVERLAP
    return Synced(raw, how), replace(
        kept, raw=raw, read_at=_iso(now), marker=marker,
        seen=tuple(c["id"] for c in logged if datetime.fromisoformat(c["time"]) >= window),
        covered=update_keys(updated))
