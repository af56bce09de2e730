"""A simulated host as a machine (lab only): what its power and boot do. Its BMC
(racklift.lab.fleet.bmc) powers it on, off or restarts it; it then takes its firmware's time
(POST) and boots what the BMC's boot override says, once: from the network, it goes through its
site's real boot server as racklift's deploy ramdisk would (racklift.lab.fleet.netboot: DHCP,
iPXE, the deploy data, the image's time on the link, the report) and reboots; from its disk,
it runs the OS it came with or the one a deploy wrote, which presents the host key and
authorizes the keys that deploy's data gave it, and shows its nonce and image marker.

While it is off or booting it answers no SSH; each boot gives it a new boot id.

Faults: `provisioning-mac-wrong` (its NIC's MAC is not the one NetBox records: the boot
server ignores it), `deploy-disk-missing` (the ramdisk finds no target disk and reports so),
`disk-boot-old` (the deploy succeeds, but the firmware boots the disk it came with, whose OS
has its old host key).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cache

from racklift.ansible import script
from racklift.imaging.diskimage import marker
from racklift.lab import seed
from racklift.lab.fleet import netboot
from racklift.lab.fleet.bmc import SimBmc
from racklift.lab.fleet.tools import Answer

MAC_WRONG = "provisioning-mac-wrong"
DISK_MISSING = "deploy-disk-missing"
OLD_DISK = "disk-boot-old"
MACHINE_FAULTS = frozenset({MAC_WRONG, DISK_MISSING, OLD_DISK})
BOOT_ID = ["cat", "/proc/sys/kernel/random/boot_id"]
REUSED_TOKEN_PAUSE = 10.0  # the ramdisk's wait before rebooting when its deploy already ran
# The ramdisk's fetch: 5 tries, 3 s apart, while the server does not answer at all (the deploy
# API may be restarting when a host that takes no time to POST asks).
FETCH_TRIES, FETCH_PAUSE = 5, 3.0

RUNNING, DOWN, DEPLOYED = "running", "down", "deployed"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Deployed:
    """What a deploy wrote on the host's disk, from its deploy data."""

    nonce: str
    marker: str  # /etc/racklift/image.json
    host_key: str  # ssh_host_ed25519_key: the private key, base64 of OpenSSH's format
    authorized_keys: tuple[str, ...]


@dataclass(frozen=True)
class BootTimes:
    post: float = 0.0  # power-on → the firmware's first DHCP, and again at every reboot
    link_gbps: float = 10.0  # the provisioning link: the ramdisk's and the image's time on it
    ramdisk: float = 0.0  # the ramdisk's kernel boot → its own DHCP


@cache
def image_check() -> bytes:
    """What racklift's image stage sends `sh -s` on a deployed host."""
    return script("image_check.sh")


def _new_boot_id() -> str:
    return str(uuid.uuid4())


