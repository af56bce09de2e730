"""A local stand-in BMC for the Redfish tests: a real HTTPS server on loopback answering
scripted (status, headers, body) answers first, then GETs from its resources (a captured real
tree's, `tree_resources`), with basic auth checked where it is given credentials."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# The credentials a stand-in serving a tree checks (tests/unit/conftest.py's `dell`).
USER, PASSWORD = "racklift", "standin-Pa55-word"


def make_cert(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    cert, key = directory / "standin.pem", directory / "standin.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def tree_resources(tree: Path) -> dict[str, object]:
    """A captured tree (tests/fixtures/real/redfish) as resources: path -> its index.json."""
    return {"/" + p.parent.relative_to(tree).as_posix(): json.loads(p.read_text(encoding="utf-8"))
            for p in tree.rglob("index.json")}


class StandinBmc(ThreadingHTTPServer):
    """Answers each request with the next scripted (status, headers, body); then GETs from
    `resources` (404 for any other path), and anything else with 204. With `credentials`, a
    request without them is answered 401."""

    def __init__(self, cert: Path, key: Path,
                 credentials: tuple[str, str] | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.script: list[tuple[int, dict[str, str], object]] = []
        self.resources: dict[str, object] = {}
        self.received: list[tuple[str, str, object]] = []
        self.credentials = credentials
        self.users: list[str] = []  # the user each request authenticated as ("" for none)
        self.tokens: list[str | None] = []  # the Redfish session token each request carried

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    server: StandinBmc

    def _user(self) -> tuple[str, str] | None:
        scheme, _, value = (self.headers.get("Authorization") or "").partition(" ")
        if scheme != "Basic":
            return None
        user, _, password = base64.b64decode(value).decode().partition(":")
        return user, password

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.server.received.append((self.command, self.path, body))
        user = self._user()
        self.server.users.append(user[0] if user else "")
        self.server.tokens.append(self.headers.get("X-Auth-Token"))
        if self.server.credentials is not None and user != self.server.credentials:
            status, headers, payload = 401, {"WWW-Authenticate": 'Basic realm="BMC"'}, None
        elif self.server.script:
            status, headers, payload = self.server.script.pop(0)
        elif self.path in self.server.resources:
            status, headers, payload = 200, {}, self.server.resources[self.path]
        elif self.command == "GET":
            status, headers, payload = 404, {}, {"error": {"message": "not found"}}
        else:
            status, headers, payload = 204, {}, None
        data = json.dumps(payload).encode() if payload is not None else b""
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serving(server: StandinBmc) -> Iterator[StandinBmc]:
    """The server answering in a thread until the block ends."""
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def serving_tree(tree: Path, tls: tuple[Path, Path],
                 credentials: tuple[str, str] | None = None) -> Iterator[StandinBmc]:
    """A stand-in BMC answering GETs from a captured tree, over HTTPS with `tls` (make_cert's)."""
    server = StandinBmc(*tls, credentials=credentials)
    server.resources = tree_resources(tree)
    with serving(server):
        yield server
