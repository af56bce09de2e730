"""Tests for the deploy data renderer and tokens (src/racklift/imaging/deploy_data.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re

import pytest

from racklift.imaging.deploy_data import (
    DeployDataError,
    HostDeploy,
    ImageArtifact,
    host_record,
    new_token,
    normalize_mac,
    render,
    token_sha256,
)

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBk2Ay1d3BTrlW9LCzg8p8bEzLxvRgGcXa8W0nUHbJz0 ops@ctl"
IMAGE = ImageArtifact("debian12", "0123456789abcdef", "ab" * 32)
SERVER = "http://10.90.0.1"


def spec(**changes) -> HostDeploy:
    base = HostDeploy(host="gpu-a01", mac="52:54:00:AA:BB:01", address="10.90.0.11/24",
                      gateway="10.90.0.1", dns=("10.90.0.1",), authorized_keys=(KEY,))
    return dataclasses.replace(base, **changes)


def test_render_matches_the_contract() -> None:
    assert render(spec(), IMAGE, SERVER + "/") == {
        "host": "gpu-a01",
        "image": {"name": "debian12", "build_id": "0123456789abcdef",
                  "url": "http://10.90.0.1/images/debian12/0123456789abcdef/disk.raw.gz",
                  "sha256": "ab" * 32, "format": "raw.gz"},
        "target_disk": "/dev/vda",
        "hostname": "gpu-a01",
        "authorized_keys": [KEY],
        "network": {"mac": "52:54:00:aa:bb:01", "address": "10.90.0.11/24",
                    "gateway": "10.90.0.1", "dns": ["10.90.0.1"]},
    }


def test_optional_fields() -> None:
    data = render(spec(gateway=None, dns=(), hostname="node1", target_disk="/dev/nvme0n1"),
                  IMAGE, SERVER)
    assert data["network"]["gateway"] is None
    assert data["network"]["dns"] == []
    assert data["hostname"] == "node1"
    assert data["host"] == "gpu-a01"
    assert data["target_disk"] == "/dev/nvme0n1"


def test_every_string_is_sed_safe() -> None:
    """The ramdisk extracts fields with sed: no quote, backslash or bracket inside values."""
    text = json.dumps(render(spec(), IMAGE, SERVER))
    for value in re.findall(r'"([^"]*)"', text):
        assert not set(value) & set('\\[]\n')


@pytest.mark.parametrize(("changes", "field", "hint"), [
    ({"host": "GPU_01"}, "'host'", "lowercase DNS label"),
    ({"hostname": "a" * 64}, "'hostname'", "lowercase DNS label"),
    ({"mac": "52:54:00:aa:bb"}, "'network.mac'", "MAC address in NetBox"),
    ({"mac": None}, "'network.mac'", "MAC address in NetBox"),
    ({"address": "10.90.0.11"}, "'network.address'", "with its prefix"),
    ({"address": "10.90.0.300/24"}, "'network.address'", "primary IP"),
    ({"address": "10.90.0.0/24"}, "'network.address'", "inside its prefix"),
    ({"gateway": "10.91.0.1"}, "'network.gateway'", "provisioning network"),
    ({"gateway": "10.90.0.11"}, "'network.gateway'", "provisioning network"),
    ({"gateway": "gw"}, "'network.gateway'", "fix the gateway"),
    ({"dns": ("dns.example",)}, "'network.dns'", "IP addresses"),
    ({"authorized_keys": ()}, "'authorized_keys'", "at least one"),
    ({"authorized_keys": KEY}, "'authorized_keys'", "list"),
    ({"authorized_keys": ("not a key",)}, "'authorized_keys'", "TYPE BASE64"),
    ({"authorized_keys": (f'command="x" {KEY}',)}, "'authorized_keys'", "without options"),
    ({"authorized_keys": (KEY + ' "quoted"',)}, "'authorized_keys'", "quotes"),
    ({"target_disk": "sda"}, "'target_disk'", "/dev/vda"),
    ({"target_disk": "/dev/sda; reboot"}, "'target_disk'", "/dev/vda"),
])
def test_bad_input_names_host_field_and_fix(changes: dict, field: str, hint: str) -> None:
    with pytest.raises(DeployDataError) as caught:
        render(spec(**changes), IMAGE, SERVER)
    message = str(caught.value)
    host = changes.get("host", "gpu-a01")
    assert message.startswith(f"{host}: deploy data field {field}")
    assert hint in message


@pytest.mark.parametrize(("image", "field"), [
    (ImageArtifact("Debian 12", "0123456789abcdef", "ab" * 32), "'image.name'"),
    (ImageArtifact("debian12", "xyz", "ab" * 32), "'image.build_id'"),
    (ImageArtifact("debian12", "0123456789abcdef", "ab" * 31), "'image.sha256'"),
])
def test_bad_image_artifact(image: ImageArtifact, field: str) -> None:
    with pytest.raises(DeployDataError, match=f"gpu-a01: deploy data field {field}"):
        render(spec(), image, SERVER)


def test_https_boot_server_refused_with_reason() -> None:
    with pytest.raises(DeployDataError, match=r"'image\.url'.*no TLS"):
        render(spec(), IMAGE, "https://boot.example")


def test_normalize_mac() -> None:
    assert normalize_mac(" 52-54-00-AA-BB-01 ") == "52:54:00:aa:bb:01"
    with pytest.raises(ValueError, match="not a MAC"):
        normalize_mac("52:54:00:aa:bb:zz")


def test_tokens_are_random_and_only_their_hash_is_stored() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100
    token = tokens.pop()
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token)
    assert token_sha256(token) == hashlib.sha256(token.encode()).hexdigest()
    data = render(spec(), IMAGE, SERVER)
    record = host_record(token, data)
    assert record == {"token_sha256": token_sha256(token), "deploy": data}
    assert token not in json.dumps(record)