@dataclass
class Machine:
    """One simulated host's power and boot. `up(address, deployed)` starts the SSH listener
    of a deployed OS, `down(address)` stops it."""

    host: seed.HostPlan
    bmc: SimBmc
    faults: frozenset[str]
    link: netboot.SiteLink | None  # its site's provisioning link; None: no boot server there
    times: BootTimes
    up: Callable[[str, Deployed], Awaitable[None]]
    down: Callable[[str], None]
    boot_id: str = field(default_factory=_new_boot_id)
    state: str = RUNNING  # the OS it came with until the BMC first powers it
    deployed: Deployed | None = None
    _task: asyncio.Task[None] | None = None

    @property
    def address(self) -> str:
        return self.host.primary_ip.split("/")[0]

    @property
    def mac(self) -> str:
        return self.host.macs[seed.PROVISIONING].lower()

    def power(self, on: bool) -> None:
        """The BMC turned it off, on, or restarted it: whatever ran stops."""
        if self._task is not None:
            self._task.cancel()
        self.down(self.address)
        self.state = DOWN
        self._task = asyncio.get_running_loop().create_task(self._boot()) if on else None
        if self._task is not None:
            self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("%s: its boot failed: %r", self.host.name, exc)

    async def _boot(self) -> None:
        while True:
            await asyncio.sleep(self.times.post)
            boot = self.bmc.boot
            if (boot.get("BootSourceOverrideTarget") == "Pxe"
                    and boot.get("BootSourceOverrideEnabled") in ("Once", "Continuous")):
                if boot["BootSourceOverrideEnabled"] == "Once":  # a real BMC's: used up
                    boot.update(BootSourceOverrideEnabled="Disabled",
                                BootSourceOverrideTarget="None")
                try:
                    outcome = await self._network_boot()
                except (OSError, TimeoutError, ValueError, KeyError, TypeError) as exc:
                    log.info("%s: the deploy ramdisk stops: %s", self.host.name, exc)
                    outcome = "halt"
                if outcome == "reboot":
                    continue
                if outcome == "halt":  # the ramdisk stops there, as it does on a failure
                    return
            self.boot_id = _new_boot_id()
            if self.deployed is not None and OLD_DISK not in self.faults:
                await self.up(self.address, self.deployed)
                self.state = DEPLOYED
            else:
                self.state = RUNNING
            return

    async def _network_boot(self) -> str:
        """The firmware's PXE, iPXE, and the deploy ramdisk: "reboot" when it ends in a reboot,
        "disk" when the network gives it nothing to boot, "halt" when the ramdisk stops."""
        mac = self.mac if MAC_WRONG not in self.faults else "02:00:5e:00:00:01"
        if self.link is None or await self.link.lease(mac, arch=netboot.EFI_X64) is None:
            return "disk"
        ipxe = await self.link.lease(mac, arch=netboot.EFI_X64, user_class=netboot.IPXE)
        if ipxe is None or not ipxe.boot_file.startswith("http://"):
            return "disk"
        source = ipxe.address
        got = await netboot.http("GET", ipxe.boot_file, source)
        chain = netboot.chained(got.body.decode(errors="replace"), mac) if got.status == 200 \
            else None
        got = await netboot.http("GET", chain, source) if chain else None
        boot = (netboot.ramdisk_boot(got.body.decode(errors="replace"))
                if got is not None and got.status == 200 else None)
        if boot is None:  # not being deployed: iPXE exits to the local disk
            log.info("%s: iPXE boots the local disk (%s)", self.host.name,
                     f"{chain}: {got.status}" if got else f"{ipxe.boot_file}: no chain")
            return "disk"
        size = await netboot.size_of(boot.kernel, source) + await netboot.size_of(
            boot.initrd, source)
        await asyncio.sleep(netboot.transfer_seconds(size, self.times.link_gbps))
        return await self._ramdisk(boot.cmdline)

    @staticmethod
    async def _fetch(method: str, url: str, source: str,
                     body: bytes | None = None) -> netboot.HttpAnswer:
        for _ in range(FETCH_TRIES - 1):
            try:
                return await netboot.http(method, url, source, body)
            except OSError:
                await asyncio.sleep(FETCH_PAUSE)
        return await netboot.http(method, url, source, body)

    async def _ramdisk(self, cmdline: dict[str, str]) -> str:
        self.boot_id = _new_boot_id()
        await asyncio.sleep(self.times.ramdisk)
        assert self.link is not None
        lease = await self.link.lease(self.mac)
        if lease is None:
            return "halt"
        api, token = cmdline["racklift.api"], cmdline["racklift.token"]
        source = lease.address
        got = await self._fetch("GET", f"{api}/v1/deploy/{token}", source)
        if got.status == 410:
            await asyncio.sleep(REUSED_TOKEN_PAUSE)
            return "reboot"
        if got.status != 200:
            await self._report(api, token, source, "failure", "deploy-data",
                               f"GET {api}/v1/deploy/<token>: {got.status}")
            return "halt"
        data = netboot.deploy_json(got.body)
        image, disk = data["image"], data["target_disk"]
        if DISK_MISSING in self.faults:
            await self._report(api, token, source, "failure", "disk",
                               f"target disk {disk} does not exist (disks: sda)")
            return "halt"
        started = time.monotonic()
        await asyncio.sleep(netboot.transfer_seconds(
            await netboot.size_of(image["url"], source), self.times.link_gbps))
        self.deployed = Deployed(str(data["nonce"]), marker(image["name"], image["build_id"]),
                                 str(data["ssh_host_ed25519_key"]),
                                 tuple(str(k) for k in data["authorized_keys"]))
        await self._report(api, token, source, "success", "done",
                           f"wrote {image['name']} {image['build_id']} to {disk}: streamed and "
                           f"verified in {time.monotonic() - started:.0f} s; ramdisk boot id "
                           f"{self.boot_id}")
        return "reboot"

    async def _report(self, api: str, token: str, source: str, result: str, phase: str,
                      reason: str) -> None:
        body = json.dumps({"result": result, "phase": phase, "reason": reason})
        got = await self._fetch("POST", f"{api}/v1/report/{token}", source, body.encode())
        if got.status != 204:
            log.info("%s: the deploy API took no report (%d)", self.host.name, got.status)

    def answer(self, words: list[str], stdin: bytes) -> Answer | None:
        """What the running OS says to the commands racklift's image stage sends it; None for
        the others (racklift.lab.fleet.tools answers them)."""
        if words == ["true"]:
            return Answer(0)
        if words == BOOT_ID:
            return Answer(0, self.boot_id + "\n")
        if words == ["sh", "-s"] and stdin == image_check():
            if self.deployed is None:
                return Answer(1, f"{self.boot_id}\n\n",
                              "cat: /etc/racklift/image.json: No such file or directory\n")
            return Answer(0, f"{self.boot_id}\n{self.deployed.nonce}\n{self.deployed.marker}")
        return None
