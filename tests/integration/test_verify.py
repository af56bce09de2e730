"""The gate on the lab: real containers, real Ansible collection, the real test NetBox.
A healthy host passes; each fault fails its host with the right field; heal and it passes;
NetBox status and journal follow, and a re-run with nothing changed writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

from helpers import BIN, REPO, without_acceptance
from helpers import TEST_NET as NET
from racklift import podman
from racklift.ansible import run_playbook
from racklift.facts import bundle as bundles
from racklift.lab import hardware, hwemu
from racklift.lab import rack as lab_rack
from racklift.lifecycle.state import STAGE_FIELD
from racklift.netbox.reader import Selection, read_hosts
from racklift.verify import verdict_report
from racklift.verify.gate import verify

pytestmark = pytest.mark.containers

RACK = "V01"
SELECT = Selection(racks=(RACK,), roles=("gpu-server",))  # not the rack's leaf switches


@pytest.fixture(scope="module")
def lab(netbox, settings, tmp_path_factory):
    os.environ["RACKLIFT_RUNS"] = str(tmp_path_factory.mktemp("runs"))
    lab_rack.down(netbox, NET)
    result = lab_rack.up(netbox, 4, RACK, net=NET)
    without_acceptance(netbox, [h.name for h in result.hosts])  # verify alone admits them
    # The lab's hosts stand in for hosts provision has configured: the driver role (the stand-in
    # driver and fabric manager, which the emulated nvidia-smi and the NVSwitch type need),
    # then the stage that lets the gate admit them.
    driver = run_playbook("configure.yml", [h.name for h in result.hosts], settings,
                          extravars={"racklift_roles": ["nvidia_driver"]})
    assert driver.rc == 0, driver.failed
    netbox.update("dcim/devices", [
        {"id": d["id"], "custom_fields": {STAGE_FIELD: "configured"}}
        for d in netbox.get_all("dcim/devices", {"name": [h.name for h in result.hosts]},
                                fields=("id",))])
    yield result
    lab_rack.down(netbox, NET)
    os.environ.pop("RACKLIFT_RUNS")


def statuses(netbox) -> dict[str, str]:
    return {h.name: h.status for h in read_hosts(netbox, SELECT)}


def journal(netbox) -> list[dict]:
    return netbox.get_all("extras/journal-entries", {"assigned_object_type": "dcim.device"})


def macs(netbox, names):
    """Each host's MACs by interface, as NetBox has them."""
    return {h.name: {i.name: i.mac for i in h.interfaces if i.mac}
            for h in read_hosts(netbox, Selection(names=tuple(names)))}


def test_healthy_hosts_pass_and_become_active(netbox, lab):
    run = verify(netbox, SELECT)
    assert [(v.host, v.passed, v.mismatches) for v in run.verdicts] == [
        (h.name, True, ()) for h in lab.hosts]
    assert set(statuses(netbox).values()) == {"active"}
    entries = journal(netbox)
    assert len(entries) == 4
    assert {e["kind"]["value"] for e in entries} == {"success"}
    assert all(e["comments"].startswith("racklift verify: passed") for e in entries)
    # The support bundle of each host is kept with the run.
    for h in lab.hosts:
        xml = (run.run_dir / "bundles" / h.name / "nvidia-smi-q-x.xml").read_text()
        assert ET.fromstring(xml).findtext("attached_gpus") == "8"


def test_rerun_with_nothing_changed_writes_nothing(netbox, lab):
    before = len(journal(netbox))
    run = verify(netbox, SELECT)
    assert all(v.passed and v.changes == () for v in run.verdicts)
    assert len(journal(netbox)) == before


