"""A simulated host's boot (racklift.lab.fleet.machine, racklift.lab.fleet.netboot): what its
firmware, iPXE and the deploy ramdisk would send and read, against the boot_server role's own
templates and the real deploy API; its power and boot by its BMC. The whole boot through a
real boot server (dnsmasq, nginx) runs in tests/integration/test_fleet.py."""

from __future__ import annotations

import asyncio
import functools
import http.server
import json
import socket
import struct
from pathlib import Path
from typing import Any

import jinja2
import pytest

from helpers import http_served, load_script
from racklift.lab import seed
from racklift.lab.fleet import bmc, machine, netboot, plan
from racklift.paths import REPO_ROOT
from racklift.pipeline import image_plan
from racklift.pipeline.image_plan import check_error, parse_check

ROLE = REPO_ROOT / "roles" / "boot_server"
MAC = "02:00:00:20:00:01"
TOKEN = "planted-Deploy-Token-4711abcdef"
api = load_script(ROLE / "files" / "racklift-deploy-api", "racklift_deploy_api_netboot")


def _options(message: bytes) -> dict[int, bytes]:
    return netboot._options(message[240:])


def test_a_dhcp_message_is_the_hosts_mac_asking_for_broadcast_replies() -> None:
    sent = netboot.dhcp_message(netboot.REQUEST, 0x1234ABCD, MAC, arch=netboot.EFI_X64,
                                user_class=netboot.IPXE, requested="10.48.0.1",
                                server="10.48.255.1")
    op, htype, hlen, _, xid, _, flags = struct.unpack("!BBBBIHH", sent[:12])
    assert (op, htype, hlen, xid, flags) == (1, 1, 6, 0x1234ABCD, netboot.BROADCAST_FLAG)
    assert sent[28:34] == bytes.fromhex(MAC.replace(":", ""))  # chaddr: what dnsmasq reads
    assert sent[236:240] == netboot.MAGIC and sent.endswith(b"\xff")
    assert _options(sent) == {53: bytes([netboot.REQUEST]),
                              61: b"\x01" + bytes.fromhex(MAC.replace(":", "")),
                              55: bytes([1, 3, 6, 66, 67]), 93: b"\x00\x07", 77: b"iPXE",
                              50: socket.inet_aton("10.48.0.1"),
                              54: socket.inet_aton("10.48.255.1")}


def _reply(kind: int, xid: int, address: str, options: bytes, file: bytes = b"") -> bytes:
    # Hand-made (a BOOTREPLY as RFC 2131 lays it out), shaped on what dnsmasq sent the
    # simulated hosts: option 67 NUL-terminated, as dnsmasq sends it.
    head = struct.pack("!BBBBIHH4s4s4s4s16s64s128s", 2, 1, 6, 0, xid, 0, 0x8000, bytes(4),
                       socket.inet_aton(address), bytes(4), bytes(4),
                       bytes.fromhex(MAC.replace(":", "")), b"", file)
    return head + netboot.MAGIC + bytes([53, 1, kind]) + options + b"\xff"


def test_a_reply_gives_its_address_and_boot_file() -> None:
    url = b"http://10.48.255.1/boot.ipxe"
    got = netboot.parse_reply(_reply(netboot.ACK, 7, "10.48.0.1",
                                     bytes([0, 67, len(url) + 1]) + url + b"\0"))
    assert got == netboot.DhcpReply(netboot.ACK, 7, "10.48.0.1", url.decode())
    # BIOS PXE's answer: the file field, no option 67.
    assert netboot.parse_reply(_reply(netboot.OFFER, 8, "10.48.0.2", b"",
                                      b"ipxe.efi")).boot_file == "ipxe.efi"


@pytest.mark.parametrize("data", [b"", b"\x02" * 239, b"\x01" + bytes(239) + netboot.MAGIC,
                                  b"\x02" + bytes(239) + b"nope"])
def test_what_is_no_reply_is_none(data: bytes) -> None:
    assert netboot.parse_reply(data) is None


def _template(name: str, **variables: Any) -> str:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             loader=jinja2.FileSystemLoader(ROLE / "templates"))
    env.filters["regex_replace"] = lambda text, pattern, new: text  # not reached here
    return env.get_template(name).render(
        __boot_server_base_url="http://10.48.255.1", __boot_server_api_url=(
            "http://10.48.255.1:8081"), boot_server_ramdisk_build_id="1c882f52ba2721e2",
        boot_server_ramdisk_cmdline="console=ttyS0", **variables)


