"""Lab setups for the registry mirror's end-to-end test and benchmark: lab-image containers on
their own podman network, reached over SSH as real hosts are: an "upstream" registry (a
second CNCF Distribution, plain registry mode) with an image pushed by skopeo, a mirror server
set up by playbooks/registry_mirror.yml, and hosts that pull.

Lab only. Every container and the network carry the label `racklift.mirror-lab=<name>`;
`down()` removes exactly those.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from racklift import podman
from racklift.errors import LabError
from racklift.lab import hosts, images
from racklift.paths import REPO_ROOT

CONTAINERFILE = Path(__file__).resolve().parent / "containerfiles" / "Containerfile.registry"
TOOLS_REPO = "localhost/racklift-mirror-lab"
# The image maker of container_runtime's Molecule scenario: an OCI layout of busybox-static,
# made without any registry. Used as it is, not copied.
MAKE_OCI_IMAGE = REPO_ROOT / "roles/container_runtime/molecule/default/files/make_oci_image.py"
LABEL = "racklift.mirror-lab"
FIRST_ADDRESS = 10
UPSTREAM_CONFIG = "/etc/racklift-lab-upstream.yml"
UPSTREAM_UNIT = "racklift-lab-upstream"


@dataclass(frozen=True)
class MirrorLab:
    """One lab: its network (and the prefix of its containers' names) and subnet."""

    name: str
    subnet: ipaddress.IPv4Network

    def container(self, role: str) -> str:
        return f"{self.name}-{role}"

    def address(self, index: int) -> str:
        return str(self.subnet.network_address + FIRST_ADDRESS + index)


def tools_image() -> str:
    """The lab host image with Distribution, skopeo and busybox-static installed (once per
    recipe)."""
    return podman.derived_image(TOOLS_REPO, images.host_image(), CONTAINERFILE)


def up(lab: MirrorLab, roles: Sequence[str], memory: str = "512m") -> dict[str, str]:
    """Start one container per role (systemd, sshd, the lab SSH key); role → address."""
    image = tools_image()
    key = hosts.ssh_key()
    if not podman.succeeds("network", "exists", lab.name):
        podman.podman("network", "create", "--subnet", str(lab.subnet),
                      "--gateway", str(lab.subnet.network_address + 1),
                      "--label", f"{LABEL}={lab.name}", lab.name)
    addresses = {role: lab.address(i) for i, role in enumerate(roles)}
    for role, address in addresses.items():
        name = lab.container(role)
        podman.podman("rm", "-f", "-t", "2", name, check=False)
        podman.podman(
            "run", "-d", "--name", name, "--hostname", name, "--systemd=always",
            "--label", f"{LABEL}={lab.name}", "--network", f"{lab.name}:ip={address}",
            # NET_ADMIN: the benchmark limits the upstream's bandwidth with tc.
            "--cap-add", "NET_ADMIN",
            "--mount", f"type=bind,src={key}.pub,dst=/root/.ssh/authorized_keys,ro=true",
            "--memory", memory, image)
    deadline = time.monotonic() + 120 + 5 * len(roles)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda a: hosts.wait_for_ssh(a, deadline), addresses.values()))
    return addresses


def down(lab: MirrorLab) -> int:
    out = podman.podman("ps", "-aq", "--filter", f"label={LABEL}={lab.name}", check=False)
    ids = out.split()
    if ids:
        podman.podman("rm", "-f", "-t", "2", *ids)
    if podman.succeeds("network", "exists", lab.name):
        podman.podman("network", "rm", "-f", lab.name)
    return len(ids)


