"""perftest's ``ib_write_bw`` between two emulated hosts' HCA ports, over a real TCP connection:
perftest's own out-of-band exchange, the server listening on PORT (18515 by default) on all
addresses for one client.

The output is the layout of the real MLNX_OFED 24.10 capture in tests/fixtures/real (TABs
kept; ``MiB/sec``, or ``Gb/sec`` with ``--report_gbits``) on an InfiniBand port (LID addresses,
no GID lines, as in the real ConnectX-6 IB capture), printed with perftest's format strings and
worded as perftest words its errors (src/perftest_*.c, linux-rdma/perftest). Each end sends the
other one JSON line: its port's capability (the profile's rate, 97% of it as perftest reads a
healthy link, times what the port carries under load), its queue pairs' addresses, and from the
client the test's message size and length. Both ends print the pair's figures, as the real
server prints the client's: the slower port's capability less a small jitter seeded by the two
ends' names. A ``-D`` run spends at most a second (lab speed)."""

from __future__ import annotations

import json
import random
import socket
import time
from dataclasses import dataclass
from typing import Any

from .command import ToolExit, read_options
from .infiniband import _IB_STATE, _sorted_hcas
from .profile import HCAPort, Profile, _hca

DEFAULT_PORT = 18515
# How long the server waits for its client, the client retries its server (perftest itself
# does not: the lab starts both ends at once), and either end waits for the other's line.
ACCEPT_WAIT_S = 60.0
CONNECT_RETRY_S = 5.0
EXCHANGE_WAIT_S = 10.0
_LAB_SECONDS = 1.0
_LINE_RATE_SHARE = 0.97
_MAX_LINE = 1 << 16


_RESULT_LINE = "-" * 87


_WAITING = ("\n************************************\n* Waiting for client to connect... *\n"
            "************************************\n")


_NO_PEAK = " WARNING: BW peak won't be measured in this run.\n"


_NO_SOCKET = ("Unable to open file descriptor for socket connection\n"
              " Unable to init the socket connection\n")


_PORT_STATES = ("Nop", "Down", "Init", "Armed", "", "Active Defer")  # perftest's portStates


@dataclass(frozen=True)
class _Options:
    device: str | None
    ib_port: int
    duration: int  # seconds; 0: a count of iterations
    gbits: bool
    port: int
    qps: int
    size: int
    iters: int
    server: str | None  # the client's operand; None: this end is the server


_VALUED = {"-d": "d", "--ib-dev": "d", "-i": "i", "--ib-port": "i", "-D": "D",
           "--duration": "D", "-p": "p", "--port": "p", "-q": "q", "--qp": "q", "-s": "s",
           "--size": "s", "-n": "n", "--iters": "n"}


_FLAGS = {"-F": "F", "--CPU-freq": "F", "--report_gbits": "gbits"}


# Each number option: perftest's name for it, and its default.
_NUMBERS = {"i": ("IB Port", 1), "D": ("Duration period", 0), "p": ("Port", DEFAULT_PORT),
            "q": ("num of Qps", 1), "s": ("Size", 65536), "n": ("Iteration num", 5000)}


def _parse(args: list[str]) -> _Options:
    options, operands = read_options("ib_write_bw", args, _VALUED, _FLAGS)
    if len(operands) > 1:
        raise ToolExit(1, "", f"ib_write_bw: the lab does not emulate {operands[1]}\n")
    numbers = {}
    for key, (name, default) in _NUMBERS.items():
        value = options.get(key, str(default))
        try:
            numbers[key] = int(value, 0)
        except ValueError:
            raise ToolExit(1, "", f" {name} argument {value} should be int\n Parser function "
                                  "exited with Error\n") from None
        if key in options and numbers[key] < 1:
            raise ToolExit(1, "", f" {name} must be positive\n Parser function exited with "
                                  "Error\n")
    return _Options(options.get("d"), numbers["i"], numbers["D"], "gbits" in options,
                    numbers["p"], numbers["q"], numbers["s"], numbers["n"],
                    operands[0] if operands else None)


