"""The image stage of the pipeline (DESIGN.md step 3): each host PXE-boots racklift's deploy
ramdisk from its site's boot server, which streams the OS image onto its disk; the host comes
back on SSH with a new boot id and the image's marker.

`image_hosts` is the pipeline's ImageStage: host name → error (None: imaged). Per host, with
a timeout per phase and one clear error each; one host's failure never stops the others:

1. From NetBox: provisioning MAC and IP, BMC (OOB IP), the host's desired state
   (racklift.netbox.desired: the OS image, racklift builds `debian12`; the disk to write it
   to, `os_disk`; the device type's `hardware.boot_timeout`), the boot server: THE active
   device with role `boot-server` in the host's site (none or several is an error naming the
   site).
   From the inventory (playbooks/image_hostvars.yml): BMC port, CA and credentials (vault or
   environment), the SSH key Ansible uses (its .pub is authorized on the deployed host, or the
   host var `racklift_authorized_keys`), and the boot id of a host that already runs.
2. A one-time token, a nonce and deploy data per host (racklift.imaging.deploy_data); the
   boot_server role on the boot server (playbooks/image_boot.yml) with only these hosts
   deploying, the ramdisk and the image (copied when their checksum differs).
3. Redfish: one-time network boot, then power on (or force restart when on).
4. On the boot server (playbooks/image_wait.yml): the MAC's DHCP request (timeout: the MAC,
   and MACs the boot server ignored), then the ramdisk's report (failure: its phase and reason).
   Times there are the boot server's own: its journal is compared with its clock only.
5. Redfish: boot from disk again, always (sushy-tools keeps "Once" forever and its VM reboots
   into the network: then a power cycle makes the disk boot take effect). Hosts that failed
   after power-on are powered off, so they do not loop through network boots.
6. SSH (playbooks/image_check.yml, the inventory's connection, the lab's ProxyCommand): a new
   boot id, this deploy's nonce on the disk (the ramdisk wrote it: an older disk of the same
   image has another or none) and the marker (name + build id); NetBox's custom field
   `racklift_image` records it.
7. However the stage ends, after step 5: each boot server drops the deploy scripts and deploy
   data (tokens, their hashes) of the hosts it was given (playbooks/image_release.yml).

Secrets: tokens and the vars file with them, and the host vars file with the BMC credentials,
live in a 0700 directory outside the run directory, deleted at the end; tokens never appear
in errors or progress. The pipeline writes NetBox status and journal.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from racklift.ansible import HostEvent, PlaybookResult, run_playbook
from racklift.bmc.redfish import BmcError, client_for
from racklift.errors import RackliftError
from racklift.facts.parsers import ParseError, load_json
from racklift.imaging import deploy_data, diskimage, ramdisk
from racklift.names import HOSTNAME_HINT, is_hostname
from racklift.netbox.client import NetBox
from racklift.netbox.desired import FIELD_PREFIX
from racklift.netbox.model import ExpectedHost, Problem
from racklift.paths import REPO_ROOT
from racklift.pipeline.plan import IMAGE
from racklift.pipeline.progress import Progress
from racklift.pipeline.state import Transition, apply

BOOT_SERVER_ROLE = "boot-server"
IMAGE_FIELD = "racklift_image"
API_DATA = "/var/lib/racklift/boot"  # boot_server_api_data's default (roles/boot_server)
WAIT_TASK = "Wait on the boot server"
FACTS_TASK = "Gathering Facts"  # image_boot.yml's, on the boot server right before power-on
BOOT_ID_TASK = "Current boot id"
CHECK_TASK = "Boot id, deploy nonce and image marker"
NONCE_FILE = "/etc/racklift/deploy-nonce"  # written by the deploy ramdisk (ramdisk/init)
NETBOX_INVENTORY = REPO_ROOT / "inventory" / "netbox.racklift.yml"


@dataclass(frozen=True)
class Timeouts:
    """Seconds per phase, each host against its own clock."""

    # Power-on → the boot server sees the MAC's DHCP request; None: each host's
    # hardware.boot_timeout (its device type's POST).
    dhcp: float | None = None
    deploy: float = 900.0  # DHCP request → the ramdisk's report (streaming the image)
    # Report → SSH answers: the reboot's POST (the longest hardware.boot_timeout of the hosts)
    # and then this, the image's first boot.
    ssh: float = 420.0


@dataclass(frozen=True)
class ImagingOptions:
    timeouts: Timeouts = Timeouts()
    # Non-secret vars for the playbooks (the lab's tests name their namespace here).
    extravars: Mapping[str, Any] = field(default_factory=dict)
    # More Ansible inventory sources after NetBox's, e.g. host vars a site keeps elsewhere.
    inventory: tuple[str, ...] = ()
    # What to deploy; None: built (or found in the cache) from the image recipe.
    image: diskimage.DiskImage | None = None
    # Another image for some hosts (by name): the tests give one host a corrupted copy (other
    # build id, so another URL; the real image's checksum) to see its ramdisk refuse it.
    images: Mapping[str, diskimage.DiskImage] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """One host to image, with what its deploy needs."""

    host: ExpectedHost
    mac: str  # lowercase with colons
    boot_server: str
    image: diskimage.DiskImage
    disk: str  # racklift.os_disk
    boot_timeout: float  # hardware.boot_timeout: power-on → DHCP request, the firmware's POST
    hostvars: Mapping[str, Any] = field(default_factory=dict, repr=False)  # BMC credentials

    @property
    def name(self) -> str:
        return self.host.name


@dataclass(frozen=True)
class BootServer:
    name: str
    address: str  # its primary IP, without prefix length
    subnet: str  # the provisioning subnet (its primary IP's network)

    @property
    def url(self) -> str:
        return f"http://{self.address}"


# ---------------------------------------------------------------------------------------------
# Pure


def boot_server_for(host: ExpectedHost, servers: list[Mapping[str, Any]]) -> BootServer:
    """The boot server of the host's site: exactly one active device with role boot-server."""
    here = [s for s in servers if (s.get("site") or {}).get("slug") == host.site]
    if len(here) != 1:
        found = "none" if not here else ", ".join(sorted(s["name"] for s in here))
        raise RackliftError(f"{host.name}: site {host.site} needs exactly one active device "
                            f"with role {BOOT_SERVER_ROLE} in NetBox (found {found}): racklift "
                            "boots each host from its site's boot server")
    server = here[0]
    if not is_hostname(server.get("name")):
        raise RackliftError(f"{host.name}: boot server {str(server.get('name'))[:80]!r} (NetBox "
                            f"device {server.get('id')}): name: {HOSTNAME_HINT}")
    address = (server.get("primary_ip4") or {}).get("address")
    if not address:
        raise RackliftError(f"{host.name}: boot server {server['name']} has no primary IPv4 in "
                            "NetBox: give it its provisioning address as primary IP")
    interface = ipaddress.ip_interface(address)
    return BootServer(server["name"], str(interface.ip), str(interface.network))


