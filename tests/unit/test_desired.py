"""The typed desired state (src/racklift/netbox/desired.py): racklift's defaults, what a config
context overrides, every value it refuses named by its field, and null as "not managed"."""

from __future__ import annotations

from typing import Any

import pytest

from racklift.imaging import diskimage
from racklift.lab import hosts, seed
from racklift.netbox.desired import (
    FIELD_PREFIX,
    DesiredState,
    Hardware,
    Invalid,
    NvidiaDriver,
    has_software,
    parse,
    read,
    role_vars,
    setting_of,
)


def context(path: str, value: Any) -> dict[str, Any]:
    """{"a": {"b": value}} from "a.b"."""
    *sections, key = path.split(".")
    data: dict[str, Any] = {key: value}
    for section in reversed(sections):
        data = {section: data}
    return data


def attribute(state: DesiredState, path: str) -> Any:
    value: Any = state
    for name in path.split("."):
        value = getattr(value, name)
    return value


def test_an_empty_context_is_racklifts_defaults() -> None:
    for empty in ({}, None):
        state = parse(empty)
        assert state == DesiredState()
    state = DesiredState()
    assert (state.provisioning_interface, state.os_image, state.os_disk) == (
        "eno1", diskimage.IMAGE_NAME, None)
    assert state.nvidia_driver == NvidiaDriver("550", None, "open", None)
    assert (state.ofed.source, state.ofed.version, state.ofed.repo_url) == ("inbox", None, None)
    assert state.container_toolkit.version == "1.17.3"
    assert state.registry_mirror.url is None
    assert state.hardware == Hardware(nvswitch=False, boot_timeout=180)
    assert not state.fabric_manager


@pytest.mark.parametrize(("path", "value"), [
    ("provisioning_interface", "enp65s0f0np0"),
    ("os_image", "debian12-site"),
    ("os_disk", "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4"),
    ("os_disk", "/dev/disk/by-id/nvme-eui.0025388b91b0c3e1"),
    ("os_disk", "/dev/vda"),
    ("nvidia_driver.branch", "570"),
    ("nvidia_driver.version", "550.127.08"),
    ("nvidia_driver.kernel_modules", "proprietary"),
    ("nvidia_driver.fabricmanager", False),
    ("ofed.source", "mlnx_ofed"),
    ("ofed.version", "24.10-1.1.4.0"),
    ("ofed.version", "2.9.1-*"),
    ("ofed.repo_key_url", "https://linux.mellanox.com/public/repo/doca/GPG-KEY-Mellanox.pub"),
    ("ofed.repo_key_fingerprint", "0123456789ABCDEF0123456789ABCDEF01234567"),
    ("container_toolkit.version", "1.17.4"),
    ("registry_mirror.url", "https://registry-mirror.lab.racklift.test:5000"),
    ("registry_mirror.url", "http://10.16.0.2:5000"),
    ("hardware.nvswitch", True),
    ("hardware.boot_timeout", 900),
    ("hardware.lldp_switches", False),
    ("acceptance.dcgm_level", 3),
    ("acceptance.nccl_busbw", 350),
    ("acceptance.rdma_gbps", 370.5),
])
def test_each_key_overrides_its_default_alone(path: str, value: Any) -> None:
    state = parse(context(path, value))
    assert isinstance(state, DesiredState)
    assert attribute(state, path) == value
    # Nothing else moved.
    default = DesiredState()
    others = {f: attribute(default, f) for f in ("provisioning_interface", "os_image",
                                                 "nvidia_driver.branch", "ofed.source",
                                                 "hardware.boot_timeout") if f != path}
    assert {f: attribute(state, f) for f in others} == others


