"""How the acceptance stage (racklift.pipeline.accept_stage) runs its tests: over racklift's own
SSH clients, every host from one loop (racklift.verify.direct_collect), as verify collects; a
host Ansible reaches another way than ssh runs the same commands through playbooks/accept.yml.
The commands are made here once, for both ways: a NetBox string is on none of them unchecked
(the caller checks device names).

What comes back is each test's output as Ansible's `command` result holds it (stdout, stderr,
rc), or why the host gave none; judging it is the stage's.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from racklift.ansible import HostEvent, PlaybookResult, run_playbook
from racklift.netbox.client import NetBox
from racklift.verify.direct_collect import HostFailed, Ran, Step, run_steps
from racklift.verify.reach import Reached

DCGM_TASK, NCCL_TASK = "DCGM diagnostic", "NCCL all-reduce"
SERVERS_TASK = "Start the ib_write_bw servers"
CLIENT_TASK = "Run the ib_write_bw clients"
STOP_TASK = "Stop the servers whose client never came"
MAX_OUTPUT = 4 * 2**20  # what a test may print; a longer output is refused, not read
# What the tests run (all_reduce_perf's message sizes: large ones, whose average bus bandwidth
# is the board's and not latency; ib_write_bw's seconds) and how long one may take before it
# is stopped.
NCCL_SIZES = ("1G", "8G")
RDMA_SECONDS = 5
RDMA_TIMEOUT = 120
# How long each test may take before its host fails it: DCGM's levels run for seconds, about
# two minutes, tens of minutes and hours (NVIDIA's dcgmi reference), with room to spare.
DCGM_TIMEOUT = {1: 600.0, 2: 1800.0, 3: 3 * 3600.0, 4: 8 * 3600.0}
NCCL_TIMEOUT = 1800.0
SERVERS_TIMEOUT = 120.0  # start them all, and each listens within 30 s
STOP_TIMEOUT = 60.0
LISTEN_WAIT = 30  # seconds a server may take to listen before its client is run anyway


def dcgm_argv(level: int) -> list[str]:
    # The table, not -j: its layout is the one racklift reads on every DCGM 2.x-4.x capture;
    # the JSON names a result's GPU differently from release to release.
    return ["dcgmi", "diag", "-r", str(level)]


def nccl_argv(gpus: int) -> list[str]:
    # Large messages only: the average over a sweep from 8 bytes is mostly latency.
    return ["all_reduce_perf", "-b", NCCL_SIZES[0], "-e", NCCL_SIZES[1], "-f", "2",
            "-g", str(gpus)]


def _ib_write_bw(device: str, tcp_port: int) -> list[str]:
    return ["ib_write_bw", "-d", device, "-p", str(tcp_port), "-F", "--report_gbits",
            "-D", str(RDMA_SECONDS)]


def client_argv(pair: Mapping[str, Any]) -> list[str]:
    return [*_ib_write_bw(pair["client_device"], pair["tcp_port"]), pair["server_address"]]


def servers_script(served: Sequence[Mapping[str, Any]]) -> str:
    """Start each server detached (not Ansible's async: its wrapper is two more Python processes
    per server), then wait until each listens: not by connecting, since a server takes one
    connection and a probe would be it."""
    starts = [f"setsid -f {shlex.join(_ib_write_bw(p['server_device'], p['tcp_port']))} "
              ">/dev/null 2>&1 </dev/null" for p in served]
    ports = " ".join(str(int(p["tcp_port"])) for p in served)
    return "\n".join([*starts,
                      f"for port in {ports}; do",
                      "  n=0",
                      '  until [ -n "$(ss -Hltn "sport = :$port")" ]; do',
                      f'    n=$((n + 1)); [ "$n" -ge {LISTEN_WAIT} ] && break; sleep 1',
                      "  done",
                      "done", "exit 0", ""])


def stop_script(served: Sequence[Mapping[str, Any]]) -> str:
    """A server whose client finished has ended; one whose client never came would hold its
    device and TCP port into the next round."""
    stops = [f"pkill -f {shlex.quote(shlex.join(_ib_write_bw(p['server_device'], p['tcp_port'])))}"
             " || true" for p in served]
    return "\n".join([*stops, "exit 0", ""])


class AcceptRunner:
    """Runs the tests on one rack's hosts (and their partners): each host reached as Ansible
    would reach it (racklift.verify.reach), asked once for the batch (`reached`: verify's)."""

    def __init__(self, netbox: NetBox, run_dir: Path, ident: str,
                 on_event: Callable[[HostEvent], None] | None,
                 extravars: Mapping[str, Any], reached: Reached | None = None) -> None:
        self.netbox, self.run_dir, self.ident = netbox, run_dir, ident
        self.on_event, self.extravars = on_event, extravars
        self.runs = 0
        self.reached = reached or Reached()

    def _split(self, names: Iterable[str]) -> tuple[dict[str, list[str]], list[str],
                                                    dict[str, str]]:
        """(host → its ssh argv, for those reached over plain ssh; the hosts Ansible reaches
        another way; host → why it cannot be reached)."""
        entries = self.reached.get(sorted(set(names)), self.netbox.settings, self.extravars)
        return ({n: e["ssh"] for n, e in entries.items() if "ssh" in e},
                [n for n, e in entries.items() if "ansible" in e],
                {n: str(e["error"]) for n, e in entries.items() if "error" in e})

    def _play(self, names: Iterable[str], part: str, capture: list[str],
              **variables: Any) -> PlaybookResult:
        self.runs += 1
        return run_playbook(
            "accept.yml", names, self.netbox.settings, artifacts=self.run_dir / "ansible",
            ident=f"{self.ident}-{part}-{self.runs}", on_event=self.on_event, capture=capture,
            extravars={**self.extravars, "racklift_accept_part": part, **variables})

    def _steps(self, ssh: Mapping[str, list[str]],
               steps: Mapping[str, list[Step]]) -> dict[str, list[Ran | HostFailed]]:
        return run_steps(ssh, {n: s for n, s in steps.items() if n in ssh}, limit=MAX_OUTPUT,
                         on_event=self.on_event)

    def local(self, commands: Mapping[str, Mapping[str, list[str]]],
              ) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
        """Each host's own tests (`commands`: host → task → argv), one after another on it.
        Returns (host → task → its result), (host → why it ran none)."""
        ssh, others, failed = self._split(commands)
        steps = {name: [Step(task, argv, timeout=_timeout(argv)) for task, argv in tests.items()]
                 for name, tests in commands.items()}
        captured: dict[str, dict[str, Any]] = {}
        for name, got in self._steps(ssh, steps).items():
            captured[name] = {step.task: _result(ran)
                              for step, ran in zip(steps[name], got, strict=False)}
            if got and isinstance(got[-1], HostFailed) and got[-1].kind == "unreachable":
                failed[name] = got[-1].message
        if others:
            result = self._play(others, "local", [DCGM_TASK, NCCL_TASK], racklift_accept_local={
                name: {"dcgm": tests.get(DCGM_TASK), "nccl": tests.get(NCCL_TASK)}
                for name, tests in commands.items()})
            for name in others:
                captured[name] = result.captured.get(name, {})
                if name in result.failed:
                    failed[name] = result.failed[name]
        return captured, failed

    def rdma_round(self, pairs: list[dict[str, Any]]) -> list[Mapping[str, Any] | None]:
        """One round of ib_write_bw pairs (no port in two; each numbered `n`): every server
        started and listening, every client run against it, then any server whose client never
        came stopped. Each pair's client result, in the order given (None: none came back)."""
        served = {p["server"]: [q for q in pairs if q["server"] == p["server"]] for p in pairs}
        clients = {p["client"]: [q for q in pairs if q["client"] == p["client"]] for p in pairs}
        ssh, others, _ = self._split([*served, *clients])  # the unreachable: no result
        got: dict[int, Mapping[str, Any] | None] = {}
        rdma = {"servers": {n: servers_script(ps) for n, ps in served.items()},
                "clients": {n: [{"n": p["n"], "argv": client_argv(p)} for p in ps]
                            for n, ps in clients.items()},
                "stops": {n: stop_script(ps) for n, ps in served.items()},
                "timeout": RDMA_TIMEOUT}

        def ansible(part: str, names: Iterable[str], capture: list[str]) -> None:
            # A host Ansible reaches another way runs the same phase through accept.yml.
            if mine := [n for n in others if n in names]:
                result = self._play(mine, part, capture, racklift_accept_rdma=rdma)
                for name in mine:
                    res = result.captured.get(name, {}).get(CLIENT_TASK) or {}
                    for item in res.get("results") or []:
                        if isinstance(item.get("item"), dict) and "n" in item["item"]:
                            got[item["item"]["n"]] = item

        self._steps(ssh, {n: [Step(SERVERS_TASK, ["sh", "-s"], rdma["servers"][n].encode(),
                                   SERVERS_TIMEOUT)] for n in served})
        ansible("servers", served, [])
        ran = self._steps(ssh, {n: [Step(CLIENT_TASK, client_argv(p), timeout=RDMA_TIMEOUT)
                                    for p in ps] for n, ps in clients.items()})
        for name, outcomes in ran.items():
            got.update({p["n"]: _result(r) for p, r in zip(clients[name], outcomes, strict=False)})
        ansible("clients", clients, [CLIENT_TASK])
        self._steps(ssh, {n: [Step(STOP_TASK, ["sh", "-s"], rdma["stops"][n].encode(),
                                   STOP_TIMEOUT)] for n in served})
        ansible("stops", served, [])
        return [got.get(p["n"]) for p in pairs]


def _timeout(argv: list[str]) -> float:
    return DCGM_TIMEOUT[int(argv[-1])] if argv[0] == "dcgmi" else NCCL_TIMEOUT


def _result(ran: Ran | HostFailed) -> dict[str, Any]:
    """An outcome as Ansible's `command` result holds it."""
    return ({"failed": True, "msg": ran.message} if isinstance(ran, HostFailed)
            else ran.result())
