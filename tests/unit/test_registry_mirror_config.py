"""The registry mirror's pure functions: client configuration, Distribution configuration,
who holds a port (from real `ss -Htlnp` output), which listen addresses the role refuses (its
validate.yml asserts, evaluated here with its filters)."""

from collections.abc import Callable
from typing import Any

import jinja2
import pytest
import yaml

from helpers import REPO, load_script
from racklift.registry import mirror

ROLE = REPO / "roles" / "registry_mirror"

UPSTREAMS = [
    {"name": "dockerhub", "registry": "docker.io", "url": "https://registry-1.docker.io",
     "port": 5000},
    {"name": "nvcr", "registry": "nvcr.io", "url": "https://nvcr.io/", "port": 5001,
     "username": "$oauthtoken", "password": "nvapi-secret"},
]

# In the format of `ss -Htlnpe` (iproute2 6.1, Debian 12): two mirror instances, sshd, and one
# socket shared by two processes.
SS = """\
LISTEN 0      4096         0.0.0.0:5000      0.0.0.0:*    users:(("docker-registry",pid=812,fd=3))
LISTEN 0 4096 0.0.0.0:5001 0.0.0.0:* users:(("docker-registry",pid=813,fd=3)) uid:998 ino:3 sk:2
LISTEN 0      128          0.0.0.0:22        0.0.0.0:*    users:(("sshd",pid=301,fd=3))
LISTEN 0      128             [::]:22           [::]:*    users:(("sshd",pid=301,fd=4))
LISTEN 0 4096 127.0.0.1:50000 0.0.0.0:* users:(("containerd",pid=90,fd=9),("dockerd",pid=91,fd=4))
"""


def test_client_config_maps_each_registry_to_every_server_in_order():
    servers = [{"host": "head-01", "tls": "racklift", "upstreams": UPSTREAMS},
               {"host": "10.0.0.6", "tls": "racklift", "upstreams": UPSTREAMS[:1]}]
    assert mirror.client_config(servers) == {
        "mirrors": {"docker.io": ["https://head-01:5000", "https://10.0.0.6:5000"],
                    "nvcr.io": ["https://head-01:5001"]},
        "insecure": []}


def test_client_config_lists_plain_http_mirrors_as_insecure():
    config = mirror.client_config([{"host": "fd00::5", "tls": "none", "upstreams": UPSTREAMS}])
    assert config["mirrors"]["docker.io"] == ["http://[fd00::5]:5000"]
    assert config["insecure"] == ["[fd00::5]:5000", "[fd00::5]:5001"]


def test_unknown_tls_mode_is_refused():
    with pytest.raises(ValueError, match="unknown TLS mode 'off'"):
        mirror.endpoint("head-01", 5000, "off")


def test_distribution_config_proxies_one_upstream_with_tls_and_credentials():
    config = mirror.distribution_config(UPSTREAMS[1], listen="0.0.0.0",
                                        storage_root="/srv/mirror", tls_cert="/t/c.crt",
                                        tls_key="/t/c.key")
    assert config["proxy"] == {"remoteurl": "https://nvcr.io", "username": "$oauthtoken",
                               "password": "nvapi-secret"}
    assert config["http"]["addr"] == "0.0.0.0:5001"
    assert config["http"]["tls"] == {"certificate": "/t/c.crt", "key": "/t/c.key"}
    assert config["storage"]["filesystem"]["rootdirectory"] == "/srv/mirror/nvcr"
    assert config["storage"]["delete"] == {"enabled": True}


def test_distribution_config_without_credentials_or_tls():
    config = mirror.distribution_config(UPSTREAMS[0], listen="10.1.2.3", storage_root="/m")
    assert config["proxy"] == {"remoteurl": "https://registry-1.docker.io"}
    assert "tls" not in config["http"]
    assert config["http"]["addr"] == "10.1.2.3:5000"


def test_port_listeners_from_ss_output():
    assert mirror.port_listeners(SS, 22) == [mirror.Listener("sshd", 301, 0)]
    assert mirror.port_listeners(SS, 5001) == [mirror.Listener("docker-registry", 813, 998)]
    assert mirror.port_listeners(SS, 50000) == [mirror.Listener("containerd", 90, 0),
                                                mirror.Listener("dockerd", 91, 0)]
    assert mirror.port_listeners(SS, 5002) == []


