"""The invoke collections behind `invoke` in a checkout and the `racklift` console program."""

from __future__ import annotations

from contextlib import suppress

from invoke import Collection, task
from invoke.exceptions import Exit

from racklift.console import console
from racklift.tasks import image, lab, mirror, netbox, vrack
from racklift.tasks.netbox import bootstrap, expected, seed, up
from racklift.tasks.pipeline import locks, provision, reimage, unlock
from racklift.tasks.verify import bundle, facts_, parse, verify

DEMO_FLAKY_HOST = "lab-l01-02"


@task
def demo(c):
    """The built-in lab end to end: NetBox with the demo rack R01 (8 GPU servers, their
    expected state), then a lab rack L01 of 4 container hosts, one of them with a GPU that
    fell off the bus (Xid 79), through the gate: 3 admitted, 1 refused."""
    up(c)
    bootstrap(c)
    seed(c, racks=1)
    expected(c, rack="R01")
    lab.up(c, hosts=4, rack="L01")
    lab.heal(c, host=DEMO_FLAKY_HOST)  # a re-run starts from a healthy rack
    lab.fault(c, host=DEMO_FLAKY_HOST, kind="xid-79")
    with suppress(Exit):  # the refused host is the point of the demo
        verify(c, rack="L01")
    console.print(f"[bold]{DEMO_FLAKY_HOST} was refused, the others joined the pool.[/] "
                  f"Heal it and verify again: racklift lab.heal --host {DEMO_FLAKY_HOST} "
                  "&& racklift verify --rack L01")


namespace = Collection(demo, provision, reimage, verify, locks, unlock, parse, facts_, bundle)
namespace.add_collection(Collection.from_module(netbox), name="netbox")
namespace.add_collection(Collection.from_module(lab), name="lab")
namespace.add_collection(Collection.from_module(mirror), name="mirror")
namespace.add_collection(Collection.from_module(vrack), name="vrack")
namespace.add_collection(Collection.from_module(image), name="image")
