"""The image stage's pure parts (src/racklift/pipeline/image.py): what a host needs to be imaged,
the device type's boot timeout, and DHCP timing on the boot server's clock alone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import emulated
from racklift.imaging import diskimage
from racklift.netbox.model import ExpectedHost
from racklift.pipeline import image as imaging

IMAGE = diskimage.DiskImage(diskimage.IMAGE_NAME, "0123456789abcdef", Path("/x"), "0" * 64, 1, 1,
                            0, True)
DISK = "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4"


def host(**context: Any) -> ExpectedHost:
    """The lab's GPU server with these keys in its context."""
    base = emulated.expected_host()
    return replace(base, config={**base.config, **context})


def target(boot_timeout: float = 180) -> imaging.Target:
    return imaging.Target(host(os_disk=DISK), "02:52:4c:00:00:01", "boot-a", IMAGE, DISK,
                          boot_timeout)


def test_a_real_server_without_a_recorded_disk_is_refused_naming_the_field() -> None:
    problems = imaging.imaging_problems(host())
    assert [(p.field, p.host) for p in problems] == [("config_context.racklift.os_disk",
                                                      emulated.PLAN.name)]
    assert "local context data as racklift.os_disk" in problems[0].message
    assert imaging.imaging_problems(host(os_disk=DISK)) == []
    assert imaging.imaging_problems(host(os_disk="/dev/vda")) == []  # a VM's one disk


def test_imaging_needs_a_bmc_and_a_context_that_parses() -> None:
    no_bmc = replace(host(os_disk=DISK), oob_ip=None)
    assert [p.field for p in imaging.imaging_problems(no_bmc)] == ["oob_ip"]
    # A context that does not parse: the host's own problems name each value, once.
    broken = host(os_disk="/dev/sda1")
    assert broken.desired is None
    assert imaging.imaging_problems(broken) == []
    assert imaging.image_problem(broken, IMAGE) is None


def test_the_os_image_comes_from_the_desired_state_with_its_one_default() -> None:
    # The lab's contexts name no image: racklift's default is the image it builds.
    assert imaging.image_problem(host(), IMAGE) is None
    assert imaging.image_problem(host(os_image="ubuntu"), IMAGE) == (
        f"{emulated.PLAN.name}: racklift.os_image is 'ubuntu' but racklift deploys images it "
        f"builds ('{diskimage.IMAGE_NAME}'): set os_image to '{diskimage.IMAGE_NAME}' in the "
        "host's config context")


def test_the_dhcp_wait_is_the_device_types_boot_timeout_unless_the_run_sets_one() -> None:
    hgx = target(boot_timeout=900)
    assert imaging.dhcp_timeout(hgx, imaging.Timeouts()) == 900
    assert imaging.dhcp_timeout(hgx, imaging.Timeouts(dhcp=60)) == 60
    # The reboot into the image goes through the POST again: the slowest type's, then the
    # image's own boot.
    assert imaging.ssh_timeout([target(), hgx], imaging.Timeouts(ssh=300)) == 1200
    assert imaging.Timeouts().ssh + 180 == 600  # a VM: as long as before


def test_boot_server_clock_from_the_facts_gathered_on_it() -> None:
    facts = {"ansible_facts": {"ansible_date_time": {"epoch": "1796150722",
                                                     "epoch_int": "1796150722"}}}
    clock = imaging.boot_clock(facts, received=5000.0)
    assert clock == imaging.BootClock(1796150722.0, 5000.0)
    assert clock.server_time(5012.5) == 1796150734.5
    assert imaging.boot_clock({"ansible_facts": {}}, 5000.0) is None


def test_dhcp_timing_uses_the_boot_servers_clock_only() -> None:
    """The boot server's clock an hour ahead of the controller's (or behind: its time never
    meets the controller's): a request 40 s after power-on counts, and is 40 s after it."""
    controller_wall = 1796150000.0  # what time.time() says here: not used at all
    server_now = controller_wall + 3600
    clock = imaging.BootClock(server_now, monotonic=200.0)  # the facts came at monotonic 200
    powered_on = 230.0  # the boot playbook ran on for 30 s, then Redfish powered it on
    since, deadline = imaging.dhcp_window(clock, powered_on, timeout=180)
    assert (since, deadline) == (server_now, server_now + 30 + 180)
    request = server_now + 30 + 40  # the journal's time of the DHCP request
    assert since <= request < deadline
    assert request - clock.server_time(powered_on) == 40


BOOT_ID = "3f2c9a4e-1b7d-4c8e-9a6f-0d1e2f3a4b5c"


@pytest.mark.parametrize(("reason", "found"), [
    (f"deployed debian12 to /dev/vda, ramdisk boot id {BOOT_ID}", BOOT_ID),
    # Planted by a hostile ramdisk report: no IndexError, no boot id taken from it.
    ("boot id ", None), ("ramdisk boot id ", None), ("ramdisk boot id ../../x", None),
    ("ramdisk boot id " + "f" * 10**5, None), (None, None)])
def test_the_ramdisk_boot_id_is_a_uuid_or_nothing(reason, found):
    assert imaging.ramdisk_boot_id({"reason": reason}) == found


@pytest.mark.parametrize("report", [[], "success", 7, {"result": ["success"]},
                                    {"result": "failure", "phase": {"x": 1}, "reason": "r" * 5000}])
def test_a_malformed_deploy_report_fails_its_host_with_a_bounded_message(report):
    why = imaging.report_error(target(), report, 600)
    assert why and len(why) < 500


@pytest.mark.parametrize("stdout", ["abc\n[1, 2]", "abc\nnull", "abc\n\"x\"", "abc\nnot json"])
def test_an_image_marker_that_is_not_an_object_is_unreadable(stdout):
    with pytest.raises(ValueError):
        imaging.parse_check(stdout)