def _port(p: Profile, opts: _Options, printed: str) -> HCAPort:
    """The port the test runs on, Active; otherwise the tool ends as perftest does."""
    hcas = _sorted_hcas(p)
    if not hcas:
        raise ToolExit(1, printed, " Did not detect devices \n If device exists, check if "
                                   "driver is up\n Unable to find the Infiniband/RoCE device\n")
    h = _hca(p, opts.device) if opts.device else hcas[0]
    if h is None:
        raise ToolExit(1, printed, f"IB device {opts.device} not found\n Unable to find the "
                                   "Infiniband/RoCE device\n")
    if opts.ib_port != h.port:
        why = f" Unable to query port {opts.ib_port} attributes"
    elif h.state != "Active":
        why = f" Port number {h.port} state is {_PORT_STATES[_IB_STATE.get(h.state, 1)]}"
    else:
        return h
    raise ToolExit(1, printed, f"{why}\n Couldn't set the link layer\n Couldn't get context for "
                               "the device\n")


def _capability(h: HCAPort) -> float:
    """What ib_write_bw measures of an Active port alone, in Gb/s."""
    return h.rate * _LINE_RATE_SHARE * h.load_factor


def _hello(p: Profile, h: HCAPort, opts: _Options) -> dict[str, Any]:
    """This end's line to the other: its port, its queue pairs (QPN, PSN, RKey, VAddr), and
    the test as this end was asked to run it (the server's is not used)."""
    rng = random.Random(f"{p.hostname}:{h.ca}:{opts.server is None}")
    qpn = rng.randrange(0x20, 0x1000)
    qps = [[qpn + n, rng.randrange(1 << 24), rng.randrange(0x100000, 0x200000),
            rng.randrange(0x7F0000000, 0x800000000) << 12] for n in range(opts.qps)]
    return {"host": p.hostname, "device": h.ca, "gbps": _capability(h), "lid": h.base_lid,
            "qps": qps, "size": opts.size, "iters": opts.iters, "duration": opts.duration}


def _valid(hello: Any) -> bool:
    try:
        return (isinstance(hello["host"], str) and isinstance(hello["device"], str)
                and hello["gbps"] > 0 and all(len(qp) == 4 for qp in hello["qps"])
                and isinstance(hello["lid"], int) and hello["size"] > 0
                and hello["iters"] > 0 and hello["duration"] >= 0)
    except (KeyError, TypeError):
        return False


@dataclass(frozen=True)
class _Figures:
    """One run's row: as the client measures it, and the server prints it."""

    size: int
    iters: int
    peak_gbps: float  # 0 under -D: perftest measures no peak then
    average_gbps: float


def _figures(client: dict[str, Any], server: dict[str, Any]) -> _Figures:
    """The pair's figures from the two ends' hellos: the slower port, less up to 0.4%."""
    rng = random.Random("|".join(sorted(f"{end['host']}:{end['device']}"
                                        for end in (client, server))))
    average = min(client["gbps"], server["gbps"]) * (1 - 0.004 * rng.random())
    peak = average * (1.0005 + 0.0015 * rng.random())
    if client["duration"]:
        iters = int(average * 1e9 / 8 / client["size"] * client["duration"])
        return _Figures(client["size"], iters, 0.0, average)
    return _Figures(client["size"], client["iters"], peak, average)


def _report_row(f: _Figures, gbits: bool) -> str:
    scale = 1.0 if gbits else 1e9 / 8 / 2**20  # MiB/sec
    rate = f.average_gbps * 1e9 / 8 / f.size / 1e6
    return (f" {f.size:<7d}    {f.iters:<10d}       {f.peak_gbps * scale:<7.2f}            "
            f"{f.average_gbps * scale:<7.2f}\t\t     {rate:<7.6f}")


def _address(side: str, lid: int, qp: list[int]) -> str:
    qpn, psn, rkey, vaddr = qp
    return (f" {side} address: LID {lid:#04x} QPN {qpn:#06x} PSN {psn:#06x} RKey {rkey:#08x} "
            f"VAddr {vaddr:#016x}")


def _output(opts: _Options, h: HCAPort, local: dict[str, Any], remote: dict[str, Any],
            figures: _Figures) -> str:
    unit = "Gb" if opts.gbits else "MiB"
    lines = [_RESULT_LINE, "                    RDMA_Write BW Test",
             f" Dual-port       : OFF\t\tDevice         : {h.ca}",
             f" Number of qps   : {opts.qps}\t\tTransport type : IB",
             " Connection type : RC\t\tUsing SRQ      : OFF",
             " PCIe relax order: ON\t\tLock-free      : OFF",
             " ibv_wr* API     : ON\t\tUsing DDP      : OFF",
             *([" TX depth        : 128"] if opts.server else []),  # the sending end's
             # perftest turns CQ moderation off past 8 KiB messages.
             f" CQ Moderation   : {1 if opts.size > 8192 else 100}",
             f" Mtu             : {h.active_mtu}[B]",
             " Link type       : IB",  # the lab's ports are InfiniBand: no GID lines
             " Max inline data : 0[B]", " rdma_cm QPs\t : OFF", " Data ex. method : Ethernet",
             _RESULT_LINE,
             *(_address("local", local["lid"], qp) for qp in local["qps"]),
             *(_address("remote", remote["lid"], qp) for qp in remote["qps"]),
             _RESULT_LINE,
             f" #bytes     #iterations    BW peak[{unit}/sec]    BW average[{unit}/sec]   "
             "MsgRate[Mpps]", _report_row(figures, opts.gbits), _RESULT_LINE]
    return "\n".join(lines) + "\n"


