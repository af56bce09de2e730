"""The rack's services in its namespace: the stand-in vendor repositories, the registry
mirror and the boot server container."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from racklift import podman
from racklift.ansible import run_playbook
from racklift.errors import LabError
from racklift.lab import hosts, images, standin_repo
from racklift.lab.sources import lab_inventory
from racklift.lab.vrack.commands import _in_ns, _netns_path, _process_pid, _spawn, _wait
from racklift.lab.vrack.layout import Vrack, vrack_dir
from racklift.lab.vrack.network import apt_proxy_conf
from racklift.netbox.client import NetBoxSettings
from racklift.paths import REPO_ROOT
from racklift.pipeline.image_run import with_boot_servers

STANDIN_PORT = 8080


STANDIN_SERVER = b"http.server"


# URL path → the stand-in recipe: NVIDIA's CUDA repository (driver, fabric manager) and its
# container toolkit repository, each its own repository as in production.
STANDIN_REPOS = {
    "cuda": hosts.STANDIN_PACKAGES,
    "libnvidia-container": REPO_ROOT / "roles" / "container_runtime" / "molecule" / "default"
                           / "standin-packages.yml",
}


def standin_url(rack: Vrack, repo: str) -> str:
    return f"http://{rack.gateway}:{STANDIN_PORT}/{repo}/"


def _standin_pid_file(rack: Vrack) -> Path:
    return vrack_dir(rack) / "standin.pid"


def _ensure_standin_server(rack: Vrack) -> None:
    """Each stand-in repository built (cached by recipe) and linked under the served directory;
    the server started once. Relinking on every `up` serves a rebuilt repository at once."""
    root = vrack_dir(rack) / "standin"
    root.mkdir(parents=True, exist_ok=True)
    for path, spec in STANDIN_REPOS.items():
        link = root / path
        link.unlink(missing_ok=True)
        link.symlink_to(standin_repo.build(spec))
    if _process_pid(_standin_pid_file(rack), STANDIN_SERVER) is not None:
        return
    _spawn(f"stand-in repository server in {rack.netns}",
           ["ip", "netns", "exec", rack.netns, sys.executable, "-m", "http.server",
            str(STANDIN_PORT), "--bind", str(rack.gateway), "--directory", str(root)],
           _standin_pid_file(rack),
           lambda: _in_ns(rack, "nc", "-z", str(rack.gateway), str(STANDIN_PORT),
                          check=False).returncode == 0)


# The registry mirror on the boot server container


MIRROR_PORT = 5000


def mirror_url(rack: Vrack) -> str:
    return f"https://{rack.gateway}:{MIRROR_PORT}"


def _ensure_registry(settings: NetBoxSettings, rack: Vrack) -> None:
    """The stand-in upstream, then the registry_mirror role, on the boot server (both
    converge). The VMs' container runtime is pointed at it by the configure stage."""
    if _in_ns(rack, "nc", "-z", str(rack.gateway), str(MIRROR_PORT),
              check=False).returncode == 0:
        return  # set up by an earlier `up`: re-running converges without Ansible
    lab = {"racklift_vrack_netns": rack.netns}
    env = with_boot_servers(vrack_dir(rack), base=lab_inventory())
    upstream = run_playbook("lab_registry_upstream.yml", [rack.boot_server], settings, env,
                            extravars=lab)
    mirror = upstream if upstream.rc or rack.boot_server not in upstream.ok else run_playbook(
        "registry_mirror.yml", [rack.boot_server], settings,
        {**env, "RACKLIFT_MIRROR_SERVERS": rack.boot_server, "RACKLIFT_MIRROR_CLIENTS": "none"},
        extravars={**lab, "registry_mirror_endpoint_host": str(rack.gateway),
                   "registry_mirror_tls_names": [str(rack.gateway)],
                   "registry_mirror_upstreams": [
                       {"name": "dockerhub", "registry": "docker.io",
                        "url": "http://127.0.0.1:5100", "port": MIRROR_PORT}]})
    if mirror.rc or rack.boot_server not in mirror.ok:
        details = "; ".join(f"{h}: {why}" for h, why in sorted(mirror.failed.items()))
        raise LabError(f"the registry mirror on {rack.boot_server} could not be set up "
                       f"(exit {mirror.rc}): {details or 'see the Ansible output'}")


# Emulated hardware of the VMs


def boot_server_containers(rack: Vrack) -> list[str]:
    out = podman.podman("ps", "-a", "--filter", f"label={rack.label}", "--format", "json")
    return [c["Names"][0] for c in json.loads(out or "[]")]


def ssh_answers(rack: Vrack, address: str) -> bool:
    """Whether sshd at `address` inside the namespace sends its banner."""
    result = _in_ns(rack, "nc", "-w", "2", address, "22", timeout=10, check=False)
    return result.stdout.startswith("SSH-")


def run_boot_server(name: str, netns: Path, labels: list[str], apt_conf: Path) -> None:
    """A lab host container (systemd, sshd with the lab's key) as a boot server in the network
    namespace at `netns`, apt configured by `apt_conf`: the virtual rack's, the simulated
    fleet's."""
    podman.podman(
        "run", "-d", "--name", name, "--hostname", name, "--systemd=always",
        *(word for label in labels for word in ("--label", label)),
        "--network", f"ns:{netns}",
        # dnsmasq answers DHCP and sends router advertisements on its interface.
        "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW",
        "--mount", f"type=bind,src={hosts.ssh_key()}.pub,dst=/root/.ssh/authorized_keys,"
                   "ro=true",
        "--mount", f"type=bind,src={apt_conf},dst=/etc/apt/apt.conf.d/01racklift-uplink,"
                   "ro=true",
        "--memory", "512m", images.host_image())


def _ensure_boot_server(rack: Vrack) -> bool:
    name = rack.boot_server
    if name in boot_server_containers(rack):
        podman.podman("start", name)
        created = False
    else:
        apt_conf = vrack_dir(rack) / "apt-uplink.conf"
        apt_conf.write_text(apt_proxy_conf())
        run_boot_server(name, _netns_path(rack), [f"{hosts.LABEL}={rack.netns}", rack.label],
                        apt_conf)
        created = True
    _wait(f"SSH of the boot server {name} at {rack.gateway}",
          lambda: ssh_answers(rack, str(rack.gateway)), 120, f"see `podman logs {name}`")
    return created


# NetBox
