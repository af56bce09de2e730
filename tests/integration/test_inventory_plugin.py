"""The racklift_netbox inventory plugin, through the real ansible-inventory and ansible."""

import json
import os
import subprocess

import pytest

from helpers import BIN, REPO
from racklift.ansible import run_playbook
from racklift.ansible_inventory import without_unsafe
from racklift.errors import RackliftError
from racklift.netbox.client import NetBoxSettings


def run(*args, **env_overrides):
    env = {**os.environ, "ANSIBLE_INVENTORY_CACHE": "false",
           "PATH": f"{BIN}:{os.environ['PATH']}", **env_overrides}
    return subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=180)


def inventory(instance, **env):
    return run("ansible-inventory", "--list", NETBOX_URL=instance.url,
               NETBOX_TOKEN=instance.token, **env)


def listed(instance, **env):
    result = inventory(instance, **env)
    assert result.returncode == 0, result.stderr
    return without_unsafe(json.loads(result.stdout))


def test_groups_and_host_vars(instance, seeded_netbox, demo_plan):
    inv = listed(instance)
    names = [h.name for h in demo_plan.hosts]
    for group in ("site_lab1", "rack_r01", "role_gpu_server", "status_planned"):
        assert sorted(inv[group]["hosts"]) == names, group
    assert "racklift_incomplete" not in inv
    hostvars = inv["_meta"]["hostvars"]
    first = demo_plan.hosts[0]
    hv = hostvars[first.name]
    assert hv["ansible_host"] == first.primary_ip.split("/")[0]
    assert hv["netbox_status"] == "planned"
    assert hv["racklift_expected"]["serial"] == first.serial
    assert hv["racklift_expected"]["provisioning_mac"] == first.macs["eno1"]
    assert hv["racklift_expected"]["macs"] == first.macs
    assert hv["racklift_expected"]["ips"] == {"eno1": [first.primary_ip], "bmc": [first.oob_ip]}
    assert hv["racklift_expected"]["tags"] == ["racklift-lab"]
    assert hv["racklift_desired"]["nvidia_driver"]["version"] == "550.127.08"
    assert hv["racklift_problems"] == []
    # The desired state arrives parsed, defaults applied (racklift.netbox.desired): neither the
    # raw context nor a second set of defaults in group_vars.
    assert "racklift_config" not in hv and "racklift_software_defaults" not in hv


def test_filters_by_host_and_status(instance, seeded_netbox):
    only_two = listed(instance, RACKLIFT_NAMES='["gpu-0002", "gpu-0005"]')
    assert sorted(only_two["_meta"]["hostvars"]) == ["gpu-0002", "gpu-0005"]
    # A small selection reads its own hosts' components (REST): the same host vars.
    assert only_two["_meta"]["hostvars"]["gpu-0002"] == listed(instance)["_meta"]["hostvars"][
        "gpu-0002"]
    none_active = listed(instance, RACKLIFT_STATUSES="active")
    assert none_active["_meta"]["hostvars"] == {}


def test_a_device_name_cannot_select_another_host(instance, seeded_netbox):
    """Planted: a planned device named so that a comma-joined selection would pull in an
    active host. The name selects only itself, and racklift refuses the host for its name."""
    nb = seeded_netbox
    bad = "new-01,gpu-0005"
    victim, planted = (nb.get_all("dcim/devices", {"name": n})[0] for n in ("gpu-0005", "gpu-0003"))
    nb.update("dcim/devices", [{"id": victim["id"], "status": "active"},
                               {"id": planted["id"], "name": bad}])
    result = inventory(instance, RACKLIFT_NAMES=json.dumps([bad]))
    assert result.returncode == 0, result.stderr
    # Never gpu-0005; and no Ansible host of that name either: refused, with the warning
    # naming the device and its problem.
    assert without_unsafe(json.loads(result.stdout))["_meta"]["hostvars"] == {}
    warning = " ".join(result.stderr.split())
    assert f"device {planted['id']} ('{bad}' at site lab1) is no host" in warning
    assert f"{bad}: name: " in warning and "not a host name" in warning
    with pytest.raises(RackliftError, match="refusing to select 'new-01,gpu-0005'"):
        run_playbook("collect.yml", [bad], NetBoxSettings(instance.url, instance.token))
    # A list that is not JSON is refused, not split.
    refused = inventory(instance, RACKLIFT_NAMES="gpu-0002,gpu-0005")
    assert refused.returncode != 0 and "not a JSON list" in refused.stderr


def test_incomplete_hosts_are_listed_with_their_problems(instance, seeded_netbox):
    device = seeded_netbox.get_all("dcim/devices", {"name": "gpu-0004"})[0]
    seeded_netbox.update("dcim/devices", [{"id": device["id"], "serial": ""}])
    inv = listed(instance)
    assert inv["racklift_incomplete"]["hosts"] == ["gpu-0004"]
    assert inv["_meta"]["hostvars"]["gpu-0004"]["racklift_problems"] == [
        "gpu-0004: serial: no serial number: set the chassis serial on the device in NetBox"]


