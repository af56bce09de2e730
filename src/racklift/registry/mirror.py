"""Registry mirror: what the registry_mirror role and the `mirror.*` tasks compute on the
controller, as pure functions the tests call directly.

One CNCF Distribution instance per upstream registry (Distribution 2.8 proxies exactly one
`remoteurl` per instance), each on its own port, so a host's container runtime maps every
upstream registry to `scheme://mirror:port` (Docker and containerd refuse a path).
"""

from __future__ import annotations

import ipaddress
import re
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TLS_MODES = ("racklift", "site", "none")
# systemd's `ss -Htlnp` user field: users:(("docker-registry",pid=812,fd=3),(...)).
_SS_USER = re.compile(r'\("([^"]*)",pid=(\d+),')


def endpoint(host: str, port: int, tls: str) -> str:
    """The URL a client uses for one mirror instance: no path (Docker refuses one)."""
    if tls not in TLS_MODES:
        raise ValueError(f"unknown TLS mode {tls!r}; one of {', '.join(TLS_MODES)}")
    return f"{'http' if tls == 'none' else 'https'}://{_bracketed(host)}:{int(port)}"


def _bracketed(host: str) -> str:
    """`host` for a host:port pair: an IPv6 literal needs brackets (in a URL, in Docker's
    host:port lists, in Distribution's listen address)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def listen_ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address an instance is told to listen on, in any spelling (an IPv6 one with or
    without brackets); "" is every address (Distribution's ":port"). None: not an IP address,
    which Distribution would resolve as a name (validate refuses it)."""
    text = str(address).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if not text:
        return ipaddress.IPv6Address("::")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def unspecified(address: str) -> bool:
    """Whether an instance told to listen on `address` listens on every address: "", 0.0.0.0,
    :: however written (::0, 0:0:0:0:0:0:0:0, [::]), and ::ffff:0.0.0.0 (Go listens on every
    IPv4 address for it)."""
    ip = listen_ip(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip is not None and ip.is_unspecified


def client_config(mirrors: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What hosts need to pull through the mirror servers, from each server's settings.

    `mirrors`: one mapping per mirror server: `host` (the name or address clients use), `tls`
    (racklift / site / none) and `upstreams` (the role's list: `registry`, `port`, ...).
    Returns `mirrors` (upstream registry → mirror URLs, servers in the given order: the
    container_runtime role's `container_runtime_registry_mirrors`) and `insecure` (host:port of
    the plain-HTTP instances: its `container_runtime_insecure_registries`).
    """
    by_registry: dict[str, list[str]] = {}
    insecure: list[str] = []
    for server in mirrors:
        for upstream in server["upstreams"]:
            url = endpoint(str(server["host"]), int(upstream["port"]), str(server["tls"]))
            urls = by_registry.setdefault(str(upstream["registry"]), [])
            if url not in urls:
                urls.append(url)
            if server["tls"] == "none":
                netloc = url.split("://", 1)[1]
                if netloc not in insecure:
                    insecure.append(netloc)
    return {"mirrors": by_registry, "insecure": insecure}


def public_upstreams(upstreams: Any) -> Any:
    """The upstream list without passwords, for everything that loops over it or shows it
    (Ansible prints a loop's items with -v). Anything that is not a list of mappings comes back
    unchanged, so validation can still say what is wrong with it."""
    if not isinstance(upstreams, list):
        return upstreams
    return [{k: v for k, v in u.items() if k != "password"} if isinstance(u, Mapping) else u
            for u in upstreams]


def distribution_config(upstream: Mapping[str, Any], *, listen: str, storage_root: str,
                        tls_cert: str = "", tls_key: str = "",
                        log_level: str = "info") -> dict[str, Any]:
    """The Distribution configuration of one proxy instance (written as YAML by the role).

    Upstream credentials go into `proxy` only when a username is set; the file that holds
    them is readable by root and the registry's group only.
    """
    config: dict[str, Any] = {
        "version": 0.1,
        "log": {"level": log_level, "accesslog": {"disabled": False},
                "fields": {"service": "racklift-registry-mirror",
                           "upstream": str(upstream["registry"])}},
        "storage": {
            "filesystem": {"rootdirectory": f"{storage_root}/{upstream['name']}"},
            # Garbage collection and the proxy's expiry delete blobs.
            "delete": {"enabled": True},
            "cache": {"blobdescriptor": "inmemory"},
            # Uploads cut off mid-way (a client or upstream gone) are purged after a week.
            "maintenance": {"uploadpurging": {"enabled": True, "age": "168h",
                                              "interval": "24h", "dryrun": False}},
        },
        "http": {"addr": f"{_bracketed(listen)}:{int(upstream['port'])}",
                 "headers": {"X-Content-Type-Options": ["nosniff"]}},
        "health": {"storagedriver": {"enabled": True, "interval": "10s", "threshold": 3}},
        "proxy": {"remoteurl": str(upstream["url"]).rstrip("/")},
    }
    if tls_cert:
        config["http"]["tls"] = {"certificate": tls_cert, "key": tls_key}
    if upstream.get("username"):
        config["proxy"]["username"] = str(upstream["username"])
        config["proxy"]["password"] = str(upstream.get("password", ""))
    return config


@dataclass(frozen=True)
class Listener:
    process: str  # "" when ss cannot tell (another user's process without CAP_SYS_PTRACE)
    pid: int
    uid: int


def port_listeners(ss_output: str, port: int) -> list[Listener]:
    """Processes listening on TCP `port`, from `ss -Htlnpe` output (any address)."""
    found: list[Listener] = []
    for line in ss_output.splitlines():
        fields = line.split()
        # State Recv-Q Send-Q Local:Port Peer:Port [users:(...)] [uid:N] ino:N ...
        if len(fields) < 4 or fields[0] != "LISTEN":
            continue
        if fields[3].rsplit(":", 1)[-1] != str(port):
            continue
        uid = next((int(f[4:]) for f in fields[5:] if f.startswith("uid:")), 0)  # ss omits 0
        matches = _SS_USER.findall(" ".join(fields[5:]))
        for process, pid in matches or [("", "0")]:
            listener = Listener(process, int(pid), uid)
            if listener not in found:
                found.append(listener)
    return found


def foreign_listeners(ss_output: str, port: int, own_pids: Sequence[int],
                      own_uids: Sequence[int] = ()) -> list[str]:
    """Who else than `own_pids` holds `port`, as 'name (pid N)'; empty when the port is free or
    held by the mirror itself. Where ss names no process (root without CAP_SYS_PTRACE, as in a
    container, cannot see another user's sockets' processes), a listener of one of `own_uids`
    counts as the mirror's own."""
    own = {int(p) for p in own_pids if int(p) > 0}
    foreign = []
    for item in port_listeners(ss_output, port):
        if item.pid in own or (not item.process and item.uid in own_uids):
            continue
        foreign.append(f"{item.process} (pid {item.pid})" if item.process
                       else f"a process of uid {item.uid} (run as root to see which)")
    return foreign


@dataclass(frozen=True)
class Health:
    url: str
    ok: bool
    detail: str


def check_endpoint(url: str, ca_file: str | None = None, timeout: float = 10) -> Health:
    """GET /v2/ of one mirror instance: 200 is healthy (a pull-through cache serves anonymous
    pulls); anything else, a TLS error or no answer is not, with the reason."""
    context = ssl.create_default_context(cafile=ca_file) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/v2/", timeout=timeout,
                                    context=context) as response:
            api = response.headers.get("Docker-Distribution-Api-Version", "")
            if api != "registry/2.0":
                return Health(url, False, f"HTTP {response.status} but no registry API header")
            return Health(url, True, f"HTTP {response.status}, {api}")
    except urllib.error.HTTPError as exc:
        return Health(url, False, f"HTTP {exc.code} {exc.reason}")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return Health(url, False, f"no answer: {reason}")