@pytest.mark.parametrize(("path", "value", "hint"), [
    ("provisioning_interface", "eno 1", "interface"),
    ("provisioning_interface", 1, "interface"),
    ("os_image", "Debian 12", f'"{diskimage.IMAGE_NAME}"'),
    ("os_disk", "/dev/sda1", "whole disk"),
    ("os_disk", "/dev/disk/by-path/pci-0000:3b:00.0-scsi-0:0:0:0", "wwn-0x"),
    ("os_disk", "sda", "/dev/disk/by-id/"),
    ("nvidia_driver.branch", 550, "digits only"),
    ("nvidia_driver.branch", "r550", "digits only"),
    ("nvidia_driver.branch", None, "digits only"),  # null is no branch
    ("nvidia_driver.version", "550.127", "exact driver version"),
    ("nvidia_driver.version", " 550.127.08", "exact driver version"),
    ("nvidia_driver.version", "550.127.08\n", "exact driver version"),
    ("nvidia_driver.kernel_modules", "closed", "open or proprietary"),
    ("nvidia_driver.kernel_modules", "open ", "open or proprietary"),
    ("nvidia_driver.fabricmanager", "yes", "true or false"),
    ("ofed.source", "mlnx", "mlnx_ofed"),
    ("ofed.source", "DOCA", "doca"),
    ("ofed.version", "latest", "apt version"),
    ("ofed.repo_url", "ftp://mirror/doca", "https URL"),
    ("ofed.repo_url", "http://mirror/doca", "https URL"),
    ("ofed.repo_url", "https://mirror/doca dists", "https URL"),
    # Planted: a second, trusted repository in the sources line, or options for it.
    ("ofed.repo_url", "https://mirror/doca /\ndeb [trusted=yes] http://evil/ /", "https URL"),
    ("ofed.repo_url", "https://mirror/doca\r\n", "https URL"),
    ("ofed.repo_url", "https://[trusted=yes]mirror/", "https URL"),
    # Planted: a template an older Ansible would have run on the controller.
    ("ofed.repo_url", "https://mirror/{{7*7}}", "https URL"),
    ("ofed.repo_key_url", "https://mirror/{%if(1)%}x{%endif%}", "https URL"),
    ("ofed.repo_key_url", "mirror/key.pub", "https URL"),
    ("ofed.repo_key_url", "http://mirror/key.pub", "https URL"),
    ("ofed.repo_key_fingerprint", "0123456789abcdef0123456789abcdef01234567", "upper-case hex"),
    ("ofed.repo_key_fingerprint", "0123 4567 89AB CDEF 0123 4567 89AB CDEF 0123 4567",
     "upper-case hex"),
    ("ofed.repo_key_fingerprint", "0123456789ABCDEF0123456789ABCDEF0123456", "upper-case hex"),
    ("ofed.version", "24.10\nPin: release *", "apt version"),
    ("container_toolkit.version", "1.17.3-1", "toolkit version"),
    ("container_toolkit.version", 1.17, "toolkit version"),
    ("registry_mirror.url", "https://mirror.example:5000/v2", "no path"),
    ("registry_mirror.url", "mirror.example:5000", "no path"),
    ("registry_mirror.url", "https://mirror example", "no path"),
    ("hardware.nvswitch", "true", "true for HGX"),
    ("hardware.nvswitch", 1, "true for HGX"),
    ("hardware.boot_timeout", "180", "whole seconds"),
    ("hardware.boot_timeout", 180.5, "whole seconds"),
    ("hardware.boot_timeout", True, "whole seconds"),
    ("hardware.boot_timeout", 0, "whole seconds"),
    ("hardware.boot_timeout", 86400, "whole seconds"),
    ("hardware.lldp_switches", "no", "send LLDP"),
    ("cabling.switch_roles", "leaf-switch", "device role slugs"),  # a list, not one slug
    ("cabling.switch_roles", ["leaf switch"], "device role slugs"),
    ("cabling.switch_roles", ["leaf-switch", 1], "device role slugs"),
    ("acceptance.dcgm_level", 5, "run level"),
    ("acceptance.dcgm_level", "3", "run level"),
    ("acceptance.nccl_busbw", 0, "bus bandwidth in GB/s"),
    ("acceptance.rdma_gbps", "370", "Gb/s"),
])
def test_each_invalid_value_is_named_by_its_field(path: str, value: Any, hint: str) -> None:
    problems = parse(context(path, value))
    assert isinstance(problems, list)
    assert [p.field for p in problems] == [f"config_context.racklift.{path}"]
    assert problems[0].message.startswith(f"is {value!r}: ")
    assert hint in problems[0].message


