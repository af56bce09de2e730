"""The virtual rack's one way out: an HTTP proxy that listens inside the provisioning namespace
and reaches the Debian mirror, and nothing else, from the controller's network. Lab only.

The namespace has no uplink by design (its private addresses never touch the host's network),
yet the boot server must install its packages, as a real one does from the site's mirror.
apt there uses http://127.0.0.1:3142 (the VMs could use http://<bridge address>:3142). The
listening socket is made inside the namespace (setns) by a process that otherwise stays in the
controller's namespace, so connections leave from the controller, like its own apt's.

One origin per client connection (apt opens one per host); requests are relayed unchanged
(HTTP/1.1 servers accept the absolute form); CONNECT for https to an allowed host on 443.

    python -m racklift.lab.vrack_uplink --netns NS --port 3142 --allow deb.debian.org
"""

from __future__ import annotations

import argparse
import os
import socket
import threading
import urllib.parse
from contextlib import suppress

PORT = 3142
HEAD_LIMIT = 64 * 1024


def parse_request_head(head: bytes) -> tuple[str, str, int]:
    """(method, host, port) of a proxy request: absolute-form http:// or CONNECT host:port."""
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3:
        raise ValueError(f"not an HTTP request line: {line!r}")
    method, target, _ = parts
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"CONNECT needs host:port, not {target!r}")
        return method, host, int(port)
    url = urllib.parse.urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise ValueError(f"not a proxy request (absolute http:// URL expected): {line!r}")
    return method, url.hostname, url.port or 80


def refusal(status: str, reason: str) -> bytes:
    body = f"racklift lab uplink: {reason}\n".encode()
    return (f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body


def listen_in(netns: str, port: int) -> socket.socket:
    """A listening socket inside `netns` (on every address there), made from this thread."""
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        os.setns(target, os.CLONE_NEWNET)
        return socket.create_server(("0.0.0.0", port))
    finally:
        os.setns(own, os.CLONE_NEWNET)  # outgoing connections leave from the controller
        os.close(own)
        os.close(target)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with suppress(OSError):  # either side gone: the relay is over
        while data := source.recv(65536):
            sink.sendall(data)
    with suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


def _serve(client: socket.socket, allowed: frozenset[str]) -> None:
    with client:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(65536)
            if not chunk or len(head) > HEAD_LIMIT:
                return
            head += chunk
        # One line per connection to the log (the first request's line; apt and the Debian
        # installer open one per host): what the rack's hosts asked the mirror for.
        print(ascii(head.split(b"\r\n", 1)[0][:300].decode("latin-1")), flush=True)
        try:
            method, host, port = parse_request_head(head)
        except ValueError as exc:
            client.sendall(refusal("400 Bad Request", str(exc)))
            return
        if host not in allowed or port not in (80, 443):
            client.sendall(refusal("403 Forbidden", f"{host}:{port} is not the lab's mirror "
                                   f"({', '.join(sorted(allowed))})"))
            return
        try:
            upstream = socket.create_connection((host, port), timeout=30)
        except OSError as exc:
            client.sendall(refusal("502 Bad Gateway", f"cannot reach {host}:{port}: {exc}"))
            return
        with upstream:
            upstream.settimeout(None)
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.sendall(head)
            back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
            back.start()
            _pump(client, upstream)
            back.join()


def serve(server: socket.socket, allowed: frozenset[str]) -> None:
    while True:
        client, _ = server.accept()
        threading.Thread(target=_serve, args=(client, allowed), daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--netns", required=True)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--allow", action="append", required=True, help="an allowed host")
    args = parser.parse_args(argv)
    serve(listen_in(args.netns, args.port), frozenset(args.allow))


if __name__ == "__main__":
    main()
