"""provision and reimage on the lab: real containers, real Ansible through ansible-runner, the
real test NetBox, a real Slurm. Faults: a GPU off the bus, SSH dropping mid-configure, a
malformed NetBox record, a second run on the same hosts, a killed run, NetBox going away
mid-run, NetBox unreachable at start. Each ends as a clear per-host error, the other hosts
finish, no host is active without a passing verify, and a re-run converges. Planted secrets
never reach the run directory."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

import netbox_ui
from browser import Browser
from helpers import BIN, REPO, planned_lab
from helpers import TEST_NET as NET
from racklift import metrics, podman
from racklift.lab import hardware, netbox_server
from racklift.lab import rack as lab_rack
from racklift.lab.slurm import SlurmLab
from racklift.lab.slurm import down as slurm_down
from racklift.lab.slurm import up as slurm_up
from racklift.lifecycle import lock
from racklift.lifecycle import result as result_field
from racklift.lifecycle.result import RESULT_FIELD
from racklift.lifecycle.state import Transition, apply
from racklift.netbox.reader import Selection, read_hosts
from racklift.pipeline import run_report
from racklift.pipeline.outcome import FAILED, INTERRUPTED, JOINED, LOCKED, PREFLIGHT, SKIPPED
from racklift.pipeline.plan import REIMAGE, Options
from racklift.pipeline.progress import QUIET, Progress
from racklift.pipeline.provision import run
from racklift.pipeline.racks import Limits

pytestmark = [pytest.mark.containers, pytest.mark.slurm]

RACK = "P01"
SELECT = Selection(racks=(RACK,), roles=("gpu-server",))
PLANTED_BMC_PASSWORD = "planted-bmc-password-5e1f"
# Tests after the first one configure with the driver role alone (the emulated nvidia-smi
# reports the installed driver package, as on a real host): the roles have their own Molecule
# scenarios; these tests are about the pipeline around them.
LIGHT = {"racklift_roles": ["nvidia_driver"]}


class Hooked(Progress):
    """Progress that runs `hooks[stage]` once, when a stage starts."""

    def __init__(self, hooks=None):
        super().__init__(lambda line: print(line, flush=True), QUIET)
        self.hooks = dict(hooks or {})

    def stage(self, hosts, stage):
        super().stage(hosts, stage)
        if stage in self.hooks:
            self.hooks.pop(stage)()


@pytest.fixture(scope="module")
def lab(netbox, tmp_path_factory):
    os.environ["RACKLIFT_BMC_PASSWORD"] = PLANTED_BMC_PASSWORD
    with planned_lab(netbox, 4, RACK, tmp_path_factory.mktemp("runs")) as result:
        yield result
    os.environ.pop("RACKLIFT_BMC_PASSWORD")


def names(lab):
    return [h.name for h in lab.hosts]


def statuses(netbox):
    return {h.name: h.status for h in read_hosts(netbox, SELECT)}


def journal(netbox, host):
    entries = netbox.get_all("extras/journal-entries", {"assigned_object_type": "dcim.device"})
    return [e["comments"] for e in sorted(entries, key=lambda e: e["id"])
            if e["assigned_object"]["name"] == host]


def macs(netbox, hosts):
    return {h.name: {i.name: i.mac for i in h.interfaces if i.mac}
            for h in read_hosts(netbox, Selection(names=tuple(hosts)))}


def by_host(result):
    return {h.name: h for h in result.hosts}


def device_id(netbox, name):
    return netbox.get_all("dcim/devices", {"name": name}, fields=("id",))[0]["id"]


@dataclass(frozen=True)
class FirstRun:
    result: Any  # the first operator's run
    second: Any  # the second operator's, refused
    serial: str  # the malformed host's serial, blanked in NetBox for the run


@pytest.fixture(scope="module")
def first_run(netbox, settings, lab) -> FirstRun:
    """The rack's first provision with its faults (a GPU's Xid 79, SSH dropped mid-configure,
    a blank serial, a second operator at once): the tests up to the heal read what it left."""
    _, flaky, dropped, malformed = names(lab)
    hardware.inject({flaky: ["xid-79"]}, macs(netbox, [flaky]), settings, NET)
    serial = lab.hosts[3].serial
    netbox.update("dcim/devices", [{"id": device_id(netbox, malformed), "serial": ""}])
    second = {}

    def second_run():  # another operator, on the same rack, while the first one configures
        second["result"] = run(netbox, SELECT, Options(image=False), progress=Hooked(),
                               owner=lock.Owner("bob", "ctl02", 77), extravars=LIGHT)

    def drop_ssh():  # the SSH daemon stops and every session on one host dies mid-configure
        time.sleep(3)
        podman.podman("exec", dropped, "sh", "-c", "systemctl stop ssh.service ssh.socket; "
                      "pkill -9 sshd || true")

    hooks = Hooked({"configure": lambda: (threading.Thread(target=drop_ssh).start(),
                                          second_run())})
    result = run(netbox, SELECT, Options(image=False), progress=hooks)
    return FirstRun(result, second["result"], serial)


def test_provision_admits_healthy_hosts_and_reports_each_fault(netbox, settings, lab,
                                                               first_run):
    healthy, flaky, dropped, malformed = names(lab)
    result = first_run.result
    got = by_host(result)

    assert got[healthy].result == JOINED and got[healthy].reached == "verify"
    assert got[flaky].result == FAILED and got[flaky].reached == "verify"
    assert "XID 79" in got[flaky].error
    assert got[dropped].result == FAILED and got[dropped].reached == "configure"
    assert "unreachable" in got[dropped].error or "connection" in got[dropped].error.lower()
    assert got[malformed].result == PREFLIGHT
    assert got[malformed].error.startswith("serial: no serial number")
    assert statuses(netbox) == {healthy: "active", flaky: "failed", dropped: "failed",
                                malformed: "planned"}
    # The second operator got nothing, and was told who holds each host.
    refused = by_host(first_run.second)
    assert {n: h.result for n, h in refused.items()} == {
        healthy: LOCKED, flaky: LOCKED, dropped: LOCKED, malformed: PREFLIGHT}
    holder = os.environ.get("USER", "root")
    assert f"provision run {result.run_id}" in refused[healthy].error
    assert "locked by " in refused[healthy].error and holder in refused[healthy].error
    # Every transition is in the journal; the failure lists the reason.
    assert [line.split("\n")[0] for line in journal(netbox, healthy)
            if line.startswith(("racklift provision", "racklift verify"))] == [
        f"racklift provision (run {result.run_id}): started; stages configure, verify",
        f"racklift provision (run {result.run_id}): configured",
        "racklift verify: passed: the host matches NetBox and is healthy."]
    assert any("XID 79" in e for e in journal(netbox, flaky))
    assert any(e.startswith(f"racklift provision (run {result.run_id}): configure failed")
               for e in journal(netbox, dropped))
    assert not lock.current(netbox, [device_id(netbox, n) for n in names(lab)])
    # The report and the artifacts are in the run directory; no secret is.
    data = json.loads((result.run_dir / "report.json").read_text())
    assert run_report.to_json(result, SELECT.describe())["summary"] == data["summary"] == {
        "hosts": 4, "failed": 2, "joined": 1, "preflight failed": 1}
    artifacts = result.run_dir / "ansible" / "artifacts"
    assert (artifacts / f"configure-lab1-{RACK}" / "job_events").is_dir()
    assert_no_secrets(result.run_dir.parent, settings.token)


# Markup planted in a recorded value: shown as text, never run (window.__planted stays unset).
PLANTED_MARKUP = ('<script>window.__planted = 1</script>'
                  '<img src=x onerror="window.__planted = 2">')


def test_netbox_shows_the_run_where_operators_look(netbox, instance, lab, first_run,
                                                   tmp_path):
    """racklift's NetBox plugin after the first run, as a person reads it: logged in through
    NetBox's login form, over HTTP and in a headless Chromium, the refused host's tab with its
    cause and the rack's bring-up with its counts; and the run's report.html in the same
    browser. Screenshots go to RACKLIFT_SCREENSHOTS (docs/images when the docs are updated)."""
    healthy, flaky, dropped, malformed = names(lab)
    run_id = first_run.result.run_id
    ids = {n: device_id(netbox, n) for n in names(lab)}
    rack_id = netbox.get_all("dcim/racks", {"name": RACK}, fields=("id",))[0]["id"]
    # What the lifecycle writer recorded for the plugin: the refused host's cause, the stage
    # the dropped one failed at.
    results = {d["name"]: d["custom_fields"][RESULT_FIELD] for d in netbox.get_all(
        "dcim/devices", {"id": list(ids.values())}, fields=("name", "custom_fields"))}
    assert [f["cause"] for f in results[flaky]["last"]["failures"]] == ["kernel.gpu_errors"]
    assert results[flaky]["last"]["run"] == run_id and not results[flaky]["verdict"]["passed"]
    assert [f["cause"] for f in results[dropped]["last"]["failures"]] == ["stage.configure"]
    assert results[healthy]["last"]["result"] == "passed" and results[malformed] is None

    # A recorded value with markup in it, through the one writer: the malformed host (never
    # started) gets a journal entry and a result whose text plants a script.
    apply(netbox, [Transition(ids[malformed], f"racklift verify: test entry {PLANTED_MARKUP}",
                              result=result_field.of_stage_failure("image", PLANTED_MARKUP,
                                                                   "planted"))])
    password = netbox_server.admin_password(instance)
    web = netbox_ui.session(instance.url, password)
    device_tab = f"{instance.url}/dcim/devices/{{}}/racklift/"
    planted = web.get(device_tab.format(ids[malformed]), timeout=120)
    assert planted.status_code == 200
    assert "&lt;script&gt;window.__planted = 1&lt;/script&gt;" in planted.text
    assert "<script>window.__planted" not in planted.text
    assert 'onerror="window.__planted' not in planted.text  # NetBox's own onerror= are there
    for path in (f"dcim/racks/{rack_id}/racklift/", f"dcim/devices/{ids[flaky]}/racklift/"):
        assert web.get(f"{instance.url}/{path}", timeout=120).status_code == 200
    # The site's bring-up: its one rack drawn, the same counts.
    site_id = netbox.get_all("dcim/racks", {"name": RACK}, fields=("site",))[0]["site"]["id"]
    site = web.get(f"{instance.url}/dcim/sites/{site_id}/racklift/", timeout=120)
    site_text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", site.text)).split())
    assert "in the pool 1 refused 2 planned 1 hosts 4" in site_text
    assert f'<h3 class="h4">{RACK}</h3>' in site.text
    # Not logged in, NetBox's login page, not the tab.
    anonymous = requests.get(device_tab.format(ids[flaky]), timeout=120)
    assert "/login/" in anonymous.url and "kernel.gpu_errors" not in anonymous.text

    shots = Path(os.environ.get("RACKLIFT_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    browser = Browser()

    def seen(css: str) -> str:  # what a person reads there, on one line
        return " ".join(browser.text(css).split())

    try:
        browser.login(instance.url, netbox_ui.USER, password)
        browser.go(device_tab.format(ids[flaky]))
        lifecycle, last = seen("#racklift-lifecycle"), seen("#racklift-result")
        assert "refused (status Failed)" in lifecycle and "not locked" in lifecycle, lifecycle
        assert f"Run that last touched it {run_id}" in lifecycle, lifecycle
        assert "failed at stage verify" in last, last
        assert "kernel.gpu_errors" in last and "XID 79" in last, last
        verdict = seen("#racklift-verdict")
        assert "kernel.gpu_errors CRITICAL" in verdict, verdict
        assert "racklift verify: failed" in seen("#racklift-journal")
        browser.screenshot(shots / "netbox-device-tab.png")

        browser.go(device_tab.format(ids[healthy]))
        assert "in the pool (status Active)" in seen("#racklift-lifecycle")
        assert "No mismatches" in seen("#racklift-verdict")

        browser.go(device_tab.format(ids[malformed]))
        assert browser.scripts_run() is None
        assert PLANTED_MARKUP in seen("#racklift-result")

        browser.go(f"{instance.url}/dcim/racks/{rack_id}/racklift/")
        states = seen("#racklift-states table")
        assert states == "in the pool 1 refused 2 planned 1 hosts 4", states
        causes = seen("#racklift-causes")
        assert f"kernel.gpu_errors 1 {flaky}" in causes, causes
        assert f"stage.configure 1 {dropped}" in causes, causes
        rack = seen("#racklift-racks")
        assert f"{flaky} · refused: kernel.gpu_errors" in rack, rack
        assert f"{healthy} · in the pool" in rack, rack
        browser.screenshot(shots / "netbox-bringup.png")

        browser.go((first_run.result.run_dir / "report.html").as_uri())
        report = seen("body")
        assert "joined 1" in report and "failed 2" in report, report
        assert "kernel.gpu_errors" in report and flaky in report
        browser.screenshot(shots / "report-html.png")
    finally:
        browser.close()


def test_the_run_s_metrics_pass_promtool(first_run, tmp_path):
    """The first run's report as the metrics file `--metrics-file` writes, checked by
    Prometheus' own linter (Debian's prometheus: scripts/test-packages)."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: run scripts/test-packages"
    report = json.loads((first_run.result.run_dir / "report.json").read_text())
    path = tmp_path / "racklift-provision-p01.prom"
    metrics.write(path, metrics.render(report))
    checked = subprocess.run([promtool, "check", "metrics"], stdin=path.open("rb"),
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    text = path.read_text()
    assert 'racklift_host_failures{' in text and 'cause="kernel.gpu_errors"' in text


def test_healed_the_refused_host_is_reimaged_and_a_rerun_converges(netbox, settings, lab,
                                                                   first_run):
    """Heal; re-image the refused host (no --force: it is not in the pool); a re-run takes
    the other failed hosts again; everything converges."""
    healthy, flaky, dropped, malformed = names(lab)
    serial = first_run.serial
    hardware.heal([flaky], macs(netbox, [flaky]), settings, NET)
    rebuilt = run(netbox, Selection(names=(flaky,)),
                  Options(REIMAGE, image=False, reason="GPU reseated"), progress=Hooked(),
                  extravars=LIGHT)
    assert rebuilt.hosts[0].result == JOINED
    assert any("racklift reimage: GPU reseated" in e for e in journal(netbox, flaky))
    podman.podman("exec", dropped, "systemctl", "start", "ssh.service")
    netbox.update("dcim/devices", [{"id": device_id(netbox, malformed), "serial": serial}])
    rerun = by_host(run(netbox, SELECT, Options(image=False, retry_failed=True),
                        progress=Hooked(), extravars=LIGHT))
    assert {n: h.result for n, h in rerun.items()} == {
        healthy: SKIPPED, flaky: SKIPPED, dropped: JOINED, malformed: JOINED}
    assert set(statuses(netbox).values()) == {"active"}


def assert_no_secrets(root: Path, token: str):
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert token.encode() not in data, path
            assert PLANTED_BMC_PASSWORD.encode() not in data, path


def test_reimage_drains_rebuilds_and_resumes(netbox, lab):
    host = names(lab)[1]
    refused = run(netbox, Selection(names=(host,)), Options(REIMAGE, image=False,
                                                            reason="GPU swap"),
                  progress=Hooked(), extravars=LIGHT)
    assert refused.hosts[0].result == SKIPPED and "--force" in refused.hosts[0].plan.skip
    slurm = SlurmLab("pipeline", (host,))
    slurm_up(slurm)
    seen = {}
    try:
        hook = slurm.hook()
        result = run(netbox, Selection(names=(host,)),
                     Options(REIMAGE, image=False, force=True, reason="GPU swap in slot 3"),
                     progress=Hooked({"configure": lambda: seen.update(
                         netbox=statuses(netbox)[host], slurm=hook.state([host])[host])}),
                     scheduler=hook, extravars=LIGHT)
        after = hook.state([host])[host]
    finally:
        slurm_down(slurm)
    assert result.hosts[0].result == JOINED, result.hosts[0].error
    assert seen["netbox"] == "staged" and "DRAIN" in seen["slurm"]
    assert "DRAIN" not in after
    assert statuses(netbox)[host] == "active"
    assert any("out of service for re-imaging (racklift reimage: GPU swap in slot 3)" in e
               for e in journal(netbox, host))


def test_a_killed_run_leaves_its_lock_and_unlock_breaks_it(netbox, settings, lab):
    host = names(lab)[0]
    lab_rack.replan(netbox, [host])
    code = ("import sys; from racklift.netbox.client import NetBox, NetBoxSettings; "
            "from racklift.netbox.selection import Selection; "
            "from racklift.pipeline.plan import Options; "
            "from racklift.pipeline.progress import Progress; "
            "from racklift.pipeline.provision import run; "
            f"run(NetBox.connect(NetBoxSettings({settings.url!r}, sys.stdin.read())), "
            f"Selection(names=({host!r},)), Options(image=False), "
            "progress=Progress(print), extravars={'racklift_roles': ['base_os']})")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO / "tests")})
    child.stdin.write(settings.token)
    child.stdin.close()
    deadline = time.monotonic() + 120
    while statuses(netbox)[host] != "staged" and time.monotonic() < deadline:
        time.sleep(0.5)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert statuses(netbox)[host] == "staged"  # never active without a verify

    refused = run(netbox, Selection(names=(host,)), Options(image=False), progress=Hooked(),
                  extravars=LIGHT)
    assert refused.hosts[0].result == LOCKED
    assert refused.hosts[0].error.endswith("its process is gone: the lock is stale")
    out = subprocess.run([BIN / "invoke", "unlock", "--host", host], cwd=REPO, text=True,
                         capture_output=True, env={**os.environ, "NETBOX_URL": settings.url,
                                                   "NETBOX_TOKEN": settings.token})
    assert out.returncode == 0 and f"{host}: broke the lock of" in out.stderr
    resumed = run(netbox, Selection(names=(host,)), Options(image=False), progress=Hooked(),
                  extravars=LIGHT)
    assert resumed.hosts[0].result == JOINED
    assert statuses(netbox)[host] == "active"