def imaging_problems(host: ExpectedHost) -> list[Problem]:
    """What imaging needs of a host's record beyond what every host needs (its `problems`,
    which name each value of a context that does not parse): the pipeline's preflight for
    hosts headed for imaging."""
    problems = []
    if not host.oob_ip:
        problems.append(Problem(host.name, "oob_ip", "no BMC address: imaging needs the BMC's "
                                "IP as the device's OOB IP in NetBox"))
    if host.desired is not None and host.desired.os_disk is None:
        problems.append(Problem(host.name, f"{FIELD_PREFIX}.os_disk", (
            "no disk to write the image to: record it in the device's local context data as "
            "racklift.os_disk, by a stable name such as /dev/disk/by-id/wwn-0x5000c500a1b2c3d4 "
            "(racklift never guesses which disk to overwrite)")))
    return problems


def image_problem(host: ExpectedHost, image: diskimage.DiskImage) -> str | None:
    """Whether the host asks for the image racklift deploys (None too where its context does
    not parse: its problems say so)."""
    wanted = host.desired.os_image if host.desired else image.name
    if wanted != image.name:
        return (f"{host.name}: racklift.os_image is {wanted!r} but racklift deploys images it "
                f"builds ({image.name!r}): set os_image to {image.name!r} in the host's "
                "config context")
    return None


