"""The installer path: a host installed by its OS's own installer instead of an image.

Pure functions: from the same host data as an image deploy (`deploy_data.HostDeploy`, checked by
the same rules) render a Debian 12 preseed or an Ubuntu autoinstall (cloud-init `user-data` +
`meta-data`), and the iPXE script that boots the installer with them. The boot_server role
serves the result per host (`boot_server_hosts[].method: installer`, `.installer` =
`boot_server_installer()`): the script as `ipxe/<mac>.ipxe`, the files under
`installer/<hostname>/`. The installed system carries the racklift markers the image path
writes (`/etc/racklift/image.json`, `/etc/racklift/deploy.json`), named "installer-<os>", the
deploy's nonce (`/etc/racklift/deploy-nonce`) the image stage's SSH check reads back, and the SSH
host key racklift made for it (racklift.imaging.host_keys): the rendered files hold that key,
so the boot server serves them to the host's address alone and removes them on release. The
installer powers the host off when it is done: the image stage sees the end of an install as
the BMC's power state, boots the disk and checks the host over SSH.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from racklift.errors import RackliftError
from racklift.imaging.deploy_data import (
    DISK_RE,
    HOSTNAME_RE,
    NONCE_RE,
    HostDeploy,
    _check,
    _keys,
    _network,
    host_key_fields,
)

TEMPLATES = Path(__file__).with_name("installer")
URL_RE = re.compile(r"^https?://[A-Za-z0-9.:\[\]-]+(/[A-Za-z0-9._~%/+-]*)?$")


@dataclass(frozen=True)
class Release:
    family: str  # "debian" (preseed) or "ubuntu" (autoinstall)
    mirror: str  # the distribution's own archive; sites point it at their mirror


RELEASES = {
    "debian-12": Release("debian", "http://deb.debian.org/debian"),
    "ubuntu-22.04": Release("ubuntu", "http://archive.ubuntu.com/ubuntu"),
    "ubuntu-24.04": Release("ubuntu", "http://archive.ubuntu.com/ubuntu"),
}
MARKER_PREFIX = "installer-"  # the installed system's image name: installer-<os>
# The netboot installer a controller has from its own distribution's package, published to
# installer/<os>/ by the image stage: os → (directory, files). Others are the site's to publish
# (boot_server_files), or named by URL (InstallerSpec.kernel_url, initrd_url).
PACKAGED_MEDIA = {
    "debian-12": (Path("/usr/lib/debian-installer/images/12/amd64/text/debian-installer/amd64"),
                  ("linux", "initrd.gz"), "debian-installer-12-netboot-amd64"),
}


class InstallerError(RackliftError):
    """An installer configuration cannot be rendered: names the host, the field and the fix."""


@dataclass(frozen=True)
class InstallerSpec:
    """What an installer needs beyond the host's deploy data."""

    os: str  # a key of RELEASES
    mirror: str | None = None  # default: the release's archive
    # An HTTP proxy to that mirror, for the installer and the installed system's apt (a
    # provisioning network without a route out); None: the mirror is reached directly.
    proxy: str | None = None
    # The installer's netboot kernel and initrd (Debian: debian-installer-12-netboot-amd64's
    # linux and initrd.gz; Ubuntu: the live server ISO's casper/vmlinuz and initrd) and, for
    # Ubuntu, the ISO itself. Default: installer/<os>/ on the boot server.
    kernel_url: str | None = None
    initrd_url: str | None = None
    iso_url: str | None = None


@dataclass(frozen=True)
class Rendered:
    ipxe: str  # the host's iPXE script
    files: dict[str, str]  # served as installer/<hostname>/<name>
    marker: dict[str, str]  # /etc/racklift/image.json on the installed system


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.filters["tojson"] = lambda value: json.dumps(value)
    return env


def _url(host: str, field_name: str, value: str) -> str:
    if not isinstance(value, str) or not URL_RE.match(value):
        raise InstallerError(f"{host}: installer field '{field_name}' is {value!r}; give an "
                             "http(s) URL without spaces, quotes or query strings")
    return value.rstrip("/")


def build_id(os_name: str, mirror: str) -> str:
    """Hash of the installer recipe (templates, release, mirror): the same recipe gives the same
    id, as an image's build id does."""
    digest = hashlib.sha256(f"{os_name}\n{mirror}\n".encode())
    for template in sorted(TEMPLATES.glob("*.j2")):
        digest.update(template.name.encode() + b"\n" + template.read_bytes())
    return digest.hexdigest()[:16]


def marker_name(os_name: str) -> str:
    """The image name an installed system reports (and NetBox's racklift.os_image names)."""
    return f"{MARKER_PREFIX}{os_name}"