def test_the_role_s_scripts_are_read_as_ipxe_would() -> None:
    chain = netboot.chained(_template("boot.ipxe.j2"), MAC)
    assert chain == f"http://10.48.255.1/ipxe/{MAC}.ipxe"
    deploying = {"name": "sim-00001", "mac": MAC, "deploy": True, "method": "image",
                 "token": TOKEN}
    boot = netboot.ramdisk_boot(_template("host.ipxe.j2", host=deploying))
    ramdisk = "http://10.48.255.1/ramdisk/1c882f52ba2721e2"
    assert boot == netboot.RamdiskBoot(
        f"{ramdisk}/vmlinuz", f"{ramdisk}/initrd.img",
        {"console": "ttyS0", "racklift.api": "http://10.48.255.1:8081",
         "racklift.token": TOKEN, "racklift.mac": MAC, "initrd": "initrd.img"})
    # A host not being deployed boots its local disk: no kernel.
    assert netboot.ramdisk_boot(_template("host.ipxe.j2", host={**deploying,
                                                                 "deploy": False})) is None


def test_the_ramdisks_requests_reach_the_real_deploy_api_from_the_hosts_address(
        tmp_path: Path) -> None:
    (tmp_path / "hosts").mkdir()
    deploy = {"host": "sim-00001", "nonce": "n" * 32}
    (tmp_path / "hosts" / "sim-00001.json").write_text(json.dumps(
        {"token_sha256": api.token_sha256(TOKEN), "address": "127.0.0.1", "deploy": deploy}))

    async def ramdisk(url: str) -> list[Any]:
        got = await netboot.http("GET", f"{url}/v1/deploy/{TOKEN}", "127.0.0.1")
        again = await netboot.http("GET", f"{url}/v1/deploy/{TOKEN}", "127.0.0.1")
        elsewhere = await netboot.http("GET", f"{url}/v1/deploy/{TOKEN}", "127.0.0.2")
        body = json.dumps({"result": "success", "phase": "done", "reason": "ok"}).encode()
        reported = await netboot.http("POST", f"{url}/v1/report/{TOKEN}", "127.0.0.1", body)
        return [got.status, netboot.deploy_json(got.body), again.status, elsewhere.status,
                reported.status]

    with http_served(api.make_server(("127.0.0.1", 0), tmp_path)) as url:
        assert asyncio.run(ramdisk(url)) == [200, deploy, 410, 403, 204]
    assert json.loads((tmp_path / "reports" / "sim-00001.json").read_text())["result"] == (
        "success")


def test_a_transfer_takes_its_size_at_the_link_rate() -> None:
    assert netboot.transfer_seconds(1_250_000_000, 10.0) == pytest.approx(1.0)
    assert netboot.transfer_seconds(10, 0.0) == 0.0


# The machine


def _machine(faults: frozenset[str] = frozenset(),
             deployed: machine.Deployed | None = None) -> tuple[machine.Machine, list[Any]]:
    host = plan.plan(8).hosts[0]
    calls: list[Any] = []

    async def up(address: str, what: machine.Deployed) -> None:
        calls.append(("up", address, what))
    sim = bmc.bmcs([host], {}, 0.0)[host.oob_ip.split("/")[0]]
    one = machine.Machine(host, sim, faults, None, machine.BootTimes(),
                          up, lambda address: calls.append(("down", address)),
                          deployed=deployed)
    sim.on_power = one.power
    return one, calls


DEPLOYED = machine.Deployed("ab" * 16, '{"name": "debian12", "build_id": "ddf87a8d943772e1"}\n',
                            "a2V5", ("ssh-ed25519 AAAA controller",))


def _reset(one: machine.Machine, kind: str) -> None:
    async def run() -> None:
        bmc.answer(one.bmc, "POST", bmc.RESET, json.dumps({"ResetType": kind}).encode(),
                   lambda delay, done: done())
        if one._task is not None:
            await one._task
    asyncio.run(run())


def test_a_network_boot_is_used_once_and_with_nothing_on_the_network_the_disk_boots() -> None:
    one, calls = _machine()
    before = one.boot_id
    one.bmc.boot.update(BootSourceOverrideTarget="Pxe", BootSourceOverrideEnabled="Once")
    _reset(one, "On")
    assert one.bmc.boot["BootSourceOverrideEnabled"] == "Disabled"
    assert (one.state, calls) == (machine.RUNNING, [("down", one.address)])
    assert one.boot_id != before