ROUNDS = [  # three hosts get a fault each round; the fourth stays healthy as the control
    # A GPU nvidia-smi cannot reach (it exits 15, naming it): the gate reads the others and
    # names the lost one. gpu-missing is test_gate's and test_lab's.
    # A host may take two faults ("+"): a down NVLink shows in nvlink -s and in its GPU's pairs;
    # each cabling fault shows on its port in the fabric map (NetBox holds the cable plan).
    # The in-band port's faults move its real cable at the rack's leaf (real lldpd at both
    # ends): a wrong port is evidence, a pulled cable leaves the link down; both critical.
    {0: ("gpu-lost+eth-cable-wrong-port", {"gpus.count", "gpus.lost[0000:ab:00.0]",
                                           "cable.wrong_peer[eno2]"}),
     1: ("ib-port-down+nvlink-errors-rising", {"ib.links", "nvlink[2].errors"}),
     2: ("xid-79+cable-swapped", {"kernel.gpu_errors", "cable.swapped[mlx5_0]",
                                  "cable.swapped[mlx5_1]"})},
    {0: ("pcie-degraded+nvlink-down", {"gpu.pcie_link", "nvlink[3].links", "topology.gpu_link"}),
     1: ("ib-rate-wrong+numa-misplaced", {"interfaces.mlx5_5.rate", "topology.GPU6.nic"}),
     2: ("wrong-system-serial+cable-wrong-leaf", {"system.serial", "cable.wrong_peer[mlx5_2]"})},
    # Uncorrectable ECC errors on H100 also leave a row remap pending: both must be reported.
    {0: ("ecc-uncorrected+eth-link-no-neighbor", {"gpu.ecc", "gpu.memory_remapping",
                                                   "cable.no_neighbor[eno2]"}),
     1: ("mac-swapped+link-no-neighbor", {"interfaces.eno1.mac", "cable.no_neighbor[mlx5_7]",
                                          "ib.links"}),
     2: ("driver-version-wrong+ib-link-degraded", {"software.nvidia_driver",
                                                    "cable.degraded[mlx5_4]",
                                                    "interfaces.mlx5_4.rate"})},
    # The real-world forms (test_hwemu_real_forms): a fatal AER the GPU cannot recover from
    # (the serial in the chassis record alone, which the collector reads, is no fault); ibstat
    # panicking after its eight CAs; GPU 7 off the bus at probe, in three NVRM lines. These
    # hosts are in the pool (active) when verified: the Nonfatal NVLink5 Xids only warn there
    # (admission refuses them: test_hwemu_real_forms).
    {0: ("aer-gpu-endpoint+dmi-chassis-only", {"kernel.gpu_errors"}),
     1: ("ibstat-panic+xid-nvlink5-nonfatal", {"tools.ibstat"}),
     2: ("gpu-off-bus-open-module", {"gpus.count", "kernel.gpu_errors"})},
]


@pytest.mark.parametrize("faults", ROUNDS, ids=lambda r: "+".join(k for k, _ in r.values()))
def test_each_fault_fails_its_host_and_heal_restores_it(netbox, settings, lab, faults):
    names = [h.name for h in lab.hosts]
    victims = [names[slot] for slot in faults]
    hardware.inject({names[slot]: kind.split("+") for slot, (kind, _) in faults.items()},
                    macs(netbox, victims), settings, NET)
    try:
        run = verify(netbox, SELECT, mark_active_failed=True)
        by_host = {v.host: v for v in run.verdicts}
        for slot, (kind, fields) in faults.items():
            v = by_host[names[slot]]
            assert not v.passed, kind
            # That fault, on the right fields, and nothing else.
            assert {line.split(": ")[0] for line in v.failures} == fields, (kind, v.failures)
        assert by_host[names[3]].passed
        assert statuses(netbox) == {names[0]: "failed", names[1]: "failed",
                                    names[2]: "failed", names[3]: "active"}
        fields = faults[1][1]
        entry = next(e for e in journal(netbox) if e["assigned_object"]["name"] == names[1]
                     and e["kind"]["value"] == "danger" and next(iter(fields)) in e["comments"])
        assert entry["comments"].startswith(
            f"racklift verify: failed: {len(fields)} problem(s).")
    finally:  # the next round and the module's other tests start from healthy hosts
        hardware.heal(victims, macs(netbox, victims), settings, NET)
    run = verify(netbox, SELECT)
    assert all(v.passed for v in run.verdicts), [v.failures for v in run.verdicts]
    assert set(statuses(netbox).values()) == {"active"}


def test_recorded_gpu_serials_catch_a_swapped_gpu(netbox, settings, lab):
    name = lab.hosts[0].name
    healthy = hardware.load(name, NET)
    run = verify(netbox, Selection(names=(name,)), record_observed_serials=True)
    assert run.verdicts[0].passed
    host = read_hosts(netbox, Selection(names=(name,)))[0]
    assert [g.serial for g in host.gpus] == [g.serial for g in healthy.gpus]
    # Adopting again changes nothing: blanks only.
    verify(netbox, Selection(names=(name,)), record_observed_serials=True)
    hardware.inject({name: ["gpu-serial-changed"]}, macs(netbox, [name]), settings, NET)
    run = verify(netbox, Selection(names=(name,)), record_observed_serials=True,
                 mark_active_failed=True)
    assert run.verdicts[0].failures == [
        f"gpus[3].serial: expected {healthy.gpus[3].serial!r}, observed "
        f"{hardware.load(name, NET).gpus[3].serial!r} [critical] — GPU in slot GPU3 is not the "
        "one NetBox records: update the inventory item after an RMA, or find the swap"]
    # The recorded serial was not overwritten by --record-serials.
    assert read_hosts(netbox, Selection(names=(name,)))[0].gpus[3].serial == \
        healthy.gpus[3].serial
    hardware.heal([name], macs(netbox, [name]), settings, NET)
    assert verify(netbox, Selection(names=(name,))).verdicts[0].passed


