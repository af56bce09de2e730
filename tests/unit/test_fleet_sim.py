"""The simulated fleet's pure parts (racklift.lab.fleet): its plan, what its SSH server agrees
to run, its BMCs as racklift's own Redfish reader and firmware judgement read them, and its
acceptance tools as the stage's own commands and scripts drive them."""

from __future__ import annotations

import base64
import json
from dataclasses import replace

import pytest

from racklift.bmc import firmware
from racklift.bmc.inventory import read_inventory
from racklift.errors import RackliftError
from racklift.facts.parsers import parse_dcgmi_diag, parse_nccl_tests, parse_perftest_bw
from racklift.lab import seed
from racklift.lab.fleet import bmc, plan, server, tools
from racklift.lab.hwemu.latency import REALISTIC
from racklift.netbox.desired import Acceptance
from racklift.pipeline import accept_run
from racklift.tasks.fleet import parse_faults
from racklift.verify.acceptance import best_gbps, judge_acceptance
from racklift.verify.mismatch import CRITICAL


def test_a_fleet_is_unique_across_its_sites_and_each_site_has_its_own_rail_leaves() -> None:
    fleet = plan.plan(512, sites=4)
    hosts = fleet.hosts
    assert [len(s.hosts) for s in fleet.sites] == [128, 128, 128, 128]
    for field in ("name", "serial", "primary_ip", "oob_ip"):
        assert len({getattr(h, field) for h in hosts}) == 512, field
    assert len({mac for h in hosts for mac in h.macs.values()}) == 3 * 512
    leaves = [{switch for h in s.hosts for iface, (switch, _) in h.links.items()
               if iface in seed.IB_PORTS} for s in fleet.sites]
    assert all(not (a & b) for i, a in enumerate(leaves) for b in leaves[i + 1:])
    assert all(len(site) == 4 * 8 for site in leaves)  # 128 hosts: 4 rail groups of 8 leaves
    assert {h.name[:4] for h in hosts} == {"sim-"}
    assert all(switch.startswith("sim-") for h in hosts for switch, _ in h.links.values())
    # The seed numbers MACs from 0 in every NetBox: the fleet's are its own.
    assert seed.mac_for(0, 1) not in {mac for h in hosts for mac in h.macs.values()}
    assert all(h.primary_ip.startswith("10.48.") and h.oob_ip.startswith("10.49.")
               for h in hosts)


def test_a_short_fleet_fills_its_first_site_first() -> None:
    fleet = plan.plan(40, sites=2)
    assert [(s.site, len(s.racks), len(s.hosts)) for s in fleet.sites] == [
        ("sim1", 4, 32), ("sim2", 1, 8)]
    assert fleet.site_of("sim-00033") == "sim2"


@pytest.mark.parametrize("args", [(0, 1), (8, 0), (8, 1, 5)])
def test_a_fleet_that_cannot_be_is_refused(args) -> None:
    with pytest.raises(ValueError, match="rail group"):
        plan.plan(*args)


@pytest.mark.parametrize(("command", "root"), [
    ("python3 - --sysfs-root /sys", "/sys"),
    ("python3 - --sysfs-root /var/lib/racklift-lab/sys", "/var/lib/racklift-lab/sys"),
    ("python3 -", "/sys"),
    ("python3 - --mirror http://m:5000 --image x -- true", None),  # the container check
    ("python3 - --sysfs-root", None),
    ("python3 - --sysfs-root /sys --extra", None),
    ("rm -rf /", None),
    ("python3 -c 'import os'", None),
    ("python3 - --sysfs-root '/sys", None),  # not a command line a shell would run
    (None, None),
])
def test_only_the_collector_is_answered(command, root) -> None:
    assert server.collector_root(command) == root


def test_the_collector_takes_its_slowest_tool_and_the_pause_between_nvlink_readings() -> None:
    assert server.collect_seconds(REALISTIC) == REALISTIC["nvidia-smi -q"]
    assert server.collect_seconds({}) == server.NVLINK_PAUSE
    assert server.collect_seconds({"ibnetdiscover": 30.0}) == 30.0


def test_a_fault_the_simulator_does_not_have_is_refused() -> None:
    assert server.Spec(8, faults={"sim-00001": ["xid-79", "unreachable", "bmc-firmware-old"]})
    with pytest.raises(ValueError, match="sim-00002: no fault xid_79"):
        server.Spec(8, faults={"sim-00002": ["xid_79"]})


