"""The front door of NetBox's expected model: `read_hosts` reads a `Selection` of hosts from
NetBox and builds each one's ExpectedHost.

Its parts: which devices (racklift.netbox.selection), how their records are read in a bounded
number of bulk requests (racklift.netbox.bulk_reads, with racklift.netbox.graphql_records for a
whole read's GraphQL and racklift.netbox.raw_records for the records' shapes), and the pure
records → model step (racklift.netbox.expected_hosts); what each host's record lacks is
racklift.netbox.record_problems'. `Selection` is offered here too, on purpose: callers that read
hosts name which ones, and take both from this one module; everything else is taken from the
module that defines it.
"""

from __future__ import annotations

from racklift.netbox.bulk_reads import read_raw_model
from racklift.netbox.client import NetBox
from racklift.netbox.expected import ExpectedHost
from racklift.netbox.expected_hosts import build_hosts
from racklift.netbox.selection import Selection

__all__ = ["Selection", "read_hosts"]


def read_hosts(netbox: NetBox, selection: Selection) -> list[ExpectedHost]:
    """The expected model of every selected device, sorted by name."""
    return build_hosts(read_raw_model(netbox, selection))
