"""What the image stage decides, without I/O: the stage's options and timeouts, which boot
server serves a host, what a host lacks to be imaged, how long each wait is (on the boot
server's clock alone), what a host's deploy report and its SSH check mean, and the messages
that name what an operator must check. racklift.pipeline.image_stage runs the stage with them."""


from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from racklift.errors import RackliftError
from racklift.facts.parsers import ParseError, load_json
from racklift.imaging import diskimage, installer, ramdisk
from racklift.names import HOSTNAME_HINT, is_hostname
from racklift.netbox.desired import FIELD_PREFIX
from racklift.netbox.expected import ExpectedHost, Problem
from racklift.paths import REPO_ROOT

BOOT_SERVER_ROLE = "boot-server"
API_DATA = "/var/lib/racklift/boot"  # boot_server_api_data's default (roles/boot_server)
WAIT_TASK = "Wait on the boot server"
FACTS_TASK = "Gathering Facts"  # image_boot.yml's, on the boot server right before power-on
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
    # DHCP request → the OS installer powers the host off (racklift.imaging.installer): the
    # installer downloads and installs every package.
    install: float = 3600.0
    # Report → SSH answers: the reboot's POST (the longest hardware.boot_timeout of the hosts)
    # and then this, the image's first boot.
    ssh: float = 420.0
    # --apply-firmware: the updates, the reboot and the read back of one host's pins.
    firmware: float = 1800.0


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
    # --apply-firmware: bring hosts off their firmware and BIOS pins to them before imaging
    # (racklift.bmc.apply), the images from this directory (None: racklift.bmc.apply's).
    apply_firmware: bool = False
    firmware_dir: Path | None = None


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
    # The OS whose installer installs the host (its os_image is installer-<os>); None: the
    # image is deployed.
    installer: str | None = None

    @property
    def name(self) -> str:
        return self.host.name

    def installer_spec(self) -> installer.InstallerSpec:
        """The installer's settings from the host's inventory vars (a site's group vars)."""
        return installer.InstallerSpec(
            os=str(self.installer), mirror=self.hostvars.get("racklift_installer_mirror"),
            proxy=self.hostvars.get("racklift_installer_proxy"))


@dataclass(frozen=True)
class BootServer:
    name: str
    address: str  # its primary IP, without prefix length
    subnet: str  # the provisioning subnet (its primary IP's network)

    @property
    def url(self) -> str:
        return f"http://{self.address}"


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
    """Whether the host asks for the image racklift deploys or an OS installer racklift runs
    (None too where its context does not parse: its problems say so)."""
    wanted = host.desired.os_image if host.desired else image.name
    if wanted != image.name and installer.installer_os(wanted) is None:
        choices = ", ".join(repr(installer.marker_name(os)) for os in installer.RELEASES)
        return (f"{host.name}: racklift.os_image is {wanted!r} but racklift deploys images it "
                f"builds ({image.name!r}) or installs with an OS's installer ({choices}): set "
                "os_image to one of them in the host's config context")
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
              images: list[diskimage.DiskImage], disk: ramdisk.Ramdisk,
              media: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
    """The boot_server role's vars for one imaging run: these hosts deploy, nothing else;
    `media`: other files to publish, installer kernels (installer.packaged_media) and firmware
    images (image_power.firmware_files)."""
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
            *media,
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


def install_error(target: Target, seconds: float) -> str:
    return (f"the {target.installer} installer did not finish within {seconds:.0f} s of the DHCP "
            "request (racklift's preseed or autoinstall powers the host off at the end): see the "
            "host's console, and which installer files it fetched in the boot server's nginx "
            "access log; an installer waiting on a question shows it there")


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


def image_marker(image: diskimage.DiskImage) -> dict[str, str]:
    """The marker (/etc/racklift/image.json) a host deployed with `image` shows."""
    return {"name": image.name, "build_id": image.build_id}


def check_error(host: str, want: Mapping[str, str], nonce: str, found: Found,
                old_boot_ids: set[str]) -> str | None:
    """Why what `host` showed is not this deploy (`want`: the marker's name and build id;
    `nonce`: the one its deploy data carried)."""
    if found.boot_id in old_boot_ids:
        return (f"SSH answered with boot id {found.boot_id}, the one from before the deploy: "
                "the host did not reboot into the new image (check its boot order)")
    got = {k: found.marker.get(k) for k in want}
    if got != want:
        return (f"the image marker /etc/racklift/image.json says {got}, not {want}: the host "
                "booted another disk or image")
    if found.nonce != nonce:
        # Neither nonce is shown: the host's is its word (any text, any length).
        state = "another deploy's" if found.nonce else "missing"
        return (f"{host}: the deploy nonce in {NONCE_FILE} is {state}: the disk that booted is "
                "not the one this deploy wrote (an older disk with the same image, or another "
                "machine at its address): check its boot order and its disks")
    return None