@dataclass(frozen=True)
class BootClock:
    """One instant as the boot server's clock (epoch seconds) and the controller's monotonic
    clock read it. The waits on the boot server compare its journal and its clock with times
    reckoned on its own clock from this instant, adding durations measured on the controller:
    the two machines' clocks are never compared."""

    server: float
    monotonic: float

    def server_time(self, monotonic: float) -> float:
        """The boot server's time at an instant of the controller's monotonic clock."""
        return self.server + (monotonic - self.monotonic)


def boot_clock(facts: Mapping[str, Any], received: float) -> BootClock | None:
    """From the facts Ansible gathered on the boot server (FACTS_TASK's result), received at
    `received` (monotonic); None without the time in them."""
    epoch = (facts.get("ansible_facts") or {}).get("ansible_date_time", {}).get("epoch")
    return BootClock(float(epoch), received) if epoch else None


def dhcp_window(clock: BootClock, powered_on: float, timeout: float) -> tuple[float, float]:
    """Since when and until when (boot server's clock) a DHCP request of a host powered on at
    `powered_on` (monotonic) counts: from the clock's instant, before the power-on, to
    `timeout` after it."""
    return clock.server, clock.server_time(powered_on) + timeout


def dhcp_timeout(target: Target, timeouts: Timeouts) -> float:
    """Power-on → DHCP request: the run's override, else the device type's boot timeout."""
    return target.boot_timeout if timeouts.dhcp is None else timeouts.dhcp


def ssh_timeout(targets: list[Target], timeouts: Timeouts) -> float:
    """The SSH wait after the deploys: the reboot's POST of the slowest device type, then the
    image's first boot."""
    return max((t.boot_timeout for t in targets), default=0.0) + timeouts.ssh


def authorized_keys(host: str, hostvars: Mapping[str, Any]) -> tuple[str, ...]:
    """The keys the deployed host authorizes: racklift_authorized_keys, else the public half
    of the SSH key Ansible connects with (so the inventory reaches the host it deployed)."""
    keys = hostvars.get("racklift_authorized_keys")
    if keys:
        return tuple([keys] if isinstance(keys, str) else keys)
    private = hostvars.get("ansible_ssh_private_key_file")
    public = Path(f"{private}.pub") if private else None
    if public is None or not public.is_file():
        raise RackliftError(f"{host}: no SSH public key to authorize on the deployed host: "
                            "set racklift_authorized_keys, or ansible_ssh_private_key_file "
                            f"with its .pub next to it (looked for {public})")
    return (public.read_text().strip(),)


def boot_vars(server: BootServer, hosts: list[Mapping[str, Any]],
              images: list[diskimage.DiskImage], disk: ramdisk.Ramdisk) -> dict[str, Any]:
    """The boot_server role's vars for one imaging run: these hosts deploy, nothing else."""
    return {
        "boot_server_listen_address": server.address,
        "boot_server_dhcp_subnet": server.subnet,
        "boot_server_ramdisk_build_id": disk.build_id,
        "boot_server_hosts": hosts,
        "boot_server_files": [
            {"src": str(disk.kernel), "dest": f"{disk.url_path}/vmlinuz"},
            {"src": str(disk.initrd), "dest": f"{disk.url_path}/initrd.img"},
            *({"src": f"{image.path}{suffix}", "dest": f"{image.url_path}{suffix}"}
              for image in images for suffix in ("", ".sha256")),
        ],
    }


def dhcp_error(target: Target, seconds: float, ignored: list[str]) -> str:
    others = [m for m in ignored if m != target.mac]
    seen = (f"; it ignored DHCP requests from MACs it does not know: {', '.join(others)}"
            if others else "")
    return (f"no DHCP request from {target.mac} (the provisioning MAC in NetBox) reached boot "
            f"server {target.boot_server} within {seconds:.0f} s of power-on{seen}: check that "
            "the NIC's MAC matches NetBox, that it is cabled to the provisioning network and "
            "that the firmware network-boots from it")