class _Unconnected(Exception):
    """No connection to the other end; the message is perftest's."""


def _accept(port: int) -> socket.socket:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind(("", port))
        except OSError:
            raise _Unconnected(f"Couldn't listen to port {port}") from None
        server.listen(1)
        server.settimeout(ACCEPT_WAIT_S)
        try:
            return server.accept()[0]
        except TimeoutError:
            raise _Unconnected("server accept: Connection timed out\naccept() failed") from None


def _connect(address: str, port: int) -> socket.socket:
    """The server; retried a while, so that a client started with its server finds it."""
    deadline = time.monotonic() + CONNECT_RETRY_S
    while True:
        try:
            return socket.create_connection(
                (address, port), timeout=max(0.1, deadline - time.monotonic()))
        except socket.gaierror:
            raise _Unconnected("Problem in resolving basic address and port") from None
        except OSError:
            if time.monotonic() >= deadline:
                raise _Unconnected(f"Couldn't connect to {address}:{port}") from None
            time.sleep(0.05)


def _exchange(conn: socket.socket, hello: dict[str, Any], client: bool) -> dict[str, Any]:
    """The client's line first, then the server's; ValueError or OSError if it fails."""
    conn.settimeout(EXCHANGE_WAIT_S)
    line = (json.dumps(hello) + "\n").encode()
    if client:
        conn.sendall(line)
    with conn.makefile("rb") as stream:
        peer = json.loads(stream.readline(_MAX_LINE))
    if not _valid(peer):
        raise ValueError("not an ib_write_bw peer")
    if not client:
        conn.sendall(line)
    return peer


def ib_write_bw(p: Profile, args: list[str]) -> str:
    """The ``ib_write_bw`` tool: a server without SERVER_ADDRESS, else a client."""
    opts = _parse(args)
    printed = _NO_PEAK if opts.duration else ""
    h = _port(p, opts, printed)
    hello = _hello(p, h, opts)
    if opts.server is None:
        printed += _WAITING
    try:
        conn = _connect(opts.server, opts.port) if opts.server else _accept(opts.port)
    except _Unconnected as exc:
        raise ToolExit(1, printed, f"{exc}\n{_NO_SOCKET}") from None
    with conn:
        try:
            peer = _exchange(conn, hello, client=opts.server is not None)
        except (OSError, ValueError):
            raise ToolExit(1, printed, " Failed to exchange data between server and "
                                       "clients\n") from None
    if opts.server and opts.duration:
        time.sleep(min(opts.duration, _LAB_SECONDS))
    figures = _figures(*((hello, peer) if opts.server else (peer, hello)))
    return printed + _output(opts, h, hello, peer, figures)


def client_of(client: Profile, client_args: list[str], server: Profile | None,
              server_args: list[str]) -> str:
    """What the client of a pair prints where one process answers for both ends (the simulated
    fleet: no socket between them): the same exchange, figures and output as
    ``ib_write_bw``. `server` None: no server listens at the client's address and port."""
    opts = _parse(client_args)
    printed = _NO_PEAK if opts.duration else ""
    h = _port(client, opts, printed)
    if opts.server is None:
        raise ToolExit(1, printed, "ib_write_bw: the simulated fleet runs clients only\n")
    peer = None
    if server is not None:
        server_opts = _parse(server_args)
        try:
            peer = _hello(server, _port(server, server_opts, ""), server_opts)
        except ToolExit:
            peer = None  # a server that could not start does not listen
    if peer is None:
        raise ToolExit(1, printed, f"Couldn't connect to {opts.server}:{opts.port}\n{_NO_SOCKET}")
    hello = _hello(client, h, opts)
    return printed + _output(opts, h, hello, peer, _figures(hello, peer))
