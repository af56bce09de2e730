"""The host keys racklift gives the hosts it images, the run's known_hosts that pins them, and
how a connection that meets another key is told apart (src/racklift/imaging/host_keys.py,
src/racklift/pipeline/ssh_wait.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from racklift.ansible import HostEvent, failure_text
from racklift.errors import RackliftError
from racklift.imaging import host_keys
from racklift.pipeline import ssh_wait

# What OpenSSH 9.2 prints when the pinned key differs (hand-made from its message texts).
MISMATCH_HANDMADE = (
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
    "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
    "Host key for gpu-01 has changed and you have requested strict checking.\n"
    "Host key verification failed.\n")


def test_a_new_key_is_an_openssh_pair_and_each_host_gets_its_own(tmp_path: Path) -> None:
    key, other = host_keys.new_host_key(), host_keys.new_host_key()
    assert key.public != other.public and key.private not in repr(key)
    private = tmp_path / "key"
    private.write_text(key.private)
    private.chmod(0o600)
    derived = subprocess.run(["ssh-keygen", "-y", "-f", str(private)], capture_output=True,
                             text=True, check=True, timeout=10).stdout
    assert derived.split()[:2] == key.public.split()[:2]
    assert key.public.startswith("ssh-ed25519 ")


def test_the_known_hosts_file_holds_the_key_under_the_host_name(tmp_path: Path) -> None:
    key = host_keys.new_host_key()
    path = host_keys.write_known_hosts(tmp_path, "gpu-01", key)
    assert path == tmp_path.resolve() / "known_hosts" / "gpu-01"
    assert path.read_text() == f"gpu-01 {key.public}\n"
    # ssh-keygen finds that key under that name (HostKeyAlias) in the file.
    found = subprocess.run(["ssh-keygen", "-F", "gpu-01", "-f", str(path)], capture_output=True,
                           text=True, timeout=10)
    assert found.returncode == 0 and key.public.split()[1] in found.stdout


def test_only_hosts_given_a_key_in_this_run_are_pinned(tmp_path: Path) -> None:
    host_keys.write_known_hosts(tmp_path, "gpu-01", host_keys.new_host_key())
    assert host_keys.extravars(tmp_path, ["gpu-02", "gpu-01"]) == {"racklift_known_hosts": {
        "dir": str(tmp_path.resolve() / "known_hosts"), "hosts": ["gpu-01"]}}
    with pytest.raises(RackliftError, match="refusing to select"):
        host_keys.write_known_hosts(tmp_path, "../etc/passwd", host_keys.new_host_key())


@pytest.mark.parametrize("part", ["with space", "50%", "it's", 'say"', "back\\slash"])
def test_a_run_directory_ssh_would_read_otherwise_is_refused(tmp_path: Path, part: str) -> None:
    with pytest.raises(RackliftError, match="UserKnownHostsFile"):
        host_keys.extravars(tmp_path / part, ["gpu-01"])


def test_a_deploy_field_is_one_plain_line_and_decodes_to_the_key() -> None:
    import base64

    key = host_keys.new_host_key()
    fields = host_keys.deploy_fields(key)
    assert "\n" not in fields["ssh_host_ed25519_key"]
    assert base64.b64decode(fields["ssh_host_ed25519_key"]).decode() == key.private
    with pytest.raises(ValueError):
        host_keys.deploy_fields(host_keys.HostKey("ssh-rsa AAAA\nx", key.private))


def test_ansible_and_the_collector_say_what_a_key_mismatch_means() -> None:
    event = HostEvent("gpu-01", "unreachable", "SSH answers",
                      "Failed to connect to the host via ssh: " + " ".join(
                          MISMATCH_HANDMADE.split()))
    assert failure_text(event) == f"unreachable: {host_keys.MISMATCH_ERROR}"
    other = HostEvent("gpu-01", "unreachable", "SSH answers", "Connection refused")
    assert failure_text(other) == "unreachable: Connection refused"


def _tries(answers: dict[str, list[subprocess.CompletedProcess[str]]], monkeypatch):
    tried: list[str] = []

    def one_try(argv: list[str]) -> subprocess.CompletedProcess[str]:
        tried.append(argv[-1])
        return answers[argv[-1]].pop(0)
    monkeypatch.setattr(ssh_wait, "one_try", one_try)
    return tried


def _done(rc: int, stderr: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess([], rc, "", stderr)


def test_the_wait_ends_at_once_on_another_key_and_retries_a_host_still_booting(
        monkeypatch) -> None:
    tried = _tries({"gpu-01": [_done(255, MISMATCH_HANDMADE)],
                    "gpu-02": [_done(255, "ssh: connect to host 10.0.0.2 port 22: Connection "
                                          "refused"), _done(0)],
                    "gpu-03": [_done(255, "Connection timed out")] * 5}, monkeypatch)
    now = [0.0]
    got = ssh_wait.wait_for_ssh({h: ["ssh", "--", h] for h in ("gpu-01", "gpu-02", "gpu-03")},
                                deadline=10.0, clock=lambda: now[0],
                                sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert got == {"gpu-01": host_keys.MISMATCH_ERROR, "gpu-02": None,
                   "gpu-03": "no answer by its deadline (Connection timed out)"}
    assert tried.count("gpu-01") == 1 and tried.count("gpu-02") == 2
