"""The simulated fleet (racklift.lab.fleet) through the real pipeline: hosts that exist only as
one SSH server's answers, each at its own address, go from `planned` to the pool through the
real test NetBox, real Ansible (configure: no roles, no connection) and racklift's real
collector and acceptance tests over OpenSSH, and the faulty ones are refused on their own check
(the slow rail blamed on its own host, not on the partners it was paired with). Two controllers,
each a `racklift provision` process of its own, take one site each at the same time against
the one NetBox. The second site's hosts are imaged first, through the site's real boot server
(a lab container the image stage sets up: dnsmasq, nginx, the deploy API): each host's DHCP,
iPXE scripts, deploy data and report on the wire, and its deployed OS's host key checked; its
two racks deploy at once (the second rack's role run lists the first's hosts too)."""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import BIN
from racklift.lab.fleet import lifecycle, server
from racklift.netbox.reader import Selection, read_hosts

pytestmark = pytest.mark.netbox

# 48 hosts of 8 to a rack: the first site takes a whole rail group (32), the second the rest
# (two racks).
HOSTS = 48
FAULTS = {
    "sim-00003": ["xid-79"],
    "sim-00010": ["ib-port-down"],
    "sim-00012": ["eth-cable-wrong-port"],
    "sim-00017": ["unreachable"],
    "sim-00021": ["bmc-firmware-old"],
    "sim-00026": ["bios-setting-off"],
    "sim-00030": ["bmc-unreachable"],
    "sim-00034": ["garbage"],
    "sim-00039": ["wrong-system-serial"],
    # Refused when imaged (the second site's hosts are):
    "sim-00035": ["deploy-disk-missing"],
    "sim-00038": ["disk-boot-old"],
    # Refused under load (the acceptance stage), their verify passed:
    "sim-00005": ["hbm-fail"],
    "sim-00014": ["rail-slow"],
    "sim-00037": ["nvlink-slow"],
}
ACCEPT_FAULTS = {"sim-00005", "sim-00014", "sim-00037"}
IMAGE_FAULTS = {"sim-00035", "sim-00038"}
IMAGED = "sim2"
# What each fault's refusal says: the check, and what it found.
REFUSED_ON = {
    "sim-00003": "kernel.gpu_errors: CRITICAL: XID 79",
    "sim-00010": "ib.links: CRITICAL: ports not Active/LinkUp: mlx5_3",
    "sim-00012": "swp7",
    "sim-00017": "collection: unreachable",
    "sim-00021": "firmware BMC: found 01.02.07, wanted 01.03.12",
    "sim-00026": 'BIOS attribute SMTControl: found "Disabled", wanted "Enabled"',
    "sim-00034": "the collector's output is not JSON",
    "sim-00030": "firmware.pins: UNKNOWN: its BMC could not be read: sim-00030: BMC at "
                 "https://10.49.0.30:443 is unreachable",
    "sim-00039": "system.serial: expected 'SIM00000039'",
    "sim-00005": "accept.dcgm.GPU Memory: ",
    "sim-00014": "accept.rdma[mlx5_3]: ",
    "sim-00037": "accept.nccl.busbw: ",
    "sim-00035": "the deploy ramdisk reported failure in phase disk: target disk /dev/nvme0n1",
    "sim-00038": "the SSH host key it presents is not the one racklift gave it",
}


@pytest.fixture(scope="module")
def fleet(instance, netbox):
    spec = server.Spec(HOSTS, sites=2, faults=FAULTS, boot_servers=True)
    got = lifecycle.up(netbox, spec, instance)
    yield got
    lifecycle.down()


def provision(settings, site: str, runs) -> tuple[int, dict]:
    done = subprocess.run(
        [str(BIN / "racklift"), "provision", "--site", site, "--json",
         *(() if site == IMAGED else ("--no-image",))],
        # The imaged site may build the disk image and ramdisk first (once per recipe).
        capture_output=True, text=True, timeout=1200,
        env={**os.environ, "NETBOX_URL": settings.url, "NETBOX_TOKEN": settings.token,
             "RACKLIFT_RUNS": str(runs / site)})
    assert done.stdout, done.stderr[-2000:]
    return done.returncode, json.loads(done.stdout), done.stderr


def test_two_controllers_take_a_site_each_and_admit_exactly_the_healthy_hosts(
        fleet, netbox, settings, tmp_path):
    sites = [s.site for s in fleet.plan.sites]
    assert sites == ["sim1", "sim2"]
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda site: provision(settings, site, tmp_path), sites))

    results = {}
    for (rc, report, _), site in zip(runs, sites, strict=True):
        assert rc == 1  # some hosts did not join
        assert {h["host"] for h in report["hosts"]} == {
            h.name for h in fleet.plan.sites[sites.index(site)].hosts}
        results |= {h["host"]: h for h in report["hosts"]}
    assert len(results) == HOSTS
    for name, got in results.items():
        if name in FAULTS:
            stage = ("accept" if name in ACCEPT_FAULTS else "image" if name in IMAGE_FAULTS
                     else "verify")
            assert (got["result"], got["stage_reached"]) == ("failed", stage), got
            assert REFUSED_ON[name] in got["error"], got
        else:
            assert got["result"] == "joined", got

    # Their inventory gives them no roles: no configure run at all (verify and acceptance
    # then reach them with the same one answer of Ansible's variables per rack).
    assert [p.name for p in tmp_path.rglob("configure-*")] == []
    assert list(tmp_path.rglob("collect-*")) == []  # collected by racklift's own SSH clients

    # The BMCs' password went from the inventory to the Redfish client, and nowhere else.
    password = lifecycle.bmc_password_file().read_bytes().strip()
    assert [p for p in tmp_path.rglob("*") if p.is_file() and password in p.read_bytes()] == []

    recorded = {h.name: h.status for h in read_hosts(
        netbox, Selection(sites=tuple(sites), roles=("gpu-server",)))}
    assert recorded == {name: "failed" if name in FAULTS else "active" for name in results}
    # The imaged site's hosts run the image racklift deployed, NetBox says which: all but
    # those refused when imaged.
    images = {d["name"]: d["custom_fields"]["racklift_image"] for d in netbox.get_all(
        "dcim/devices", {"site": IMAGED, "role": "gpu-server"})}
    assert {n for n, image in images.items() if image and image.startswith("debian12 ")} == {
        n for n in images if n not in IMAGE_FAULTS}
    # Its two racks deployed at once: the boot server's second role run, its hosts' part
    # alone, listed the first rack's hosts, still deploying, beside its own.
    served = [line for line in runs[sites.index(IMAGED)][2].splitlines()
              if "boot server sim-boot2: serving" in line]
    assert len(served) == 2, served
    assert served[0].endswith("serving 8 deploys"), served
    assert served[1].endswith("serving 8 deploys (and 8 of other racks), the role's hosts part"), \
        served


def test_a_command_other_than_the_collector_is_not_run(fleet):
    first = fleet.plan.hosts[0].primary_ip.split("/")[0]
    key = lifecycle.hosts.ssh_key()
    done = subprocess.run(
        ["ssh", "-i", str(key), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", f"root@{first}",
         "rm -rf /"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 127
    assert "not found" in done.stderr