def test_a_deployed_disk_boots_its_os_with_its_deploys_key_and_shows_its_deploy() -> None:
    one, calls = _machine(deployed=DEPLOYED)
    _reset(one, "On")
    assert (one.state, calls) == (machine.DEPLOYED, [("down", one.address),
                                                     ("up", one.address, DEPLOYED)])
    shown = one.answer(["sh", "-s"], machine.image_check())
    assert shown is not None and shown.rc == 0
    found = parse_check(shown.stdout)
    want = {"name": "debian12", "build_id": "ddf87a8d943772e1"}
    assert found.boot_id == one.boot_id
    assert check_error(one.host.name, want, DEPLOYED.nonce, found, set()) is None
    # Off: its OS stops answering.
    _reset(one, "ForceOff")
    assert (one.state, calls[-1]) == (machine.DOWN, ("down", one.address))


def test_a_host_whose_firmware_boots_its_old_disk_comes_back_without_the_deploy() -> None:
    one, calls = _machine(frozenset({machine.OLD_DISK}), deployed=DEPLOYED)
    _reset(one, "ForceRestart")
    assert one.state == machine.RUNNING and [c[0] for c in calls] == ["down"]


def test_a_host_that_was_never_deployed_shows_no_marker_and_no_nonce() -> None:
    one, _ = _machine()
    shown = one.answer(["sh", "-s"], machine.image_check())
    assert shown is not None and shown.rc == 1 and shown.stdout == f"{one.boot_id}\n\n"
    # As the image stage asks a running host before its deploy (image_stage._boot_ids).
    assert one.answer(["cat", "/proc/sys/kernel/random/boot_id"], b"") == machine.Answer(
        0, one.boot_id + "\n")
    assert one.answer(["true"], b"") == machine.Answer(0)
    assert one.answer(["sh", "-s"], b"rm -rf /\n") is None  # not the image check: not its


@pytest.mark.parametrize(("first", "kind", "told"), [
    ("Off", "On", [True]), ("On", "On", []), ("On", "ForceRestart", [True]),
    ("On", "ForceOff", [False])])
def test_the_bmc_tells_the_machine_when_its_power_acts(first: str, kind: str,
                                                       told: list[bool]) -> None:
    sim = bmc.bmcs([seed.plan(1, 8).hosts[0]], {}, 0.0)
    one = next(iter(sim.values()))
    one.power_state, got = first, []
    one.on_power = got.append
    bmc.answer(one, "POST", bmc.RESET, json.dumps({"ResetType": kind}).encode(),
               lambda delay, done: done())
    assert got == told


# A whole network boot: the real deploy API, the role's iPXE scripts served over HTTP from a
# directory (a stand-in for the boot server's nginx), and a stand-in for its dnsmasq that leases
# 127.0.0.1 to the host's NetBox MAC only. With the real dnsmasq and nginx:
# tests/integration/test_fleet.py.

class _Dnsmasq:
    def __init__(self, mac: str, boot_file: str) -> None:
        self.mac, self.boot_file, self.asked = mac, boot_file, []

    async def lease(self, mac: str, *, arch: int | None = None, user_class: bytes | None = None,
                    tries: int = 4, wait: float = 4.0) -> netboot.DhcpReply | None:
        self.asked.append((mac, arch, user_class))
        if mac != self.mac:
            return None  # dhcp-ignore=tag:!known
        return netboot.DhcpReply(netboot.ACK, 1, "127.0.0.1",
                                 self.boot_file if user_class == netboot.IPXE else "ipxe.efi")


class _BootServer:
    """What a site's boot server holds for one host being deployed, served on loopback."""

    def __init__(self, root: Path, host: seed.HostPlan, url: str, api_url: str) -> None:
        from racklift.imaging import deploy_data, host_keys
        self.mac = host.macs[seed.PROVISIONING].lower()
        self.token, self.nonce, self.key = (deploy_data.new_token(), deploy_data.new_nonce(),
                                            host_keys.new_host_key())
        artifact = deploy_data.ImageArtifact("debian12", "ddf87a8d943772e1", "0" * 64)
        self.deploy = deploy_data.render(deploy_data.HostDeploy(
            host=host.name, mac=self.mac, address="127.0.0.1/8", target_disk="/dev/nvme0n1",
            authorized_keys=("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKey controller",),
            host_key=self.key), artifact, url, self.nonce)
        data = root / "api"
        (data / "hosts").mkdir(parents=True)
        (data / "hosts" / f"{host.name}.json").write_text(json.dumps(
            deploy_data.host_record(self.token, self.deploy, "127.0.0.1")))
        http_root = root / "http"
        entry = {"name": host.name, "mac": self.mac, "deploy": True, "method": "image",
                 "token": self.token}
        for path, text in ((f"ipxe/{self.mac}.ipxe", _template("host.ipxe.j2", host=entry)),
                           ("boot.ipxe", _template("boot.ipxe.j2")),
                           ("ramdisk/1c882f52ba2721e2/vmlinuz", "k" * 1000),
                           ("ramdisk/1c882f52ba2721e2/initrd.img", "i" * 1000),
                           (artifact.url("http://x")[len("http://x/"):], "d" * 5000)):
            (http_root / path).parent.mkdir(parents=True, exist_ok=True)
            (http_root / path).write_text(text.replace("http://10.48.255.1:8081", api_url)
                                          .replace("http://10.48.255.1", url))
        self.data, self.http_root = data, http_root


