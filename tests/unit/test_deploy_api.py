"""Tests for the deploy API (roles/boot_server/files/racklift-deploy-api): the real server in a
thread on 127.0.0.1 against a temporary data directory, spoken to over HTTP. Clients connect
from 127.0.0.1 (the hosts' reserved address here) or, as another machine on the provisioning
network, from 127.0.0.2 (Linux routes all of 127/8 to loopback)."""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import pytest

from helpers import http_served, load_script
from racklift.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "roles" / "boot_server" / "files" / "racklift-deploy-api"
SYSTEM_PYTHON = Path("/usr/bin/python3")  # Debian 12's 3.11, what the boot server runs
TOKEN = "tok-" + "a1" * 20
HOST_ADDRESS = "127.0.0.1"  # the address reserved for the hosts' MACs, here
OTHER_ADDRESS = "127.0.0.2"  # another machine on the provisioning network
DEPLOY = {"host": "vm-01", "hostname": "vm-01", "image": {"name": "debian12"}}


def _load() -> ModuleType:
    return load_script(SCRIPT, "racklift_deploy_api")


api = _load()


def _host(data: Path, name: str, token: str, deploy: dict | None = None,
          address: str | None = HOST_ADDRESS) -> None:
    (data / "hosts").mkdir(parents=True, exist_ok=True)
    record = {"token_sha256": hashlib.sha256(token.encode()).hexdigest(),
              "deploy": deploy or {**DEPLOY, "host": name, "hostname": name}}
    if address is not None:
        record["address"] = address
    (data / "hosts" / f"{name}.json").write_text(json.dumps(record))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    _host(tmp_path, "vm-01", TOKEN)
    _host(tmp_path, "vm-02", "tok-other")
    return tmp_path


@pytest.fixture
def url(data: Path) -> Iterator[str]:
    with http_served(api.make_server(("127.0.0.1", 0), data)) as served:
        yield served