def test_every_problem_is_reported_not_the_first_and_the_rest_stays() -> None:
    bad = {"nvidia_driver": "550", "ofed": {"source": "mlnx"}, "hardware": {"nvswitch": True},
           "registry_mirror": {"url": "https://m:5000"}}
    state, problems = read(bad)
    assert [p.field for p in problems] == ["config_context.racklift.nvidia_driver",
                                           "config_context.racklift.ofed.source"]
    assert "make it a mapping" in problems[0].message
    # What was right still holds; what was wrong stays at its default.
    assert state.hardware.nvswitch and state.registry_mirror.url == "https://m:5000"
    assert state.nvidia_driver == NvidiaDriver() and state.ofed.source == "inbox"


def test_a_driver_version_outside_its_branch_is_refused() -> None:
    assert parse({"nvidia_driver": {"branch": "570", "version": "550.127.08"}}) == [Invalid(
        "config_context.racklift.nvidia_driver.version",
        "550.127.08 is not a version of branch 570: set the branch and the version together")]


def test_null_is_not_managed_where_it_means_that() -> None:
    state = parse({"nvidia_driver": {"version": None}, "ofed": {"version": None},
                   "container_toolkit": {"version": None}, "registry_mirror": {"url": None},
                   "os_disk": None, "nvidia_driver_typo": 1})
    assert isinstance(state, DesiredState)
    assert state.nvidia_driver.version is None  # the newest of the branch, not checked
    assert state.container_toolkit.version is None  # absent: the default; null: not managed
    assert (state.ofed.version, state.registry_mirror.url, state.os_disk) == (None, None, None)


def test_fabric_manager_follows_the_nvswitches_unless_the_context_says() -> None:
    def fabric(nvswitch: bool, **driver: Any) -> bool:
        state = parse({"hardware": {"nvswitch": nvswitch}, "nvidia_driver": driver})
        assert isinstance(state, DesiredState)
        return state.fabric_manager

    assert fabric(True) and fabric(True, fabricmanager=None)
    assert not fabric(True, fabricmanager=False) and not fabric(False)
    assert fabric(False, fabricmanager=True)  # the nvidia_driver role refuses this one


def test_the_labs_contexts_parse_to_one_os_image() -> None:
    type_context = {"hardware": seed.DEVICE_TYPE["hardware"]}
    servers = parse({**seed.DESIRED_SOFTWARE, **type_context})
    lab = parse({**hosts.LAB_SOFTWARE, **type_context})
    assert isinstance(servers, DesiredState) and isinstance(lab, DesiredState)
    # What racklift builds is what every context asks for: one image name.
    assert servers.os_image == lab.os_image == diskimage.IMAGE_NAME
    assert servers.nvidia_driver.version == lab.nvidia_driver.version == "550.127.08"
    assert servers.hardware.nvswitch and servers.fabric_manager
    # Lab hosts: no OFED version, container toolkit or registry mirror managed.
    assert (lab.ofed.version, lab.container_toolkit.version, lab.registry_mirror.url) == (
        None, None, None)