def report_error(target: Target, report: Any, seconds: float) -> str | None:
    """Why a host's deploy report (what its ramdisk posted: the host's word) is no success."""
    if report is None:
        return (f"no deploy report within {seconds:.0f} s of the DHCP request: see the host's "
                "console (the deploy ramdisk logs there) and the boot server's "
                "racklift-deploy-api journal")
    if not isinstance(report, Mapping):
        return "the deploy report is not a JSON object: see the boot server's racklift-deploy-api"
    if report.get("result") != "success":
        return (f"the deploy ramdisk reported failure in phase {str(report.get('phase'))[:40]}: "
                f"{str(report.get('reason') or 'no reason given')[:300]}")
    return None


BOOT_ID = re.compile(r"ramdisk boot id ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                     r"[0-9a-f]{12})\b")


def ramdisk_boot_id(report: Mapping[str, Any]) -> str | None:
    """The ramdisk's boot id, from its success report ('... ramdisk boot id <uuid>')."""
    found = BOOT_ID.search(str(report.get("reason", "")))
    return found[1] if found else None


class Found(NamedTuple):
    """What a deployed host showed over SSH (CHECK_TASK)."""

    boot_id: str
    nonce: str  # NONCE_FILE's content, "" where there is none
    marker: dict[str, Any]  # /etc/racklift/image.json


def parse_check(stdout: str) -> Found:
    """CHECK_TASK's output: the boot id, the nonce and /etc/racklift/image.json, in this order;
    ValueError unless the marker is a JSON object."""
    boot_id, _, rest = stdout.strip().partition("\n")
    nonce, _, marker = rest.partition("\n")
    try:
        found = load_json(marker, "image marker")
    except ParseError as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(found, dict):
        raise ValueError("the image marker is not a JSON object")
    return Found(boot_id.strip(), nonce.strip(), found)


def check_error(host: str, image: diskimage.DiskImage, nonce: str, found: Found,
                old_boot_ids: set[str]) -> str | None:
    """Why what `host` showed is not this deploy (`nonce`: the one its deploy data carried)."""
    if found.boot_id in old_boot_ids:
        return (f"SSH answered with boot id {found.boot_id}, the one from before the deploy: "
                "the host did not reboot into the new image (check its boot order)")
    want = {"name": image.name, "build_id": image.build_id}
    got = {k: found.marker.get(k) for k in want}
    if got != want:
        return (f"the image marker /etc/racklift/image.json says {got}, not {want}: the host "
                "booted another disk or image")
    if found.nonce != nonce:
        # Neither nonce is shown: the host's is its word (any text, any length).
        state = "another deploy's" if found.nonce else "missing"
        return (f"{host}: the deploy nonce in {NONCE_FILE} is {state}: the disk that booted is "
                "not the one this deploy's ramdisk wrote (an older disk with the same image, or "
                "another machine at its address): check its boot order and its disks")
    return None


# ---------------------------------------------------------------------------------------------
# I/O


@contextmanager
def _secrets_dir() -> Iterator[Path]:
    """0700, outside the run directory (runner artifacts are kept), removed at the end."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(tempfile.mkdtemp(prefix="racklift-image-",
                                 dir=runtime if runtime and os.path.isdir(runtime) else None))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _write_secret(path: Path, data: Any) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(data, out)
    return path


def with_boot_servers(directory: Path, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment of a playbook run whose inventory also holds the boot servers (the
    NetBox inventory takes GPU servers only): a second racklift_netbox source in `directory`,
    with `extra` inventory sources after both."""
    boot_sources = directory / "boot-servers.racklift.yml"
    boot_sources.write_text(f"plugin: racklift_netbox\nroles: [{BOOT_SERVER_ROLE}]\n")
    return {"ANSIBLE_INVENTORY": ",".join([str(NETBOX_INVENTORY), str(boot_sources), *extra])}


