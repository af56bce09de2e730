"""BMC control (Redfish)."""