def test_the_roles_part_is_plain_data_with_fabric_manager_resolved() -> None:
    state = parse({"hardware": {"nvswitch": True}, "registry_mirror": {"url": "https://m:5"}})
    assert isinstance(state, DesiredState)
    assert role_vars(state) == {
        "nvidia_driver": {"branch": "550", "version": None, "kernel_modules": "open",
                          "fabricmanager": True},
        "ofed": {"source": "inbox", "version": None, "repo_url": None, "repo_key_url": None,
                 "repo_key_fingerprint": None},
        "container_toolkit": {"version": "1.17.3"},
        "registry_mirror": {"url": "https://m:5",
                            "check_image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                            "check_command": ["nvidia-smi", "-L"], "check_gpus": True},
        "hardware": {"nvswitch": True},
    }


def test_what_the_device_type_or_device_records_is_no_desired_software() -> None:
    assert not has_software({})
    assert not has_software({"hardware": {"nvswitch": True}, "os_disk": "/dev/vda"})
    assert has_software({"os_disk": "/dev/vda", "os_image": "debian12"})
    assert not has_software("racklift")


def test_one_top_level_value_before_the_state() -> None:
    assert setting_of({"provisioning_interface": "eno2"}, "provisioning_interface") == "eno2"
    assert setting_of({"provisioning_interface": "e 2"}, "provisioning_interface") == "eno1"
    assert setting_of(None, "provisioning_interface") == "eno1"


def test_the_gpu_container_check_is_data_checked_before_use() -> None:
    state = parse({"registry_mirror": {"url": "https://10.90.0.1:5000",
                                       "check_image": "library/rackhello:1.0",
                                       "check_command": ["/bin/busybox", "true"],
                                       "check_gpus": False}})
    assert isinstance(state, DesiredState)
    assert state.registry_mirror.check_command == ("/bin/busybox", "true")  # immutable
    # Docker mirrors only Docker Hub; a command is argv, never a shell line.
    problems = parse({"registry_mirror": {"check_image": "nvcr.io/nvidia/cuda:12.4.1",
                                          "check_command": "nvidia-smi -L; rm -rf /"}})
    assert [p.field for p in problems] == [
        "config_context.racklift.registry_mirror.check_image",
        "config_context.racklift.registry_mirror.check_command"]


@pytest.mark.parametrize("word", ["{{ lookup('pipe', 'touch /tmp/pwned') }}",
                                  "{% if true %}x{% endif %}", "{# comment #}"])
def test_a_template_in_the_container_check_command_is_refused(word: str) -> None:
    # Planted: the command becomes the host's argv; a template in it is never what was meant.
    problems = parse({"registry_mirror": {"check_command": ["nvidia-smi", word]}})
    assert [p.field for p in problems] == ["config_context.racklift.registry_mirror.check_command"]


DOCA = {"repo_url": "https://linux.mellanox.com/public/repo/doca/2.9.1/debian12.5/x86_64/",
        "repo_key_url": "https://linux.mellanox.com/public/repo/doca/GPG-KEY-Mellanox.pub",
        "repo_key_fingerprint": "0123456789ABCDEF0123456789ABCDEF01234567"}


def test_a_repository_from_netbox_comes_with_its_key_pinned() -> None:
    state = parse({"ofed": {"source": "doca", **DOCA}})
    assert isinstance(state, DesiredState)
    assert state.ofed.repo_key_fingerprint == DOCA["repo_key_fingerprint"]
    # Planted: an editor points OFED at a repository of theirs, with its key but no pin.
    for missing in ("repo_key_fingerprint", "repo_key_url"):
        unpinned = {k: v for k, v in DOCA.items() if k != missing}
        problems = parse({"ofed": {"source": "doca", **unpinned}})
        assert [p.field for p in problems] == [f"{FIELD_PREFIX}.ofed.repo_key_fingerprint"]
        assert "signing key pinned" in problems[0].message


def test_switch_roles_default_to_the_lab_switches_role_and_take_a_list_of_slugs() -> None:
    """`verify --record-cables` takes far ends only among devices of these roles: the default
    is the role the lab seeds its switches with; a context names its own."""
    assert DesiredState().cabling.switch_roles == (seed.SWITCH_ROLE,)
    state = parse(context("cabling.switch_roles", ["leaf-switch", "ib_leaf"]))
    assert isinstance(state, DesiredState)
    assert state.cabling.switch_roles == ("leaf-switch", "ib_leaf")
    none = parse(context("cabling.switch_roles", []))
    assert isinstance(none, DesiredState) and none.cabling.switch_roles == ()