class _Run:
    """One imaging run over a rack's hosts (the pipeline calls the stage per rack)."""

    def __init__(self, netbox: NetBox, run_dir: Path, progress: Progress,
                 options: ImagingOptions, secrets: Path) -> None:
        self.netbox, self.run_dir, self.progress = netbox, run_dir, progress
        self.options, self.secrets = options, secrets
        self.errors: dict[str, str | None] = {}
        self.started: dict[str, float] = {}  # power-on, per host (monotonic)
        self.clocks: dict[str, BootClock] = {}  # per boot server, read right before power-on
        self.disk_boot_set: set[str] = set()  # hosts whose BMC was told to boot the disk again
        # Per host given to its boot server (set before the role runs there): its deploy's
        # nonce, which the SSH check reads back; these hosts' boot servers are released.
        self.nonces: dict[str, str] = {}
        self.env = with_boot_servers(secrets, options.inventory)

    def fail(self, name: str, why: str) -> None:
        if self.errors.get(name) is None:
            self.errors[name] = why
            self.progress.failed(name, IMAGE, why)

    def note(self, name: str, text: str) -> None:
        since = self.started.get(name)
        self.progress.note(f"{name}: {text}" + (f" ({time.monotonic() - since:.0f} s after "
                                                "power-on)" if since else ""))

    def playbook(self, name: str, hosts: list[str], ident: str,
                 extravars: Mapping[str, Any] | None = None, capture: tuple[str, ...] = (),
                 expected_to_fail: str = "",
                 received: dict[str, float] | None = None) -> PlaybookResult:
        """`received`: when each host's captured result came (monotonic), filled in."""
        def event(got: HostEvent) -> None:
            if received is not None and got.task in capture and got.kind == "ok":
                received[got.host] = time.monotonic()
            # A task that may fail (a host that does not run yet) is no failure to show.
            if not (got.task == expected_to_fail and got.kind in ("failed", "unreachable")):
                self.progress.event(got)
        return run_playbook(name, hosts, self.netbox.settings, self.env,
                            artifacts=self.run_dir / "ansible", ident=ident,
                            extravars={**self.options.extravars, **(extravars or {})},
                            on_event=event, capture=capture)

    def live(self, targets: list[Target]) -> list[Target]:
        return [t for t in targets if self.errors.get(t.name) is None]


def _resolve(run: _Run, hosts: list[ExpectedHost], image: diskimage.DiskImage,
             ) -> tuple[list[Target], dict[str, BootServer]]:
    images = run.options.images
    servers = run.netbox.get_all("dcim/devices", {"role": BOOT_SERVER_ROLE, "status": "active",
                                                  "site": sorted({h.site for h in hosts})},
                                 fields=("id", "name", "site", "primary_ip4"))
    targets, by_name = [], {}
    for host in hosts:
        host_image = images.get(host.name, image)
        problems = [*map(str, imaging_problems(host)), image_problem(host, host_image)]
        desired = host.desired
        try:
            if not host.provisioning_mac:
                raise RackliftError(f"{host.name}: no MAC on its provisioning interface "
                                    f"{host.provisioning_interface} in NetBox: add it")
            if desired is None:
                raise RackliftError(f"{host.name}: {FIELD_PREFIX}: the config context does not "
                                    f"parse: `racklift netbox.expected --host {host.name}` "
                                    "names each value racklift cannot take")
            if desired.os_disk is None or any(problems):
                raise RackliftError("; ".join(p for p in problems if p))
            server = boot_server_for(host, servers)
        except RackliftError as exc:
            run.fail(host.name, str(exc))
            continue
        by_name[server.name] = server
        targets.append(Target(host, deploy_data.normalize_mac(host.provisioning_mac),
                              server.name, host_image, desired.os_disk,
                              desired.hardware.boot_timeout))
    return targets, by_name


