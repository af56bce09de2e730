"""One offline judge: `racklift facts --from BUNDLE --expected FILE` judges a support bundle
against what `netbox.expected --json` printed, with no NetBox. The export reads back as the
host NetBox gave; the verdict is the one `--compare` gives; both exit 1 when a host fails; a
file that is wrong says which host and field, exit 2, and the other hosts are still judged."""

import json
import subprocess
from dataclasses import replace
from importlib import import_module

import pytest
from invoke import Context
from invoke.exceptions import Exit

import emulated
from helpers import BIN, REPO
from racklift.facts import bundle
from racklift.facts.host import from_bundle
from racklift.netbox import expected_json
from racklift.netbox.expected import Problem
from racklift.verify.verdict import judge

# The modules (racklift.tasks names its `verify` task as the package's attribute).
netbox_tasks = import_module("racklift.tasks.netbox")
verify_tasks = import_module("racklift.tasks.verify")

SECRET = "s3cr3t-do-not-print"
OTHER = "lab-u01-02"  # a second host in the bundle


def colons(guid: str) -> str:
    digits = guid.removeprefix("0x").zfill(16)
    return ":".join(digits[i:i + 2] for i in range(0, 16, 2))  # NetBox's WWN form


def fully_recorded(profile):
    """The lab host as a NetBox that records everything of it: its GPUs' serials, each
    InfiniBand port's GUID and its switch's (as the host's fabric map shows them), the OS
    disk, a half-U position and the platform."""
    host = emulated.expected_host({n: g.serial for n, g in enumerate(profile.gpus)})
    guids = {h.ca: h.port_guid for h in profile.hcas}
    links = from_bundle(emulated.bundle(profile)).ib_links
    interfaces = tuple(
        replace(i, wwn=colons(guids[i.name]),
                peer=replace(i.peer, wwn=colons(links[i.name].peer_guid)))
        if i.is_infiniband else i for i in host.interfaces)
    return replace(host, interfaces=interfaces, position=12.5, platform="debian-12",
                   config={**host.config, "os_disk": "/dev/nvme0n1"})


def hosts_to_export():
    full = fully_recorded(emulated.healthy_profile())
    return {
        "lab host": emulated.expected_host(),
        "fully recorded, with the reader's problems": replace(full, problems=(
            Problem(full.name, "oob_ip", "no OOB (BMC) IP: assign the BMC's IP"),)),
        "a context that does not parse": replace(full, config={
            **full.config, "nvidia_driver": {"branch": "latest"}}),
    }


def exported(hosts, monkeypatch, capsys) -> str:
    """What `netbox.expected --json` prints of these hosts, NetBox read as giving them."""
    monkeypatch.setattr(netbox_tasks, "connect", lambda: None)
    monkeypatch.setattr(netbox_tasks, "read_hosts", lambda netbox, chosen: list(hosts))
    netbox_tasks.expected(Context(), json=True)
    return capsys.readouterr().out


def facts(directory, capsys, **flags):
    """`racklift facts --from directory ...`: its JSON, exit code and stderr."""
    try:
        verify_tasks.facts_(Context(), from_=str(directory), **flags)
        code, message = 0, ""
    except Exit as stopped:
        code, message = stopped.code, stopped.message or ""
    out = capsys.readouterr().out
    return (json.loads(out) if out else None), code, message


@pytest.mark.parametrize("name", list(hosts_to_export()))
def test_the_export_reads_back_as_the_host_netbox_gave(name, monkeypatch, capsys):
    host = hosts_to_export()[name]
    assert (host.desired is None) is (name == "a context that does not parse")
    found = expected_json.read(exported([host], monkeypatch, capsys))
    assert (found.refused, found.unnamed) == ({}, ())
    assert found.hosts == {host.name: host}
    assert found.hosts[host.name].desired == host.desired


