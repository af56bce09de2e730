"""Tests for the deploy data renderer and tokens (src/racklift/imaging/deploy_data.py)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import json
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from racklift.imaging import diskimage, host_keys, ramdisk
from racklift.imaging.deploy_data import (
    DeployDataError,
    HostDeploy,
    ImageArtifact,
    disk_identity,
    host_record,
    new_nonce,
    new_token,
    normalize_mac,
    render,
    token_sha256,
)

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBk2Ay1d3BTrlW9LCzg8p8bEzLxvRgGcXa8W0nUHbJz0 ops@ctl"
IMAGE = ImageArtifact("debian12", "0123456789abcdef", "ab" * 32)
SERVER = "http://10.90.0.1"
NONCE = "5e" * 16
HOST_KEY = host_keys.new_host_key()


def spec(**changes) -> HostDeploy:
    base = HostDeploy(host="gpu-a01", mac="52:54:00:AA:BB:01", address="10.90.0.11/24",
                      target_disk="/dev/vda", gateway="10.90.0.1", dns=("10.90.0.1",),
                      authorized_keys=(KEY,), host_key=HOST_KEY)
    return dataclasses.replace(base, **changes)


def test_render_matches_the_contract() -> None:
    assert render(spec(), IMAGE, SERVER + "/", NONCE) == {
        "host": "gpu-a01",
        "nonce": NONCE,
        "image": {"name": "debian12", "build_id": "0123456789abcdef",
                  "url": "http://10.90.0.1/images/debian12/0123456789abcdef/disk.raw.zst",
                  "sha256": "ab" * 32, "format": "raw.zst"},
        "target_disk": "/dev/vda", "target_disk_sysfs": None, "target_disk_id": None,
        "hostname": "gpu-a01",
        "authorized_keys": [KEY],
        "ssh_host_ed25519_key": HOST_KEY.private_base64(),
        "ssh_host_ed25519_key_pub": HOST_KEY.public,
        "network": {"mac": "52:54:00:aa:bb:01", "address": "10.90.0.11/24",
                    "gateway": "10.90.0.1", "dns": ["10.90.0.1"]},
    }


def test_optional_fields() -> None:
    data = render(spec(gateway=None, dns=(), hostname="node1", target_disk="/dev/nvme0n1"),
                  IMAGE, SERVER, NONCE)
    assert data["network"]["gateway"] is None
    assert data["network"]["dns"] == []
    assert data["hostname"] == "node1"
    assert data["host"] == "gpu-a01"
    assert data["target_disk"] == "/dev/nvme0n1"


def test_every_string_is_sed_safe() -> None:
    """The ramdisk extracts fields with sed: no quote, backslash or bracket inside values."""
    text = json.dumps(render(spec(), IMAGE, SERVER, NONCE))
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
    ({"target_disk": "/dev/sda1"}, "'target_disk'", "whole disk"),
    ({"target_disk": "/dev/disk/by-path/pci-0000:3b:00.0-nvme-1"}, "'target_disk'", "wwn-0x"),
    ({"target_disk": "/dev/disk/by-id/ata-ST4000NM0035_ZC1A2B3C"}, "'target_disk'", "wwn-0x"),
])
def test_bad_input_names_host_field_and_fix(changes: dict, field: str, hint: str) -> None:
    with pytest.raises(DeployDataError) as caught:
        render(spec(**changes), IMAGE, SERVER, NONCE)
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
        render(spec(), image, SERVER, NONCE)


def test_https_boot_server_refused_with_reason() -> None:
    with pytest.raises(DeployDataError, match=r"'image\.url'.*no TLS"):
        render(spec(), IMAGE, "https://boot.example", NONCE)


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
    data = render(spec(), IMAGE, SERVER, NONCE)
    record = host_record(token, data, "10.90.0.11")
    assert record == {"token_sha256": token_sha256(token), "address": "10.90.0.11",
                      "deploy": data}
    assert token not in json.dumps(record)
    with pytest.raises(ValueError):
        host_record(token, data, "10.90.0.0/24")  # a token is bound to one address


def test_each_deploy_has_its_own_nonce_and_a_bad_one_is_refused() -> None:
    nonces = {new_nonce() for _ in range(100)}
    assert len(nonces) == 100
    assert all(re.fullmatch(r"[0-9a-f]{32}", n) for n in nonces)
    nonce = nonces.pop()
    assert render(spec(), IMAGE, SERVER, nonce)["nonce"] == nonce
    # Anything else (what sed could not carry, too short): refused before any deploy.
    for bad in ("", "5e" * 15, "5E" * 16, NONCE + "\n", 'x"' + NONCE[2:], None):
        with pytest.raises(DeployDataError, match="gpu-a01: deploy data field 'nonce'"):
            render(spec(), IMAGE, SERVER, bad)


def test_the_ramdisk_reads_each_field_the_api_sends() -> None:
    """The deploy data as the API sends it (one line of JSON), read by the ramdisk's own field
    function: the nonce it writes on the disk is the controller's."""
    data = render(spec(target_disk="/dev/disk/by-id/wwn-0x5000c500a1b2c3d4"), IMAGE, SERVER,
                  NONCE)
    fields = ("host", "nonce", "url", "sha256", "name", "build_id", "target_disk",
              "target_disk_sysfs", "target_disk_id", "hostname", "address", "gateway",
              "ssh_host_ed25519_key", "ssh_host_ed25519_key_pub")
    assert _ramdisk_fields(json.dumps(data), fields) == [
        "gpu-a01", NONCE, IMAGE.url(SERVER), IMAGE.sha256, "debian12", IMAGE.build_id,
        "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4", "device/wwid", "naa.5000c500a1b2c3d4",
        "gpu-a01", "10.90.0.11/24", "10.90.0.1", HOST_KEY.private_base64(), HOST_KEY.public]