def _hostvars(run: _Run, targets: list[Target], ident: str) -> tuple[list[Target],
                                                                     dict[str, str]]:
    """Targets with their inventory vars, and the boot ids of hosts that already run."""
    result = run.playbook("image_hostvars.yml", [t.name for t in targets],
                          f"image-hostvars-{ident}",
                          {"racklift_image_secrets_dir": str(run.secrets)}, (BOOT_ID_TASK,),
                          expected_to_fail=BOOT_ID_TASK)
    with_vars = []
    for t in targets:
        path = run.secrets / f"{t.name}.json"
        if not path.exists():
            run.fail(t.name, f"reading its inventory vars: {result.failed.get(t.name, '?')}")
            continue
        values = {k: v for k, v in json.loads(path.read_text()).items()
                  if v not in (None, "", "None")}
        path.unlink()
        with_vars.append(replace(t, hostvars=values))
    boot_ids = {name: str(res["stdout"]).strip() for name, tasks in result.captured.items()
                for task, res in tasks.items() if task == BOOT_ID_TASK and res.get("stdout")}
    return with_vars, boot_ids


def _prepare_boot_servers(run: _Run, targets: list[Target], servers: dict[str, BootServer],
                          disk: ramdisk.Ramdisk, ident: str) -> dict[str, str]:
    """Tokens per host; each boot server set up to deploy its hosts."""
    tokens: dict[str, str] = {}
    for name, server in sorted(servers.items()):
        mine = [t for t in run.live(targets) if t.boot_server == name]
        entries = []
        for t in mine:
            nonce = deploy_data.new_nonce()
            try:
                spec = deploy_data.HostDeploy(
                    host=t.name, mac=t.mac, address=t.host.primary_ip or "",
                    authorized_keys=authorized_keys(t.name, t.hostvars), target_disk=t.disk)
                data = deploy_data.render(spec, deploy_data.ImageArtifact(
                    t.image.name, t.image.build_id, t.image.sha256), server.url, nonce)
            except RackliftError as exc:
                run.fail(t.name, str(exc))
                continue
            tokens[t.name], run.nonces[t.name] = deploy_data.new_token(), nonce
            entries.append({"name": t.name, "mac": t.mac, "ip": t.host.address,
                            "deploy": True, "method": "image", "token": tokens[t.name],
                            "deploy_data": data})
        if not entries:
            continue
        vars_file = _write_secret(run.secrets / f"boot-{name}.json",
                                  boot_vars(server, entries, _images(mine), disk))
        run.progress.note(f"boot server {name}: serving {len(entries)} deploys")
        received: dict[str, float] = {}
        result = run.playbook("image_boot.yml", [name], f"image-boot-{name}-{ident}",
                              {"racklift_image_vars_file": str(vars_file)}, (FACTS_TASK,),
                              received=received)
        vars_file.unlink()
        facts = result.captured.get(name, {}).get(FACTS_TASK)
        clock = boot_clock(facts, received[name]) if facts and name in received else None
        if name in result.failed or name not in result.ok:
            why = result.failed.get(name, "the playbook did not run on it")
        elif clock is None:
            why = "the facts Ansible gathered on it hold no time (ansible_date_time)"
        else:
            run.clocks[name] = clock
            continue
        for entry in entries:
            run.fail(entry["name"], f"boot server {name}: {why}")
    return tokens


def _images(targets: list[Target]) -> list[diskimage.DiskImage]:
    return list({t.image.path: t.image for t in targets}.values())


def _bmc(run: _Run, t: Target, operation: str, action: Callable[[Any], None]) -> None:
    try:
        with client_for(t.name, t.host.oob_ip, t.hostvars) as bmc:
            action(bmc)
    except BmcError as exc:
        run.fail(t.name, f"{operation}: {exc}")


def _parallel(targets: list[Target], work: Callable[[Target], None]) -> None:
    if targets:
        with ThreadPoolExecutor(max_workers=min(32, len(targets))) as pool:
            list(pool.map(work, targets))


def _power_on(run: _Run, targets: list[Target]) -> None:
    def one(t: Target) -> None:
        _bmc(run, t, "network boot", lambda bmc: bmc.network_boot_once())
        if run.errors.get(t.name) is None:
            run.note(t.name, "network boot once, powered on through Redfish")
            run.started[t.name] = time.monotonic()
    _parallel(targets, one)


