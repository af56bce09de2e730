"""What a simulated host's firmware, iPXE and racklift's deploy ramdisk say to its site's boot
server (lab only), on the wire: DHCP from the host's NetBox MAC on the site's link, iPXE's
scripts over HTTP, the deploy data and the report from the deploy API, every request from the
host's own address. The image itself is not fetched: its size (HEAD) at the fleet's link rate
is how long its stream takes. racklift.lab.fleet.machine runs these steps in order.

Whatever the boot server answers is data: replies are bounded, a script is only searched for
the lines iPXE would run.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
import struct
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import urlsplit

DHCP_SERVER, DHCP_CLIENT = 67, 68
MAGIC = b"\x63\x82\x53\x63"
DISCOVER, OFFER, REQUEST, ACK, NAK = 1, 2, 3, 5, 6
BROADCAST_FLAG = 0x8000  # replies broadcast: the site's link is shared by all its hosts
EFI_X64 = 7  # option 93: what a UEFI firmware's PXE says it is
IPXE = b"iPXE"  # option 77 as iPXE sends it (dnsmasq's dhcp-userclass matches it)
REPLY_LIMIT = 64 * 1024  # of an HTTP answer read whole (a script, the deploy data)
HTTP_TIMEOUT = 30.0


class DhcpReply(NamedTuple):
    kind: int
    xid: int
    address: str  # yiaddr
    boot_file: str  # option 67, else the file field


def dhcp_message(kind: int, xid: int, mac: str, *, arch: int | None = None,
                 user_class: bytes | None = None, requested: str | None = None,
                 server: str | None = None) -> bytes:
    """A client's DHCP message (BOOTREQUEST) from `mac`, asking for broadcast replies."""
    hw = bytes.fromhex(mac.replace(":", ""))
    head = struct.pack("!BBBBIHH4s4s4s4s16s64s128s", 1, 1, 6, 0, xid, 0, BROADCAST_FLAG,
                       bytes(4), bytes(4), bytes(4), bytes(4), hw, b"", b"")
    options: list[tuple[int, bytes]] = [(53, bytes([kind])), (61, b"\x01" + hw),
                                         (55, bytes([1, 3, 6, 66, 67]))]
    if arch is not None:
        options.append((93, struct.pack("!H", arch)))
    if user_class:
        options.append((77, user_class))
    if requested:
        options.append((50, socket.inet_aton(requested)))
    if server:
        options.append((54, socket.inet_aton(server)))
    return head + MAGIC + b"".join(bytes([c, len(v)]) + v for c, v in options) + b"\xff"


def _options(data: bytes) -> dict[int, bytes]:
    found, at = {}, 0
    while at < len(data) and data[at] != 255:
        if data[at] == 0:  # pad
            at += 1
            continue
        if at + 1 >= len(data):
            break
        code, size = data[at], data[at + 1]
        found[code] = data[at + 2:at + 2 + size]
        at += 2 + size
    return found


def parse_reply(data: bytes) -> DhcpReply | None:
    """A server's BOOTREPLY, or None for anything else."""
    if len(data) < 240 or data[0] != 2 or data[236:240] != MAGIC:
        return None
    options = _options(data[240:])
    kind = options.get(53, b"\0")[0]
    file = (options.get(67) or data[108:236]).split(b"\0", 1)[0]  # dnsmasq ends 67 with NUL
    return DhcpReply(kind, struct.unpack("!I", data[4:8])[0], socket.inet_ntoa(data[16:20]),
                     file.decode("latin-1"))


class _Replies(asyncio.DatagramProtocol):
    def __init__(self, waiting: dict[int, asyncio.Queue[DhcpReply]]) -> None:
        self._waiting = waiting

    def datagram_received(self, data: bytes, addr: Any) -> None:
        reply = parse_reply(data)
        if reply is not None and reply.xid in self._waiting:
            self._waiting[reply.xid].put_nowait(reply)


