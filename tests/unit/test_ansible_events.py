from pathlib import Path

from racklift.ansible import HostEvent, child_environment, failure_text, host_event
from racklift.netbox.client import NetBoxSettings


def event(kind, host="h1", task="Install", **data):
    return {"event": kind, "event_data": {"host": host, "task": task, **data}}


def test_host_events():
    assert host_event(event("runner_on_start")) == HostEvent("h1", "start", "Install")
    assert host_event(event("runner_on_ok", res={"changed": True})).kind == "changed"
    assert host_event(event("runner_on_ok", res={"changed": False})).kind == "ok"
    failed = host_event(event("runner_on_failed", res={"msg": "no  such\npackage"}))
    assert failed == HostEvent("h1", "failed", "Install", "no such package")
    assert failure_text(failed) == "failed at 'Install': no such package"
    ignored = host_event(event("runner_on_failed", ignore_errors=True, res={"msg": "x"}))
    assert ignored.kind == "ok"
    down = host_event(event("runner_on_unreachable", res={"msg": "ssh: timed out"}))
    assert failure_text(down) == "unreachable: ssh: timed out"
    assert host_event(event("playbook_on_task_start")) is None
    assert host_event({"event": "runner_on_ok", "event_data": {}}) is None


def test_child_environment_carries_no_secrets():
    base = {"PATH": "/usr/bin", "HOME": "/root", "NETBOX_TOKEN": "s3cret",
            "RACKLIFT_BMC_PASSWORD": "hunter2", "AWS_SECRET_ACCESS_KEY": "x",
            "ANSIBLE_STDOUT_CALLBACK": "awx_display"}
    env = child_environment(NetBoxSettings("http://nb", "s3cret"), Path("/run/tok"),
                            ["a", "b"], {"MY_PASSWORD": "p"}, base=base)
    assert "s3cret" not in env.values() and "hunter2" not in env.values()
    assert not {"NETBOX_TOKEN", "RACKLIFT_BMC_PASSWORD", "AWS_SECRET_ACCESS_KEY",
                "MY_PASSWORD"} & env.keys()
    assert env["NETBOX_TOKEN_FILE"] == "/run/tok" and env["NETBOX_URL"] == "http://nb"
    assert env["RACKLIFT_NAMES"] == '["a", "b"]' and env["ANSIBLE_STDOUT_CALLBACK"] == "awx_display"
