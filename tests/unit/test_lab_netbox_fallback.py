"""Without NETBOX_URL, commands use the lab NetBox only when it is the server racklift started:
planted, a server that answers on the lab's port as the lab NetBox would is refused."""

import http.server
import json
import os
import socket
import threading

import pytest

from racklift.errors import RackliftError
from racklift.lab import services
from racklift.tasks import common, lab_netbox


class _Impostor(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"netbox-version": "4.7.3"}).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def impostor():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Impostor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_listener_is_known_by_its_owner(impostor):
    assert services.listening_inodes(impostor)
    assert services.owns_listener(os.getpid(), impostor)
    assert not services.owns_listener(1, impostor)  # init holds no such socket
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        assert services.listening_inodes(free.getsockname()[1]) == set()  # bound, not listening


def test_something_answering_on_the_lab_port_is_not_taken_for_the_lab(impostor, monkeypatch,
                                                                      tmp_path):
    monkeypatch.delenv("NETBOX_URL", raising=False)
    monkeypatch.delenv("NETBOX_TOKEN", raising=False)
    monkeypatch.setenv("RACKLIFT_LAB_NETBOX_PORT", str(impostor))
    monkeypatch.setenv("RACKLIFT_STATE", str(tmp_path))  # no lab NetBox started here
    monkeypatch.setattr(common, "_fallbacks", [])
    monkeypatch.delenv("ANSIBLE_INVENTORY", raising=False)
    lab_netbox.lab_session()  # what a lab task does first
    with pytest.raises(RackliftError, match=rf"127.0.0.1:{impostor}\) is not the lab NetBox "
                                            "racklift started"):
        common.netbox_settings.__wrapped__()
    # Told which NetBox to use, the command uses it and never looks at the lab port.
    monkeypatch.setenv("NETBOX_URL", "https://netbox.example")
    monkeypatch.setenv("NETBOX_TOKEN", "x" * 40)
    assert common.netbox_settings.__wrapped__().url == "https://netbox.example"
