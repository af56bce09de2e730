"""Lab tasks: a rack of container hosts with emulated GPU hardware, faults, Molecule. Each
imports the lab when it runs (racklift.tasks.lab_netbox says why)."""

from __future__ import annotations

from invoke import task
from invoke.exceptions import Exit

from racklift.console import console
from racklift.errors import RackliftError
from racklift.netbox.reader import Selection, read_hosts
from racklift.tasks.common import connect, operator_errors
from racklift.tasks.lab_netbox import lab_connect, lab_session


@task(help={"hosts": "number of hosts (1-240)", "rack": "rack name in NetBox",
            "site": "site slug"})
def up(c, hosts=4, rack="L01", site="lab1"):
    """Start N lab hosts (systemd + sshd containers), register them in NetBox, give each its
    emulated GPUs/HCAs. Re-running converges."""
    from racklift.lab import rack as lab_rack
    with operator_errors():
        result = lab_rack.up(lab_connect(), int(hosts), rack, site)
    console.print(f"{len(result.hosts)} lab hosts up in {result.seconds:.1f} s "
                  f"({result.created} created; containers use {result.memory_mib:.0f} MiB)")
    for h in result.hosts:
        console.print(f"  {h.name}  {h.primary_ip}  {h.macs['eno1']}  serial {h.serial}")


@task
def down(c):
    """Remove the lab's containers, its network and its hosts' NetBox records (nothing else)."""
    from racklift.lab import rack as lab_rack
    with operator_errors():
        try:
            netbox = lab_connect()
        except RackliftError as exc:  # NetBox down must not keep the containers alive
            console.print(f"[yellow]NetBox not reachable ({exc}); removing containers only[/]")
            netbox = None
        result = lab_rack.down(netbox)
    console.print(f"removed {result.containers} containers and {result.devices} NetBox devices")


@task
def status(c):
    """The lab's containers and their state."""
    from racklift.lab import hosts
    with operator_errors():
        found = hosts.containers()
    for name, info in sorted(found.items()):
        console.print(f"{name}  {info['State']}")
    console.print(f"{len(found)} lab containers")


def _macs(name: str) -> dict[str, str]:
    host = next(iter(read_hosts(connect(), Selection(names=(name,)))), None)
    if host is None:
        raise Exit(f"error: {name} is not in NetBox", code=1)
    return {i.name: i.mac for i in host.interfaces if i.mac}


@task(help={"rack": "lab rack name"})
def replan(c, rack="L01"):
    """Put the lab rack's hosts back to `planned` (journal entry each), so provision starts
    over on them. Lab hosts only."""
    from racklift.lab import hosts
    from racklift.lab import rack as lab_rack
    with operator_errors():
        found = hosts.containers()
        names = [n for n, info in found.items()
                 if info.get("Labels", {}).get("racklift.rack") == rack]
        changed = lab_rack.replan(lab_connect(), names) if names else 0
    console.print(f"{changed} of {len(names)} lab hosts in {rack} back to planned")


@task(help={"host": "lab host name",
            "kind": "fault kind(s), comma-separated (an unknown kind is refused with the list "
                    "of known ones)"})
def fault(c, host, kind):
    """Inject faults into one lab host's hardware (heal with lab.heal)."""
    from racklift.lab import hardware, hwemu
    lab_session()
    kinds = [k.strip() for k in kind.split(",") if k.strip()]
    with operator_errors():
        unknown = sorted(set(kinds) - set(hwemu.FAULTS))
        if unknown:
            raise Exit(f"error: unknown fault kind(s) {', '.join(unknown)}; "
                       f"known: {', '.join(sorted(hwemu.FAULTS))}", code=1)
        profile = hardware.inject({host: kinds}, {host: _macs(host)}, connect().settings)[host]
    console.print(f"{host}: faults now {', '.join(profile.faults)}")


@task(help={"host": "lab host name"})
def heal(c, host):
    """Remove every injected fault from one lab host."""
    from racklift.lab import hardware
    lab_session()
    with operator_errors():
        hardware.heal([host], {host: _macs(host)}, connect().settings)
    console.print(f"{host}: healthy")


@task(help={"role": "role name (default: every role with a scenario)",
            "command": "molecule command: test, converge, verify, destroy, ..."})
def molecule(c, role=None, command="test"):
    """Run Molecule scenarios on the local lab image (all roles, or one)."""
    from racklift.lab import molecule as molecule_runner
    roles = [role] if role else molecule_runner.roles_with_scenarios()
    failed = []
    with operator_errors():
        for name in roles:
            console.print(f"[bold]molecule {command}: {name}[/]")
            if molecule_runner.run(name, command).returncode != 0:
                failed.append(name)
    if failed:
        raise Exit(f"error: molecule {command} failed for {', '.join(failed)}", code=1)