def test_without_record_flags_nothing_observed_is_written(netbox, lab):
    name = lab.hosts[1].name
    verify(netbox, Selection(names=(name,)))
    host = read_hosts(netbox, Selection(names=(name,)))[0]
    assert all(g.serial is None for g in host.gpus)


def test_active_hosts_are_only_reported_without_the_flag(netbox, settings, lab):
    name = lab.hosts[3].name
    hardware.inject({name: ["xid-79"]}, macs(netbox, [name]), settings, NET)
    before = len(journal(netbox))
    run = verify(netbox, Selection(names=(name,)))
    assert not run.verdicts[0].passed and run.verdicts[0].changes == ()
    assert statuses(netbox)[name] == "active" and len(journal(netbox)) == before
    hardware.heal([name], macs(netbox, [name]), settings, NET)


def netdev(pci_bus_id: str) -> str:
    """The InfiniBand netdev name udev gives a port at this PCI address (0000:1a:00.0 →
    ibp26s0), as real NetBoxes name HCA ports."""
    bus = int(pci_bus_id.split(":")[1], 16)
    return f"ibp{bus}s0"


def wwn(guid: str) -> str:
    """A GUID as NetBox's WWN field takes it (EUI-64, colon-separated)."""
    digits = guid.removeprefix("0x").rjust(16, "0")
    return ":".join(digits[i:i + 2] for i in range(0, 16, 2))


def test_ports_netbox_names_by_netdev_are_matched_by_guid_or_label(netbox, lab):
    """A real NetBox names HCA ports by netdev and keeps the port GUID in WWN (the first host)
    or the CA in the label (the second): the gate matches each observed CA to its NetBox port by
    GUID, else label, reads its link and cable through it, and passes both hosts."""
    by_guid, by_label = lab.hosts[0].name, lab.hosts[1].name
    saved = []
    for name, keep in ((by_guid, "wwn"), (by_label, "label")):
        cas = {h.ca: h for h in hardware.load(name, NET).hcas}
        ports = netbox.get_all("dcim/interfaces", {"device": name, "type": "infiniband-ndr"})
        saved += [{"id": i["id"], "name": i["name"], "label": i["label"], "wwn": i["wwn"]}
                  for i in ports]
        netbox.update("dcim/interfaces", [{
            "id": i["id"], "name": netdev(cas[i["name"]].pci_bus_id),
            "label": i["name"] if keep == "label" else "",
            "wwn": wwn(cas[i["name"]].port_guid) if keep == "wwn" else None} for i in ports])
    try:
        records = {h.name: h for h in read_hosts(netbox, SELECT)}
        assert {i.name for i in records[by_guid].ib_ports} == {
            netdev(h.pci_bus_id) for h in hardware.load(by_guid, NET).hcas}
        run = verify(netbox, SELECT)
        by_host = {v.host: v for v in run.verdicts}
        for name in (by_guid, by_label):
            assert by_host[name].passed, by_host[name].failures
            assert not by_host[name].warnings, by_host[name].warnings
    finally:
        netbox.update("dcim/interfaces", saved)


def test_the_direct_and_the_ansible_collector_bring_the_same_facts(netbox, lab):
    # The direct collector reaches each host as Ansible's inventory and ssh settings say; what
    # it brings back must be what collect.yml brings: the same outputs, the same verdicts.
    runs = {how: verify(netbox, SELECT, write=False, collector=how)
            for how in ("direct", "ansible")}
    outputs = {how: {h.name: sorted(bundles.read(run.run_dir / "bundles" / h.name).outputs)
                     for h in lab.hosts} for how, run in runs.items()}
    assert outputs["direct"] == outputs["ansible"]
    assert "nvidia-smi-q-x.xml" in outputs["direct"][lab.hosts[0].name]
    verdicts = {how: {v.host: (v.passed, v.failures, sorted((c.name, c.status) for c in v.checks))
                      for v in run.verdicts} for how, run in runs.items()}
    assert verdicts["direct"] == verdicts["ansible"]
    assert all(passed for passed, _, _ in verdicts["direct"].values())


