"""Bad tokens, unreachable and too-old NetBoxes: one clear line each, exit non-zero."""

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from helpers import BIN, REPO
from racklift.errors import NetBoxError
from racklift.lab.services import port_open
from racklift.netbox.client import NetBox, NetBoxSettings

# The NetBox tier: every test here is about the NetBox server or a connection to one.
pytestmark = pytest.mark.netbox

RACKLIFT = str(BIN / "racklift")


def free_port() -> int:
    port = 18999
    while port_open(port):
        port -= 1
    return port


def test_wrong_token_is_refused_clearly(instance):
    with pytest.raises(NetBoxError, match=r"refused the token \(HTTP 403: Invalid v1 token\)"):
        NetBox.connect(NetBoxSettings(instance.url, "f" * 40))


def test_v2_tokens_work(instance, seeded_netbox):
    """NetBox >= 4.5 issues v2 tokens ('nbt_<key>.<secret>', sent as Bearer) by default."""
    admin = seeded_netbox.get_all("users/users", {"username": "admin"})[0]
    created = seeded_netbox.create("users/tokens", [
        {"user": admin["id"], "version": 2, "description": "v2 test", "write_enabled": False}])[0]
    # The API shows the secret once, at creation; the full v2 token is nbt_<key>.<secret>.
    token = f"nbt_{created['key']}.{created['token']}"
    netbox = NetBox.connect(NetBoxSettings(instance.url, token))
    assert netbox.count("dcim/devices", {"role": "gpu-server"}) == 8


def test_unreachable_netbox_is_reported(instance):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(NetBoxError, match=f"cannot reach NetBox at {url}"):
        NetBox.connect(NetBoxSettings(url, "t" * 40))


def test_url_that_is_not_netbox_root(instance):
    with pytest.raises(NetBoxError, match="is NETBOX_URL the NetBox root URL"):
        NetBox.connect(NetBoxSettings(f"{instance.url}/api", instance.token))


class _OldNetBoxStatus(BaseHTTPRequestHandler):
    """Stand-in for a NetBox 4.1 status endpoint: running a real 4.1 needs its own 5-minute
    migration and Python; the version check is all that differs."""

    def do_GET(self):
        body = json.dumps({"netbox-version": "4.1.11", "python-version": "3.12.1"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_netbox_older_than_4_2_is_refused():
    server = HTTPServer(("127.0.0.1", 0), _OldNetBoxStatus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        with pytest.raises(NetBoxError, match=r"is 4\.1\.11; racklift needs NetBox >= 4\.2"):
            NetBox.connect(NetBoxSettings(url, "t" * 40))
    finally:
        server.shutdown()


def _racklift(*args, env):
    return subprocess.run([RACKLIFT, *args], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=120)


def test_cli_prints_one_line_and_exits_non_zero(instance, seeded_netbox):
    env = {**os.environ, "NETBOX_URL": instance.url, "NETBOX_TOKEN": "0" * 40}
    bad_token = _racklift("netbox.expected", "--rack", "R01", env=env)
    assert bad_token.returncode == 1
    assert bad_token.stderr.strip().splitlines() == [
        f"error: NetBox at {instance.url} refused the token (HTTP 403: Invalid v1 token) while "
        "reading /api/status/: set NETBOX_TOKEN to a valid API token with the permissions "
        "racklift needs"]
    assert "0" * 40 not in bad_token.stderr + bad_token.stdout

    env["NETBOX_TOKEN"] = instance.token
    unknown_rack = _racklift("netbox.expected", "--rack", "R99", env=env)
    assert unknown_rack.returncode == 1
    assert "no rack named R99" in unknown_rack.stderr

    ok = _racklift("netbox.expected", "--rack", "R01", "--json", env=env)
    assert ok.returncode == 0, ok.stderr
    assert [h["name"] for h in json.loads(ok.stdout)] == [f"gpu-{n:04d}" for n in range(1, 9)]


def test_refused_bulk_write_names_the_object_and_field(seeded_netbox):
    with pytest.raises(NetBoxError) as error:
        seeded_netbox.create("dcim/devices", [
            {"name": "fresh-1", "device_type": {"slug": "supermicro-sys-421ge-tnhr2-lcc"},
             "role": {"slug": "gpu-server"}, "site": {"slug": "lab1"}},
            {"name": "fresh-2", "device_type": {"slug": "supermicro-sys-421ge-tnhr2-lcc"},
             "role": {"slug": "gpu-server"}, "site": {"slug": "lab1"},
             "asset_tag": "lab1-000001"}])
    assert "name=fresh-2: asset_tag: device with this asset tag already exists." in str(
        error.value)
    # One request, one transaction: the valid object was not created either.
    assert seeded_netbox.count("dcim/devices", {"name": ["fresh-1", "fresh-2"]}) == 0