def test_faults_are_given_host_by_host() -> None:
    assert parse_faults("sim-00001=xid-79+garbage, sim-00002=unreachable,") == {
        "sim-00001": ["xid-79", "garbage"], "sim-00002": ["unreachable"]}
    for bad in ("sim-00001", "=xid-79", "sim-00001="):
        with pytest.raises(RackliftError, match="HOST=KIND"):
            parse_faults(bad)


def _bmc(*faults: str) -> bmc.SimBmc:
    return bmc.bmcs(list(plan.plan(8).hosts), {"sim-00001": list(faults)}, 0.0)["10.49.0.1"]


def _judged(sim: bmc.SimBmc) -> list[str]:
    inventory = read_inventory(lambda path: sim.resources()[path])
    pins, problems = firmware.read(plan.SOFTWARE)
    assert not problems
    return [str(f) for f in firmware.compare(pins, inventory)]


def test_racklifts_reader_reads_a_simulated_bmc_whole_and_finds_it_as_pinned() -> None:
    sim = _bmc()
    inventory = read_inventory(lambda path: sim.resources()[path])
    assert inventory.problems == ()
    assert (inventory.manufacturer, inventory.serial, inventory.power_state) == (
        "Supermicro", "SIM00000001", "Off")
    assert dict(inventory.macs) == {"eno1": sim.host.macs["eno1"].lower(),
                                    "eno2": sim.host.macs["eno2"].lower()}
    assert (inventory.bmc_image, inventory.bios_image) == ("BMC", "BIOS")
    assert _judged(sim) == []


@pytest.mark.parametrize(("fault", "found"), [
    ("bmc-firmware-old", "01.02.07"),
    ("bios-setting-off", "SMTControl"),
])
def test_a_simulated_bmc_off_its_pins_is_found_so(fault, found) -> None:
    judged = _judged(_bmc(fault))
    assert len(judged) == 1
    assert found in judged[0]


def _ask(sim: bmc.SimBmc, method: str, path: str, body: object = None) -> bmc.Answer:
    later: list[tuple[float, object]] = []
    got = bmc.answer(sim, method, path, json.dumps(body).encode() if body is not None else b"",
                     lambda delay, done: later.append((delay, done)))
    for _, done in later:
        done()  # the power latency has passed
    return got


def test_a_reset_powers_the_system_on_after_the_bmcs_latency() -> None:
    sim = bmc.bmcs(list(plan.plan(8).hosts), {}, power_seconds=4.0)["10.49.0.2"]
    assert 2.0 < sim.power_seconds < 8.0
    later: list[float] = []
    got = bmc.answer(sim, "POST", bmc.RESET, b'{"ResetType": "On"}',
                     lambda delay, done: later.append(delay))
    assert got.status == 204 and later == [sim.power_seconds]
    assert sim.power_state == "Off"  # not yet
    assert _ask(sim, "POST", bmc.RESET, {"ResetType": "On"}).status == 204
    assert _ask(sim, "GET", bmc.SYSTEM).body["PowerState"] == "On"
    assert _ask(sim, "POST", bmc.RESET, {"ResetType": "ForceOff"}).status == 204
    assert sim.power_state == "Off"


def test_a_simulated_bmc_refuses_what_a_bmc_would() -> None:
    sim = _bmc()
    assert _ask(sim, "POST", bmc.RESET, {"ResetType": "Nmi"}).status == 400
    assert bmc.answer(sim, "POST", bmc.RESET, b"{not json", lambda *_: None).status == 400
    assert _ask(sim, "POST", bmc.RESET, ["On"]).status == 400
    assert _ask(sim, "DELETE", bmc.SYSTEM).status == 405
    assert _ask(sim, "GET", "/redfish/v1/Systems/2").status == 404
    patched = _ask(sim, "PATCH", bmc.SYSTEM, {"Boot": {"BootSourceOverrideTarget": "Pxe",
                                                       "BootSourceOverrideEnabled": "Once"}})
    assert patched.body["Boot"]["BootSourceOverrideTarget"] == "Pxe"


