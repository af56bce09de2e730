"""The deploy data a deploying host fetches (once) from the deploy API, its one-time token and
its nonce.

Pure functions: the controller renders each host's deploy data from NetBox's values, the image
artifact and a new nonce; the boot_server role stores it as hosts/<hostname>.json next to the
token's SHA-256 and the host's reserved address (host_record). The deploy ramdisk reads it with
sed, so every string is checked here to be plain: no quotes, backslashes, brackets or line
breaks. It writes the nonce on the disk it deployed, where the controller's SSH check reads it
back: a disk that holds this deploy's nonce is the one this deploy wrote; and the host's SSH host
key (racklift.imaging.host_keys), so that check knows the machine answering is that host.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from racklift.errors import RackliftError
from racklift.imaging import host_keys

HOSTNAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
MAC_RE = re.compile(r"^[0-9a-f]{2}([:-][0-9a-f]{2}){5}$")
DISK_RE = re.compile(r"^/dev/[A-Za-z0-9/_.-]+$")
# A whole disk by its kernel name: used as is (a VM's /dev/vda; a server's names can change
# between boots, so real servers name their disk by id).
KERNEL_DISK_RE = re.compile(r"/dev/(sd[a-z]+|vd[a-z]+|xvd[a-z]+|hd[a-z]+|nvme[0-9]+n[0-9]+)")
BY_ID = "/dev/disk/by-id/"
# udev's stable names: the deploy ramdisk has no udev, so it finds the disk by the identity
# the link is named after, as the kernel shows it in a file under /sys/block/<disk>.
BY_ID_FORMS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    # SAS and SATA disks: wwn-0x<NAA WWN>, the kernel's wwid of the same NAA designator.
    (re.compile(r"wwn-0x([0-9a-f]{16}|[0-9a-f]{32})", re.IGNORECASE), "device/wwid", "naa."),
    # NVMe namespaces: nvme-eui.<EUI-64 or NGUID>, the namespace's wwid.
    (re.compile(r"nvme-eui\.([0-9a-f]{16}|[0-9a-f]{32})", re.IGNORECASE), "wwid", "eui."),
)
# virtio disks (VMs) given a serial: virtio-<serial>; serials keep their case.
VIRTIO_BY_ID = re.compile(r"virtio-([A-Za-z0-9_.-]{1,20})")
DISK_HINT = ("name the whole disk by its udev link /dev/disk/by-id/wwn-0x<WWN> (SAS, SATA), "
             "/dev/disk/by-id/nvme-eui.<EUI> (NVMe) or /dev/disk/by-id/virtio-<serial>, or by "
             "its kernel name (/dev/vda, /dev/sda, /dev/nvme0n1)")
IMAGE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
BUILD_ID_RE = re.compile(r"^[0-9a-f]{8,64}$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
NONCE_RE = re.compile(r"^[0-9a-f]{32}$")
KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
             "ecdsa-sha2-nistp521", "sk-ssh-ed25519@openssh.com",
             "sk-ecdsa-sha2-nistp256@openssh.com")
KEY_RE = re.compile(r"^(?P<type>\S+) (?P<blob>[A-Za-z0-9+/]+={0,2})( [^\"\\\[\]\n\r]*)?$")
IMAGE_FORMAT = "raw.zst"  # zstd (disk.raw.zst): the ramdisk pipes it through `zstd -dc`


class DeployDataError(RackliftError):
    """A host's deploy data cannot be rendered: names the host, the field and the fix."""


@dataclass(frozen=True)
class ImageArtifact:
    name: str
    build_id: str
    sha256: str  # of the compressed image, as the ramdisk reads it off the wire

    def url(self, boot_server_url: str) -> str:
        return f"{boot_server_url.rstrip('/')}/images/{self.name}/{self.build_id}/disk.raw.zst"


