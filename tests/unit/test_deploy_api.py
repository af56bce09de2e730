"""Tests for the deploy API (roles/boot_server/files/racklift-deploy-api): the real server in a
thread on 127.0.0.1 against a temporary data directory, spoken to over HTTP."""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import pytest

from helpers import load_script
from racklift.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "roles" / "boot_server" / "files" / "racklift-deploy-api"
SYSTEM_PYTHON = Path("/usr/bin/python3")  # Debian 12's 3.11, what the boot server runs
TOKEN = "tok-" + "a1" * 20
DEPLOY = {"host": "vm-01", "hostname": "vm-01", "image": {"name": "debian12"}}


def _load() -> ModuleType:
    return load_script(SCRIPT, "racklift_deploy_api")


api = _load()


def _host(data: Path, name: str, token: str, deploy: dict | None = None) -> None:
    (data / "hosts").mkdir(parents=True, exist_ok=True)
    record = {"token_sha256": hashlib.sha256(token.encode()).hexdigest(),
              "deploy": deploy or {**DEPLOY, "host": name, "hostname": name}}
    (data / "hosts" / f"{name}.json").write_text(json.dumps(record))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    _host(tmp_path, "vm-01", TOKEN)
    _host(tmp_path, "vm-02", "tok-other")
    return tmp_path


@pytest.fixture
def url(data: Path) -> Iterator[str]:
    server = api.make_server(("127.0.0.1", 0), data)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def call(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def report(url: str, token: str, **fields: str) -> tuple[int, bytes]:
    return call(f"{url}/v1/report/{token}", "POST", json.dumps(fields).encode())


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


def test_concurrent_gets_hand_out_the_data_once(url: str) -> None:
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: call(f"{url}/v1/deploy/{TOKEN}")[0], range(16)))
    assert sorted(statuses) == [200] + [410] * 15


def test_unreadable_host_file_does_not_stop_the_others(url: str, data: Path) -> None:
    (data / "hosts" / "broken.json").write_text("{")
    assert call(f"{url}/v1/deploy/{TOKEN}")[0] == 200


def test_tokens_never_logged(url: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="racklift-deploy-api"):
        call(f"{url}/v1/deploy/{TOKEN}")
        call(f"{url}/v1/deploy/{TOKEN}")
        call(f"{url}/v1/deploy/secret-unknown-token")
        report(url, TOKEN, result="success")
    text = caplog.text
    assert "deploy vm-01 -> 200" in text
    assert "-> 410" in text
    assert "report from vm-01: success" in text
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