def installer_os(image_name: str) -> str | None:
    """The installer OS an os_image asks for ("installer-debian-12" → "debian-12"); None: an
    image racklift builds."""
    if image_name.startswith(MARKER_PREFIX) and image_name[len(MARKER_PREFIX):] in RELEASES:
        return image_name[len(MARKER_PREFIX):]
    return None


def render_installer(spec: HostDeploy, installer: InstallerSpec, boot_server_url: str,
                     nonce: str) -> Rendered:
    """The iPXE script and installer files for one host, every field checked first. `nonce`:
    this deploy's (deploy_data.new_nonce()), written on the installed disk."""
    host = spec.host if isinstance(spec.host, str) and spec.host else "<unnamed host>"
    _check(host, "host", spec.host, HOSTNAME_RE,
           "use a lowercase DNS label (letters, digits, '-') as the device name")
    hostname = _check(host, "hostname", spec.hostname or spec.host, HOSTNAME_RE,
                      "use a lowercase DNS label (letters, digits, '-')")
    disk = _check(host, "target_disk", spec.target_disk, DISK_RE,
                  "name the disk to install on as /dev/..., e.g. /dev/vda")
    keys = _keys(host, spec.authorized_keys)
    host_key = host_key_fields(host, spec.host_key)
    network = _network(spec, host)
    if installer.os not in RELEASES:
        raise InstallerError(f"{host}: installer field 'os' is {installer.os!r}; use one of "
                             f"{', '.join(RELEASES)}")
    release = RELEASES[installer.os]
    base = _url(host, "boot_server_url", boot_server_url)
    mirror = _url(host, "mirror", installer.mirror or release.mirror)
    proxy = _url(host, "proxy", installer.proxy) if installer.proxy else ""
    nonce = _check(host, "nonce", nonce, NONCE_RE, "use deploy_data.new_nonce()")
    media = f"{base}/installer/{installer.os}"
    marker = {"name": marker_name(installer.os), "build_id": build_id(installer.os, mirror)}
    interface = ipaddress.ip_interface(network["address"])
    context: dict[str, Any] = {
        "host": spec.host, "hostname": hostname, "os": installer.os, "disk": disk,
        "keys": keys, "host_key": host_key, "network": network, "ip": str(interface.ip),
        "netmask": str(interface.netmask), "mirror": mirror, "proxy": proxy, "nonce": nonce,
        "mirror_host": mirror.split("://", 1)[1].split("/", 1)[0],
        "mirror_dir": "/" + mirror.split("://", 1)[1].partition("/")[2],
        "files_url": f"{base}/installer/{spec.host}",
        "kernel_url": _url(host, "kernel_url", installer.kernel_url or
                           f"{media}/{'linux' if release.family == 'debian' else 'vmlinuz'}"),
        "initrd_url": _url(host, "initrd_url", installer.initrd_url or
                           f"{media}/{'initrd.gz' if release.family == 'debian' else 'initrd'}"),
        "iso_url": _url(host, "iso_url", installer.iso_url or f"{media}/live-server.iso"),
    }
    env = _environment()
    late = env.get_template("late-command.sh.j2").render(
        marker=marker, deploy={"host": spec.host, "image": marker["name"],
                               "build_id": marker["build_id"]}, **context)
    context["late_b64"] = base64.b64encode(late.encode()).decode()
    if release.family == "debian":
        files = {"preseed.cfg": env.get_template("preseed.cfg.j2").render(**context)}
        ipxe = env.get_template("debian.ipxe.j2").render(**context)
    else:
        files = {"user-data": env.get_template("user-data.j2").render(**context),
                 "meta-data": env.get_template("meta-data.j2").render(
                     instance_id=f"racklift-{hostname}-{marker['build_id']}", **context)}
        ipxe = env.get_template("ubuntu.ipxe.j2").render(**context)
    return Rendered(ipxe=ipxe, files=files, marker=marker)


def boot_server_installer(rendered: Rendered) -> dict[str, Any]:
    """The host's entry fields for the boot_server role's boot_server_hosts."""
    return {"method": "installer", "installer": {"ipxe": rendered.ipxe, "files": rendered.files}}


def packaged_media(os_name: str) -> list[dict[str, str]]:
    """The installer's kernel and initrd from the controller's package, as boot_server_files
    entries ([]: none packaged for this OS); RackliftError naming the package when missing."""
    if os_name not in PACKAGED_MEDIA:
        return []
    directory, files, package = PACKAGED_MEDIA[os_name]
    missing = [name for name in files if not (directory / name).is_file()]
    if missing:
        raise InstallerError(f"the {os_name} installer's {', '.join(missing)} is not on this "
                             f"controller ({directory}): install the Debian package {package}")
    return [{"src": str(directory / name), "dest": f"installer/{os_name}/{name}"}
            for name in files]
