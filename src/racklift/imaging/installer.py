"""The installer path: a host installed by its OS's own installer instead of an image.

Pure functions: from the same host data as an image deploy (`deploy_data.HostDeploy`, checked by
the same rules) render a Debian 12 preseed or an Ubuntu autoinstall (cloud-init `user-data` +
`meta-data`), and the iPXE script that boots the installer with them. The boot_server role
serves the result per host (`boot_server_hosts[].method: installer`, `.installer` =
`boot_server_installer()`): the script as `ipxe/<mac>.ipxe`, the files under
`installer/<hostname>/`. The installed system carries the racklift markers the image path
writes (`/etc/racklift/image.json`, `/etc/racklift/deploy.json`), named "installer-<os>".
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
from racklift.imaging.deploy_data import DISK_RE, HOSTNAME_RE, HostDeploy, _check, _keys, _network

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


class InstallerError(RackliftError):
    """An installer configuration cannot be rendered: names the host, the field and the fix."""


@dataclass(frozen=True)
class InstallerSpec:
    """What an installer needs beyond the host's deploy data."""

    os: str  # a key of RELEASES
    mirror: str | None = None  # default: the release's archive
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


def render_installer(spec: HostDeploy, installer: InstallerSpec,
                     boot_server_url: str) -> Rendered:
    """The iPXE script and installer files for one host, every field checked first."""
    host = spec.host if isinstance(spec.host, str) and spec.host else "<unnamed host>"
    _check(host, "host", spec.host, HOSTNAME_RE,
           "use a lowercase DNS label (letters, digits, '-') as the device name")
    hostname = _check(host, "hostname", spec.hostname or spec.host, HOSTNAME_RE,
                      "use a lowercase DNS label (letters, digits, '-')")
    disk = _check(host, "target_disk", spec.target_disk, DISK_RE,
                  "name the disk to install on as /dev/..., e.g. /dev/vda")
    keys = _keys(host, spec.authorized_keys)
    network = _network(spec, host)
    if installer.os not in RELEASES:
        raise InstallerError(f"{host}: installer field 'os' is {installer.os!r}; use one of "
                             f"{', '.join(RELEASES)}")
    release = RELEASES[installer.os]
    base = _url(host, "boot_server_url", boot_server_url)
    mirror = _url(host, "mirror", installer.mirror or release.mirror)
    media = f"{base}/installer/{installer.os}"
    marker = {"name": f"installer-{installer.os}", "build_id": build_id(installer.os, mirror)}
    interface = ipaddress.ip_interface(network["address"])
    context: dict[str, Any] = {
        "host": spec.host, "hostname": hostname, "os": installer.os, "disk": disk,
        "keys": keys, "network": network, "ip": str(interface.ip),
        "netmask": str(interface.netmask), "mirror": mirror,
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


def boot_server_installer(spec: HostDeploy, installer: InstallerSpec,
                          boot_server_url: str) -> dict[str, Any]:
    """The host's entry fields for the boot_server role's boot_server_hosts."""
    rendered = render_installer(spec, installer, boot_server_url)
    return {"method": "installer", "installer": {"ipxe": rendered.ipxe, "files": rendered.files}}