def test_foreign_listeners_ignore_the_instance_itself():
    assert mirror.foreign_listeners(SS, 5000, [812]) == []
    assert mirror.foreign_listeners(SS, 5000, [0]) == ["docker-registry (pid 812)"]
    assert mirror.foreign_listeners(SS, 22, [812, 813]) == ["sshd (pid 301)"]


def test_a_listener_ss_cannot_name_counts_unless_it_runs_as_the_mirror_user():
    # What ss prints in a container for another user's socket: no users:(...) field.
    line = "LISTEN 0 4096 0.0.0.0:5000 0.0.0.0:* uid:998 ino:91234 sk:3 <->\n"
    assert mirror.foreign_listeners(line, 5000, [812], own_uids=[998]) == []
    assert mirror.foreign_listeners(line, 5000, [812], own_uids=[]) == [
        "a process of uid 998 (run as root to see which)"]


def test_public_upstreams_drop_passwords_and_keep_bad_input_as_it_is():
    public = mirror.public_upstreams(UPSTREAMS)
    assert public[1] == {"name": "nvcr", "registry": "nvcr.io", "url": "https://nvcr.io/",
                         "port": 5001, "username": "$oauthtoken"}
    assert "password" in UPSTREAMS[1]  # the input is not changed
    assert mirror.public_upstreams("docker.io") == "docker.io"
    assert mirror.public_upstreams([1, {"password": "x"}]) == [1, {}]


# Planted: an instance with upstream credentials told to listen on every address, spelled so
# that a list of literal spellings lets it through.
@pytest.mark.parametrize("address", ["::0", "0:0:0:0:0:0:0:0", "[::]", "[0:0::0]", "::",
                                     "0.0.0.0", "", " 0.0.0.0 ", "::ffff:0.0.0.0"])
def test_every_spelling_of_every_address_is_unspecified(address):
    assert mirror.unspecified(address)


@pytest.mark.parametrize("address", ["10.0.0.1", "::1", "fe80::1", "[fd00::5]", "127.0.0.1"])
def test_one_address_is_not_unspecified(address):
    assert not mirror.unspecified(address) and mirror.listen_ip(address) is not None


@pytest.mark.parametrize("address", ["0.0.0.0.", "0", "mirror.example", "0x0", "[0.0.0.0"])
def test_what_is_no_ip_address_is_refused_not_taken_for_one_address(address):
    # Distribution would resolve it as a name: glibc reads "0" and "0x0" as 0.0.0.0.
    assert mirror.listen_ip(address) is None and not mirror.unspecified(address)


def test_distribution_listens_on_an_ipv6_address_in_brackets():
    upstream = {"name": "nvcr", "registry": "nvcr.io", "url": "https://nvcr.io", "port": 5001}
    assert mirror.distribution_config(upstream, listen="fd00::5",
                                      storage_root="/srv")["http"]["addr"] == "[fd00::5]:5001"


def _validate_assert(name: str) -> Callable[..., Any]:
    """The `that` of validate.yml's task `name`, with the role's filters, as a function of
    its variables."""
    tasks = yaml.safe_load((ROLE / "tasks" / "validate.yml").read_text())
    that = next(t for t in tasks if t["name"] == name)["ansible.builtin.assert"]["that"]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters.update(load_script(ROLE / "filter_plugins" / "registry_mirror.py",
                                   "registry_mirror_filters").FilterModule().filters())
    return env.compile_expression(that)


@pytest.mark.parametrize("address", ["::0", "0:0:0:0:0:0:0:0", "[0:0::0]", "0.0.0.0", ""])
def test_the_role_refuses_credentials_on_every_address_however_written(address):
    allowed = _validate_assert(
        "Check an instance with upstream credentials does not listen on every address")
    assert not allowed(__with_credentials=["nvcr"], registry_mirror_listen_address=address)
    assert allowed(__with_credentials=[], registry_mirror_listen_address=address)
    assert allowed(__with_credentials=["nvcr"], registry_mirror_listen_address="10.0.0.5")


@pytest.mark.parametrize("address", ["0.0.0.0.", "0", "mirror.example"])
def test_the_role_refuses_a_listen_address_that_is_no_ip_address(address):
    valid = _validate_assert("Check the listen address is an IP address")
    assert not valid(registry_mirror_listen_address=address)
    assert valid(registry_mirror_listen_address="fd00::5")
