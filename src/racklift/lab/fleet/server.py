"""One process that answers SSH for every simulated host (lab only): it listens once in the
fleet's namespace (racklift.lab.fleet.network), and the address a connection came to says which
host was asked. A host answers the collector (`python3 - --sysfs-root ROOT`, the script on
stdin) with the document racklift's collector would print on it (racklift.lab.fleet.document),
after the real tools' time, and the acceptance tests' tools (racklift.lab.fleet.tools); anything
else it does not run (127), as a host without the tool.

It also answers each host's BMC, at its OOB address (racklift.lab.fleet.bmc), with the lab BMC
CA's certificate for every such address, and the BMC's power drives the host as a machine
(racklift.lab.fleet.machine): with `boot_servers`, a network boot goes through its site's boot
server, and an OS a deploy wrote answers SSH at the host's address on a listener of its own,
with the host key that deploy gave it.

Faults per host: the hardware faults the lab's emulator injects (racklift.lab.hwemu), two of
the wire's own: `unreachable` (the connection closed before the key exchange) and `garbage`
(the collector prints what is not JSON), and the BMC's (racklift.lab.fleet.bmc.BMC_FAULTS).

Run as `ip netns exec racklift-fleet python -m racklift.lab.fleet.server SPEC ...`: SPEC is the
JSON file `write_spec` writes, the fleet's size and faults, from which the plan is made again.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import logging
import random
import shlex
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from racklift.lab import hwemu, seed
from racklift.lab.fleet import bmc, document, machine, netboot, network, plan, tools
from racklift.lab.hwemu.faults import FAULTS
from racklift.lab.hwemu.latency import REALISTIC, delay

UNREACHABLE = "unreachable"
GARBAGE = "garbage"
WIRE_FAULTS = frozenset({UNREACHABLE, GARBAGE})
KINDS = WIRE_FAULTS | frozenset(FAULTS) | bmc.BMC_FAULTS | machine.MACHINE_FAULTS
# collect.py reads every tool at once, and reads NVLink's error counters twice, 5 s apart: its
# time is its slowest command's.
NVLINK_PAUSE = 5.0


def collect_seconds(table: Mapping[str, float] = REALISTIC) -> float:
    """How long collect.py takes on a host whose tools take `table`'s times."""
    def took(command: str) -> float:
        words = command.split()
        return delay(table, words[0], words[1:])
    nvlink = 2 * took("nvidia-smi nvlink -e") + NVLINK_PAUSE
    return max(nvlink, *(took(c) for c in ("nvidia-smi -q -x", "nvidia-smi topo -m",
                                           "ibnetdiscover", "ibstat", "ibv_devinfo")))


@dataclass(frozen=True)
class Spec:
    """What the server serves: the fleet `plan.plan(hosts, sites, hosts_per_rack)` makes, each
    host's faults, and the real tools' times (`latency`, hwemu's table: empty, they answer at
    once). The collector's time by the table is a median: each host's own is drawn around it,
    the same on every run."""

    hosts: int
    sites: int = 1
    hosts_per_rack: int = seed.HOSTS_PER_RACK
    faults: dict[str, list[str]] = field(default_factory=dict)
    latency: dict[str, float] = field(default_factory=dict)
    spread: float = 0.1  # of the log-normal around the median
    power_seconds: float = 0.0  # how long a BMC takes to change the power state (median)
    authorized_key: str = ""  # the controller's public key, OpenSSH's one-line form
    # Each site has a boot server on its link (racklift.lab.fleet.boot_servers), and a network
    # boot goes there, taking these times.
    boot_servers: bool = False
    post_seconds: float = 0.0
    link_gbps: float = 10.0

    def __post_init__(self) -> None:
        for host, kinds in self.faults.items():
            if unknown := sorted(set(kinds) - KINDS):
                raise ValueError(f"{host}: no fault {', '.join(unknown)}: the faults are "
                                 f"{', '.join(sorted(KINDS))}")

    def fleet(self) -> plan.FleetPlan:
        return plan.plan(self.hosts, self.sites, self.hosts_per_rack)

    @property
    def collect_seconds(self) -> float:
        return collect_seconds(self.latency) if self.latency else 0.0