def _network_boot(tmp_path: Path, faults: frozenset[str] = frozenset(), boots: int = 1,
                  ) -> tuple[machine.Machine, _BootServer, _Dnsmasq, list[Any]]:
    """The host powered on to boot from the network `boots` times (a real BMC's Once each
    time), each boot run to its end."""
    host = plan.plan(8).hosts[0]
    (tmp_path / "api").mkdir()
    (tmp_path / "http").mkdir()
    nginx = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "http")))
    with http_served(nginx) as url, \
            http_served(api.make_server(("127.0.0.1", 0), tmp_path / "api")) as api_url:
        server = _BootServer(tmp_path, host, url, api_url)
        dnsmasq = _Dnsmasq(server.mac, f"{url}/boot.ipxe")
        calls: list[Any] = []

        async def up(address: str, deployed: machine.Deployed) -> None:
            calls.append(("up", deployed))
        sim = bmc.bmcs([host], {}, 0.0)[host.oob_ip.split("/")[0]]
        one = machine.Machine(host, sim, faults, dnsmasq, machine.BootTimes(), up,
                              lambda address: calls.append(("down",)))
        sim.on_power = one.power
        for _ in range(boots):
            sim.boot.update(BootSourceOverrideTarget="Pxe", BootSourceOverrideEnabled="Once")
            _reset(one, "ForceRestart")
    return one, server, dnsmasq, calls


def _report(server: _BootServer) -> dict[str, Any]:
    return json.loads((server.data / "reports" / f"{plan.plan(8).hosts[0].name}.json")
                      .read_text())


def test_a_network_boot_deploys_reports_and_boots_the_deployed_os(tmp_path: Path) -> None:
    one, server, dnsmasq, calls = _network_boot(tmp_path)
    # The firmware's DHCP, iPXE's (its user class), the ramdisk's: all from its NetBox MAC.
    assert dnsmasq.asked == [(server.mac, netboot.EFI_X64, None),
                             (server.mac, netboot.EFI_X64, netboot.IPXE), (server.mac, None, None)]
    report = _report(server)
    assert (report["result"], report["phase"]) == ("success", "done")
    ramdisk_id = image_plan.ramdisk_boot_id(report)
    assert ramdisk_id and ramdisk_id != one.boot_id  # the deployed OS booted after it
    assert one.state == machine.DEPLOYED and calls[-1][0] == "up"
    deployed = calls[-1][1]
    assert (deployed.nonce, deployed.host_key) == (
        server.nonce, server.deploy["ssh_host_ed25519_key"])
    assert deployed.authorized_keys == tuple(server.deploy["authorized_keys"])
    found = parse_check(one.answer(["sh", "-s"], machine.image_check()).stdout)
    assert check_error("sim-00001", {"name": "debian12", "build_id": "ddf87a8d943772e1"},
                       server.nonce, found, {ramdisk_id}) is None


def test_a_ramdisk_without_its_disk_reports_so_and_stops(tmp_path: Path) -> None:
    one, server, _, calls = _network_boot(tmp_path, frozenset({machine.DISK_MISSING}))
    report = _report(server)
    assert (report["result"], report["phase"]) == ("failure", "disk")
    assert "/dev/nvme0n1" in report["reason"]
    assert one.state == machine.DOWN and one.deployed is None
    assert [c for c in calls if c[0] == "up"] == []


def test_a_nic_whose_mac_is_not_netboxs_gets_nothing_and_boots_its_old_disk(
        tmp_path: Path) -> None:
    one, server, dnsmasq, calls = _network_boot(tmp_path, frozenset({machine.MAC_WRONG}))
    assert [mac for mac, _, _ in dnsmasq.asked] == ["02:00:5e:00:00:01"]
    assert not (server.data / "reports").exists()
    assert one.state == machine.RUNNING and [c for c in calls if c[0] == "up"] == []


def test_a_second_network_boot_with_a_spent_token_reboots_into_the_deployed_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "REUSED_TOKEN_PAUSE", 0.0)
    one, server, dnsmasq, calls = _network_boot(tmp_path, boots=2)
    assert _report(server)["result"] == "success"  # once: the second GET was refused (410)
    assert len(dnsmasq.asked) == 6 and one.state == machine.DEPLOYED
    assert [c[0] for c in calls].count("up") == 2
