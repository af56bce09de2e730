"""The image stage's pure parts that name what an operator must check: the boot server's DHCP
journal as the wait script reads it, the boot server of a host's site, the stage's error
messages, the deployed host's authorized keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import load_script
from racklift.imaging import diskimage
from racklift.paths import REPO_ROOT
from racklift.pipeline import image_plan as imaging

JOURNAL = """\
1796056589.402421 boot-v91 dnsmasq-dhcp[870]: 1621730575 DHCPDISCOVER(rltest0) 02:52:4c:01:60:01
1796056589.433345 boot-v91 dnsmasq-dhcp[870]: 1621730575 DHCPREQUEST(rltest0) 10.91.0.11 02:52:4c:01:60:01
1796056596.419909 boot-v91 dnsmasq-dhcp[870]: 3151908285 DHCPDISCOVER(rltest0) 02:52:4c:ff:ff:07 ignored
1796056596.5 boot-v91 dnsmasq-dhcp[870]: 3151908285 vendor class: PXEClient:Arch:00007:UNDI:003016
"""  # noqa: E501 (real lines from the boot server's journal)


def _wait_script():
    return load_script(REPO_ROOT / "playbooks/files/image_wait.py", "image_wait")


def test_wait_script_reads_dnsmasq_requests_and_ignored_macs():
    found = [(m[1].lower(), bool(m[2])) for line in JOURNAL.splitlines()
             if (m := _wait_script().REQUEST.search(line))]
    assert found == [("02:52:4c:01:60:01", False), ("02:52:4c:01:60:01", False),
                     ("02:52:4c:ff:ff:07", True)]


def _host(name="gpu-001", site="lab1", **config):
    from racklift.netbox.expected import DeviceTypeRef, ExpectedHost

    return ExpectedHost(name, 1, "planned", site, "R1", None, "gpu-server", None,
                        DeviceTypeRef("m", "t", "t"), "S1", None, "10.9.0.11/24", "eno1",
                        "127.0.0.1/32", "bmc", "eno1", (), (), config={"os_image": "debian12",
                                                                        **config})


def test_boot_server_is_the_one_of_the_hosts_site():
    one = {"name": "boot-a", "site": {"slug": "lab1"}, "primary_ip4": {"address": "10.9.0.1/24"}}
    other = {"name": "boot-b", "site": {"slug": "lab2"}, "primary_ip4": None}
    server = imaging.boot_server_for(_host(), [one, other])
    assert (server.name, server.address, server.subnet, server.url) == \
        ("boot-a", "10.9.0.1", "10.9.0.0/24", "http://10.9.0.1")
    with pytest.raises(imaging.RackliftError, match=r"site lab2 needs exactly one .* \(found "
                                                    r"none"):
        imaging.boot_server_for(_host(site="lab2"), [one])
    with pytest.raises(imaging.RackliftError, match="found boot-a, boot-c"):
        imaging.boot_server_for(_host(), [one, {**one, "name": "boot-c"}])
    with pytest.raises(imaging.RackliftError, match="boot server boot-b has no primary IPv4"):
        imaging.boot_server_for(_host(site="lab2"), [other])
    # Planted: a boot server name that is Ansible pattern syntax and a path.
    for planted in ("boot-a,gpu-prod-042", "../../boot"):
        with pytest.raises(imaging.RackliftError, match=r"gpu-001: boot server .*: name: not a "
                                                        r"host name"):
            imaging.boot_server_for(_host(), [{**one, "name": planted}])


def test_errors_name_what_to_check():
    image = diskimage.DiskImage("debian12", "0123456789abcdef", Path("/x"), "0" * 64, 1, 1, 0,
                                True)
    target = imaging.Target(_host(), "02:52:4c:00:00:01", "boot-a", image, "/dev/vda", 180)
    assert "gpu-001: racklift.os_image is 'ubuntu'" in imaging.image_problem(
        _host(os_image="ubuntu"), image)
    assert imaging.image_problem(_host(), image) is None
    text = imaging.dhcp_error(target, 60, ["02:52:4c:00:00:01", "02:52:4c:ff:ff:07"])
    assert text.startswith("no DHCP request from 02:52:4c:00:00:01 (the provisioning MAC in "
                           "NetBox) reached boot server boot-a within 60 s")
    assert "does not know: 02:52:4c:ff:ff:07:" in text
    assert imaging.report_error(target, {"result": "failure", "phase": "disk",
                                         "reason": "no /dev/vda"}, 1) == \
        "the deploy ramdisk reported failure in phase disk: no /dev/vda"
    assert "no deploy report within 900 s" in imaging.report_error(target, None, 900)
    boot_id = "42b22d99-1681-4c8e-9a6f-0d1e2f3a4b5c"  # /proc/sys/kernel/random/boot_id's form
    ok = {"result": "success", "reason": f"wrote ...; ramdisk boot id {boot_id}"}
    assert imaging.report_error(target, ok, 1) is None
    assert imaging.ramdisk_boot_id(ok) == boot_id
    nonce = "5e" * 16
    marker = imaging.image_marker(image)
    found = imaging.parse_check(f'b1\n{nonce}\n{{"name": "debian12", "build_id": '
                                '"0123456789abcdef"}\n')
    assert imaging.check_error("gpu-001", marker, nonce, found, {"b0"}) is None
    assert "did not reboot" in imaging.check_error("gpu-001", marker, nonce, found, {"b1"})
    assert "booted another disk" in imaging.check_error(
        "gpu-001", marker, nonce, found._replace(marker={"name": "x"}), set())
    assert "gpu-001: the deploy nonce" in imaging.check_error("gpu-001", marker, "0f" * 16,
                                                              found, set())


def test_authorized_keys_come_from_the_vars_or_ansibles_key(tmp_path):
    key = tmp_path / "id"
    key.with_suffix(".pub").write_text("ssh-ed25519 AAAA controller\n")
    assert imaging.authorized_keys("h", {"ansible_ssh_private_key_file": str(key)}) == \
        ("ssh-ed25519 AAAA controller",)
    assert imaging.authorized_keys("h", {"racklift_authorized_keys": "ssh-rsa B x"}) == \
        ("ssh-rsa B x",)
    with pytest.raises(imaging.RackliftError, match="h: no SSH public key"):
        imaging.authorized_keys("h", {})