def test_netbox_going_away_mid_run_leaves_hosts_staged(netbox, instance, lab):
    host = names(lab)[2]
    lab_rack.replan(netbox, [host])
    result = run(netbox, Selection(names=(host,)), Options(image=False),
                 progress=Hooked({"configure": lambda: netbox_server.down(instance)}),
                 extravars=LIGHT)
    netbox_server.up(instance)
    assert result.hosts[0].result == INTERRUPTED
    assert "NetBox" in result.hosts[0].error or "netbox" in result.hosts[0].error
    assert any(e.startswith("the locks of run") for e in result.errors)
    assert statuses(netbox)[host] == "staged"
    lock.break_locks(netbox, [device_id(netbox, host)], "test: NetBox was down")
    again = run(netbox, Selection(names=(host,)), Options(image=False), progress=Hooked(),
                extravars=LIGHT)
    assert again.hosts[0].result == JOINED


def test_netbox_unreachable_at_start_is_one_clear_error(lab):
    out = subprocess.run([BIN / "invoke", "provision", "--rack", RACK, "--no-image"],
                         cwd=REPO, text=True, capture_output=True,
                         env={**os.environ, "NETBOX_URL": "http://127.0.0.1:9",
                              "NETBOX_TOKEN": "x" * 40})
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "127.0.0.1:9" in out.stderr and "Traceback" not in out.stderr


