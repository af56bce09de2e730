"""The lab's NetBox tags. The lab creates them when it creates its objects (`ensure`), so a
production NetBox, which only ever sees `netbox.bootstrap`, holds none of them."""

from __future__ import annotations

from racklift.netbox.client import NetBox

LAB = "racklift-lab"  # objects the lab created, and the only ones lab teardown removes
LAB_HOST = "racklift-lab-host"  # a lab host (container or VM): its hardware is emulated
VM = "racklift-lab-vm"  # a VM of the virtual rack
PROV = "racklift-lab-prov"  # reached through the provisioning namespace (SSH ProxyCommand)
SIM = "racklift-lab-sim"  # a simulated host of the lab's fleet (racklift.lab.fleet)

_TAGS = {
    LAB: ("9e9e9e", "Created by the racklift lab; removed by lab teardown"),
    LAB_HOST: ("607d8b", "A racklift lab host (container or VM): its GPUs and HCAs are emulated"),
    VM: ("795548", "A VM of the racklift virtual rack (lab)"),
    PROV: ("795548", "Reached through the lab's provisioning namespace"),
    SIM: ("3f51b5", "A simulated host of the racklift lab's fleet: no machine behind it"),
}


def ensure(netbox: NetBox) -> None:
    """Create the lab's tags that are missing (existing ones are left as they are)."""
    for slug, (color, description) in _TAGS.items():
        netbox.get_or_create("extras/tags", {"slug": slug},
                             {"name": slug, "color": color, "description": description})
