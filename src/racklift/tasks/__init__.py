"""The invoke collections behind `invoke` in a checkout and the `racklift` console program."""

from __future__ import annotations

from contextlib import suppress

from invoke import Collection, task
from invoke.exceptions import Exit

from racklift.console import console
from racklift.tasks import bmc, fleet, image, lab, lab_netbox, mirror, netbox, vrack
from racklift.tasks.lab_netbox import lab_connect, lab_session, seed, up
from racklift.tasks.netbox import bootstrap, expected
from racklift.tasks.pipeline import accept, locks, provision, reimage, unlock
from racklift.tasks.verify import bundle, facts_, parse, verify

DEMO_FLAKY_HOST = "lab-l01-02"


@task
def demo(c):
    """The built-in lab end to end: NetBox with the demo rack R01 (8 GPU servers, their
    expected state), then a lab rack L01 of 4 planned container hosts, one of them with a GPU
    that fell off the bus (Xid 79), provisioned with live progress: configured by the node
    roles, verified against NetBox, load-tested (DCGM, NCCL all-reduce, RDMA per rail in
    pairs), 3 joined the pool, 1 refused. The containers run the OS
    they were made with, so their image stage is skipped (--no-image). Then the virtual rack
    V01: a VM behind a Redfish BMC taken through the whole pipeline, from power-off to the
    pool: imaged through racklift's boot server, configured by every node role (NVIDIA's
    repositories are the rack's stand-ins, its GPU and HCA emulated), verified, active."""
    from racklift.lab import rack as lab_rack
    from racklift.lab import vrack as virtual_rack
    lab_session()  # production's bootstrap and provision below run on the lab
    up(c)
    bootstrap(c)
    seed(c, racks=1)
    expected(c, rack="R01")
    lab.up(c, hosts=4, rack="L01")
    lab.replan(c, rack="L01")  # a re-run starts over
    lab.heal(c, host=DEMO_FLAKY_HOST)
    lab.fault(c, host=DEMO_FLAKY_HOST, kind="xid-79")
    with suppress(Exit):  # the refused host is the point of the demo
        provision(c, rack="L01", no_image=True)
    vrack.up(c, vms=1)
    lab_rack.replan(lab_connect(), [vm.name for vm in virtual_rack.plan(1, virtual_rack.LAB)])
    provision(c, rack=virtual_rack.LAB.rack)
    console.print(f"[bold]{DEMO_FLAKY_HOST} was refused, the others joined the pool; the VM "
                  "went from power-off to the pool.[/] "
                  f"Heal the refused host and re-image it: racklift lab.heal --host "
                  f"{DEMO_FLAKY_HOST}, then racklift reimage --host {DEMO_FLAKY_HOST} "
                  "--reason 'GPU reseated' --no-image told the lab's NetBox and inventory "
                  "source (docs/lab.md)")


namespace = Collection(demo, provision, reimage, accept, verify, locks, unlock, parse, facts_,
                       bundle)
# The lab NetBox's tasks sit beside the production ones under netbox.*; lab tasks use the lab
# NetBox when NETBOX_URL is not set and racklift started it (lab_netbox.lab_session).
netbox_tasks = Collection.from_module(netbox)
for lab_task in Collection.from_module(lab_netbox).tasks.values():
    netbox_tasks.add_task(lab_task)
namespace.add_collection(netbox_tasks, name="netbox")
namespace.add_collection(Collection.from_module(lab), name="lab")
namespace.add_collection(Collection.from_module(mirror), name="mirror")
namespace.add_collection(Collection.from_module(vrack), name="vrack")
namespace.add_collection(Collection.from_module(image), name="image")
namespace.add_collection(Collection.from_module(bmc), name="bmc")
namespace.add_collection(Collection.from_module(fleet), name="fleet")