@dataclass(frozen=True)
class HostDeploy:
    host: str  # the NetBox device name
    mac: str  # provisioning NIC
    address: str  # with prefix length, e.g. 10.90.0.11/24
    # The disk to overwrite (the host's racklift.os_disk): no default, a guess erases a disk.
    target_disk: str
    gateway: str | None = None
    dns: tuple[str, ...] = ()
    authorized_keys: tuple[str, ...] = field(default_factory=tuple)
    hostname: str | None = None  # defaults to host
    # Its SSH host key (host_keys.new_host_key()): written into /etc/ssh before the first boot,
    # the one key the run accepts from it.
    host_key: host_keys.HostKey | None = None


@dataclass(frozen=True)
class DiskIdentity:
    """How the deploy ramdisk finds a disk named by id: the disk whose /sys/block/<disk>/<sysfs>
    reads `value`."""

    sysfs: str
    value: str


def disk_identity(disk: str) -> DiskIdentity | None:
    """The identity of a disk named by its /dev/disk/by-id link; None for a kernel name, which
    the ramdisk uses as is. ValueError (with DISK_HINT) for any other name."""
    if KERNEL_DISK_RE.fullmatch(disk):
        return None
    name = disk.removeprefix(BY_ID) if disk.startswith(BY_ID) else ""
    for pattern, sysfs, prefix in BY_ID_FORMS:
        if found := pattern.fullmatch(name):
            return DiskIdentity(sysfs, prefix + found[1].lower())
    if found := VIRTIO_BY_ID.fullmatch(name):
        return DiskIdentity("serial", found[1])
    raise ValueError(DISK_HINT)


def new_token() -> str:
    """A one-time deploy token: 256 random bits, URL- and kernel-command-line-safe."""
    return secrets.token_urlsafe(32)


def new_nonce() -> str:
    """A deploy's nonce: 128 random bits as hex. Not a secret (it ends up on the host's disk),
    but nobody knows it before the deploy, so an older disk cannot hold it."""
    return secrets.token_hex(16)


def token_sha256(token: str) -> str:
    """What the boot server stores instead of the token."""
    return hashlib.sha256(token.encode()).hexdigest()


def normalize_mac(mac: str) -> str:
    """Lowercase with colons, as the boot server's file names and iPXE's ${net0/mac} use."""
    value = mac.strip().lower()
    if not MAC_RE.match(value):
        raise ValueError(f"{mac!r} is not a MAC address (expected 52:54:00:12:34:56)")
    return value.replace("-", ":")


def _fail(host: str, field_name: str, problem: str, fix: str) -> DeployDataError:
    return DeployDataError(f"{host}: deploy data field '{field_name}' {problem}; {fix}")


