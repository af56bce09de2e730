"""Acceptance on the lab: provision with the load tests the lab's context asks for (DCGM level
2, all-reduce >= 350 GB/s, ib_write_bw >= 370 Gb/s per NDR rail), run through Ansible on real
containers whose tools are emulated in their real output formats, ib_write_bw pairs talking
over real TCP. A host with failing HBM, one whose NVLinks are slow under load (and whose DCGM
skips the tests it requires) and one with a slow rail each fail on their test with the figure
or DCGM's word; the healthy host joins; the slow rail is blamed on its own host, never on the
partners it was paired with. Healed, `racklift accept` admits them."""

from __future__ import annotations

import html
import json
import re

import pytest

import netbox_ui
from helpers import TEST_NET as NET
from helpers import planned_lab
from racklift.lab import hardware, netbox_server
from racklift.lifecycle.result import RESULT_FIELD
from racklift.lifecycle.state import ACCEPTANCE_FIELD
from racklift.netbox.reader import Selection, read_hosts
from racklift.pipeline.outcome import FAILED, JOINED
from racklift.pipeline.plan import ACCEPT_ONLY, Options
from racklift.pipeline.progress import QUIET, Progress
from racklift.pipeline.provision import run

pytestmark = pytest.mark.containers

RACK = "A01"
SELECT = Selection(racks=(RACK,), roles=("gpu-server",))
LIGHT = {"racklift_roles": ["nvidia_driver"]}  # the driver the emulated tools report
FAULTS = ["hbm-fail", "nvlink-slow", "rail-slow"]  # hosts 1-3; host 4 healthy


@pytest.fixture(scope="module")
def lab(netbox, tmp_path_factory):
    with planned_lab(netbox, 4, RACK, tmp_path_factory.mktemp("runs"),
                     acceptance=True) as result:
        yield result


def macs(netbox, names):
    return {h.name: {i.name: i.mac for i in h.interfaces if i.mac}
            for h in read_hosts(netbox, Selection(names=tuple(names)))}


def device(netbox, name):
    return netbox.get_all("dcim/devices", {"name": name})[0]


def journal(netbox, name):
    entries = netbox.get_all("extras/journal-entries", {"assigned_object_type": "dcim.device",
                                                        "assigned_object_id":
                                                        device(netbox, name)["id"]})
    return [e["comments"] for e in sorted(entries, key=lambda e: e["id"])]


