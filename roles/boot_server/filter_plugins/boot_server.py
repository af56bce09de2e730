"""Filters for the boot_server role: checks of boot_server_hosts, and the hosts without secrets.

Pure functions; the role's validate.yml fails on any problem before anything changes.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
METHODS = ("image", "installer")
DHCP_MODES = ("authoritative", "proxy")
# Where boot_server_files may go under the HTTP root (the contract's layout).
FILE_AREAS = ("ramdisk/", "images/", "installer/", "firmware/")
# A host's token, and what holds its SSH host key (racklift.imaging.host_keys): its deploy data,
# its preseed or autoinstall.
SECRET_KEYS = ("token", "deploy_data", "installer")
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _subnet(value: str) -> ipaddress.IPv4Network | None:
    try:
        return ipaddress.ip_network(value, strict=True) if value else None
    except ValueError:
        return None


def boot_server_setting_problems(mode: str, subnet: str, listen: str,
                                 ramdisk_build_id: str, hosts: list[dict[str, Any]],
                                 files: list[dict[str, Any]]) -> list[str]:
    """The role's own settings: DHCP mode, subnet, listen address, ramdisk, published files."""
    problems = []
    if mode not in DHCP_MODES:
        problems.append(f"boot_server_dhcp_mode must be one of {', '.join(DHCP_MODES)} "
                        f"(got {mode!r})")
    net = _subnet(subnet)
    if net is None or net.version != 4:
        net = None
        problems.append("boot_server_dhcp_subnet must be the IPv4 provisioning subnet in CIDR "
                        "form, "
                        f"e.g. 10.90.0.0/24 (got {subnet!r})")
    try:
        address = ipaddress.ip_address(listen)
    except ValueError:
        problems.append("boot_server_listen_address must be this server's IP address on the "
                        f"provisioning network (got {listen!r})")
    else:
        if net is not None and address not in net:
            problems.append(f"boot_server_listen_address {listen} is outside "
                            f"boot_server_dhcp_subnet {subnet}")
    image_deploys = [h for h in hosts if isinstance(h, dict) and h.get("deploy")
                     and h.get("method", "image") == "image"]
    if image_deploys and not re.match(r"^[A-Za-z0-9._-]+$", ramdisk_build_id or ""):
        problems.append("boot_server_ramdisk_build_id must name the deploy ramdisk's build "
                        f"(ramdisk/<build id>/) when hosts deploy an image (got "
                        f"{ramdisk_build_id!r}; build the ramdisk first)")
    for entry in files if isinstance(files, list) else [files]:
        dest = entry.get("dest", "") if isinstance(entry, dict) else ""
        if (not isinstance(entry, dict) or not entry.get("src")
                or not dest.startswith(FILE_AREAS) or ".." in dest.split("/")):
            problems.append("boot_server_files entries need src (a controller path) and dest "
                            f"under {', '.join(FILE_AREAS)} of the HTTP root (got {entry!r})")
    return problems


def boot_server_host_problems(hosts: list[dict[str, Any]], subnet: str) -> list[str]:
    """Each problem names the host and the field, and never shows a token."""
    if not isinstance(hosts, list):
        return [f"boot_server_hosts must be a list of hosts (got a {type(hosts).__name__})"]
    net = _subnet(subnet)
    problems: list[str] = []
    seen: dict[str, dict[str, str]] = {"name": {}, "mac": {}, "ip": {}}
    for index, host in enumerate(hosts):
        if not isinstance(host, dict):
            problems.append(f"boot_server_hosts[{index}] must be a mapping with name, mac, ip")
            continue
        name = str(host.get("name", ""))
        label = name or f"boot_server_hosts[{index}]"
        if not NAME.match(name):
            problems.append(f"{label}: name must be a lowercase DNS label (the NetBox device "
                            f"name) (got {name!r})")
        mac = str(host.get("mac", ""))
        if not MAC.match(mac):
            problems.append(f"{label}: mac {mac!r} is not a MAC address in lowercase with "
                            "colons (aa:bb:cc:dd:ee:ff); fix the provisioning MAC in NetBox")
        ip = str(host.get("ip", ""))
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            problems.append(f"{label}: ip {ip!r} is not an IP address; set the primary IP "
                            "of the provisioning interface in NetBox")
        else:
            if net is not None and address not in net:
                problems.append(f"{label}: ip {ip} is outside the DHCP subnet {subnet} "
                                "(boot_server_dhcp_subnet); fix the primary IP in NetBox")
            if net is not None and address in (net.network_address, net.broadcast_address):
                problems.append(f"{label}: ip {ip} is the network or broadcast address of "
                                f"{subnet}")
        for field, value in (("name", name), ("mac", mac), ("ip", ip)):
            if value and value in seen[field]:
                problems.append(f"{label}: {field} {value} is also used by "
                                f"{seen[field][value]}; each host needs its own {field}")
            seen[field].setdefault(value, label)
        problems.extend(f"{label}: {p}" for p in _deploy_problems(host))
    return problems