def test_racks_run_at_once_and_each_ends_on_its_own(netbox, lab):
    """Two racks in one run go through their stages at the same time, each its own batch
    with its own artifacts; the rack whose hosts all fail ends so, the other joins."""
    (rack,) = netbox.get_all("dcim/racks", {"name": RACK}, fields=("id", "site"))
    (other,) = netbox.create("dcim/racks", [{"name": "P02", "site": rack["site"]["id"],
                                             "status": "active"}])
    moved = names(lab)[2:]
    netbox.update("dcim/devices", [{"id": device_id(netbox, n), "rack": other["id"]}
                                   for n in moved])
    lab_rack.replan(netbox, names(lab))
    for name in moved:  # the second rack loses its SSH: every host there fails configure
        podman.podman("exec", name, "sh", "-c", "systemctl stop ssh.service ssh.socket; "
                      "pkill -9 sshd || true")
    lines: list[str] = []
    try:
        result = run(netbox, Selection(racks=(RACK, "P02"), roles=("gpu-server",)),
                     Options(image=False, limits=Limits(total=2, per_site=2)),
                     progress=Progress(lines.append), extravars=LIGHT)
    finally:
        for name in moved:
            podman.podman("exec", name, "systemctl", "start", "ssh.service")
    rack_lines = [line.split("] ", 1)[1] for line in lines if "] rack P0" in line]
    # Both racks started before either finished.
    assert sorted(rack_lines[:2]) == ["rack P01 (lab1): started, 2 hosts",
                                      "rack P02 (lab1): started, 2 hosts"], lines
    assert sorted(line.split(":")[0] + ":" + line.rsplit(":", 1)[1]
                  for line in rack_lines[2:]) == ["rack P01 (lab1): 2 joined",
                                                  "rack P02 (lab1): 2 failed"], lines
    assert {h.name: (h.result, h.reached) for h in result.hosts} == {
        **{n: (JOINED, "verify") for n in names(lab)[:2]},
        **{n: (FAILED, "configure") for n in moved}}
    assert result.errors == ()
    # Each rack's configure its own Ansible artifacts; verify went through the direct
    # collector (no Ansible run), its bundles kept per host.
    artifacts = result.run_dir / "ansible" / "artifacts"
    assert {p.name for p in artifacts.iterdir()} >= {"configure-lab1-P01", "configure-lab1-P02"}
    assert all((result.run_dir / "bundles" / n).is_dir() for n in names(lab)[:2])