def _check(host: str, field_name: str, value: str, pattern: re.Pattern[str], fix: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise _fail(host, field_name, f"is {value!r}", fix)
    return value


def _network(spec: HostDeploy, host: str) -> dict[str, Any]:
    try:
        mac = normalize_mac(spec.mac)
    except (ValueError, AttributeError) as exc:
        raise _fail(host, "network.mac", str(exc),
                    "set the provisioning interface's MAC address in NetBox") from None
    if "/" not in (spec.address or ""):
        raise _fail(host, "network.address", f"is {spec.address!r} (no prefix length)",
                    "give the primary IP with its prefix, e.g. 10.90.0.11/24")
    try:
        interface = ipaddress.ip_interface(spec.address)
    except ValueError as exc:
        raise _fail(host, "network.address", str(exc), "fix the primary IP in NetBox") from None
    net = interface.network
    if net.prefixlen < net.max_prefixlen - 1 and interface.ip in (net.network_address,
                                                                   net.broadcast_address):
        raise _fail(host, "network.address", f"{interface} is the network's own address",
                    "give the host an address inside its prefix")
    gateway = None
    if spec.gateway:
        try:
            gateway = ipaddress.ip_address(spec.gateway)
        except ValueError as exc:
            raise _fail(host, "network.gateway", str(exc), "fix the gateway address") from None
        if gateway not in net or gateway == interface.ip:
            raise _fail(host, "network.gateway", f"{gateway} is not another address in {net}",
                        "use a gateway on the host's provisioning network")
    dns = []
    for server in spec.dns:
        try:
            dns.append(str(ipaddress.ip_address(server)))
        except ValueError as exc:
            raise _fail(host, "network.dns", str(exc), "list DNS servers as IP addresses") \
                from None
    return {"mac": mac, "address": str(interface), "gateway": str(gateway) if gateway else None,
            "dns": dns}


def _keys(host: str, keys: Sequence[str]) -> list[str]:
    if isinstance(keys, str) or not keys:
        raise _fail(host, "authorized_keys", "is empty" if not keys else "is one string",
                    "give a list of at least one SSH public key, or nobody can log in")
    out = []
    for number, key in enumerate(keys, 1):
        match = KEY_RE.match(key.strip()) if isinstance(key, str) else None
        if not match or match["type"] not in KEY_TYPES:
            raise _fail(host, "authorized_keys", f"entry {number} is not a plain OpenSSH public "
                        "key", "give 'TYPE BASE64 [comment]' without options, quotes or "
                        "brackets (e.g. the content of ~/.ssh/id_ed25519.pub)")
        out.append(key.strip())
    return out


def host_key_fields(host: str, key: host_keys.HostKey | None) -> dict[str, str]:
    """The host key's deploy data fields; DeployDataError when there is none or it is not one
    host_keys made."""
    if key is None:
        raise _fail(host, "ssh_host_ed25519_key", "is missing",
                    "give the host a key from racklift.imaging.host_keys.new_host_key()")
    try:
        return host_keys.deploy_fields(key)
    except ValueError as exc:
        raise _fail(host, "ssh_host_ed25519_key", str(exc), "make a new one") from None


def _target_disk(host: str, disk: str) -> dict[str, str | None]:
    _check(host, "target_disk", disk, DISK_RE, DISK_HINT)
    try:
        identity = disk_identity(disk)
    except ValueError:
        raise _fail(host, "target_disk", f"is {disk!r}", DISK_HINT) from None
    return {"target_disk": disk, "target_disk_sysfs": identity.sysfs if identity else None,
            "target_disk_id": identity.value if identity else None}


def render(spec: HostDeploy, image: ImageArtifact, boot_server_url: str,
           nonce: str) -> dict[str, Any]:
    """The deploy data for one host, checked field by field (schema in the boot contract);
    `nonce`: this deploy's (new_nonce), which the ramdisk writes on the disk."""
    host = spec.host if isinstance(spec.host, str) and spec.host else "<unnamed host>"
    _check(host, "host", spec.host, HOSTNAME_RE,
           "use a lowercase DNS label (letters, digits, '-') as the device name")
    hostname = _check(host, "hostname", spec.hostname or spec.host, HOSTNAME_RE,
                      "use a lowercase DNS label (letters, digits, '-')")
    if not boot_server_url.startswith("http://"):
        raise _fail(host, "image.url", f"would start with {boot_server_url!r}",
                    "serve images over plain http:// (the deploy ramdisk's busybox wget has "
                    "no TLS; the sha256 check protects the image)")
    return {
        "host": spec.host,
        "nonce": _check(host, "nonce", nonce, NONCE_RE, "use deploy_data.new_nonce()"),
        "image": {
            "name": _check(host, "image.name", image.name, IMAGE_NAME_RE,
                           "use the image name racklift built (e.g. debian12)"),
            "build_id": _check(host, "image.build_id", image.build_id, BUILD_ID_RE,
                               "use the build id `invoke image.build` printed"),
            "url": image.url(boot_server_url),
            "sha256": _check(host, "image.sha256", image.sha256, SHA256_RE,
                             "use the disk.raw.zst.sha256 written next to the image"),
            "format": IMAGE_FORMAT,
        },
        **_target_disk(host, spec.target_disk),
        "hostname": hostname,
        "authorized_keys": _keys(host, spec.authorized_keys),
        **host_key_fields(host, spec.host_key),
        "network": _network(spec, host),
    }


def host_record(token: str, deploy: dict[str, Any], address: str) -> dict[str, Any]:
    """hosts/<hostname>.json on the boot server: the token's hash, never the token, and the
    address the deploy API answers it for (the one reserved for the host's MAC)."""
    return {"token_sha256": token_sha256(token), "address": str(ipaddress.ip_address(address)),
            "deploy": deploy}
