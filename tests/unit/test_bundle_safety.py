"""Planted attacks on the support bundle: a host's document names files on the controller, a
NetBox name becomes a directory. Nothing lands outside the bundle directory, and the host that
tried is named."""

import importlib.util
import json
from dataclasses import replace

import pytest

import emulated
from helpers import REPO
from racklift import names
from racklift.errors import RackliftError
from racklift.facts import bundle
from racklift.facts.host import from_bundle


def document(outputs):
    return {"hostname": "gpu-01", "collected_at": "now", "sysfs": {}, "outputs": outputs}


@pytest.mark.parametrize("key", [
    "../../../root/.ssh/authorized_keys", "/root/.ssh/authorized_keys", "..", "",
    "dmesg.txt/../../x", "meta.json", "commands.json"])
def test_an_output_name_racklift_does_not_collect_fails_that_host(tmp_path, key):
    planted = document({key: {"stdout": "ssh-ed25519 AAAA attacker", "rc": 0}})
    with pytest.raises(RackliftError, match=r"^gpu-01: .*does not collect") as caught:
        bundle.from_collector("gpu-01", planted)
    assert "not verified" in str(caught.value)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("output", [
    {"stdout": ["not", "text"]}, {"stdout": "x", "rc": "0"}, {"stdout": "x", "rc": True},
    {"stdout": "x", "rc": 10**100 * 1.0}, "not an object", {"stderr": {"a": 1}}])
def test_a_malformed_output_fails_that_host(output):
    with pytest.raises(RackliftError, match=r"^gpu-01: .*malformed dmesg.txt"):
        bundle.from_collector("gpu-01", document({"dmesg.txt": output}))


@pytest.mark.parametrize("planted", [None, [], "x", {"outputs": []}, {"sysfs": {"a": 1}},
                                     {"sysfs": {"a": "b" * (bundle.MAX_OUTPUT + 1)}}])
def test_a_document_of_the_wrong_shape_fails_that_host(planted):
    with pytest.raises(RackliftError, match=r"^gpu-01: the collector's document"):
        bundle.from_collector("gpu-01", planted)


def test_an_output_over_the_limit_is_refused_not_read():
    huge = document({"dmesg.txt": {"stdout": "x" * (bundle.MAX_OUTPUT + 1)}})
    with pytest.raises(RackliftError, match="over racklift's limit of 16 MiB"):
        bundle.from_collector("gpu-01", huge)


def test_meta_is_text_or_nothing():
    got = bundle.from_collector("gpu-01", {**document({}), "hostname": {"$ref": "x"}})
    assert got.meta == {"hostname": None, "collected_at": "now", "sysfs_root": None}


@pytest.mark.parametrize("host", ["../escape", "/etc", "..", ".", "a/../../b"])
def test_a_host_name_that_is_not_a_file_name_writes_nothing(tmp_path, host):
    inside = tmp_path / "bundles"
    planted = replace(emulated.bundle(emulated.healthy_profile()), host=host)
    with pytest.raises(RackliftError, match="refusing to write"):
        bundle.write(planted, inside)
    assert [p.name for p in tmp_path.iterdir()] == ["bundles"]
    assert not any(inside.iterdir())


def test_a_link_planted_in_the_bundle_is_not_followed_out(tmp_path):
    target = tmp_path / "authorized_keys"
    target.write_text("keep\n")
    host_dir = tmp_path / "bundles" / emulated.PLAN.name
    host_dir.mkdir(parents=True)
    (host_dir / "dmesg.txt").symlink_to(target)
    with pytest.raises(RackliftError, match=r"dmesg\.txt"):
        bundle.write(emulated.bundle(emulated.healthy_profile()), tmp_path / "bundles")
    assert target.read_text() == "keep\n"


def test_written_and_read_back_the_facts_are_the_same(tmp_path):
    original = emulated.bundle(emulated.healthy_profile())
    host_dir = bundle.write(original, tmp_path)
    (host_dir / "notes.txt").write_text("an operator's file: not an output")
    back = bundle.read(host_dir)
    assert back.outputs == original.outputs and back.host == original.host
    assert from_bundle(back) == from_bundle(original)


def test_the_directory_names_the_host_not_what_the_host_says(tmp_path):
    host_dir = bundle.write(emulated.bundle(emulated.healthy_profile()), tmp_path)
    meta = json.loads((host_dir / "meta.json").read_text())
    (host_dir / "meta.json").write_text(json.dumps({**meta, "hostname": "gpu-prod-042"}))
    assert bundle.read(host_dir).host == emulated.PLAN.name


def test_every_collector_output_is_one_the_bundle_takes():
    spec = importlib.util.spec_from_file_location("collect", REPO / "playbooks/files/collect.py")
    collect = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(collect)
    assert set(collect.COMMANDS) | {bundle.CONTAINER_CHECK} == bundle.OUTPUTS


@pytest.mark.parametrize(("name", "ok"), [
    ("gpu-0001", True), ("gpu001.dc1.example.com", True), ("A1", True), ("x" * 63, True),
    ("new-01,gpu-prod-042", False), ("gpu*", False), ("PP:MDF", False), ("-gpu", False),
    ("gpu-", False), ("x" * 64, False), ("a..b", False), ("", False), ("gpu 01", False),
    ("gpu\n01", False), ("~gpu", False), ("!gpu", False), ("gpu[1]", False), (None, False)])
def test_host_names(name, ok):
    assert names.is_hostname(name) is ok


@pytest.mark.parametrize(("text", "safe"), [
    ("configure-R01", "configure-R01"), ("configure-../../etc", "configure-.._.._etc"),
    ("..", "_.."), ("", "_"), ("image-boot-Row A/3", "image-boot-Row_A_3")])
def test_components_are_one_file_name(text, safe):
    assert names.component(text) == safe
    assert "/" not in safe and not safe.startswith(".")


def test_one_unreadable_bundle_leaves_the_others_shown(tmp_path):
    import subprocess

    from helpers import BIN

    good = bundle.write(emulated.bundle(emulated.healthy_profile()), tmp_path)
    bad = tmp_path / "gpu-99"
    bad.mkdir()
    (bad / "commands.json").write_text("{not json")
    result = subprocess.run([str(BIN / "racklift"), "facts", "--from", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    shown = {entry["host"]: entry for entry in json.loads(result.stdout)}
    assert "facts" in shown[good.name] and "gpu-99" in shown
    assert "commands.json: not valid JSON" in shown["gpu-99"]["error"]
