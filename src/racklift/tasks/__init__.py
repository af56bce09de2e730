"""The invoke collections behind `invoke` in a checkout and the `racklift` console program."""

from __future__ import annotations

from invoke import Collection, task

from racklift.tasks import lab, netbox
from racklift.tasks.netbox import bootstrap, expected, seed, up
from racklift.tasks.verify import bundle, facts_, parse, verify


@task
def demo(c):
    """Bring up the lab NetBox, seed the demo rack (R01, 8 GPU servers), show what it expects."""
    up(c)
    bootstrap(c)
    seed(c, racks=1)
    expected(c, rack="R01")


namespace = Collection(demo, verify, parse, facts_, bundle)
namespace.add_collection(Collection.from_module(netbox), name="netbox")
namespace.add_collection(Collection.from_module(lab), name="lab")