def test_each_slow_host_fails_its_test_with_the_figure_and_the_healthy_one_joins(
        netbox, settings, instance, lab):
    names = [h.name for h in lab.hosts]
    hbm, nvlink, rail, healthy = names
    hardware.inject({hbm: ["hbm-fail"], nvlink: ["nvlink-slow", "dcgm-skip-required"],
                     rail: ["rail-slow"]}, macs(netbox, names[:3]), settings, NET)
    result = run(netbox, SELECT, Options(image=False), progress=Progress(print, QUIET),
                 extravars=LIGHT)
    got = {h.name: h for h in result.hosts}
    assert (got[healthy].result, got[healthy].reached) == (JOINED, "accept"), got[healthy].error
    for name in (hbm, nvlink, rail):
        assert (got[name].result, got[name].reached) == (FAILED, "accept"), got[name].error
    # Each on its own test, and nothing else.
    fields = {n: [f.split(": ")[0] for f in got[n].acceptance.failures] for n in names[:3]}
    assert len(fields[hbm]) == 1 and fields[hbm][0].startswith("accept.dcgm.")
    assert "GPU 4" in got[hbm].acceptance.failures[0]
    # DCGM passed its deployment checks and skipped the level's tests: no pass.
    assert fields[nvlink] == ["accept.dcgm.pcie", "accept.dcgm.memory", "accept.nccl.busbw"]
    assert all("skipped" in f for f in got[nvlink].acceptance.failures[:2])
    assert fields[rail] == ["accept.rdma[mlx5_3]"]
    # The slow rail's figure, against the threshold, with the partners it was slow with.
    (slow,) = got[rail].acceptance.failures
    assert ">= 370 Gb/s" in slow and "its partners are fast with others" in slow
    figures = got[rail].acceptance.figures["rdma"]
    assert figures["mlx5_3"]["gbps"] < 150 and figures["mlx5_3"]["outcome"] == "fail"
    # Its partners on that rail were cleared: they passed on mlx5_3 too.
    for name in (hbm, nvlink, healthy):
        assert got[name].acceptance.figures["rdma"]["mlx5_3"]["outcome"] == "pass"
        assert got[name].acceptance.figures["rdma"]["mlx5_3"]["gbps"] >= 370
    assert got[nvlink].acceptance.figures["nccl_busbw"] < 350
    assert got[healthy].acceptance.figures["nccl_busbw"] >= 350

    # NetBox: status, one journal entry with the figures, the device's acceptance field.
    statuses = {h.name: h.status for h in read_hosts(netbox, SELECT)}
    assert statuses == {hbm: "failed", nvlink: "failed", rail: "failed", healthy: "active"}
    passed = [e for e in journal(netbox, healthy) if "acceptance passed" in e]
    assert len(passed) == 1 and "rdma min" in passed[0] and "(>= 370)" in passed[0]
    assert device(netbox, healthy)["custom_fields"][ACCEPTANCE_FIELD].split(" ", 1)[1] \
        .startswith("passed: dcgm r2 pass; nccl ")
    failed = [e for e in journal(netbox, rail) if "acceptance failed" in e]
    assert len(failed) == 1 and "accept.rdma[mlx5_3]" in failed[0]
    assert " failed: " in device(netbox, rail)["custom_fields"][ACCEPTANCE_FIELD]
    report = json.loads((result.run_dir / "report.json").read_text())
    by_host = {h["host"]: h for h in report["hosts"]}
    assert by_host[rail]["acceptance"]["figures"]["rdma"]["mlx5_3"]["outcome"] == "fail"
    assert by_host[healthy]["acceptance"]["passed"] is True
    # The device's racklift_result keeps the verdict it passed and adds the figures, and the
    # plugin's tab shows the slow rail against its threshold.
    shown = device(netbox, rail)["custom_fields"][RESULT_FIELD]
    assert shown["verdict"]["passed"] and shown["last"]["stage"] == "accept"
    assert [f["cause"] for f in shown["last"]["failures"]] == ["accept.rdma"]
    slow = [r for r in shown["acceptance"]["rows"] if r["test"] == "RDMA ib_write_bw mlx5_3"]
    assert len(slow) == 1 and not slow[0]["passed"] and slow[0]["threshold"] == ">= 370 Gb/s"
    web = netbox_ui.session(instance.url, netbox_server.admin_password(instance))
    tab = web.get(f"{instance.url}/dcim/devices/{device(netbox, rail)['id']}/racklift/",
                  timeout=120)
    panel = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", tab.text.split(
        'id="racklift-acceptance"')[1].split('id="racklift-cabling"')[0])).split())
    assert "RDMA ib_write_bw mlx5_3" in panel and ">= 370 Gb/s fail" in panel, panel

    # Healed, the acceptance tests alone admit them; the pool host is not touched.
    hardware.heal(names[:3], macs(netbox, names[:3]), settings, NET)
    again = run(netbox, SELECT, Options(ACCEPT_ONLY, retry_failed=True),
                progress=Progress(print, QUIET), extravars=LIGHT)
    assert {h.name: h.result for h in again.hosts} == {
        hbm: JOINED, nvlink: JOINED, rail: JOINED, healthy: "skipped"}
    assert {h.status for h in read_hosts(netbox, SELECT)} == {"active"}


def test_a_pool_host_is_tested_again_only_when_forced_paired_with_pool_hosts(netbox, lab):
    """`racklift accept --force --pair-with-active` on one active host: alone on its rails, it
    is paired with the other active hosts (known-good), and goes back to the pool; without
    --force it is left alone."""
    name = lab.hosts[3].name
    one = Selection(names=(name,))
    (untouched,) = run(netbox, one, Options(ACCEPT_ONLY), progress=Progress(print, QUIET),
                       extravars=LIGHT).hosts
    assert untouched.result == "skipped" and "pass --force" in untouched.plan.skip
    (again,) = run(netbox, one, Options(ACCEPT_ONLY, force=True, pair_with_active=True,
                                        reason="quarterly burn-in"),
                   progress=Progress(print, QUIET), extravars=LIGHT).hosts
    assert again.result == JOINED, again.error
    partners = {v["why"].split(" ")[1] for v in again.acceptance.figures["rdma"].values()}
    assert partners <= {h.name for h in lab.hosts[:3]} and partners
    entries = journal(netbox, name)
    assert any("out of service for acceptance tests (racklift accept: quarterly burn-in)" in e
               for e in entries)
    assert device(netbox, name)["status"]["value"] == "active"
