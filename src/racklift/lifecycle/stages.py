"""The stages a host goes through, in pipeline order, and what the custom field
`racklift_stage` says once each is completed."""

from __future__ import annotations

# preflight and join always run for a host that is worked on: they are no stage of these.
IMAGE, CONFIGURE, VERIFY, ACCEPT = "image", "configure", "verify", "accept"
STAGES = (IMAGE, CONFIGURE, VERIFY, ACCEPT)
# What `racklift_stage` says a host completed; cleared when a new pass starts from imaging.
# After accept the host is active: its status says so.
COMPLETED = {IMAGE: "imaged", CONFIGURE: "configured", VERIFY: "verified"}