def write_spec(spec: Spec, path: Path) -> None:
    path.write_text(json.dumps(asdict(spec), indent=1))


def read_spec(path: Path) -> Spec:
    return Spec(**json.loads(path.read_text()))


@dataclass(frozen=True)
class Host:
    plan: seed.HostPlan
    faults: tuple[str, ...]
    seconds: float

    def profile(self) -> hwemu.Profile:
        # Made when asked (a few ms), so thousands of hosts cost no memory.
        return document.profile_for(self.plan, [f for f in self.faults if f in FAULTS])

    def answer(self, sysfs_root: str) -> bytes:
        if GARBAGE in self.faults:
            return b"Traceback (most recent call last):\n  ... not a document\n"
        got = document.collector_document(self.plan, self.profile(), plan.SOFTWARE,
                                          collected_at=time.time())
        return json.dumps({**got, "sysfs_root": sysfs_root}).encode()


def hosts_by_address(spec: Spec, fleet: plan.FleetPlan) -> dict[str, Host]:
    hosts = {}
    for h in fleet.hosts:
        rng = random.Random(h.name)
        seconds = (spec.collect_seconds * rng.lognormvariate(0, spec.spread)
                   if spec.collect_seconds else 0.0)
        hosts[h.primary_ip.split("/")[0]] = Host(h, tuple(spec.faults.get(h.name, ())),
                                                 seconds)
    return hosts


def collector_root(command: str | None) -> str | None:
    """The sysfs root asked for when `command` is the collector's, else None."""
    try:
        words = shlex.split(command or "")
    except ValueError:
        return None
    if words[:2] != ["python3", "-"] or "--mirror" in words:
        return None
    rest = words[2:]
    if rest[:1] == ["--sysfs-root"] and len(rest) == 2:
        return rest[1]
    return "/sys" if not rest else None


class _Server(asyncssh.SSHServer):
    """Answers a host's SSH while its machine is in `state` (the OS it came with on the
    listener for every address; a deployed OS on its own)."""

    def __init__(self, hosts: Mapping[str, Host], machines: Mapping[str, machine.Machine],
                 state: str) -> None:
        self._hosts, self._machines, self._state = hosts, machines, state

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        address = conn.get_extra_info("sockname")[0]
        host = self._hosts.get(address)
        if (host is None or UNREACHABLE in host.faults
                or self._machines[address].state != self._state):
            conn.abort()


async def _serve_one(hosts: Mapping[str, Host], machines: Mapping[str, machine.Machine],
                     servers: tools.Servers, latency: Mapping[str, float],
                     process: asyncssh.SSHServerProcess) -> None:
    address = process.get_extra_info("sockname")[0]
    host = hosts[address]
    root = collector_root(process.command)
    stdin = await process.stdin.read()  # the script, to its end, as python3 would
    if root is not None:
        await asyncio.sleep(host.seconds)
        process.stdout.write(host.answer(root))
        process.exit(0)
        return
    try:
        words = shlex.split(process.command or "")
    except ValueError:
        words = []
    got = machines[address].answer(words, stdin) or tools.answer(
        address, words, stdin, lambda at: hosts[at].profile() if at in hosts else None,
        servers, latency)
    await asyncio.sleep(got.seconds)
    process.stdout.write(got.stdout.encode())
    process.stderr.write(got.stderr.encode())
    process.exit(got.rc)


@dataclass(frozen=True)
class BmcSettings:
    cert: Path
    key: Path
    username: str
    password_file: Path