def _wait(run: _Run, phase: str, targets: list[Target],
          windows: Mapping[str, tuple[float, float]], tokens: dict[str, str],
          ident: str) -> dict[str, Any]:
    """Per boot server, the wait script's answer for `targets` (see playbooks/files), each
    host's window (since, deadline) on its boot server's clock."""
    answers: dict[str, Any] = {"hosts": {}, "ignored": []}
    for server in sorted({t.boot_server for t in targets}):
        mine = [t for t in targets if t.boot_server == server]
        request = {"phase": phase, "api_data": API_DATA, "poll": 2, "hosts": [
            {"name": t.name, "mac": t.mac, "since": windows[t.name][0],
             "deadline": windows[t.name][1],
             "token_sha256": hashlib.sha256(tokens[t.name].encode()).hexdigest()}
            for t in mine]}
        result = run.playbook("image_wait.yml", [server], f"image-wait-{phase}-{server}-{ident}",
                              {"racklift_image_wait": request}, (WAIT_TASK,))
        res = result.captured.get(server, {}).get(WAIT_TASK)
        if res is None:
            for t in mine:
                run.fail(t.name, f"waiting on boot server {server}: "
                                 f"{result.failed.get(server, 'no answer')}")
            continue
        try:
            answer = json.loads(res["stdout"])
            answers["hosts"].update({t.name: answer["hosts"][t.name] for t in mine
                                     if t.name in answer["hosts"]})
            answers["ignored"] += [str(mac) for mac in answer["ignored"]]
        except (KeyError, TypeError, ValueError) as exc:
            for t in mine:
                run.fail(t.name, f"waiting on boot server {server}: its wait script's answer "
                                 f"cannot be read ({type(exc).__name__}): see its run's "
                                 "Ansible artifacts")
    return answers


def _disk_boot(run: _Run, targets: list[Target], succeeded: set[str]) -> None:
    """Boot from disk again, always; cycle power where the BMC kept the network boot
    (sushy-tools); power off hosts that failed, so they stop network-booting."""
    def one(t: Target) -> None:
        def act(bmc: Any) -> None:
            before = bmc.boot_override()
            bmc.boot_from_disk()
            if t.name not in succeeded:
                bmc.power_off()
            elif before.target == "Pxe" and before.enabled == "Continuous":
                bmc.reset("ForceRestart")
        ok = run.errors.get(t.name) is None
        run.disk_boot_set.add(t.name)
        _bmc(run, t, "setting the boot device back to the disk", act)
        if ok and run.errors.get(t.name) is None:
            run.note(t.name, "boots from its disk again")
    _parallel(targets, one)


def _check(run: _Run, targets: list[Target], old_ids: dict[str, set[str]],
           ident: str) -> None:
    if not targets:
        return
    timeout = ssh_timeout(targets, run.options.timeouts)
    result = run.playbook("image_check.yml", [t.name for t in targets], f"image-check-{ident}",
                          {"racklift_image_ssh_timeout": int(timeout)}, (CHECK_TASK,))
    updates = []
    for t in targets:
        marker = f"{t.image.name} {t.image.build_id}"
        res = result.captured.get(t.name, {}).get(CHECK_TASK)
        if res is None:
            run.fail(t.name, f"after the deploy, SSH: {result.failed.get(t.name, 'no answer')}"
                             f" (timeout {timeout:.0f} s)")
            continue
        try:
            found = parse_check(str(res.get("stdout", "")))
        except ValueError:
            run.fail(t.name, "the deployed host has no readable /etc/racklift/image.json")
            continue
        why = check_error(t.name, t.image, run.nonces[t.name], found, old_ids.get(t.name, set()))
        if why:
            run.fail(t.name, why)
            continue
        run.note(t.name, f"answers on SSH with boot id {found.boot_id}, this deploy's nonce and "
                         f"image {marker}")
        # The stage's journal entry ("imaged") follows, when the stage completes.
        updates.append(Transition(t.host.netbox_id, None, fields={IMAGE_FIELD: marker}))
    apply(run.netbox, updates)