def call(url: str, method: str = "GET", body: bytes | None = None,
         source: str = HOST_ADDRESS, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One request from `source`, with `headers` besides the content type."""
    where = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname, where.port, timeout=10,
                                            source_address=(source, 0))
    try:
        connection.request(method, where.path, body=body,
                           headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def report(url: str, token: str, source: str = HOST_ADDRESS, headers: dict[str, str] | None = None,
           **fields: str) -> tuple[int, bytes]:
    return call(f"{url}/v1/report/{token}", "POST", json.dumps(fields).encode(), source, headers)


def test_health(url: str) -> None:
    assert call(f"{url}/v1/health") == (200, b'{"status": "ok"}\n')


def test_deploy_data_once_then_gone(url: str, data: Path) -> None:
    status, body = call(f"{url}/v1/deploy/{TOKEN}")
    assert status == 200
    assert json.loads(body) == DEPLOY
    status, body = call(f"{url}/v1/deploy/{TOKEN}")
    assert status == 410
    assert "vm-01" in json.loads(body)["error"]
    # The other host's token is still good: spending one token spends nothing else.
    assert call(f"{url}/v1/deploy/tok-other")[0] == 200


def test_unknown_token_and_path(url: str) -> None:
    assert call(f"{url}/v1/deploy/nope")[0] == 404
    assert call(f"{url}/v1/deploy/")[0] == 404
    assert call(f"{url}/v2/deploy/{TOKEN}")[0] == 404
    assert report(url, "nope", result="success")[0] == 404


def test_new_token_for_the_same_host_starts_afresh(url: str, data: Path) -> None:
    assert call(f"{url}/v1/deploy/{TOKEN}")[0] == 200
    assert report(url, TOKEN, result="success")[0] == 204
    _host(data, "vm-01", "tok-reimage")  # a reimage: the role writes a new token hash
    assert call(f"{url}/v1/deploy/{TOKEN}")[0] == 404
    assert call(f"{url}/v1/deploy/tok-reimage")[0] == 200
    assert report(url, "tok-reimage", result="failure", phase="stream", reason="x")[0] == 204


def test_report_stored_once_after_deploy(url: str, data: Path) -> None:
    assert call(f"{url}/v1/deploy/{TOKEN}")[0] == 200
    before = time.time()
    status, _ = report(url, TOKEN, result="failure", phase="verify",
                       reason="sha256 mismatch: expected ab got cd")
    assert status == 204
    stored = json.loads((data / "reports" / "vm-01.json").read_text())
    assert stored["result"] == "failure"
    assert stored["phase"] == "verify"
    assert stored["reason"] == "sha256 mismatch: expected ab got cd"
    assert stored["token_sha256"] == hashlib.sha256(TOKEN.encode()).hexdigest()
    assert before <= stored["received_at"] <= time.time()
    assert report(url, TOKEN, result="success")[0] == 409
    assert json.loads((data / "reports" / "vm-01.json").read_text())["result"] == "failure"


@pytest.mark.parametrize("body", [b"not json", b"[1]", b'{"result": "ok"}',
                                  b'{"result": "success", "reason": 3}'])
def test_bad_report_rejected(url: str, data: Path, body: bytes) -> None:
    status, answer = call(f"{url}/v1/report/{TOKEN}", "POST", body)
    assert status == 400
    assert "report" in json.loads(answer)["error"]
    assert not (data / "reports" / "vm-01.json").exists()


def test_oversized_report_rejected(url: str, data: Path) -> None:
    body = json.dumps({"result": "failure", "reason": "x" * 70000}).encode()
    assert call(f"{url}/v1/report/{TOKEN}", "POST", body)[0] == 400
    assert not (data / "reports").exists()


# Planted by another machine on the provisioning network that learned a host's token (or
# guesses at it): every header a proxy could have set claims the host's address.
CLAIMS = {"X-Forwarded-For": HOST_ADDRESS, "X-Real-IP": HOST_ADDRESS,
          "Forwarded": f"for={HOST_ADDRESS}"}


def test_a_token_is_answered_only_for_its_hosts_address(url: str, data: Path) -> None:
    status, body = call(f"{url}/v1/deploy/{TOKEN}", source=OTHER_ADDRESS, headers=CLAIMS)
    assert status == 403
    assert json.loads(body) == {"error": "vm-01: this token is answered only for its host's "
                                         "reserved address"}
    assert report(url, TOKEN, OTHER_ADDRESS, CLAIMS, result="success")[0] == 403
    # Nothing spent, nothing reported: the host itself still deploys.
    assert not (data / "used").exists()
    assert not (data / "reports").exists()
    assert call(f"{url}/v1/deploy/{TOKEN}")[0] == 200
    assert report(url, TOKEN, OTHER_ADDRESS, CLAIMS, result="success")[0] == 403
    assert report(url, TOKEN, result="success")[0] == 204


@pytest.mark.parametrize("address", [None, "", "10.90.0.0/24", "not an address", "0.0.0.0"])
def test_a_record_without_its_hosts_address_answers_nobody(url: str, data: Path,
                                                           address: str | None) -> None:
    _host(data, "vm-01", TOKEN, address=address)
    assert call(f"{url}/v1/deploy/{TOKEN}")[0] == 403
    assert not (data / "used").exists()


def test_the_address_is_compared_as_an_ip() -> None:
    assert api.from_its_host({"address": "127.0.0.1"}, "::ffff:127.0.0.1")
    assert api.from_its_host({"address": "fd00::0:11"}, "fd00::11")
    assert not api.from_its_host({"address": "127.0.0.1"}, "127.0.0.10")
    assert not api.from_its_host({"address": ["127.0.0.1"]}, "127.0.0.1")


def test_a_report_needs_this_tokens_deploy_first(url: str, data: Path) -> None:
    """A ramdisk (or anything at the host's address) cannot report success for a deploy whose
    data it never fetched, and a fetch with an earlier token of the host does not count."""
    status, body = report(url, TOKEN, result="success", phase="done", reason="wrote nothing")
    assert status == 409
    assert json.loads(body) == {"error": "vm-01: no deploy data was fetched with this token"}
    assert not (data / "reports").exists()
    assert call(f"{url}/v1/deploy/{TOKEN}")[0] == 200
    _host(data, "vm-01", "tok-reimage")  # a reimage: a new token, not fetched yet
    assert report(url, "tok-reimage", result="success")[0] == 409
    assert not (data / "reports").exists()
    assert call(f"{url}/v1/deploy/tok-reimage")[0] == 200
    assert report(url, "tok-reimage", result="success")[0] == 204


def test_concurrent_gets_hand_out_the_data_once(url: str) -> None:
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: call(f"{url}/v1/deploy/{TOKEN}")[0], range(16)))
    assert sorted(statuses) == [200] + [410] * 15


def test_unreadable_host_file_does_not_stop_the_others(url: str, data: Path) -> None:
    (data / "hosts" / "broken.json").write_text("{")
    assert call(f"{url}/v1/deploy/{TOKEN}")[0] == 200


def test_tokens_never_logged(url: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="racklift-deploy-api"):
        call(f"{url}/v1/deploy/{TOKEN}", source=OTHER_ADDRESS)
        report(url, TOKEN, OTHER_ADDRESS, result="success")
        report(url, "tok-other", result="success")
        call(f"{url}/v1/deploy/{TOKEN}")
        call(f"{url}/v1/deploy/{TOKEN}")
        call(f"{url}/v1/deploy/secret-unknown-token")
        report(url, TOKEN, result="success")
    text = caplog.text
    assert f"{OTHER_ADDRESS} GET deploy vm-01 (not from its address) -> 403" in text
    assert f"{OTHER_ADDRESS} POST report vm-01 (not from its address) -> 403" in text
    assert "report vm-02 (no deploy fetched) -> 409" in text
    assert "deploy vm-01 -> 200" in text
    assert "-> 410" in text
    assert "report from vm-01: success" in text
    assert "tok-other" not in text
    assert TOKEN not in text
    assert "secret-unknown-token" not in text
    assert hashlib.sha256(TOKEN.encode()).hexdigest() not in text


def test_runs_under_debian_python_from_the_command_line(data: Path) -> None:
    if not SYSTEM_PYTHON.exists():  # pragma: no cover - every Debian 12 machine has it
        pytest.fail(f"{SYSTEM_PYTHON} missing: the boot server runs the API with it")
    bad = subprocess.run([str(SYSTEM_PYTHON), str(SCRIPT), "--data", str(data / "nowhere")],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2
    assert "no hosts/ directory" in bad.stderr
    server = subprocess.Popen([str(SYSTEM_PYTHON), str(SCRIPT), "--listen", "127.0.0.1:0",
                               "--data", str(data)], stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert "listening on 127.0.0.1:" in line
        port = int(line.split("listening on 127.0.0.1:")[1].split(",")[0])
        assert call(f"http://127.0.0.1:{port}/v1/health")[0] == 200
    finally:
        server.terminate()
        server.wait(10)
