"""The direct collector (racklift.verify.direct_collect) and how it reaches hosts
(racklift.verify.reach): the ssh command Ansible's settings make, and what a hostile or broken
host gets. Real sshd runs in the integration tier (test_verify.py and the direct/ansible
comparison there); here a local `sh` stands in for the ssh hop (TRANSPORT_STAND_IN), so the
limits are tried on real processes and pipes in a second or two."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from helpers import REPO
from racklift.ansible import HostEvent
from racklift.bmc.redfish import ENV_PASSWORD
from racklift.child_env import SECRET_ENV
from racklift.verify import gate as verify_gate
from racklift.verify.direct_collect import (
    COLLECT_TASK,
    CONTAINER_CHECK_TASK,
    Collected,
    HostFailed,
    collect_direct,
    container_check_argv,
    run_everywhere,
)
from racklift.verify.reach import ansible_reason, roles_of, ssh_command, target

# Stands in for `ssh ... -- host`: runs the remote command line locally with sh, as sshd would
# on the host. `$1` is the destination slot run_on appends the command to.
TRANSPORT_STAND_IN = ["sh", "-c", 'exec sh -c "$1"', "transport-stand-in"]
DOCUMENT = json.dumps({"outputs": {"uname.txt": {"stdout": "6.8.0\n", "rc": 0}}})


def one(script: str, *, container_check: bool = False, **kw: object
        ) -> tuple[Collected | str, list[HostEvent]]:
    """Collect from one stand-in host whose collector is `script` (python3 on its stdin)."""
    events: list[HostEvent] = []
    tgt = {"ssh": TRANSPORT_STAND_IN, "sysfs_root": "/sys", "mirror": None,
           **{k: kw.pop(k) for k in ("sysfs_root", "mirror") if k in kw}}
    got = collect_direct({"gpu-01": tgt}, script.encode(),
                         script.encode() if container_check else None,
                         on_event=events.append, **{"limit": 2**20, **kw})
    return got["gpu-01"], events


# --- how a host is reached ---------------------------------------------------------------------

def test_the_ssh_command_carries_ansibles_settings_and_ends_with_the_host():
    argv = ssh_command({"host": "10.0.0.5", "port": 2222, "remote_user": "root",
                        "private_key_file": "/k/id", "ssh_args": "-C -o ControlMaster=auto",
                        "ssh_common_args": "-o ProxyJump=bastion", "ssh_extra_args": "-4",
                        "timeout": 7, "ssh_executable": "ssh", "host_key_checking": False})
    assert argv == ["ssh", "-C", "-o", "ControlMaster=auto", "-o", "ProxyJump=bastion", "-4",
                    "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes",
                    "-o", "ControlPath=none", "-o", "ConnectTimeout=7", "-o", "Port=2222",
                    "-o", "User=root", "-o", 'IdentityFile="/k/id"', "--", "10.0.0.5"]


def test_host_key_checking_stays_on_unless_ansible_turns_it_off():
    argv = ssh_command({"host": "h", "host_key_checking": True})
    assert "StrictHostKeyChecking=no" not in argv and argv[-2:] == ["--", "h"]


@pytest.mark.parametrize("address", ["-oProxyCommand=touch /tmp/pwned", "a b", ""])
def test_an_address_ssh_would_read_as_an_option_is_refused(address):
    # Planted: an ansible_host from a NetBox record that ssh would take as an option.
    with pytest.raises(ValueError, match="not a host ssh can be given"):
        ssh_command({"host": address})
    # Refused, not handed to Ansible, whose ssh would read it the same way.
    assert target({}, {"host": address}) == {
        "error": f"its address {address!r} is not a host ssh can be given"}


@pytest.mark.parametrize(("connection", "options", "why"), [
    ("local", {}, "its connection is 'local', not ssh"),
    ("community.docker.docker", {}, "its connection is 'community.docker.docker', not ssh"),
    ("ssh", {"password": "s3cret"}, "its ssh connection sets password"),
    ("ssh", {"pkcs11_provider": "/lib/p11.so"}, "its ssh connection sets pkcs11_provider"),
])
def test_what_only_ansible_can_reach_goes_to_ansible_and_no_secret_is_kept(connection, options,
                                                                             why):
    assert ansible_reason(connection, options) == why
    entry = target({"ansible_connection": connection}, {"host": "h", **options})
    assert entry == {"ansible": why} and "s3cret" not in json.dumps(entry)


def test_a_plain_ssh_host_gets_its_sysfs_root_and_a_mirror_only_with_a_url():
    mirror = {"url": "http://10.0.0.1:5000", "check_image": "cuda:12", "check_gpus": True,
              "check_command": ["nvidia-smi", "-L"]}
    entry = target({"racklift_sysfs_root": "/lab/sys", "racklift_desired": {
        "registry_mirror": mirror}}, {"host": "h"})
    assert entry["ssh"][-1] == "h" and entry["sysfs_root"] == "/lab/sys"
    assert entry["mirror"] == mirror
    assert target({"racklift_desired": {"registry_mirror": {"url": None}}},
                  {"host": "h"})["mirror"] is None
    assert target({}, {"host": "h"})["sysfs_root"] == "/sys"
    assert container_check_argv(mirror) == [
        "python3", "-", "--mirror", "http://10.0.0.1:5000", "--image", "cuda:12", "--gpus",
        "--", "nvidia-smi", "-L"]


# --- what comes back ---------------------------------------------------------------------------

def test_the_collectors_document_comes_back_with_start_and_ok_events():
    got, events = one(f"import sys; sys.stdout.write({DOCUMENT!r})")
    assert isinstance(got, Collected) and json.loads(got.stdout) == json.loads(DOCUMENT)
    assert [(e.kind, e.task) for e in events] == [("start", COLLECT_TASK),
                                                          ("ok", COLLECT_TASK)]


def test_the_command_line_reaches_the_host_quoted():
    # The sysfs root is operator config; it still must arrive as one argument.
    got, _ = one("import sys, json; print(json.dumps(sys.argv[1:]))",
                 sysfs_root="/a b; touch /tmp/x")
    assert isinstance(got, Collected)
    assert json.loads(got.stdout) == ["--sysfs-root", "/a b; touch /tmp/x"]


def test_ssh_gets_racklifts_environment_without_its_secrets(monkeypatch):
    # Planted: racklift runs with the NetBox token and a BMC password in its environment; the
    # stand-in "host" prints the environment ssh (and so a ProxyCommand) was given.
    secrets = {"NETBOX_TOKEN": "nb-s3cret", "RACKLIFT_NETBOX_TOKEN": "nb-s3cret",
               ENV_PASSWORD: "bmc-s3cret"}
    assert all(SECRET_ENV.search(name) for name in secrets)
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SSH_AUTH_SOCK", "/run/agent.sock")  # what ssh needs still reaches it
    got, _ = one("import json, os, sys; sys.stdout.write(json.dumps(dict(os.environ)))")
    assert isinstance(got, Collected)
    env = json.loads(got.stdout)
    assert not set(secrets) & set(env) and "s3cret" not in got.stdout
    assert env["SSH_AUTH_SOCK"] == "/run/agent.sock"
    assert os.environ["PATH"] in env["PATH"]  # python3 may be a shim that prepends to it


def test_a_host_that_sends_without_end_is_cut_off_at_the_limit_and_refused():
    # Planted: a collector that writes forever. The client is killed one byte past the limit
    # (a timeout would say "no answer").
    got, events = one("import sys\nwhile True: sys.stdout.write('x' * 65536)", timeout=120)
    assert got == (f"failed at '{COLLECT_TASK}': its output went past racklift's limit of "
                   "1 MiB: refused, the connection cut")
    assert events[-1].kind == "failed"


def test_a_host_that_sends_past_the_limit_in_one_burst_is_cut_off_not_timed_out():
    # Planted: a collector with a pipe larger than racklift's reader keeps buffered (1 MiB)
    # writes 3 MiB at once and hangs. The reader, stopped with a full buffer, was paused and
    # never saw the end of the killed client: the host failed at the timeout as "no answer"
    # (seen under load in the unit tier before, every time with this burst).
    burst = ("import fcntl, os, time\n"
             "fcntl.fcntl(1, fcntl.F_SETPIPE_SZ, 2**20)\n"
             "os.write(1, b'x' * (3 * 2**20))\n"
             "time.sleep(600)\n")
    got, _ = one(burst, timeout=60)
    assert got == (f"failed at '{COLLECT_TASK}': its output went past racklift's limit of "
                   "1 MiB: refused, the connection cut")


def test_output_up_to_the_limit_is_taken():
    got, _ = one(f"import sys; sys.stdout.write('x' * {2**20})")
    assert isinstance(got, Collected) and len(got.stdout) == 2**20


def test_stderr_is_kept_short_and_the_rest_drained():
    got, _ = one("import sys\nsys.stderr.write('e' * 8 * 2**20)\nsys.stdout.write('{}')")
    assert isinstance(got, Collected) and got.stdout == "{}"


def test_a_host_that_never_answers_fails_alone_after_the_timeout():
    started = time.monotonic()
    got, _ = one("import time; time.sleep(600)", timeout=1)
    assert got == f"failed at '{COLLECT_TASK}': no answer within 1 s: killed"
    assert time.monotonic() - started < 60  # killed, not waited for


def test_a_failed_collector_and_an_unreachable_host_say_so_in_ansibles_words():
    failed, events = one("import sys; sys.stderr.write('no python'); sys.exit(3)")
    assert failed == f"failed at '{COLLECT_TASK}': no python"
    assert [e.kind for e in events] == ["start", "failed"]
    down = {"ssh": ["sh", "-c", "echo 'connect to host 10.9.9.9 port 22: No route' >&2; exit 255",
                    "ssh"], "sysfs_root": "/sys", "mirror": None}
    got = collect_direct({"gpu-02": down}, b"", None, limit=2**20)
    assert got == {"gpu-02": "unreachable: connect to host 10.9.9.9 port 22: No route"}


def test_the_container_check_runs_after_the_collector_where_the_host_has_a_mirror():
    mirror = {"url": "http://10.0.0.1:5000", "check_image": "cuda:12", "check_gpus": False,
              "check_command": ["true"]}
    got, events = one("import sys, json; print(json.dumps(sys.argv[1:]))", mirror=mirror,
                      container_check=True)
    assert isinstance(got, Collected) and got.container_check is not None
    checked = got.container_check
    assert checked["rc"] == 0 and json.loads(checked["stdout"]) == [
        "--mirror", "http://10.0.0.1:5000", "--image", "cuda:12", "--", "true"]
    assert [e.task for e in events] == [COLLECT_TASK, COLLECT_TASK, CONTAINER_CHECK_TASK,
                                        CONTAINER_CHECK_TASK]
    bundle = verify_gate.host_bundle("gpu-01", DOCUMENT, checked)
    assert not isinstance(bundle, str)


def test_many_hosts_at_once_each_get_their_own_outcome():
    ok = {"ssh": TRANSPORT_STAND_IN, "sysfs_root": "/sys", "mirror": None}
    targets = {f"gpu-{n:02}": ok for n in range(1, 21)}
    targets["gpu-99"] = {"ssh": ["sh", "-c", "exit 255", "ssh"], "sysfs_root": "/sys",
                         "mirror": None}
    got = collect_direct(targets, f"import sys; sys.stdout.write({DOCUMENT!r})".encode(), None,
                         limit=2**20, concurrency=4)
    assert sorted(got) == sorted(targets)
    assert all(isinstance(got[f"gpu-{n:02}"], Collected) for n in range(1, 21))
    assert got["gpu-99"] == "unreachable: ssh failed"


def test_one_hosts_unreadable_vars_fail_that_host_and_the_others_are_reached(tmp_path):
    # Ansible itself resolves the vars (python -m racklift.verify.reach, as gate.collect runs
    # it); planted: a host whose address templates an undefined variable.
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    good: {ansible_host: 10.0.0.1, ansible_user: root}\n"
                         "    bad: {ansible_host: '{{ no_such_var }}'}\n")
    done = subprocess.run(
        [sys.executable, "-m", "racklift.verify.reach"], input='{"hosts": ["good", "bad"]}',
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={**os.environ, "ANSIBLE_INVENTORY": str(inventory),
             "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")})
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["good"]["ssh"][-2:] == ["--", "10.0.0.1"] and "User=root" in got["good"]["ssh"]
    assert got["bad"] == {"error": "its connection settings could not be read: "
                                   "AnsibleUndefinedVariable: 'no_such_var' is undefined"}


def test_the_image_check_runs_its_script_on_each_host_and_says_which_did_not_answer(tmp_path):
    """The image stage's check (files/image_check.sh, `sh -s`) over the same clients: a host
    with a disk racklift deployed prints its boot id, nonce and marker; one without the marker
    still hands back what it printed (the stage says the marker is unreadable); one whose ssh
    fails says so."""
    disk = tmp_path / "disk"
    (disk / "etc/racklift").mkdir(parents=True)
    (disk / "etc/racklift/deploy-nonce").write_text("nonce-1\n")
    (disk / "etc/racklift/image.json").write_text('{"name": "img", "build_id": "b1"}\n')
    script = (REPO / "playbooks/files/image_check.sh").read_text().replace(
        "/etc/racklift/", f"{disk}/etc/racklift/").encode()
    bare = ["sh", "-c", f'cd {tmp_path} && rm -f {disk}/etc/racklift/image.json && '
            'exec sh -c "$1"', "transport-stand-in"]
    events: list[HostEvent] = []
    got = run_everywhere({"gpu-01": TRANSPORT_STAND_IN, "gpu-03": ["sh", "-c", "exit 255", "ssh"]},
                         ["sh", "-s"], script, limit=2**16, timeout=30, on_event=events.append,
                         task="check")
    boot_id, nonce, marker = got["gpu-01"].stdout.splitlines()
    assert len(boot_id) == 36 and nonce == "nonce-1"
    assert json.loads(marker) == {"name": "img", "build_id": "b1"}
    assert isinstance(got["gpu-03"], HostFailed) and got["gpu-03"].kind == "unreachable"
    assert sorted((e.host, e.kind) for e in events) == [
        ("gpu-01", "ok"), ("gpu-01", "start"), ("gpu-03", "start"), ("gpu-03", "unreachable")]
    gone = run_everywhere({"gpu-02": bare}, ["sh", "-s"], script, limit=2**16, timeout=30)
    assert gone["gpu-02"].rc != 0 and gone["gpu-02"].stdout.splitlines()[1] == "nonce-1"
    assert run_everywhere({}, ["sh", "-s"], script, limit=1, timeout=1) == {}


def test_the_roles_configure_would_apply_are_told_only_when_they_are_a_list_of_names():
    assert roles_of(["base_os", "ofed"]) == ["base_os", "ofed"]
    assert roles_of([]) == []  # nothing to configure
    assert roles_of(None) is None and roles_of("base_os") is None
    assert roles_of(["base_os", {"name": "x"}]) is None  # the playbook says what is wrong