def sh(container: str, script: str, check: bool = True, timeout: float = 300) -> str:
    """Run a shell script in a lab container; its stdout."""
    result = subprocess.run(["podman", "exec", container, "sh", "-c", script], env=podman.env(),
                            capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise LabError(f"{container}: `{script[:200]}` failed ({result.returncode}): "
                       f"{(result.stderr or result.stdout).strip()[-800:]}")
    return result.stdout


def start_upstream(container: str, port: int = 5000) -> None:
    """Distribution in plain registry mode on all addresses of the container, HTTP."""
    config = {"version": 0.1,
              "storage": {"filesystem": {"rootdirectory": "/var/lib/racklift-lab-upstream"},
                          "delete": {"enabled": True}},
              "http": {"addr": f"0.0.0.0:{port}"}}
    sh(container, f"printf %s {shlex.quote(yaml.safe_dump(config))} > {UPSTREAM_CONFIG} && "
                  f"(systemctl is-active --quiet {UPSTREAM_UNIT} || systemd-run --unit "
                  f"{UPSTREAM_UNIT} /usr/bin/docker-registry serve {UPSTREAM_CONFIG})")
    wait_for_registry(container, f"http://127.0.0.1:{port}")


def stop_upstream(container: str) -> None:
    """Stop the upstream (a transient unit: once stopped it is gone, so stop only a live one)."""
    sh(container, f"! systemctl is-active --quiet {UPSTREAM_UNIT} || "
                  f"systemctl stop {UPSTREAM_UNIT}")


def wait_for_registry(container: str, url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    probe = f"python3 -c \"import urllib.request; urllib.request.urlopen('{url}/v2/')\""
    while sh(container, f"{probe} 2>/dev/null && echo up || true").strip() != "up":
        if time.monotonic() > deadline:
            raise LabError(f"{container}: no registry answers at {url}")
        time.sleep(0.5)


def push_image(container: str, registry: str, reference: str, message: str,
               pad_mib: int = 0) -> dict[str, Any]:
    """Make an image in the container (busybox-static, plus `pad_mib` MiB of random bytes
    appended to the binary, which still runs: a bigger layer for the benchmark), push it with
    skopeo to `registry` (host:port, HTTP) as `reference` (repository:tag); its manifest."""
    work = "/tmp/racklift-lab-image"
    podman.podman("cp", str(MAKE_OCI_IMAGE), f"{container}:/tmp/make_oci_image.py")
    pad = (f"head -c {pad_mib}M /dev/urandom >> {work}/busybox && " if pad_mib else "")
    tag = reference.rsplit(":", 1)[1]
    sh(container, f"rm -rf {work} && mkdir -p {work} && cp /bin/busybox {work}/busybox && {pad}"
                  f"python3 /tmp/make_oci_image.py {work}/busybox {work}/oci {tag} "
                  f"{shlex.quote(message)} && "
                  f"skopeo copy --quiet --dest-tls-verify=false oci:{work}/oci:{tag} "
                  f"docker://{registry}/{reference}", timeout=600)
    return json.loads(sh(container, "skopeo inspect --raw --tls-verify=false "
                                    f"docker://{registry}/{reference}"))


def blob_digests(manifest: Mapping[str, Any]) -> list[str]:
    """The config and layer digests of an image manifest."""
    return sorted([manifest["config"]["digest"], *(layer["digest"]
                                                   for layer in manifest["layers"])])


def stored_blobs(container: str, storage: str, wanted: Sequence[str] = (),
                 timeout: float = 10) -> list[str]:
    """Digests of the blobs in a Distribution storage directory; with `wanted`, wait up to
    `timeout` for them (a proxy commits a blob just after its client has received it)."""
    deadline = time.monotonic() + timeout
    while True:
        out = sh(container, f"find {shlex.quote(storage)}/docker/registry/v2/blobs -name data "
                            "2>/dev/null || true")
        found = sorted(f"sha256:{Path(p).parent.name}" for p in out.split())
        if set(wanted) <= set(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def limit_egress(container: str, rate: str, device: str = "eth0") -> None:
    """A token-bucket limit on what the container sends (tbf: netem is not in this kernel)."""
    sh(container, f"tc qdisc replace dev {device} root tbf rate {rate} burst 256kb "
                  "latency 400ms")


def write_inventory(path: Path, lab: MirrorLab, groups: Mapping[str, Mapping[str, str]],
                    variables: Mapping[str, Any]) -> Path:
    """A YAML inventory: group → {container role: address}, the lab SSH settings, `variables`."""
    inventory = {"all": {
        "vars": {"ansible_user": "root", "ansible_ssh_private_key_file": str(hosts.ssh_key()),
                 "ansible_ssh_common_args": "-o StrictHostKeyChecking=no "
                                            "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
                 **variables},
        "children": {group: {"hosts": {lab.container(role): {"ansible_host": address}
                                       for role, address in members.items()}}
                     for group, members in groups.items()}}}
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


def run_playbook(inventory: Path, servers: str, clients: str,
                 extra_vars: Mapping[str, Any] | None = None, verbose: bool = False,
                 timeout: float = 900) -> subprocess.CompletedProcess:
    """playbooks/registry_mirror.yml against a static inventory (no NetBox); output captured."""
    bindir = Path(sys.executable).parent
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
           "ANSIBLE_INVENTORY_CACHE": "false", "ANSIBLE_FORCE_COLOR": "false",
           "RACKLIFT_MIRROR_SERVERS": servers, "RACKLIFT_MIRROR_CLIENTS": clients,
           "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [str(bindir / "ansible-playbook"), "-i", str(inventory),
               str(REPO_ROOT / "playbooks" / "registry_mirror.yml")]
    if extra_vars:
        command += ["-e", json.dumps(dict(extra_vars))]
    if verbose:
        command.append("-v")
    return subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=timeout)