def test_only_the_fleets_credentials_are_let_in() -> None:
    def basic(user: str, password: str) -> dict[str, str]:
        return {"authorization": "Basic " + base64.b64encode(
            f"{user}:{password}".encode()).decode()}
    assert bmc.authorized(basic("racklift", "s3cret"), "racklift", "s3cret")
    assert not bmc.authorized(basic("racklift", "wrong"), "racklift", "s3cret")
    assert not bmc.authorized(basic("root", "s3cret"), "racklift", "s3cret")
    assert not bmc.authorized({}, "racklift", "s3cret")


# --- the acceptance tests' tools (racklift.lab.fleet.tools), driven by the stage's own scripts

def _tools_fleet(faults: dict[str, list[str]]) -> tuple[dict[str, server.Host], tools.Servers]:
    spec = server.Spec(8, faults=faults)
    return server.hosts_by_address(spec, spec.fleet()), tools.Servers()


def _run(hosts: dict[str, server.Host], servers: tools.Servers, address: str, words: list[str],
         stdin: str = "") -> tools.Answer:
    return tools.answer(address, words, stdin.encode(),
                        lambda at: hosts[at].profile() if at in hosts else None, servers,
                        REALISTIC)


def _pair(n: int, device: str) -> dict:
    return {"n": n, "client": "sim-00001", "server": "sim-00002", "server_address": "10.48.0.2",
            "client_device": device, "server_device": device, "tcp_port": 18515 + n}


def test_a_round_of_the_stages_own_scripts_gives_each_client_its_pairs_figure() -> None:
    hosts, servers = _tools_fleet({"sim-00002": ["rail-slow"]})
    pairs = [_pair(0, "mlx5_0"), _pair(1, "mlx5_3")]
    started = _run(hosts, servers, "10.48.0.2", ["sh", "-s"], accept_run.servers_script(pairs))
    assert started.rc == 0 and set(servers.listening) == {("10.48.0.2", 18515),
                                                           ("10.48.0.2", 18516)}
    figures = []
    for pair in pairs:
        got = _run(hosts, servers, "10.48.0.1", accept_run.client_argv(pair))
        assert got.rc == 0, got.stderr
        assert got.seconds == accept_run.RDMA_SECONDS  # a -D run takes its seconds
        figures.append(best_gbps(parse_perftest_bw(got.stdout)))
    # The healthy rail reaches an NDR port's figure; the slow one (the server's mlx5_3) not.
    assert figures[0] >= 370 > figures[1]
    assert servers.listening == {}  # a server takes one client


def test_a_client_without_its_server_cannot_connect_and_the_stop_script_ends_servers() -> None:
    hosts, servers = _tools_fleet({})
    pairs = [_pair(0, "mlx5_0"), _pair(1, "mlx5_1")]
    _run(hosts, servers, "10.48.0.2", ["sh", "-s"], accept_run.servers_script(pairs))
    stopped = _run(hosts, servers, "10.48.0.2", ["sh", "-s"], accept_run.stop_script(pairs[1:]))
    assert stopped.rc == 0 and list(servers.listening) == [("10.48.0.2", 18515)]
    got = _run(hosts, servers, "10.48.0.1", accept_run.client_argv(pairs[1]))
    assert got.rc == 1 and "Couldn't connect to 10.48.0.2:18516" in got.stderr
    assert _run(hosts, servers, "10.48.0.2", ["sh", "-s"], "rm -rf /\n").rc == 2


@pytest.mark.parametrize("faults", [[], ["hbm-fail"]])
def test_dcgm_and_all_reduce_answer_in_their_real_formats_with_the_hosts_faults(faults) -> None:
    hosts, servers = _tools_fleet({"sim-00001": faults})
    dcgm = _run(hosts, servers, "10.48.0.1", accept_run.dcgm_argv(2))
    assert dcgm.seconds == REALISTIC["dcgmi diag -r 2"]
    nccl = _run(hosts, servers, "10.48.0.1", accept_run.nccl_argv(8))
    assert nccl.rc == 0
    want = Acceptance(**seed.HGX_ACCEPTANCE)
    found = judge_acceptance(replace(want, rdma_gbps=None), dcgm=parse_dcgmi_diag(dcgm.stdout),
                             nccl=parse_nccl_tests(nccl.stdout))
    assert [m.field for m in found if m.severity == CRITICAL] == (
        ["accept.dcgm.GPU Memory"] if faults else [])
    assert (dcgm.rc != 0) == bool(faults)
    assert _run(hosts, servers, "10.48.0.1", ["rm", "-rf", "/"]).rc == tools.NOT_FOUND
