"""The registry mirror end to end, on lab containers reached over SSH (no NetBox): an upstream
registry (a second CNCF Distribution) with an image pushed by skopeo, a mirror server and a
pulling host set up by playbooks/registry_mirror.yml with racklift's CA. A real client (skopeo,
through registries.conf and the system trust store) pulls a Docker Hub name only the mirror can
serve; the blobs are then in the mirror's storage; with the upstream stopped the pull still
succeeds. Then bad input: an unreachable upstream, a port in use, a missing CA.

Own podman network racklift-mirror-test (10.89.3.0/24) and containers racklift-mirror-test-*,
removed at the end.
"""

import ipaddress
import json

import pytest

from racklift.lab import registry

pytestmark = pytest.mark.containers

LAB = registry.MirrorLab("racklift-mirror-test", ipaddress.ip_network("10.89.3.0/24"))
SECRET = "planted-Upstream-Password-93c1"
IMAGE = "library/rackhello:1.0"
STORAGE = "/var/lib/racklift-registry-mirror/dockerhub"


@pytest.fixture(scope="module")
def mirror_lab(tmp_path_factory):
    registry.down(LAB)
    addresses = registry.up(LAB, ["upstream", "mirror", "client"])
    try:
        upstream = LAB.container("upstream")
        registry.start_upstream(upstream, 5000)
        manifest = registry.push_image(upstream, "127.0.0.1:5000", IMAGE,
                                       "hello from the racklift mirror")
        work = tmp_path_factory.mktemp("mirror")
        variables = {
            "registry_mirror_upstreams": [{
                "name": "dockerhub", "registry": "docker.io",
                "url": f"http://{addresses['upstream']}:5000", "port": 5000,
                # Unused by a registry that asks for none, but written into the mirror's
                # configuration: it must show up nowhere else.
                "username": "racklift-lab", "password": SECRET}],
            "registry_mirror_ca_dir": str(work / "ca"),
            # With upstream credentials, one address: the network the clients pull from.
            "registry_mirror_listen_address": addresses["mirror"],
        }
        inventory = registry.write_inventory(
            work / "inventory.yml", LAB,
            {"registry_mirror": {"mirror": addresses["mirror"]},
             "mirror_clients": {"client": addresses["client"]}}, variables)
        # The engines' side (container_runtime) has its own scenario: here the trust store and
        # registries.conf, used by skopeo.
        result = registry.run_playbook(inventory, "registry_mirror", "mirror_clients",
                                       {"registry_mirror_clients_runtime": False}, verbose=True)
        yield {"addresses": addresses, "manifest": manifest, "inventory": inventory,
               "work": work, "setup": result}
    finally:
        registry.down(LAB)


def test_pull_through_the_mirror_caches_and_survives_the_upstream(mirror_lab):
    setup = mirror_lab["setup"]
    assert setup.returncode == 0, setup.stdout[-4000:] + setup.stderr[-2000:]
    client, mirror = LAB.container("client"), LAB.container("mirror")
    wanted = registry.blob_digests(mirror_lab["manifest"])
    assert registry.stored_blobs(mirror, STORAGE) == []

    # docker.io is unreachable here: only the mirror can serve this name, over TLS the client
    # trusts through the system store (no --tls-verify=false).
    pull = (f"rm -rf /tmp/p && skopeo copy --quiet docker://docker.io/{IMAGE} dir:/tmp/p && "
            "cat /tmp/p/manifest.json")
    first = registry.sh(client, pull)
    assert registry.blob_digests(json.loads(first)) == wanted
    # Config and layers (the manifest is stored as a blob too).
    assert set(wanted) <= set(registry.stored_blobs(mirror, STORAGE, wanted))

    registry.stop_upstream(LAB.container("upstream"))
    direct = registry.sh(client, f"skopeo inspect --raw --tls-verify=false "
                                 f"docker://{mirror_lab['addresses']['upstream']}:5000/{IMAGE}",
                         check=False)
    assert direct == "", "the upstream still answers"
    second = registry.sh(client, pull)
    assert second == first


def test_upstream_credentials_stay_out_of_logs(mirror_lab):
    setup = mirror_lab["setup"]
    assert setup.returncode == 0
    assert SECRET not in setup.stdout + setup.stderr
    mirror = LAB.container("mirror")
    # Where the password must be: the instance's configuration, readable by root and the
    # registry's group only. Where it must not be: the journal (Ansible logs module arguments
    # there unless no_log). The pattern is split so the grep's own command line cannot match.
    config = "/etc/racklift/registry-mirror/dockerhub.yml"
    assert registry.sh(mirror, f"grep -c racklift-lab {config}").strip() == "1"
    assert registry.sh(mirror, f"stat -c '%U:%G %a' {config}").strip() == \
        "root:docker-registry 640"
    half = len(SECRET) // 2
    found = registry.sh(mirror, f"journalctl --no-pager | grep -c '{SECRET[:half]}''"
                                f"{SECRET[half:]}' || true")
    assert found.strip() == "0"


def failing_setup(mirror_lab, variables: dict) -> str:
    result = registry.run_playbook(mirror_lab["inventory"], "registry_mirror", "none",
                                   variables)
    assert result.returncode != 0, result.stdout[-3000:]
    return " ".join((result.stdout + result.stderr).split())


def test_bad_input_fails_with_the_host_the_setting_and_what_to_do(mirror_lab):
    upstream = mirror_lab["addresses"]["upstream"]
    host = LAB.container("mirror")
    registry.stop_upstream(LAB.container("upstream"))  # stays down (also after the test above)

    out = failing_setup(mirror_lab, {})
    assert (f"{host}: upstream dockerhub (docker.io) at http://{upstream}:5000 does not answer "
            "from this host") in out
    assert "registry_mirror_check_upstreams" in out

    out = failing_setup(mirror_lab, {
        "registry_mirror_check_upstreams": False,
        "registry_mirror_upstreams": [{"name": "dockerhub", "registry": "docker.io",
                                       "url": f"http://{upstream}:5000", "port": 22}]})
    assert f"{host}: port 22 for the docker.io mirror (dockerhub) is in use by sshd" in out
    assert "give this upstream another port" in out

    ca = mirror_lab["work"] / "ca"
    out = failing_setup(mirror_lab, {
        "registry_mirror_check_upstreams": False, "registry_mirror_tls": "site",
        "registry_mirror_tls_cert_file": str(ca / "hosts" / f"{host}.crt"),
        "registry_mirror_tls_key_file": str(ca / "hosts" / f"{host}.key"),
        "registry_mirror_ca_file": str(ca / "missing-ca.crt")})
    assert f"{host}: registry_mirror_tls is site, but registry_mirror_ca_file" in out
    assert "is not a file on the controller" in out