def test_failures_fail_the_inventory_not_empty_it(instance, seeded_netbox):
    bad_token = run("ansible-inventory", "--list", NETBOX_URL=instance.url,
                    NETBOX_TOKEN="1" * 40)
    assert bad_token.returncode != 0
    assert "refused the token" in bad_token.stderr
    assert "1" * 40 not in bad_token.stderr + bad_token.stdout

    unreachable = run("ansible-inventory", "--list", NETBOX_URL="http://127.0.0.1:9",
                      NETBOX_TOKEN=instance.token)
    assert unreachable.returncode != 0
    assert "cannot reach NetBox at http://127.0.0.1:9" in unreachable.stderr

    bad_filter = inventory(instance, RACKLIFT_SITES="atlantis")
    assert bad_filter.returncode != 0
    assert "site" in bad_filter.stderr and "atlantis" in bad_filter.stderr

    bad_rack = inventory(instance, RACKLIFT_RACKS="R99")
    assert bad_rack.returncode != 0
    assert "no rack named R99" in bad_rack.stderr


def test_the_kept_inventory_sees_each_change_and_flush_reads_in_full(instance, seeded_netbox,
                                                                    tmp_path):
    env = {"ANSIBLE_INVENTORY_CACHE": "true",
           "ANSIBLE_INVENTORY_CACHE_CONNECTION": str(tmp_path)}
    first = listed(instance, **env)
    assert list(tmp_path.iterdir()), "the inventory was not kept"
    device = seeded_netbox.get_all("dcim/devices", {"name": "gpu-0001"})[0]
    seeded_netbox.update("dcim/devices", [{"id": device["id"], "serial": "CHANGED"}])
    warm = run("ansible-inventory", "--list", "-v", NETBOX_URL=instance.url,
               NETBOX_TOKEN=instance.token, **env)
    assert "1 changes since the last read: 1 devices read again" in warm.stdout
    hostvars = without_unsafe(json.loads(warm.stdout[warm.stdout.index("{"):]))[
        "_meta"]["hostvars"]
    assert hostvars["gpu-0001"]["racklift_expected"]["serial"] == "CHANGED"
    first["_meta"]["hostvars"]["gpu-0001"]["racklift_expected"]["serial"] = "CHANGED"
    assert without_unsafe(json.loads(warm.stdout[warm.stdout.index("{"):])) == first
    fresh = run("ansible-inventory", "--list", "-v", "--flush-cache", NETBOX_URL=instance.url,
                NETBOX_TOKEN=instance.token, **env)
    assert "racklift_netbox: full read (nothing kept from an earlier read)" in fresh.stdout
    assert without_unsafe(json.loads(fresh.stdout[fresh.stdout.index("{"):])) == first


def test_netbox_text_is_never_templated(instance, seeded_netbox):
    """A NetBox field is data, not a template: templates planted in a serial and in an
    interface's name (a key of the nested racklift_expected.macs) reach the play as their
    literal text, and nothing they ask for runs on the controller."""
    ran = REPO / "ran-here"  # Ansible runs in the checkout; a serial holds 50 characters
    ran.unlink(missing_ok=True)
    device = seeded_netbox.get_all("dcim/devices", {"name": "gpu-0001"})[0]
    serial = f"{{{{ lookup('pipe', 'touch {ran.name}') }}}}"
    seeded_netbox.update("dcim/devices", [{"id": device["id"], "serial": serial}])
    with_mac = next(i for i in seeded_netbox.get_all("dcim/interfaces", {"device_id": device["id"]})
                    if i.get("mac_address") or i.get("primary_mac_address"))
    interface = "{% if lookup('pipe', 'id') %}x{% endif %}{{ 6 * 7 }}"
    seeded_netbox.update("dcim/interfaces", [{"id": with_mac["id"], "name": interface}])
    result = run("ansible", "gpu-0001", "-m", "ansible.builtin.debug",
                 "-a", "msg={{ [racklift_expected.serial, racklift_expected.macs] | to_json }}",
                 NETBOX_URL=instance.url, NETBOX_TOKEN=instance.token,
                 ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    assert result.returncode == 0, result.stdout + result.stderr
    shown = json.loads(json.loads(result.stdout)["plays"][0]["tasks"][0]["hosts"]["gpu-0001"]
                       ["msg"])
    assert shown[0] == serial
    assert interface in shown[1]
    assert not ran.exists()


def test_ansible_reaches_hosts_by_group(instance, seeded_netbox):
    result = run("ansible", "rack_r01", "--list-hosts",
                 NETBOX_URL=instance.url, NETBOX_TOKEN=instance.token)
    assert result.returncode == 0, result.stderr
    assert "hosts (8):" in result.stdout


def test_role_variables_come_from_the_config_context(instance, seeded_netbox, demo_plan):
    """What the node roles will see: the config context's driver, defaults where it is silent."""
    host = demo_plan.hosts[0].name
    result = run("ansible", host, "-m", "ansible.builtin.debug",
                 "-a", "msg={{ [nvidia_driver_branch, nvidia_driver_version, "
                       "nvidia_driver_kernel_modules, nvidia_driver_fabricmanager | bool, "
                       "base_os_hostname, container_runtime_toolkit_version, "
                       "container_runtime_registry_mirrors, ofed_source, ofed_version, "
                       "ofed_repo_url] | to_json }}",
                 NETBOX_URL=instance.url, NETBOX_TOKEN=instance.token,
                 ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    assert result.returncode == 0, result.stdout + result.stderr
    shown = json.loads(result.stdout)["plays"][0]["tasks"][0]["hosts"][host]["msg"]
    # The seed's device type is an HGX board: its own config context says NVSwitch.
    assert json.loads(shown) == [
        "550", "550.127.08", "open", True, host, "1.17.3-1",
        {"docker.io": ["https://registry-mirror.lab.racklift.test:5000"]},
        # The seed's context asks for DOCA without its repository: the ofed role will refuse
        # it (validate) and say to set ofed_repo_url.
        "doca", "2.9.1-1", ""]