def _deploy_problems(host: dict[str, Any]) -> list[str]:
    method = host.get("method", "image")
    if method not in METHODS:
        return [f"method must be one of {', '.join(METHODS)} (got {method!r})"]
    if not isinstance(host.get("deploy", False), bool):
        return [f"deploy must be true or false (got {host.get('deploy')!r})"]
    if not host.get("deploy"):
        return []
    if method == "installer":
        installer = host.get("installer")
        if (not isinstance(installer, dict) or not str(installer.get("ipxe", "")).strip()
                or not isinstance(installer.get("files"), dict)
                or not all(FILE_NAME.match(str(f)) for f in installer["files"])):
            return ["installer must hold the iPXE script and files (plain file names) that "
                    "racklift.imaging.installer.boot_server_installer gives for the host"]
        return []
    problems = []
    if not re.match(r"^[A-Za-z0-9_-]{16,}$", str(host.get("token", ""))):
        # The token is never shown, only that it is missing or unusable.
        problems.append("token must be a one-time token of at least 16 URL-safe characters "
                        "when deploy is true")
    if not isinstance(host.get("deploy_data"), dict) or not host["deploy_data"]:
        problems.append("deploy_data must be the host's deploy data (the image, disk, "
                        "identity) when deploy is true")
    return problems


def boot_server_image_deploys(hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hosts being deployed with an image (they get deploy data and a token)."""
    return [h for h in hosts if h.get("deploy") and h.get("method", "image") == "image"]


def boot_server_installer_files(hosts: list[dict[str, Any]]) -> list[dict[str, str]]:
    """[{host, file, content}] for every file of every host being installed."""
    return [{"host": h["name"], "file": name, "content": content}
            for h in hosts if h.get("deploy") and h.get("method") == "installer"
            for name, content in sorted(h["installer"]["files"].items())]


def boot_server_wanted_paths(hosts: list[dict[str, Any]], http_root: str,
                             api_data: str) -> list[str]:
    """Every per-host path the boot server should hold; anything else there is stale."""
    wanted = [f"{http_root}/ipxe/{h['mac']}.ipxe" for h in hosts]
    wanted += [f"{api_data}/hosts/{h['name']}.json" for h in boot_server_image_deploys(hosts)]
    for item in boot_server_installer_files(hosts):
        wanted += [f"{http_root}/installer/{item['host']}",
                   f"{http_root}/installer/{item['host']}/{item['file']}"]
    return sorted(set(wanted))


def boot_server_stale_paths(present: list[str], hosts: list[dict[str, Any]], http_root: str,
                            api_data: str) -> list[str]:
    """What to remove of `present` (the iPXE scripts, deploy data and per-host installer files
    on the server): each path no host wants, and a host's whole installer directory when no
    host wants it. installer/<os>/ (published installer media, which holds no host's
    installer files) is never among them."""
    wanted = set(boot_server_wanted_paths(hosts, http_root, api_data))
    stale = set()
    for path in present:
        if path in wanted:
            continue
        directory = path.rsplit("/", 1)[0]
        if directory.startswith(f"{http_root}/installer/") and directory not in wanted:
            stale.add(directory)
        else:
            stale.add(path)
    return sorted(stale)


def boot_server_release_problems(hosts: list[dict[str, Any]]) -> list[str]:
    """What is wrong with boot_server_release_hosts (tasks/release.yml): their names and MACs
    become paths, so each must be a plain device name and a MAC."""
    if not isinstance(hosts, list):
        return [f"boot_server_release_hosts must be a list of hosts (got a "
                f"{type(hosts).__name__})"]
    return [f"boot_server_release_hosts[{index}] must be {{name, mac}} with a lowercase DNS "
            f"label and a MAC in lowercase with colons (got {host!r})"
            for index, host in enumerate(hosts)
            if not isinstance(host, dict) or not NAME.fullmatch(str(host.get("name", "")))
            or not MAC.fullmatch(str(host.get("mac", "")))]


def boot_server_release_paths(hosts: list[dict[str, Any]], http_root: str,
                              api_data: str) -> list[str]:
    """Each released host's iPXE script (a deploy script holds its token), deploy data (the
    token's hash, its SSH host key) and installer files (an installed host's SSH host key)."""
    return sorted({path for h in hosts for path in (f"{http_root}/ipxe/{h['mac']}.ipxe",
                                                    f"{api_data}/hosts/{h['name']}.json",
                                                    f"{http_root}/installer/{h['name']}")})


def boot_server_subnet_parts(subnet: str) -> dict[str, str]:
    """'10.90.0.0/24' → network and netmask, as dnsmasq's dhcp-range takes them."""
    net = ipaddress.ip_network(subnet, strict=True)
    return {"network": str(net.network_address), "netmask": str(net.netmask)}


def boot_server_public_hosts(hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hosts without their tokens and host keys, safe to loop over and show."""
    return [{k: v for k, v in host.items() if k not in SECRET_KEYS} for host in hosts]


class FilterModule:
    def filters(self):
        return {
            "boot_server_setting_problems": boot_server_setting_problems,
            "boot_server_host_problems": boot_server_host_problems,
            "boot_server_public_hosts": boot_server_public_hosts,
            "boot_server_subnet_parts": boot_server_subnet_parts,
            "boot_server_image_deploys": boot_server_image_deploys,
            "boot_server_installer_files": boot_server_installer_files,
            "boot_server_wanted_paths": boot_server_wanted_paths,
            "boot_server_stale_paths": boot_server_stale_paths,
            "boot_server_release_problems": boot_server_release_problems,
            "boot_server_release_paths": boot_server_release_paths,
        }