def test_the_ramdisk_writes_the_host_key_the_controller_pins(tmp_path) -> None:
    """The ramdisk's own lines that write the host key, run by busybox on a stand-in /mnt: the
    key sshd will present is the pair the controller made (ssh-keygen derives its public half
    from the written file), readable by root alone, and no other host key is left."""
    init = ramdisk.INIT.read_text()
    start = init.index("rm -f /mnt/etc/ssh/ssh_host_*")
    block = init[start:init.index("\n", init.index("ssh_host_ed25519_key.pub", start))]
    etc = tmp_path / "etc" / "ssh"
    etc.mkdir(parents=True)
    (etc / "ssh_host_rsa_key").write_text("an image's own key")
    script = "fail() { echo \"fail $*\"; exit 1; }\nwipe() { :; }\n" + block.replace(
        "/mnt/", f"{tmp_path}/")
    subprocess.run([*SHELL, "-c", script], check=True, timeout=10, env={
        "PATH": "/usr/bin:/bin", "HOST_KEY": HOST_KEY.private_base64(),
        "HOST_KEY_PUB": HOST_KEY.public})
    private = etc / "ssh_host_ed25519_key"
    assert private.read_text() == HOST_KEY.private
    assert private.stat().st_mode & 0o777 == 0o600
    assert (etc / "ssh_host_ed25519_key.pub").read_text().strip() == HOST_KEY.public
    derived = subprocess.run(["ssh-keygen", "-y", "-f", str(private)], capture_output=True,
                             text=True, check=True, timeout=10).stdout
    assert derived.split()[:2] == HOST_KEY.public.split()[:2]
    assert sorted(p.name for p in etc.iterdir()) == ["ssh_host_ed25519_key",
                                                     "ssh_host_ed25519_key.pub"]


def test_a_deploy_without_its_host_key_is_refused() -> None:
    with pytest.raises(DeployDataError, match="gpu-a01: deploy data field "
                       "'ssh_host_ed25519_key' is missing; give the host a key"):
        render(spec(host_key=None), IMAGE, SERVER, NONCE)


# Stable disk names: what udev links under /dev/disk/by-id, and the file of /sys/block/<disk>
# that holds the same identity on the real kernel (the deploy ramdisk has no udev).
SYSFS = {  # disk → {file: content, as the kernel shows it}
    "sda": {"device/wwid": "naa.5000c500a1b2c3d4\n"},  # SATA/SAS: the NAA designator
    "sdb": {"device/wwid": "naa.600508b1001c4d4b9f1a2b3c4d5e6f70\n"},  # NAA 6 (32 digits)
    "nvme0n1": {"wwid": "eui.0025388b91b0c3e1\n"},  # EUI-64
    "nvme1n1": {"wwid": "eui.36344730526054870025384500000001\n"},  # NGUID
    "vda": {"serial": "vm-disk-01"},  # virtio-blk: no newline
    "loop0": {},
}


@pytest.mark.parametrize(("name", "disk"), [
    ("/dev/disk/by-id/wwn-0x5000c500a1b2c3d4", "/dev/sda"),
    ("/dev/disk/by-id/wwn-0x5000C500A1B2C3D4", "/dev/sda"),  # hex in either case
    ("/dev/disk/by-id/wwn-0x600508b1001c4d4b9f1a2b3c4d5e6f70", "/dev/sdb"),
    ("/dev/disk/by-id/nvme-eui.0025388b91b0c3e1", "/dev/nvme0n1"),
    ("/dev/disk/by-id/nvme-eui.36344730526054870025384500000001", "/dev/nvme1n1"),
    ("/dev/disk/by-id/virtio-vm-disk-01", "/dev/vda"),
])
def test_the_ramdisk_finds_a_disk_named_by_id(tmp_path, name: str, disk: str) -> None:
    for dev, files in SYSFS.items():
        for file, content in files.items():
            path = tmp_path / "block" / dev / file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        (tmp_path / "block" / dev).mkdir(parents=True, exist_ok=True)
    identity = disk_identity(name)
    assert identity is not None
    data = render(spec(target_disk=name), IMAGE, SERVER, NONCE)
    assert (data["target_disk"], data["target_disk_sysfs"], data["target_disk_id"]) == (
        name, identity.sysfs, identity.value)
    assert _disk_by(tmp_path, identity.sysfs, identity.value) == (0, disk)
    assert _disk_by(tmp_path, identity.sysfs, identity.value + "0")[0] == 1


