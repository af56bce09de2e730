"""racklift_files (plugins/modules): a role's files, directories, links and removals in one module
run, run here as Ansible runs it on a host (the module file and its arguments as JSON)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

MODULE = Path(__file__).resolve().parents[2] / "plugins" / "modules" / "racklift_files.py"


def run(tmp_path: Path, files: list[dict], check: bool = False, diff: bool = False) -> dict:
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {
        "files": files, "_ansible_check_mode": check, "_ansible_diff": diff}}))
    result = subprocess.run([sys.executable, str(MODULE), str(args)],
                            capture_output=True, text=True, timeout=60)
    return json.loads(result.stdout)


def test_writes_each_kind_once_and_then_changes_nothing(tmp_path):
    root = tmp_path / "root"
    files = [
        {"path": str(root / "etc" / "conf.d"), "state": "directory"},
        {"path": str(root / "etc" / "conf.d" / "a.conf"), "content": "a = 1\n"},
        {"path": str(root / "etc" / "tool"), "content": "#!/bin/sh\n", "mode": "0755"},
        {"path": str(root / "etc" / "link"), "state": "link", "src": str(root / "etc" / "tool")},
        {"path": str(root / "etc" / "old"), "state": "absent"},
    ]
    first = run(tmp_path, files)
    assert first["changed_paths"] == [f["path"] for f in files[:4]], first
    assert (root / "etc" / "conf.d" / "a.conf").read_text() == "a = 1\n"
    assert (root / "etc" / "tool").stat().st_mode & 0o7777 == 0o755
    assert (root / "etc" / "conf.d" / "a.conf").stat().st_mode & 0o7777 == 0o644
    assert os.readlink(root / "etc" / "link") == str(root / "etc" / "tool")
    again = run(tmp_path, files)
    assert again["changed"] is False and again["changed_paths"] == []


def test_only_what_differs_changes(tmp_path):
    conf, other = tmp_path / "a.conf", tmp_path / "b.conf"
    conf.write_text("a = 1\n")
    other.write_text("b = 1\n")
    conf.chmod(0o644)
    other.chmod(0o600)
    result = run(tmp_path, [{"path": str(conf), "content": "a = 2\n"},
                            {"path": str(other), "content": "b = 1\n"}])
    assert result["changed_paths"] == [str(conf), str(other)]
    assert conf.read_text() == "a = 2\n"
    assert other.read_text() == "b = 1\n" and other.stat().st_mode & 0o777 == 0o644


def test_absent_removes_a_file(tmp_path):
    stale = tmp_path / "stale.conf"
    stale.write_text("x\n")
    assert run(tmp_path, [{"path": str(stale), "state": "absent"}])["changed_paths"] == [str(stale)]
    assert not stale.exists()


def test_check_mode_reports_and_writes_nothing(tmp_path):
    conf = tmp_path / "a.conf"
    conf.write_text("a = 1\n")
    new_dir = tmp_path / "new"
    result = run(tmp_path, [{"path": str(conf), "content": "a = 2\n"},
                            {"path": str(new_dir), "state": "directory"},
                            # A dry run: the directory an earlier entry would make is not there.
                            {"path": str(new_dir / "b.conf"), "content": "b\n"}],
                 check=True, diff=True)
    assert result["changed_paths"] == [str(conf), str(new_dir), str(new_dir / "b.conf")]
    assert conf.read_text() == "a = 1\n" and not new_dir.exists()
    assert result["diff"][0]["before"] == "a = 1\n" and result["diff"][0]["after"] == "a = 2\n"


def test_a_failed_validation_leaves_the_file_and_names_it(tmp_path):
    conf = tmp_path / "sshd.conf"
    conf.write_text("good\n")
    result = run(tmp_path, [{"path": str(conf), "content": "bad\n",
                             "validate": "grep -q ^good %s"}])
    assert result.get("failed") and str(conf) in result["msg"]
    assert "validation failed" in result["msg"]
    assert conf.read_text() == "good\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["args.json", "sshd.conf"]
    passed = run(tmp_path, [{"path": str(conf), "content": "good too\n",
                             "validate": "grep -q ^good %s"}])
    assert passed["changed_paths"] == [str(conf)] and conf.read_text() == "good too\n"


def test_a_missing_directory_fails_naming_the_path(tmp_path):
    target = tmp_path / "nowhere" / "a.conf"
    result = run(tmp_path, [{"path": str(target), "content": "a\n"}])
    assert result.get("failed") and str(target) in result["msg"]
    assert "does not exist" in result["msg"]


def test_backup_keeps_the_replaced_file(tmp_path):
    conf = tmp_path / "daemon.json"
    conf.write_text('{"site": 1}\n')
    run(tmp_path, [{"path": str(conf), "content": '{"site": 1, "ours": 2}\n', "backup": True}])
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("daemon.json.")]
    assert len(kept) == 1 and kept[0].read_text() == '{"site": 1}\n'
    assert conf.read_text() == '{"site": 1, "ours": 2}\n'
