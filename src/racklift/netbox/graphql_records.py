"""The GraphQL fields a whole read asks of devices, interfaces and IP addresses, and its answers
reshaped into the records NetBox's REST API returns (racklift.netbox.raw_records)."""

from __future__ import annotations

from racklift.netbox.raw_records import Json

__all__ = ["DEVICE_GRAPHQL", "INTERFACE_GRAPHQL", "IP_GRAPHQL", "rest_shaped_device",
           "rest_shaped_ip"]

# The same fields as INTERFACE_FIELDS, in GraphQL: what build_hosts reads of an interface.
INTERFACE_GRAPHQL = ("id name label wwn type mgmt_only enabled device { id name } "
                     "primary_mac_address { mac_address }")
# The fields of DEVICE_FIELDS but the config context and tags, in GraphQL (bulk_reads.all_devices).
DEVICE_GRAPHQL = ("id name status serial asset_tag position site { slug } rack { name } "
                  "role { slug } platform { slug } device_type { id } primary_ip4 { address } "
                  "primary_ip6 { address } oob_ip { address }")
# What build_hosts reads of an IP address; only interfaces' addresses matter.
IP_GRAPHQL = "id address assigned_object { ... on InterfaceType { id } }"


def rest_shaped_ip(ip: Json) -> Json | None:
    """A GraphQL IP address as REST returns it; None unless it is an interface's (the
    fragment leaves an address assigned to anything else an empty object)."""
    holder = (ip.get("assigned_object") or {}).get("id")
    if holder is None:
        return None
    return {"id": ip["id"], "address": ip["address"], "assigned_object_type": "dcim.interface",
            "assigned_object_id": holder}


def rest_shaped_device(device: Json, context: Json, tags: list[str]) -> Json:
    """A GraphQL device as REST returns it, with its config context and tags: GraphQL gives
    the position (a decimal) as text."""
    shaped = {**device, "config_context": context, "tags": [{"slug": t} for t in tags]}
    if device.get("position") is not None:
        shaped["position"] = float(device["position"])
    return shaped
