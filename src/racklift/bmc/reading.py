"""Reading BMC inventories over Redfish (I/O): one BMC, whole or refused (`read_whole`), and the
BMCs of named hosts at once, each with the BMC settings and credentials the host's Ansible vars
give (`read_bmcs`, as racklift.hostvars reads them). What `bmc.inventory` and verify call; the
image stage reads through the same client (racklift.pipeline.image_power)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from racklift.bmc.inventory import BmcInventory, read_inventory
from racklift.bmc.redfish import BmcError, RedfishClient, client_for

MAX_WORKERS = 32  # BMCs read at once


def read_whole(client: RedfishClient) -> BmcInventory:
    """`whole`, closing the client."""
    with client:
        return whole(client)


def whole(client: RedfishClient) -> BmcInventory:
    """The inventory of the client's BMC; BmcError where nothing of it was read: the client's
    own first error (unreachable, credentials refused: it names the host, the BMC and what to
    do), else what the reader found missing. What verify, the image stage and --apply-firmware
    read, so each says the same of a BMC that cannot be read."""
    errors: list[BmcError] = []

    def get(path: str) -> dict[str, Any]:
        try:
            return client.get(path)
        except BmcError as exc:
            errors.append(exc)
            raise

    found = read_inventory(get)
    if found.system is None and not found.firmware:
        raise errors[0] if errors else BmcError(
            f"nothing read from the BMC at {client.endpoint.url}: "
            f"{'; '.join(found.problems) or 'it lists no system'}")
    return found


def read_bmcs(oob_ips: Mapping[str, str | None],
              hostvars: Mapping[str, Mapping[str, Any] | str],
              environ: Mapping[str, str] = os.environ) -> dict[str, BmcInventory | str]:
    """The inventory of each host's BMC (host → its NetBox OOB IP), read in parallel with the
    host's vars (or why they could not be read), or why it could not be read, naming the host
    and what to do. One host's BMC never stops the others'."""
    def one(name: str) -> BmcInventory | str:
        values = hostvars[name]
        if isinstance(values, str):
            return (f"{name}: its BMC settings and credentials could not be read from the "
                    f"Ansible inventory: {values}")
        try:
            return read_whole(client_for(name, oob_ips[name], values, environ))
        except BmcError as exc:
            return str(exc)

    if not oob_ips:
        return {}
    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(oob_ips))) as pool:
        return dict(zip(oob_ips, pool.map(one, oob_ips), strict=True))