def image_hosts(netbox: NetBox, hosts: list[ExpectedHost], run_dir: Path, progress: Progress,
                options: ImagingOptions = ImagingOptions()) -> dict[str, str | None]:
    """Image `hosts` (the pipeline's ImageStage); host name → error, None when imaged."""
    ident = (hosts[0].rack or "no-rack").lower() if hosts else "none"
    image = options.image or diskimage.build()
    disk = ramdisk.build(image)
    progress.note(f"image {image.name} {image.build_id} ({image.size // 2**20} MiB), "
                  f"ramdisk {disk.build_id}")
    with _secrets_dir() as secrets:
        run = _Run(netbox, run_dir, progress, options, secrets)
        run.errors = {h.name: None for h in hosts}
        targets, servers = _resolve(run, hosts, image)
        targets, boot_ids = _hostvars(run, run.live(targets), ident)
        try:
            tokens = _prepare_boot_servers(run, targets, servers, disk, ident)
            _deploy(run, run.live(targets), tokens, boot_ids, ident)
        finally:
            # Whatever ended the stage, an error included, no host is left network-booting:
            # the disk again, and those not deployed powered off; then, even if that failed,
            # no boot server keeps a token of this run.
            try:
                _disk_boot(run, [t for t in targets if t.name in run.started
                                 and t.name not in run.disk_boot_set], set())
            finally:
                _release(run, [t for t in targets if t.name in run.nonces], ident)
    return run.errors


def _release(run: _Run, targets: list[Target], ident: str) -> None:
    """Per boot server, one run of playbooks/image_release.yml: the deploy scripts and deploy
    data of the hosts it was given removed. Where that fails, the operator is told what is
    left (the hosts' own results stand: their tokens are bound to their addresses)."""
    for server in sorted({t.boot_server for t in targets}):
        mine = [t for t in targets if t.boot_server == server]
        result = run.playbook("image_release.yml", [server], f"image-release-{server}-{ident}",
                              {"racklift_image_release": [{"name": t.name, "mac": t.mac}
                                                          for t in mine]})
        if server in result.failed or server not in result.ok:
            run.progress.note(
                f"boot server {server}: the deploy scripts and deploy data of "
                f"{', '.join(t.name for t in mine)} could not be removed "
                f"({result.failed.get(server, 'the playbook did not run on it')}): the next "
                "image run there removes them, or remove ipxe/<mac>.ipxe and "
                "hosts/<name>.json there by hand")


def _deploy(run: _Run, live: list[Target], tokens: dict[str, str],
            boot_ids: dict[str, str], ident: str) -> None:
    """Power on, wait for DHCP and the deploy report, boot the disk again, check over SSH."""
    timeouts = run.options.timeouts
    _power_on(run, live)
    powered = run.live(live)
    windows = {t.name: dhcp_window(run.clocks[t.boot_server], run.started[t.name],
                                   dhcp_timeout(t, timeouts)) for t in powered}
    dhcp = _wait(run, "dhcp", powered, windows, tokens, ident)
    for t in powered:
        at = dhcp["hosts"].get(t.name, {}).get("at")
        if at is None:
            run.fail(t.name, dhcp_error(t, dhcp_timeout(t, timeouts), dhcp["ignored"]))
        else:
            after = at - run.clocks[t.boot_server].server_time(run.started[t.name])
            run.progress.note(f"{t.name}: DHCP request seen by the boot server "
                              f"{after:.0f} s after power-on")
            windows[t.name] = (at, at + timeouts.deploy)
    requested = run.live(powered)
    # Off now, not after the others' deploys: a host without DHCP keeps network-booting.
    _disk_boot(run, [t for t in powered if t not in requested], set())
    reports = _wait(run, "report", requested, windows, tokens, ident)
    old_ids: dict[str, set[str]] = {}
    for t in requested:
        report = reports["hosts"].get(t.name, {}).get("report")
        why = report_error(t, report, timeouts.deploy)
        if why:
            run.fail(t.name, why)
            continue
        run.note(t.name, f"deployed: {report.get('reason')}")
        old_ids[t.name] = {i for i in (boot_ids.get(t.name), ramdisk_boot_id(report)) if i}
    deployed = {t.name for t in run.live(requested)}
    _disk_boot(run, requested, deployed)
    _check(run, [t for t in run.live(requested) if t.name in deployed], old_ids, ident)
