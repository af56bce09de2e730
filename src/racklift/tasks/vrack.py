"""Virtual rack tasks (lab only): VMs behind Redfish BMC emulators, the provisioning
namespace and its boot server container, registered in NetBox. Each imports the lab when it
runs (racklift.tasks.lab_netbox says why)."""

from __future__ import annotations

from invoke import task
from invoke.exceptions import Exit

from racklift.bmc.redfish import client_for
from racklift.console import console
from racklift.errors import RackliftError
from racklift.netbox.reader import Selection, read_hosts
from racklift.tasks.common import operator_errors
from racklift.tasks.lab_netbox import lab_connect

ACTIONS = ("on", "off", "restart", "pxe-once", "disk", "state")


@task(help={"vms": "number of VMs (more than the rack holds is refused, saying how many "
                   "it does)"})
def up(c, vms=1):
    """Start the virtual rack (N VMs behind Redfish BMCs, boot server), register it in NetBox.

    Namespace racklift-prov (10.90.0.0/24 and a ULA on its bridge), libvirtd in it, N UEFI VMs
    (TCG), each behind its own Redfish BMC emulator (https://127.0.77.<n>:8443), the boot
    server container at 10.90.0.1. VMs start powered off. Re-running converges; a smaller N
    removes the extra VMs."""
    from racklift.lab import vrack
    with operator_errors():
        result = vrack.up(lab_connect(), int(vms))
    console.print(f"virtual rack up in {result.seconds:.1f} s ({result.created_vms} VMs "
                  f"defined, {result.started_emulators} BMC emulators started)")
    console.print(f"  {result.boot_server}  {vrack.LAB.gateway}  (boot server; SSH with "
                  f"ProxyCommand='{vrack.proxy_command()}')")
    for vm in result.vms:
        console.print(f"  {vm.name}  {vm.ip}  {vm.mac}  BMC https://{vm.bmc}:{vrack.BMC_PORT}"
                      f"  serial {vm.serial}")
    console.print(f"BMC user {vrack.BMC_USERNAME}, password in "
                  f"{vrack.vrack_dir() / 'bmc-password'}, CA {vrack.ca_bundle()}")


@task
def down(c):
    """Remove the virtual rack and its NetBox devices (nothing else).

    VMs and disks, BMC emulators, the boot server container, libvirtd, the namespace."""
    from racklift.lab import vrack
    with operator_errors():
        try:
            netbox = lab_connect()
        except RackliftError as exc:  # NetBox down must not keep the VMs alive
            console.print(f"[yellow]NetBox not reachable ({exc}); removing the rack only[/]")
            netbox = None
        result = vrack.down(netbox)
    console.print(f"removed {result.vms} VMs, {result.containers} boot server container(s) "
                  f"and {result.devices} NetBox devices")


@task
def status(c):
    """The virtual rack's VMs: libvirt state and BMC emulator."""
    from racklift.lab import vrack
    with operator_errors():
        found = vrack.status()
    for vm in found:
        bmc = "running" if vm.bmc_running else "[red]not running[/]"
        console.print(f"{vm.name}  {vm.state}  BMC {vm.bmc} {bmc}  "
                      f"console {vrack.console_log(vrack.LAB, vm.name)}")
    console.print(f"{len(found)} VMs")


@task(help={"host": "VM name in NetBox (e.g. vm-v01-01)",
            "action": f"one of {', '.join(ACTIONS)}"})
def power(c, host, action="state"):
    """Drive one VM's BMC through Redfish, as racklift drives a real server's.

    on, off, restart (ForceRestart), pxe-once (network boot next, then power cycle or on),
    disk (boot from disk again: needed after a deploy, see racklift.bmc.redfish), state."""
    from racklift.lab import vrack
    if action not in ACTIONS:
        raise Exit(f"error: unknown action {action!r}; use one of {', '.join(ACTIONS)}", code=1)
    if not vrack.vrack_dir().exists():
        raise Exit("error: the virtual rack is not up here: run `invoke vrack.up`", code=1)
    with operator_errors():
        found = read_hosts(lab_connect(), Selection(names=(host,)))
        if not found:
            raise Exit(f"error: {host} is not in NetBox", code=1)
        # The same vars the lab's tag_racklift_lab_vm.yml (racklift.lab.sources) gives Ansible.
        lab_vars = {"racklift_bmc_port": vrack.BMC_PORT,
                    "racklift_bmc_ca_bundle": str(vrack.ca_bundle()),
                    "racklift_bmc_username": vrack.BMC_USERNAME,
                    "racklift_bmc_password": vrack.bmc_password()}
        with client_for(host, found[0].oob_ip, lab_vars) as bmc:
            if action == "on":
                bmc.power_on()
            elif action == "off":
                bmc.power_off()
            elif action == "restart":
                bmc.reset("ForceRestart")
            elif action == "pxe-once":
                bmc.network_boot_once()
            elif action == "disk":
                bmc.boot_from_disk()
            override = bmc.boot_override()
            console.print(f"{host}: power {bmc.power_state()}, boot {override.target} "
                          f"({override.enabled}, {override.mode or 'mode not reported'})")