def judged_both_ways(expected_host, profile, tmp_path, monkeypatch, capsys):
    """The bundle of a host with this hardware, judged against NetBox (--compare, NetBox
    giving `expected_host`) and against the export of the same record (--expected)."""
    bundles = tmp_path / "bundles"
    bundle.write(emulated.bundle(profile), bundles)
    export = tmp_path / "expected.json"
    export.write_text(exported([expected_host], monkeypatch, capsys))
    monkeypatch.setattr(verify_tasks, "connect", lambda: None)
    monkeypatch.setattr(verify_tasks, "read_hosts", lambda netbox, chosen: [expected_host])
    return (facts(bundles, capsys, compare=True), facts(bundles, capsys, expected=str(export)))


@pytest.mark.parametrize("fault", [None, "ib-port-down", "mac-swapped", "cable-wrong-leaf",
                                   "gpu-serial-changed"])
@pytest.mark.parametrize("record", ["lab host", "fully recorded"])
def test_expected_gives_the_verdict_compare_gives(fault, record, tmp_path, monkeypatch,
                                                  capsys):
    healthy = emulated.healthy_profile()
    expected_host = (fully_recorded(healthy) if record == "fully recorded"
                     else emulated.expected_host())
    profile = emulated.with_fault(fault) if fault else healthy
    (compared, compare_code, _), (offline, offline_code, _) = judged_both_ways(
        expected_host, profile, tmp_path, monkeypatch, capsys)
    # Only a NetBox that records GPU serials sees one change.
    fails = fault is not None and (fault != "gpu-serial-changed" or record == "fully recorded")
    assert offline["verdict"]["failed"] is fails, offline["verdict"]["failures"]
    assert set(offline["verdict"]) == set(compared["verdict"])
    for field, value in compared["verdict"].items():
        assert offline["verdict"][field] == value, field
    assert offline == compared
    in_memory = judge(expected_host, from_bundle(emulated.bundle(profile))).to_dict()
    assert offline["verdict"] == json.loads(json.dumps(in_memory, default=str))
    # Both exit 1 when the host fails, as verify does.
    assert compare_code == offline_code == (1 if fails else 0)


def two_host_bundle(tmp_path):
    """A bundle of the lab host and a second host (the same hardware, another name)."""
    bundles = tmp_path / "bundles"
    made = emulated.bundle(emulated.healthy_profile())
    bundle.write(made, bundles)
    bundle.write(replace(made, host=OTHER), bundles)
    return bundles


def export_of(tmp_path, monkeypatch, capsys, edit=lambda records: records):
    """The lab host's export with the record of OTHER next to it, edited by `edit`."""
    host = emulated.expected_host()
    records = json.loads(exported([host, replace(host, name=OTHER)], monkeypatch, capsys))
    path = tmp_path / "expected.json"
    path.write_text(json.dumps(edit(records)))
    return path


def test_a_host_missing_from_the_file_is_named_and_the_others_judged(tmp_path, monkeypatch,
                                                                    capsys):
    bundles = two_host_bundle(tmp_path)
    path = export_of(tmp_path, monkeypatch, capsys, lambda records: records[:1])
    out, code, message = facts(bundles, capsys, expected=str(path))
    shown = {entry["host"]: entry for entry in out}
    assert code == 2
    assert shown[emulated.PLAN.name]["verdict"]["passed"]
    assert "verdict" not in shown[OTHER]
    assert shown[OTHER]["error"] == (
        f"{path}: {OTHER}: name: no record in the file names this host: export it with "
        f"`racklift netbox.expected --host {OTHER} --json`")
    assert message == f"error: {shown[OTHER]['error']}"