def test_kernel_names_are_used_as_they_are() -> None:
    for name in ("/dev/vda", "/dev/sdb", "/dev/nvme0n1", "/dev/xvda"):
        assert disk_identity(name) is None
    for name in ("/dev/sda1", "/dev/nvme0n1p2", "/dev/disk/by-id/wwn-0x5000", "/dev/md0",
                 "/dev/disk/by-uuid/4f0c", "/dev/disk/by-id/virtio-" + "x" * 21):
        with pytest.raises(ValueError, match="whole disk"):
            disk_identity(name)


def _init_function(name: str) -> str:
    """One shell function of the ramdisk's init, as its text."""
    init = ramdisk.INIT.read_text()
    # One line (`name() { ...; }`), or up to the first line that is `}`.
    function = re.search(rf"^{name}\(\) \{{([^\n]*\}}|\n.*?^\}})\n", init,
                         re.DOTALL | re.MULTILINE)
    assert function, f"the ramdisk's init has no {name} function"
    return function[0]


# The shell the ramdisk has (busybox's, where it is installed; scripts/bootstrap installs it).
SHELL = [str(ramdisk.BUSYBOX), "sh"] if ramdisk.BUSYBOX.exists() else ["sh"]


def _disk_by(sysfs: Path, file: str, value: str) -> tuple[int, str]:
    """The ramdisk's own disk_by function (its init), run against a sysfs tree."""
    done = subprocess.run([*SHELL, "-c", f'{_init_function("disk_by")}disk_by "$@"', "sh",
                           str(sysfs), file, value], capture_output=True, text=True, timeout=10)
    return done.returncode, done.stdout.strip()


def _ramdisk_fields(deploy_json: str, names: tuple[str, ...]) -> list[str]:
    """Each field as the ramdisk's own field function reads it from /tmp/deploy.json (here: a
    temporary file in its place)."""
    function = _init_function("field").replace("/tmp/deploy.json", '"$DEPLOY_JSON"')
    # As the ramdisk takes them: NAME=$(field name).
    script = f'{function}for name in "$@"; do echo "$(field "$name")"; done'
    with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
        file.write(deploy_json)
        file.flush()
        done = subprocess.run([*SHELL, "-c", script, "sh", *names], capture_output=True,
                              text=True, timeout=10, env={"DEPLOY_JSON": file.name},
                              check=True)
    return done.stdout.splitlines()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture
def www(tmp_path) -> Iterator[tuple[Path, str]]:
    """A directory served over HTTP on the loopback: (directory, its URL)."""
    root = tmp_path / "www"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(not ramdisk.BUSYBOX.exists() or not shutil.which("zstd"),
                    reason="needs busybox-static and zstd (scripts/bootstrap installs them)")
@pytest.mark.parametrize("served", ["whole", "truncated", "corrupted"])
def test_the_ramdisk_streams_the_zstd_image_and_hashes_what_it_received(tmp_path, www,
                                                                        served) -> None:
    """The ramdisk's own stream_image (its init) under busybox with the zstd it carries, from
    HTTP into a file standing in for the disk: the image the build compressed is written as it
    was; a cut stream or a changed byte fails the decompressor (zstd checks its frame's
    checksum), and the sha256 is of the bytes that arrived, so the init's check refuses them."""
    root, url = www
    raw = tmp_path / "disk.raw"
    raw.write_bytes(bytes(range(256)) * 8192 + b"\0" * (3 << 20) + b"racklift" * 70000)
    image = tmp_path / "disk.raw.zst"
    whole_sha = diskimage.compress(raw, image)
    compressed = image.read_bytes()
    middle = len(compressed) // 2
    body = {"whole": compressed, "truncated": compressed[:middle],
            "corrupted": compressed[:middle] + bytes([compressed[middle] ^ 1])
            + compressed[middle + 1:]}[served]
    (root / "disk.raw.zst").write_bytes(body)
    bin_dir, work, disk = tmp_path / "bin", tmp_path / "tmp", tmp_path / "disk"
    bin_dir.mkdir()
    work.mkdir()
    (bin_dir / "zstd").symlink_to(shutil.which("zstd"))  # busybox runs its own applets
    function = _init_function("stream_image").replace("/tmp/", f"{work}/")
    subprocess.run([*SHELL, "-c", f'{function}stream_image "$@"', "sh", f"{url}/disk.raw.zst",
                    str(disk)], env={"PATH": str(bin_dir)}, timeout=60, check=True)
    got = (work / "image.sha256").read_text().split()[0]
    assert got == hashlib.sha256(body).hexdigest()
    failed = sorted(p.name for p in work.glob("*.failed"))
    if served == "whole":
        assert got == whole_sha
        assert failed == []
        assert disk.read_bytes() == raw.read_bytes()
    else:
        assert got != whole_sha
        assert failed == ["zstd.failed"]
        assert (work / "zstd.err").read_text().strip()
        assert disk.read_bytes() != raw.read_bytes()