@dataclass
class _Listeners:
    """The SSH listeners of deployed OSes, one per address, with its deploy's host key."""

    make: Any  # (address, Deployed) → an awaitable acceptor
    by_address: dict[str, asyncssh.SSHAcceptor] = field(default_factory=dict)

    async def up(self, address: str, deployed: machine.Deployed) -> None:
        self.down(address)
        self.by_address[address] = await self.make(address, deployed)

    def down(self, address: str) -> None:
        if (acceptor := self.by_address.pop(address, None)) is not None:
            acceptor.close()


async def _links(spec: Spec, fleet: plan.FleetPlan) -> dict[str, netboot.SiteLink]:
    """Site → its provisioning link, where the fleet has boot servers."""
    if not spec.boot_servers:
        return {}
    links = {}
    for number, site in enumerate(fleet.sites, 1):
        links[site.site] = netboot.SiteLink(network.NET.boot_link(number))
        await links[site.site].open()
    return links


async def serve(spec: Spec, host_key: Path, bmc_settings: BmcSettings, ssh_port: int = 22,
                bmc_port: int = 443) -> None:
    fleet = spec.fleet()
    hosts = hosts_by_address(spec, fleet)
    servers = tools.Servers()
    machines: dict[str, machine.Machine] = {}
    authorized = asyncssh.import_authorized_keys(spec.authorized_key)

    def factory(state: str) -> Any:
        # reuse_port: a deployed OS's listener takes its address from the one for every
        # address (the kernel prefers the listener bound to the address asked).
        return {"server_factory": lambda: _Server(hosts, machines, state),
                "process_factory": lambda p: _serve_one(hosts, machines, servers,
                                                        spec.latency, p),
                "encoding": None, "reuse_port": True}

    async def deployed_listener(address: str, deployed: machine.Deployed) -> Any:
        return await asyncssh.listen(
            address, ssh_port, server_host_keys=[asyncssh.import_private_key(
                base64.b64decode(deployed.host_key))],
            authorized_client_keys=asyncssh.import_authorized_keys(
                "\n".join(deployed.authorized_keys)), **factory(machine.DEPLOYED))

    await asyncssh.listen("", ssh_port, server_host_keys=[str(host_key)],
                          authorized_client_keys=authorized, **factory(machine.RUNNING),
                          # Thousands of clients at once: the listen queue, not the default
                          # 100, takes them.
                          backlog=4096)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(bmc_settings.cert, bmc_settings.key)
    bmcs = bmc.bmcs(list(fleet.hosts), spec.faults, spec.power_seconds)
    listeners = _Listeners(deployed_listener)
    links = await _links(spec, fleet)
    times = machine.BootTimes(spec.post_seconds, spec.link_gbps)
    for site in fleet.sites:
        for h in site.hosts:
            oob = bmcs[h.oob_ip.split("/")[0]]
            one = machine.Machine(h, oob, frozenset(spec.faults.get(h.name, ())),
                                  links.get(site.site), times, listeners.up, listeners.down)
            machines[one.address] = one
            oob.on_power = one.power
    await bmc.serve(bmcs, context, bmc_settings.username,
                    bmc_settings.password_file.read_text().strip(), bmc_port)
    logging.info("serving %d simulated hosts on port %d, their BMCs on %d%s", len(hosts),
                 ssh_port, bmc_port, f", {len(links)} sites' boot links" if links else "")
    await asyncio.Event().wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="racklift.lab.fleet.server", description=__doc__)
    parser.add_argument("spec", type=Path)
    parser.add_argument("--host-key", type=Path, required=True)
    parser.add_argument("--bmc-cert", type=Path, required=True)
    parser.add_argument("--bmc-key", type=Path, required=True)
    parser.add_argument("--bmc-username", required=True)
    parser.add_argument("--bmc-password-file", type=Path, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("asyncssh").setLevel(logging.WARNING)
    asyncio.run(serve(read_spec(args.spec), args.host_key, BmcSettings(
        args.bmc_cert, args.bmc_key, args.bmc_username, args.bmc_password_file)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