def test_a_malformed_field_names_the_host_and_field_never_its_value(tmp_path, monkeypatch,
                                                                    capsys):
    def break_other(records):
        other = records[1]
        other["interfaces"][1]["mac"] = SECRET  # eno1
        other["interfaces"][3]["peer"]["wwn"] = SECRET  # mlx5_0
        other["gpus"][0]["serial"] = 42
        other["config"] = SECRET
        other["token"] = SECRET
        del other["site"]
        return records

    bundles = two_host_bundle(tmp_path)
    path = export_of(tmp_path, monkeypatch, capsys, break_other)
    out, code, message = facts(bundles, capsys, expected=str(path))
    shown = {entry["host"]: entry for entry in out}
    assert code == 2
    assert shown[emulated.PLAN.name]["verdict"]["passed"]
    assert shown[OTHER]["error"].split("; ") == [f"{path}: {OTHER}: {line}" for line in (
        "token: is no field racklift knows: remove it, or judge with the racklift that "
        "printed the file",
        "site: is missing",
        "interfaces.eno1.mac: is not a MAC address (6 hex octets separated by colons, as "
        "NetBox gives it)",
        "interfaces.mlx5_0.peer.wwn: is not a WWN (8 hex octets separated by colons, as NetBox "
        "gives it)",
        "gpus.GPU0.serial: is a number: make it text or null",
        "config: is text: make it an object")]
    assert SECRET not in json.dumps(out) + message


@pytest.mark.parametrize(("text", "why"), [
    ("{not json", "not JSON (line 1, column 2)"),
    ("\udcff".encode("utf-8", "surrogateescape"), "not JSON (not UTF-8 text)"),
    (json.dumps({"name": "lab-u01-01"}), "is an object, not a list of hosts"),
    (json.dumps(["lab-u01-01"]), "is a list, not a list of hosts")])
def test_a_file_that_is_no_export_is_a_usage_error(text, why, tmp_path, capsys):
    path = tmp_path / "expected.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    out, code, message = facts(two_host_bundle(tmp_path), capsys, expected=str(path))
    assert (out, code) == (None, 2)
    assert message == (f"error: {path}: {why}: give the output of `racklift netbox.expected "
                       "--json`")


def test_records_that_share_a_name_or_have_none_are_refused(tmp_path, monkeypatch, capsys):
    def shared_and_unnamed(records):
        unnamed = {**records[1], "name": "lab u01 02"}
        return [records[0], {**records[0], "name": emulated.PLAN.name.upper()}, unnamed]

    path = export_of(tmp_path, monkeypatch, capsys, shared_and_unnamed)
    out, code, _ = facts(two_host_bundle(tmp_path), capsys, expected=str(path))
    shown = {entry["host"]: entry["error"] for entry in out}
    assert code == 2
    assert shown[emulated.PLAN.name] == (f"{path}: {emulated.PLAN.name}: name.ambiguous: 2 "
                                         "records name this host (case aside): keep one")
    assert shown[OTHER].endswith(
        f"; {path}: host [2]: name: is not a host name (RFC 1123: letters, digits and "
        "hyphens, in dot-separated labels), as racklift needs")


def test_compare_without_the_host_in_netbox_is_a_usage_error_too(tmp_path, monkeypatch,
                                                                  capsys):
    monkeypatch.setattr(verify_tasks, "connect", lambda: None)
    monkeypatch.setattr(verify_tasks, "read_hosts", lambda netbox, chosen: [])
    out, code, message = facts(two_host_bundle(tmp_path), capsys, compare=True)
    assert code == 2 and [e["error"] for e in out] == [
        f"{emulated.PLAN.name} is not in NetBox", f"{OTHER} is not in NetBox"]
    assert message.splitlines() == [f"error: {e['error']}" for e in out]


def test_one_source_of_expected_hosts_at_a_time(tmp_path, capsys):
    out, code, message = facts(tmp_path, capsys, compare=True, expected="expected.json")
    assert (out, code) == (None, 2) and "give one" in message


def test_the_command_line_takes_expected(tmp_path, monkeypatch, capsys):
    """The flag as the operator types it; a host judged, the other missing: exit 2."""
    bundles = two_host_bundle(tmp_path)
    path = export_of(tmp_path, monkeypatch, capsys, lambda records: records[:1])
    result = subprocess.run([str(BIN / "racklift"), "facts", "--from", str(bundles),
                             "--expected", str(path)],
                            capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 2, result.stderr
    shown = {entry["host"]: entry for entry in json.loads(result.stdout)}
    assert shown[emulated.PLAN.name]["verdict"]["passed"]
    assert result.stderr.startswith(f"error: {path}: {OTHER}: name: no record")
