"""The lab's Ansible settings come from the lab's inventory source alone (racklift.lab.sources),
never from the production inventory: a device a production NetBox tags as a lab host (planted
here: all four lab tags on a seeded GPU server) gets none of them when it is provisioned (a
playbook through racklift.ansible.run_playbook, as the configure stage runs it; the direct
collector's reach, as the gate resolves it), and all of them from a lab run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from racklift.ansible import run_playbook
from racklift.lab import tags
from racklift.lab.sources import lab_inventory
from racklift.netbox.client import NetBox, NetBoxSettings
from racklift.verify.reach import reach

HOST = "gpu-0001"
SHOWN = "the settings the lab would give"
PLAY = f"""
- name: A host's settings
  hosts: all
  gather_facts: false
  tasks:
    - name: {SHOWN}
      ansible.builtin.debug:
        msg:
          roles: "{{{{ racklift_roles }}}}"
          ssh: "{{{{ ansible_ssh_common_args | default('') }}}}"
          ssh_extra: "{{{{ ansible_ssh_extra_args | default('') }}}}"
          key: "{{{{ ansible_ssh_private_key_file | default('') }}}}"
          user: "{{{{ ansible_user | default('') }}}}"
          sysfs: "{{{{ racklift_sysfs_root | default('') }}}}"
          bmc_user: "{{{{ racklift_bmc_username | default('') }}}}"
"""


def _settings(play: Path, settings: NetBoxSettings, env: dict[str, str] | None
              ) -> dict[str, Any]:
    result = run_playbook(str(play), [HOST], settings, env, capture=[SHOWN])
    assert result.rc == 0 and HOST in result.ok, result.failed
    return result.captured[HOST][SHOWN]["msg"]


@pytest.fixture
def lab_tagged(seeded_netbox: NetBox) -> NetBox:
    tags.ensure(seeded_netbox)
    device = seeded_netbox.get_all("dcim/devices", {"name": HOST}, fields=("id",))[0]
    seeded_netbox.update("dcim/devices", [{"id": device["id"], "tags": [
        {"slug": slug} for slug in (tags.LAB, tags.LAB_HOST, tags.VM, tags.PROV)]}])
    return seeded_netbox


def test_a_lab_tag_gives_nothing_without_the_lab_source(lab_tagged, settings, tmp_path,
                                                         monkeypatch):
    play = tmp_path / "settings.yml"
    play.write_text(PLAY)
    monkeypatch.delenv("ANSIBLE_INVENTORY", raising=False)  # production: ansible.cfg's source

    production = _settings(play, settings, None)
    assert production["roles"] == ["base_os", "nvidia_driver", "ofed", "container_runtime"]
    assert production == {**production, "key": "", "user": "", "sysfs": "", "bmc_user": ""}
    assert "StrictHostKeyChecking" not in production["ssh"] + production["ssh_extra"]
    assert "ProxyCommand" not in production["ssh"]
    reached = reach([HOST], settings)[HOST]
    assert "ssh" in reached, reached
    assert reached["sysfs_root"] == "/sys"
    assert reached["roles"] == production["roles"]  # what configure.yml would apply
    assert not any("StrictHostKeyChecking=no" in a or "id_ed25519" in a or "netns" in a
                   for a in reached["ssh"]), reached["ssh"]

    lab = _settings(play, settings, lab_inventory())
    assert lab["roles"][0] == "lab_hardware"
    assert "StrictHostKeyChecking=no" in lab["ssh_extra"] and "ProxyCommand" in lab["ssh"]
    assert lab["key"].endswith("/lab/ssh/id_ed25519") and lab["user"] == "root"
    assert lab["sysfs"] == "/var/lib/racklift-lab/sys" and lab["bmc_user"] == "racklift"
    monkeypatch.setenv("ANSIBLE_INVENTORY", lab_inventory()["ANSIBLE_INVENTORY"])
    reached = reach([HOST], settings)[HOST]
    assert reached["sysfs_root"] == "/var/lib/racklift-lab/sys"
    assert reached["roles"] == lab["roles"]
    assert any("id_ed25519" in a for a in reached["ssh"]), reached["ssh"]