@dataclass
class SiteLink:
    """The fleet's end of one site's provisioning link: every host of the site sends its DHCP
    there, and the replies (broadcast) are handed to the exchange whose transaction id they
    carry."""

    device: str
    _transport: asyncio.DatagramTransport | None = None
    _waiting: dict[int, asyncio.Queue[DhcpReply]] = field(default_factory=dict)

    async def open(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, self.device.encode())
        sock.bind(("", DHCP_CLIENT))
        sock.setblocking(False)
        self._transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
            lambda: _Replies(self._waiting), sock=sock)

    async def lease(self, mac: str, *, arch: int | None = None,
                    user_class: bytes | None = None, tries: int = 4,
                    wait: float = 4.0) -> DhcpReply | None:
        """DISCOVER, OFFER, REQUEST, ACK as `mac`: the ACK, or None when no server offered
        (after `tries` DISCOVERs, `wait` seconds apart) or it refused."""
        assert self._transport is not None, "open() first"
        xid = random.getrandbits(32)
        replies: asyncio.Queue[DhcpReply] = asyncio.Queue()
        self._waiting[xid] = replies
        try:
            offer = await self._ask(replies, DISCOVER, OFFER, xid, mac, tries, wait,
                                    arch=arch, user_class=user_class)
            if offer is None:
                return None
            ack = await self._ask(replies, REQUEST, ACK, xid, mac, tries, wait, arch=arch,
                                  user_class=user_class, requested=offer.address)
            return ack
        finally:
            del self._waiting[xid]

    async def _ask(self, replies: asyncio.Queue[DhcpReply], kind: int, want: int, xid: int,
                   mac: str, tries: int, wait: float, **options: Any) -> DhcpReply | None:
        assert self._transport is not None
        message = dhcp_message(kind, xid, mac, **options)
        for _ in range(tries):
            self._transport.sendto(message, ("255.255.255.255", DHCP_SERVER))
            try:
                while True:
                    got = await asyncio.wait_for(replies.get(), wait)
                    if got.kind == want:
                        return got
                    if got.kind == NAK:
                        return None
            except TimeoutError:
                continue
        return None

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class HttpAnswer(NamedTuple):
    status: int
    headers: dict[str, str]
    body: bytes


async def http(method: str, url: str, source: str, body: bytes | None = None,
               timeout: float = HTTP_TIMEOUT) -> HttpAnswer:
    """One HTTP/1.1 request from `source` (the host's own address), the answer read whole
    (bounded); OSError or TimeoutError when the server cannot be reached."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise OSError(f"not an http:// URL: {url[:200]!r}")
    port = parts.port or 80
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    head = [f"{method} {path} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close",
            "User-Agent: racklift-fleet-sim"]
    if body is not None:
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]

    async def exchange() -> bytes:
        reader, writer = await asyncio.open_connection(parts.hostname, port,
                                                       local_addr=(source, 0))
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + (body or b""))
            await writer.drain()
            raw = b""
            while len(raw) < REPLY_LIMIT and (chunk := await reader.read(REPLY_LIMIT)):
                raw += chunk
            return raw[:REPLY_LIMIT]
        finally:
            writer.close()
    raw = await asyncio.wait_for(exchange(), timeout)
    top, _, content = raw.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    words = lines[0].split(" ", 2)
    if len(words) < 2 or not words[1].isdigit():
        raise OSError(f"{url[:200]}: not an HTTP answer")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return HttpAnswer(int(words[1]), headers, b"" if method == "HEAD" else content)


async def size_of(url: str, source: str) -> int:
    """What the boot server would send for `url` (HEAD's Content-Length); OSError when it
    would not (not 200)."""
    got = await http("HEAD", url, source)
    length = got.headers.get("content-length", "")
    if got.status != 200 or not length.isdigit():
        raise OSError(f"HEAD {url[:200]}: {got.status}")
    return int(length)


def transfer_seconds(size: int, gbps: float) -> float:
    return size * 8 / (gbps * 1e9) if gbps > 0 else 0.0


_CHAIN = re.compile(r"^chain\s+(\S+)", re.MULTILINE)
_KERNEL = re.compile(r"^kernel\s+(\S+)(.*?)(?:\|\||$)", re.MULTILINE)
_INITRD = re.compile(r"^initrd\s+(?:--name\s+\S+\s+)?(\S+)", re.MULTILINE)


def chained(script: str, mac: str) -> str | None:
    """The URL boot.ipxe chains to for the NIC with `mac` (iPXE's ${netX/mac})."""
    found = _CHAIN.search(script)
    return found[1].replace("${netX/mac}", mac) if found else None


class RamdiskBoot(NamedTuple):
    kernel: str
    initrd: str
    cmdline: dict[str, str]


def ramdisk_boot(script: str) -> RamdiskBoot | None:
    """The kernel, initrd and the kernel's `key=value` arguments of a host's iPXE script; None
    where it boots no kernel (a host not being deployed boots its local disk)."""
    kernel, initrd = _KERNEL.search(script), _INITRD.search(script)
    if not kernel or not initrd:
        return None
    args = dict(word.split("=", 1) for word in kernel[2].split() if "=" in word)
    return RamdiskBoot(kernel[1], initrd[1], args)


def deploy_json(body: bytes) -> dict[str, Any]:
    """The deploy data as the ramdisk reads it; ValueError unless it is a JSON object."""
    data = json.loads(body)
    if not isinstance(data, dict):
        raise ValueError("the deploy data is not a JSON object")
    return data