def test_unreachable_and_incomplete_hosts_fail_with_their_reason(netbox, lab):
    down, incomplete = lab.hosts[2], lab.hosts[3]
    podman.podman("stop", "-t", "1", down.name)
    device = netbox.get_all("dcim/devices", {"name": incomplete.name})[0]
    netbox.update("dcim/devices", [{"id": device["id"], "serial": ""}])
    try:
        run = verify(netbox, SELECT, mark_active_failed=True)
        by_host = {v.host: v for v in run.verdicts}
        assert by_host[down.name].failures[0].startswith("collection: unreachable: ")
        assert by_host[incomplete.name].failures == [
            "NetBox record: serial: no serial number: set the chassis serial on the device "
            "in NetBox"]
        assert by_host[lab.hosts[0].name].passed and by_host[lab.hosts[1].name].passed
        assert statuses(netbox)[down.name] == "failed"
    finally:
        podman.podman("start", down.name)
        netbox.update("dcim/devices", [{"id": device["id"], "serial": incomplete.serial}])
        lab_rack.up(netbox, 4, RACK, net=NET)  # SSH back, hardware re-applied
    assert all(v.passed for v in verify(netbox, SELECT).verdicts)


def test_planned_hosts_are_not_contacted(netbox, lab):
    # An address in the tests' own lab network where no host answers: even a bug that
    # connected would stay inside the sandbox.
    device = netbox.create("dcim/devices", [{
        "name": "planned-host", "device_type": {"slug": "supermicro-sys-421ge-tnhr2-lcc"},
        "role": {"slug": "gpu-server"}, "site": {"slug": "lab1"}, "rack": {"name": RACK},
        "status": "planned", "serial": "PLANNED1"}])[0]
    eno1 = netbox.get_all("dcim/interfaces", {"device_id": device["id"], "name": "eno1"})[0]
    ip = netbox.create("ipam/ip-addresses", [{
        "address": f"{NET.subnet.network_address + 250}/24",
        "assigned_object_type": "dcim.interface", "assigned_object_id": eno1["id"]}])[0]
    netbox.update("dcim/devices", [{"id": device["id"], "primary_ip4": ip["id"]}])
    try:
        run = verify(netbox, SELECT)
        planned = next(v for v in run.verdicts if v.host == "planned-host")
        assert planned.skipped and not planned.failed and not planned.passed
        assert not (run.run_dir / "bundles" / "planned-host").exists()
        assert verdict_report.summary(run.verdicts) == {"hosts": 5, "passed": 4, "failed": 0,
                                                "skipped": 1}
        assert statuses(netbox)["planned-host"] == "planned"
    finally:
        netbox.delete("dcim/devices", [device["id"]])


def racklift(*args, **env):
    return subprocess.run([str(BIN / "racklift"), *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300, env={**os.environ, **env})


def test_cli_report_files_exit_code_and_offline_diagnosis(instance, netbox, settings, lab,
                                                          tmp_path):
    name = lab.hosts[2].name
    hardware.inject({name: ["ib-port-down"]}, macs(netbox, [name]), settings, NET)
    env = {"NETBOX_URL": instance.url, "NETBOX_TOKEN": instance.token,
           "RACKLIFT_RUNS": str(tmp_path)}
    result = racklift("verify", "--rack", RACK, "--check", "--json", **env)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["summary"] == {"hosts": 4, "passed": 3, "failed": 1, "skipped": 0}
    assert instance.token not in result.stdout + result.stderr
    run_dir = next(tmp_path.glob("*-verify"))
    junit = ET.parse(run_dir / "junit.xml").getroot()
    assert (junit.get("tests"), junit.get("failures")) == ("4", "1")
    assert statuses(netbox)[name] == "active"  # --check wrote nothing
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert instance.token not in path.read_text(errors="replace"), path

    # The same bundle, offline: the same verdict, without touching the host.
    offline = racklift("facts", "--from", str(run_dir / "bundles" / name), "--compare", **env)
    assert offline.returncode == 1, offline.stderr  # a verdict asked for: the host fails
    verdict = json.loads(offline.stdout)["verdict"]
    assert verdict["failures"] == next(h for h in data["hosts"] if h["host"] == name)[
        "failures"]
    hardware.heal([name], macs(netbox, [name]), settings, NET)


def test_emulator_version_matches_what_netbox_expects(netbox, lab):
    host = read_hosts(netbox, Selection(names=(lab.hosts[0].name,)))[0]
    assert host.config["nvidia_driver"]["version"] == hwemu.DEFAULT_DRIVER
