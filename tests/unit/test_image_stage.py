"""The image stage (racklift.pipeline.image_stage, with image_run, image_power and
boot_server_waits): its pure parts (what a host needs to be imaged, the device type's boot
timeout, DHCP timing on the boot server's clock alone, what the deployed host shows over SSH),
and how the stage ends, with playbooks and BMCs stood in for."""

from __future__ import annotations

import base64
import json
import subprocess
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import emulated
from racklift.ansible import HostEvent, PlaybookResult
from racklift.bmc import apply as bmc_apply
from racklift.bmc import firmware
from racklift.bmc.redfish import BmcError
from racklift.imaging import diskimage, host_keys, ramdisk
from racklift.lifecycle.state import IMAGE_FIELD
from racklift.netbox.expected import ExpectedHost
from racklift.pipeline import image_plan, image_power, image_run, ssh_wait
from racklift.pipeline import image_stage as imaging
from racklift.pipeline.boot_server_hosts import BootServerHosts
from racklift.pipeline.progress import Progress
from racklift.verify import direct_collect
from redfish_trees import DELL, Tree

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
        f"builds ('{diskimage.IMAGE_NAME}') or installs with an OS's installer "
        "('installer-debian-12', 'installer-ubuntu-22.04', 'installer-ubuntu-24.04'): set "
        "os_image to one of them in the host's config context")
    # An OS installer racklift runs is an image too (its marker's name).
    assert imaging.image_problem(host(os_image="installer-debian-12"), IMAGE) is None


def test_the_dhcp_wait_is_the_device_types_boot_timeout_unless_the_run_sets_one() -> None:
    hgx = target(boot_timeout=900)
    assert imaging.dhcp_timeout(hgx, image_plan.Timeouts()) == 900
    assert imaging.dhcp_timeout(hgx, image_plan.Timeouts(dhcp=60)) == 60
    # The reboot into the image goes through the POST again: the slowest type's, then the
    # image's own boot.
    assert imaging.ssh_timeout([target(), hgx], image_plan.Timeouts(ssh=300)) == 1200
    assert image_plan.Timeouts().ssh + 180 == 600  # a VM: as long as before


def test_boot_server_clock_from_the_facts_gathered_on_it() -> None:
    facts = {"ansible_facts": {"ansible_date_time": {"epoch": "1796150722",
                                                     "epoch_int": "1796150722"}}}
    clock = imaging.boot_clock(facts, received=5000.0)
    assert clock == image_plan.BootClock(1796150722.0, 5000.0)
    assert clock.server_time(5012.5) == 1796150734.5
    assert imaging.boot_clock({"ansible_facts": {}}, 5000.0) is None


def test_dhcp_timing_uses_the_boot_servers_clock_only() -> None:
    """The boot server's clock an hour ahead of the controller's (or behind: its time never
    meets the controller's): a request 40 s after power-on counts, and is 40 s after it."""
    controller_wall = 1796150000.0  # what time.time() says here: not used at all
    server_now = controller_wall + 3600
    clock = image_plan.BootClock(server_now, monotonic=200.0)  # the facts came at monotonic 200
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


@pytest.mark.parametrize("stdout", ["abc\nn\n[1, 2]", "abc\nn\nnull", "abc\nn\n\"x\"",
                                    "abc\nn\nnot json", "abc\n{}"])
def test_an_image_marker_that_is_not_an_object_is_unreadable(stdout):
    with pytest.raises(ValueError):
        imaging.parse_check(stdout)


NONCE = "5e" * 16
MARKER = f'{{"name": "{IMAGE.name}", "build_id": "{IMAGE.build_id}"}}\n'
MARKER_OF_IMAGE = imaging.image_marker(IMAGE)


def test_the_check_reads_boot_id_nonce_and_marker_in_their_order() -> None:
    assert imaging.parse_check(f"{BOOT_ID}\n{NONCE}\n{MARKER}") == image_plan.Found(
        BOOT_ID, NONCE, {"name": IMAGE.name, "build_id": IMAGE.build_id})
    # No nonce file on the disk: image_check.sh leaves its line empty.
    assert imaging.parse_check(f"{BOOT_ID}\n\n{MARKER}").nonce == ""


def test_this_deploys_disk_passes_the_check() -> None:
    found = imaging.parse_check(f"{BOOT_ID}\n{NONCE}\n{MARKER}")
    assert imaging.check_error("gpu-01", MARKER_OF_IMAGE, NONCE, found, {"old-boot-id"}) is None


@pytest.mark.parametrize(("nonce_line", "state"), [
    ("", "missing"),  # a disk imaged before deploys had nonces, or never by racklift
    ("0f" * 16, "another deploy's"),  # the disk of an earlier deploy of the same build
    ("x" * 10**5 + "\x1b]0;owned\x07", "another deploy's")])  # planted: any text, any length
def test_an_older_disk_of_the_same_image_is_refused_naming_the_host(nonce_line, state) -> None:
    """Planted: the host reboots (a new boot id) into a disk with the same image marker, which
    this deploy's ramdisk did not write: all the check had before."""
    found = imaging.parse_check(f"{BOOT_ID}\n{nonce_line}\n{MARKER}")
    why = imaging.check_error("gpu-01", MARKER_OF_IMAGE, NONCE, found, {"old-boot-id"})
    assert why == (f"gpu-01: the deploy nonce in /etc/racklift/deploy-nonce is {state}: the "
                   "disk that booted is not the one this deploy wrote (an older disk with the "
                   "same image, or another machine at its address): check its boot order and "
                   "its disks")


# ---------------------------------------------------------------------------------------------
# How the stage ends: Ansible and the BMCs stood in for, everything else the stage's own.

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBk2Ay1d3BTrlW9LCzg8p8bEzLxvRgGcXa8W0nUHbJz0 ops@ctl"
SERVERS = {name: imaging.BootServer(name, address, "10.90.0.0/24")
           for name, address in (("boot-a", "10.90.0.1"), ("boot-b", "10.90.0.2"))}


def _targets() -> list[imaging.Target]:
    """gpu-01 and gpu-02 boot from boot-a, gpu-03 from boot-b."""
    return [replace(target(), host=replace(target().host, name=name, primary_ip=f"10.90.0.{n}/24"),
                    mac=f"02:52:4c:00:00:0{n}", boot_server=server,
                    hostvars={"racklift_authorized_keys": KEY})
            for n, (name, server) in enumerate((("gpu-01", "boot-a"), ("gpu-02", "boot-a"),
                                                ("gpu-03", "boot-b")), 1)]


class _Bmc:
    def __init__(self, host: str, calls: list[tuple[str, ...]]) -> None:
        self.host, self.calls = host, calls

    def __enter__(self) -> _Bmc:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def network_boot_once(self) -> None:
        self.calls.append(("network boot", self.host))

    def boot_override(self) -> Any:
        return SimpleNamespace(target="Pxe", enabled="Once")

    def boot_from_disk(self) -> None:
        self.calls.append(("disk boot", self.host))

    def power_off(self) -> None:
        self.calls.append(("power off", self.host))


class _Ansible:
    """Stands in for run_playbook: image_boot.yml sets the boot servers up (their clock from
    the gathered facts), `failing` raises as a lost controller would, and each call is kept."""

    def __init__(self, failing: str, calls: list[tuple[str, ...]]) -> None:
        self.failing, self.calls = failing, calls
        self.tokens: list[str] = []
        self.release_vars: list[dict[str, Any]] = []

    def __call__(self, name: str, hosts: list[str], settings: Any, env: Any, *,
                 artifacts: Path, ident: str, extravars: dict[str, Any], on_event: Any,
                 capture: tuple[str, ...]) -> PlaybookResult:
        self.calls.append((name, *hosts))
        if name == "image_boot.yml":
            served = json.loads(Path(extravars["racklift_image_vars_file"]).read_text())
            self.tokens += [h["token"] for h in served["boot_server_hosts"]]
        if name == self.failing:
            raise RuntimeError(f"{name}: the controller lost its boot server")
        if name == "image_release.yml":
            self.release_vars.append(extravars)
        (server,) = hosts
        on_event(HostEvent(server, "ok", imaging.FACTS_TASK))
        facts = {"ansible_facts": {"ansible_date_time": {"epoch": "1796150722"}}}
        return PlaybookResult(0, ok=frozenset(hosts), captured={server: {imaging.FACTS_TASK:
                                                                         facts}})


@pytest.mark.parametrize("failing", ["image_boot.yml", "image_wait.yml"])
def test_however_the_stage_ends_no_boot_server_keeps_its_tokens(monkeypatch, tmp_path,
                                                                 failing) -> None:
    """The stage ends with an error while a boot server is set up (before any power-on) or
    while the hosts deploy: the hosts that were powered on boot their disks again, then each
    boot server, in one Ansible run, drops the deploy scripts and deploy data of its hosts."""
    calls: list[tuple[str, ...]] = []
    ansible = _Ansible(failing, calls)
    targets = _targets()
    monkeypatch.setattr(image_run, "run_playbook", ansible)
    monkeypatch.setattr(image_power, "client_for", lambda host, oob_ip, hostvars: _Bmc(host, calls))
    monkeypatch.setattr(imaging.ramdisk, "build", lambda image: ramdisk.Ramdisk(
        "0123456789abcdef", tmp_path, "6.1", image.build_id, 1, 0.0, True))
    monkeypatch.setattr(imaging, "_resolve", lambda run, hosts, image: (targets, SERVERS))
    monkeypatch.setattr(imaging, "_hostvars", lambda run, live, ident: (live, {}))
    lines: list[str] = []
    with pytest.raises(RuntimeError, match="the controller lost its boot server"):
        imaging.image_hosts(SimpleNamespace(settings=None), [t.host for t in targets], tmp_path,
                            Progress(lines.append), imaging.ImagingOptions(image=IMAGE))

    released = [c for c in calls if c[0] == "image_release.yml"]
    if failing == "image_boot.yml":  # boot-a's role run failed: boot-b was never set up
        assert released == [("image_release.yml", "boot-a")]
        assert ansible.release_vars == [{"racklift_image_release": [
            {"name": "gpu-01", "mac": "02:52:4c:00:00:01"},
            {"name": "gpu-02", "mac": "02:52:4c:00:00:02"}]}]
        assert not [c for c in calls if c[0] in ("network boot", "disk boot")]
    else:
        assert released == [("image_release.yml", "boot-a"), ("image_release.yml", "boot-b")]
        assert ansible.release_vars[1] == {"racklift_image_release": [
            {"name": "gpu-03", "mac": "02:52:4c:00:00:03"}]}
        # After every powered-on host was set to boot its disk (and, not deployed, powered off).
        first_release = calls.index(released[0])
        assert {c[1] for c in calls[:first_release] if c[0] == "disk boot"} == \
            {"gpu-01", "gpu-02", "gpu-03"}
        assert not [c for c in calls[first_release:] if c[0] in ("disk boot", "power off")]
    assert ansible.tokens and not [t for t in ansible.tokens
                                   if t in json.dumps(ansible.release_vars) + "\n".join(lines)]


# ---------------------------------------------------------------------------------------------
# An OS installer instead of the image: the stage's whole path, Ansible and the BMCs stood in for.

PROXY = "http://10.90.0.1:3142"


class _InstallBmc(_Bmc):
    """A BMC whose host is on for `on_reads` power state reads, then off (the installer's end;
    never, with None)."""

    def __init__(self, host: str, calls: list[tuple[str, ...]], on_reads: int | None) -> None:
        super().__init__(host, calls)
        self.on_reads = on_reads

    def power_state(self) -> str:
        self.calls.append(("power state", self.host))
        reads = sum(1 for c in self.calls if c == ("power state", self.host))
        return "On" if self.on_reads is None or reads <= self.on_reads else "Off"

    def power_on(self) -> None:
        self.calls.append(("power on", self.host))


class _InstallAnsible:
    """image_boot.yml keeps what the boot server was given; image_wait.yml sees each host's DHCP
    request; image_check.yml (for a host Ansible reaches another way than ssh) answers with the
    nonce the installer's late command writes."""

    def __init__(self, calls: list[tuple[str, ...]]) -> None:
        self.served: list[dict[str, Any]] = []
        self.hosts_only: list[bool] = []
        self.playbooks: list[str] = []
        self.calls = calls

    def __call__(self, name: str, hosts: list[str], settings: Any, env: Any, *,
                 artifacts: Path, ident: str, extravars: dict[str, Any], on_event: Any,
                 capture: tuple[str, ...]) -> PlaybookResult:
        self.playbooks.append(name)
        self.calls.append((name, *hosts))
        captured: dict[str, dict[str, Any]] = {}
        if name == "image_boot.yml":
            self.served.append(json.loads(Path(extravars["racklift_image_vars_file"]).read_text()))
            self.hosts_only.append(extravars["racklift_image_hosts_only"])
            on_event(HostEvent(hosts[0], "ok", imaging.FACTS_TASK))
            captured[hosts[0]] = {imaging.FACTS_TASK: {"ansible_facts": {
                "ansible_date_time": {"epoch": "1796150722"}}}}
        elif name == "image_wait.yml":
            wanted = extravars["racklift_image_wait"]["hosts"]
            installs = {h["name"] for h in self.entries() if h["method"] == "installer"}
            assert all("token_sha256" not in h for h in wanted if h["name"] in installs)
            report = None
            if extravars["racklift_image_wait"]["phase"] == "report":
                report = {"result": "success", "reason": "deployed"}
            answer = {"hosts": {h["name"]: {"at": h["since"] + 5, "report": report}
                                for h in wanted}, "ignored": []}
            captured[hosts[0]] = {image_plan.WAIT_TASK: {"stdout": json.dumps(answer)}}
        elif name == "image_check.yml":
            for host_name in hosts:
                captured[host_name] = {imaging.CHECK_TASK: {"stdout": self.installed(host_name)}}
        return PlaybookResult(0, ok=frozenset(hosts), captured=captured)

    def entries(self) -> list[dict[str, Any]]:
        return [h for served in self.served for h in served["boot_server_hosts"]]

    def installed(self, host_name: str) -> str:
        """What the disk holds: the deploy ramdisk's nonce and the image's marker, or the
        installer's late command's files."""
        (entry,) = [h for h in self.entries() if h["name"] == host_name]
        if entry["method"] == "image":
            return f"new-boot-id\n{entry['deploy_data']['nonce']}\n{MARKER}"
        preseed = entry["installer"]["files"]["preseed.cfg"]
        blob = preseed.split("echo ", 1)[1].split(" ", 1)[0]
        script = base64.b64decode(blob).decode()
        (nonce,) = [line.split()[1] for line in script.splitlines()
                    if line.endswith("> /etc/racklift/deploy-nonce")]
        marker = script.split("image.json <<'RACKLIFT_MARKER'\n", 1)[1].split("\n", 1)[0]
        return f"new-boot-id\n{nonce}\n{marker}\n"


class _Hosts:
    """The deployed hosts' SSH, stood in for as ssh would answer: each host presents the key its
    deploy data or installer files gave it (or `planted`'s, for the hosts named there), and a
    connection succeeds only when the known_hosts file the argv names holds that key under the
    HostKeyAlias the argv gives. reach stands in for the inventory: the run's pinned hosts get
    the arguments inventory/group_vars/all/ssh.yml gives them."""

    def __init__(self, ansible: _InstallAnsible,
                 planted: dict[str, host_keys.HostKey] | None = None,
                 via_ansible: frozenset[str] = frozenset()) -> None:
        self.ansible, self.planted, self.tries = ansible, planted or {}, []
        self.via_ansible = via_ansible

    def reach(self, names, settings, extravars, env):
        pinned = extravars[host_keys.EXTRA_VAR]
        return {name: {"ansible": "its connection is 'paramiko', not ssh"}
                if name in self.via_ansible else
                {"ssh": ["ssh", *(["-o", "StrictHostKeyChecking=yes", "-o",
                                   f"HostKeyAlias={name}", "-o",
                                   f"UserKnownHostsFile={pinned['dir']}/{name}"]
                                  if name in pinned["hosts"] else []), "--", name]}
                for name in names}

    def run_everywhere(self, ssh, argv, script, *, limit, timeout, on_event=None, task=""):
        """The direct check: image_check.sh over each host's ssh argv, answered as the disk
        the host booted would, when the host presents the key the argv pins."""
        assert argv == ["sh", "-s"] and b"cat /etc/racklift/image.json" in script
        got = {}
        for name, ssh_argv in ssh.items():
            self.ansible.calls.append(("image check", name))
            if self.one_try(ssh_argv).returncode != 0:
                got[name] = direct_collect.HostFailed("unreachable", host_keys.MISMATCH_ERROR)
            else:
                got[name] = direct_collect.Ran(argv, 0, self.ansible.installed(name), "")
        return got

    def presented(self, name: str) -> str:
        if name in self.planted:
            return self.planted[name].public
        (entry,) = [h for h in self.ansible.entries() if h["name"] == name]
        if entry["method"] == "image":
            return entry["deploy_data"]["ssh_host_ed25519_key_pub"]
        script = base64.b64decode(entry["installer"]["files"]["preseed.cfg"].split(
            "echo ", 1)[1].split(" ", 1)[0]).decode()
        return script.split("echo '", 1)[1].split("'", 1)[0]

    def one_try(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        name = argv[argv.index("--") + 1]
        self.tries.append(name)
        options = dict(a.split("=", 1) for a in argv if "=" in a)
        known = Path(options["UserKnownHostsFile"]).read_text().split()
        if known[0] == options["HostKeyAlias"] and " ".join(known[1:3]) == \
                self.presented(name):
            return subprocess.CompletedProcess(argv, 0, "", "")
        return subprocess.CompletedProcess(argv, 255, "", (
            "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
            "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
            f"Host key for {name} has changed and you have requested strict checking.\n"
            "Host key verification failed.\n"))


def _install(monkeypatch, tmp_path, on_reads: int | None, install: float = 60.0,
             deployed: int = 0, planted: dict[str, host_keys.HostKey] | None = None,
             via_ansible: frozenset[str] = frozenset(), installed: bool = True,
             listed: BootServerHosts | None = None):
    """gpu-01 installed with Debian's installer (or, not `installed`, left out), and the next
    `deployed` hosts with the image."""
    calls: list[tuple[str, ...]] = []
    ansible = _InstallAnsible(calls)
    hosts = _Hosts(ansible, planted, via_ansible)
    monkeypatch.setattr(imaging, "reach", hosts.reach)
    monkeypatch.setattr(imaging, "run_everywhere", hosts.run_everywhere)
    monkeypatch.setattr(ssh_wait, "one_try", hosts.one_try)
    media = tmp_path / "media"
    media.mkdir()
    for name in ("linux", "initrd.gz"):
        (media / name).write_bytes(b"stand-in")
    monkeypatch.setitem(imaging.installer.PACKAGED_MEDIA, "debian-12",
                        (media, ("linux", "initrd.gz"), "debian-installer-12-netboot-amd64"))
    monkeypatch.setattr(image_power, "INSTALL_POLL", 0.01)
    monkeypatch.setattr(image_run, "run_playbook", ansible)
    monkeypatch.setattr(image_power, "client_for",
                        lambda host, oob_ip, hostvars: _InstallBmc(host, calls, on_reads))
    monkeypatch.setattr(imaging.ramdisk, "build", lambda image: ramdisk.Ramdisk(
        "0123456789abcdef", tmp_path, "6.1", image.build_id, 1, 0.0, True))
    first, *others = _targets()
    installs = [replace(first, installer="debian-12",
                        hostvars={**first.hostvars, "racklift_installer_proxy": PROXY}),
                *[replace(t, boot_server="boot-a") for t in others[:deployed]]][
        0 if installed else 1:]
    monkeypatch.setattr(imaging, "_resolve", lambda run, hosts, image: (installs, SERVERS))
    monkeypatch.setattr(imaging, "_hostvars", lambda run, live, ident: (live, {}))
    recorded: list[Any] = []
    monkeypatch.setattr(imaging, "apply", lambda netbox, updates: recorded.extend(updates))
    lines: list[str] = []
    errors = imaging.image_hosts(
        SimpleNamespace(settings=None), [t.host for t in installs], tmp_path,
        Progress(lines.append), imaging.ImagingOptions(
            image=IMAGE, timeouts=image_plan.Timeouts(install=install)),
        boot_servers=listed)
    ansible.tries = hosts.tries
    return errors, calls, ansible, recorded, lines


def test_a_racks_role_run_lists_what_other_racks_deploy_there_and_its_release_only_its_own(
        monkeypatch, tmp_path) -> None:
    """The racks of a site deploy at once: a rack's role run on boot-a lists its own hosts and
    the one another rack still deploys there (the role removes what it does not list); its
    release drops its own alone; its hosts are checked over SSH after the release."""
    listed = BootServerHosts()
    other = {"name": "gpu-99", "mac": "02:00:00:00:00:99", "ip": "10.0.0.99", "deploy": True,
             "method": "image"}
    assert listed.serve("boot-a", [other], "{}", lambda entries, whole: (None, None)) == (
        None, None)
    errors, calls, ansible, recorded, _ = _install(monkeypatch, tmp_path, on_reads=2, deployed=2,
                                                   installed=False, listed=listed)
    assert errors == {"gpu-02": None, "gpu-03": None}
    (served,) = ansible.served
    assert [h["name"] for h in served["boot_server_hosts"]] == ["gpu-99", "gpu-02", "gpu-03"]
    # Other settings (that rack's "{}"): the whole role.
    assert ansible.hosts_only == [False]
    assert _listed(listed) == [other]
    release = calls.index(("image_release.yml", "boot-a"))
    assert release < calls.index(("image check", "gpu-02"))
    assert release < calls.index(("image check", "gpu-03"))
    assert len(recorded) == 2


def test_a_racks_failed_role_run_leaves_its_hosts_unlisted(monkeypatch, tmp_path) -> None:
    """A role run that fails fails this rack's hosts on boot-a, and the next rack's role run
    there does not list them."""
    listed = BootServerHosts()
    failing = _InstallAnsible.__call__

    def broken(self, name, hosts, *args, **kwargs):
        result = failing(self, name, hosts, *args, **kwargs)
        if name == "image_boot.yml":
            return PlaybookResult(2, failed={hosts[0]: "apt: no network"})
        return result

    monkeypatch.setattr(_InstallAnsible, "__call__", broken)
    errors, *_ = _install(monkeypatch, tmp_path, on_reads=2, deployed=2, installed=False,
                          listed=listed)
    assert errors == {"gpu-02": "boot server boot-a: apt: no network",
                      "gpu-03": "boot server boot-a: apt: no network"}
    assert _listed(listed) == []


def _listed(listed: BootServerHosts) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    listed.serve("boot-a", [], "{}", lambda entries, whole: (seen.extend(entries), None))
    return seen


def test_an_installed_host_is_seen_off_then_boots_its_disk_and_shows_this_installs_nonce(
        monkeypatch, tmp_path) -> None:
    errors, calls, ansible, recorded, lines = _install(monkeypatch, tmp_path, on_reads=2)
    assert errors == {"gpu-01": None}
    (served,) = ansible.served
    (entry,) = served["boot_server_hosts"]
    assert entry["method"] == "installer" and "token" not in entry
    preseed = entry["installer"]["files"]["preseed.cfg"]
    assert f"d-i mirror/http/proxy string {PROXY}\n" in preseed
    assert {f["dest"] for f in served["boot_server_files"]} >= {
        "installer/debian-12/linux", "installer/debian-12/initrd.gz"}
    # Off after the install, then the disk, then on: in this order, and never a power off.
    bmc = [c[0] for c in calls if not c[0].endswith(".yml") and c[0] != "image check"]
    assert bmc[bmc.index("power state", bmc.index("network boot")):] == [
        "power state", "power state", "power state", "disk boot", "power on"]
    # The check went over racklift's own SSH client, not a playbook.
    assert ansible.playbooks == ["image_boot.yml", "image_wait.yml", "image_release.yml"]
    assert ("image check", "gpu-01") in calls
    (update,) = recorded
    assert update.fields[IMAGE_FIELD].startswith("installer-debian-12 ")
    assert any("gpu-01: the debian-12 installer finished and powered it off" in line
               for line in lines)


def test_an_install_that_never_ends_fails_its_host_which_is_powered_off(monkeypatch,
                                                                        tmp_path) -> None:
    errors, calls, ansible, recorded, _ = _install(monkeypatch, tmp_path, on_reads=None,
                                                   install=0.05)
    assert errors["gpu-01"].startswith("the debian-12 installer did not finish within 0 s of "
                                       "the DHCP request")
    assert ("power off", "gpu-01") in calls and ("power on", "gpu-01") not in calls
    assert ("image check", "gpu-01") not in calls
    assert ansible.playbooks[-1] == "image_release.yml"
    assert recorded == []


def test_a_rack_that_mixes_both_checks_its_deployed_hosts_before_waiting_on_installs(
        monkeypatch, tmp_path) -> None:
    errors, calls, ansible, recorded, _ = _install(monkeypatch, tmp_path, on_reads=2, deployed=1)
    assert errors == {"gpu-01": None, "gpu-02": None}
    assert [(e["name"], e["method"], "token" in e) for e in ansible.entries()] == [
        ("gpu-01", "installer", False), ("gpu-02", "image", True)]
    # gpu-02's disk checked before gpu-01's install is waited on, then gpu-01's.
    assert [c for c in calls if c[0] == "image check"] == [("image check", "gpu-02"),
                                                           ("image check", "gpu-01")]
    assert calls.index(("image check", "gpu-02")) < calls.index(("power state", "gpu-01"))
    # An install needs its boot server until its end: released then, before its check.
    assert calls.index(("image_release.yml", "boot-a")) < calls.index(("image check", "gpu-01"))
    assert sorted(u.fields[IMAGE_FIELD].split()[0] for u in recorded) == [
        IMAGE.name, "installer-debian-12"]


def test_a_host_ansible_reaches_another_way_is_checked_by_the_playbook(monkeypatch,
                                                                       tmp_path) -> None:
    errors, calls, _, recorded, _ = _install(
        monkeypatch, tmp_path, on_reads=2, deployed=1, via_ansible=frozenset({"gpu-02"}))
    assert errors == {"gpu-01": None, "gpu-02": None}
    assert ("image_check.yml", "gpu-02") in calls and ("image check", "gpu-02") not in calls
    assert ("image check", "gpu-01") in calls and ("image_check.yml", "gpu-01") not in calls
    assert sorted(u.fields[IMAGE_FIELD].split()[0] for u in recorded) == [
        IMAGE.name, "installer-debian-12"]


def test_a_host_presenting_another_key_than_it_was_given_fails_at_once(monkeypatch,
                                                                        tmp_path) -> None:
    """Planted: gpu-02 answers with a key other than its deploy data's (another machine at its
    address). It fails on its first SSH try, naming what that means, and nothing runs on it;
    gpu-01 (installed: its key came in its preseed) passes on the key it was given."""
    errors, calls, ansible, recorded, _ = _install(
        monkeypatch, tmp_path, on_reads=2, deployed=1,
        planted={"gpu-02": host_keys.new_host_key()})
    assert errors == {"gpu-01": None,
                      "gpu-02": f"after the deploy, SSH: {host_keys.MISMATCH_ERROR}"}
    assert ansible.tries.count("gpu-02") == 1
    assert ("image check", "gpu-02") not in calls
    assert ("image check", "gpu-01") in calls
    assert [u.fields[IMAGE_FIELD].split()[0] for u in recorded] == ["installer-debian-12"]
    # The run's known_hosts: each host's own key, as the deploy data carried it.
    (entry,) = [e for e in ansible.entries() if e["name"] == "gpu-02"]
    assert (tmp_path / "known_hosts" / "gpu-02").read_text() == \
        f"gpu-02 {entry['deploy_data']['ssh_host_ed25519_key_pub']}\n"


# ---------------------------------------------------------------------------------------------
# Firmware and BIOS, read before anything is served or powered on: the pins against a real
# BMC's tree (a Dell R750's iDRAC 9), the BMC otherwise stood in for.

DELL_PINS = {"firmware": {"BMC": "6.00.30.00", "BIOS": "1.8.2"},
             "bios": {"SysProfile": "PerfOptimized", "ProcVirtualization": "Enabled"}}


class _TreeBmc(_Bmc):
    """A BMC whose GETs answer from a captured tree."""

    def __init__(self, host: str, calls: list[tuple[str, ...]]) -> None:
        super().__init__(host, calls)
        calls.append(("asked", host))
        self.get = Tree(DELL)


def test_firmware_or_bios_off_their_pins_fail_the_host_before_it_is_served(monkeypatch,
                                                                          tmp_path) -> None:
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(image_power, "client_for",
                        lambda host, oob_ip, hostvars: _TreeBmc(host, calls))
    wrong = {"firmware": {"BMC": "7.10.30.00", "BIOS": "1.8.2"},
             "bios": {"SysProfile": "Custom", "ProcVirtualization": "Enabled"}}
    pinned, off, unpinned = (replace(t, host=replace(t.host, config={**t.host.config, **pins}))
                             for t, pins in zip(_targets(), (DELL_PINS, wrong, {}), strict=True))
    lines: list[str] = []
    run = image_run.ImageRun(SimpleNamespace(settings=None), tmp_path, Progress(lines.append),
                              imaging.ImagingOptions(image=IMAGE), tmp_path)
    run.errors = {t.host.name: None for t in (pinned, off, unpinned)}
    image_power.check_firmware(run, [pinned, off, unpinned])
    assert run.errors == {pinned.host.name: None, unpinned.host.name: None, off.host.name: (
        "its firmware and BIOS are not as its device type pins them: firmware BMC "
        "(Installed-25227-6.00.30.00__iDRAC.Embedded.1-1): found 6.00.30.00, wanted 7.10.30.00; "
        'BIOS attribute SysProfile: found "PerfOptimized", wanted "Custom": update them, or '
        "change the pins (racklift.firmware, racklift.bios) in NetBox")}
    assert sorted(calls) == [("asked", pinned.host.name), ("asked", off.host.name)]
    assert any(line.endswith(f"{pinned.host.name}: firmware and BIOS as pinned (2 components, "
                             "2 BIOS attributes)") for line in lines), lines


REFUSED = BmcError("gpu-01: BMC at https://10.32.0.1:443 is unreachable (refused or dropped the "
                   "connection, 4 attempts in 7 s) while reading /redfish/v1: check the OOB "
                   "cabling")


def _refusing(path: str) -> Any:
    raise REFUSED


def _no_update_service(path: str) -> Any:
    return _refusing(path) if "UpdateService" in path else Tree(DELL)(path)


@pytest.mark.parametrize(("answers", "why"), [
    # Nothing read: the client's own error, as verify and bmc.inventory say it.
    (_refusing, f"reading its firmware and BIOS: {REFUSED}"),
    # The system read, the firmware inventory not: its pins are not met ("not reported"), and
    # why it could not be read.
    (_no_update_service, "its firmware and BIOS are not as its device type pins them: "
                         "firmware BMC: found not reported, wanted 6.00.30.00;"),
])
def test_a_bmc_whose_inventory_cannot_be_read_fails_the_pinned_host_saying_why(
        monkeypatch, tmp_path, answers, why) -> None:
    bmc = _Bmc("gpu-01", [])
    bmc.get = answers  # type: ignore[attr-defined]
    bmc.endpoint = SimpleNamespace(url="https://10.32.0.1:443")  # type: ignore[attr-defined]
    monkeypatch.setattr(image_power, "client_for", lambda host, oob_ip, hostvars: bmc)
    (pinned,) = [replace(t, host=replace(t.host, config={**t.host.config, **DELL_PINS}))
                 for t in _targets()[:1]]
    run = image_run.ImageRun(SimpleNamespace(settings=None), tmp_path, Progress(print),
                              imaging.ImagingOptions(image=IMAGE), tmp_path)
    run.errors = {"gpu-01": None}
    image_power.check_firmware(run, [pinned])
    got = run.errors["gpu-01"] or ""
    assert got.startswith(why), got
    assert "unreachable" in got


def test_the_stage_reads_the_pins_before_it_serves_or_powers_on_a_host(monkeypatch,
                                                                      tmp_path) -> None:
    calls: list[tuple[str, ...]] = []
    ansible = _Ansible("image_wait.yml", calls)
    targets = _targets()
    targets[1] = replace(targets[1], host=replace(targets[1].host, config={
        **targets[1].host.config, "bios": {"SysProfile": "Custom"}}))
    served: list[str] = []
    real_entry = imaging._entry
    monkeypatch.setattr(imaging, "_entry", lambda run, t, server: (served.append(t.name),
                                                                   real_entry(run, t, server))[1])
    monkeypatch.setattr(image_run, "run_playbook", ansible)
    monkeypatch.setattr(image_power, "client_for",
                        lambda host, oob_ip, hostvars: _TreeBmc(host, calls))
    monkeypatch.setattr(imaging.ramdisk, "build", lambda image: ramdisk.Ramdisk(
        "0123456789abcdef", tmp_path, "6.1", image.build_id, 1, 0.0, True))
    monkeypatch.setattr(imaging, "_resolve", lambda run, hosts, image: (targets, SERVERS))
    monkeypatch.setattr(imaging, "_hostvars", lambda run, live, ident: (live, {}))
    with pytest.raises(RuntimeError, match="the controller lost its boot server"):
        imaging.image_hosts(SimpleNamespace(settings=None), [t.host for t in targets], tmp_path,
                            Progress(print), imaging.ImagingOptions(image=IMAGE))
    assert served == ["gpu-01", "gpu-03"]
    assert ("network boot", "gpu-02") not in calls and ("network boot", "gpu-01") in calls


def _apply_run(tmp_path: Path, firmware_dir: Path, lines: list[str]) -> image_run.ImageRun:
    return image_run.ImageRun(SimpleNamespace(settings=None), tmp_path, Progress(lines.append),
                              imaging.ImagingOptions(image=IMAGE, apply_firmware=True,
                                                     firmware_dir=firmware_dir), tmp_path)


def test_apply_firmware_makes_hosts_off_their_pins_due_or_fails_what_it_cannot_change(
        monkeypatch, tmp_path) -> None:
    """With --apply-firmware a host off its pins is due (its images go to its boot server)
    instead of failed; one whose image is missing from the firmware directory, or whose pin
    has no image, still fails in preflight, naming what is missing."""
    monkeypatch.setattr(image_power, "client_for",
                        lambda host, oob_ip, hostvars: _TreeBmc(host, []))
    firmware_dir = tmp_path / "firmware"
    (firmware_dir / "dell").mkdir(parents=True)
    (firmware_dir / "dell" / "iDRAC_7.10.EXE").write_bytes(b"stand-in")
    due = {"firmware": {"BMC": "7.10.30.00"}, "firmware_images": {"BMC": "dell/iDRAC_7.10.EXE"},
           "bios": {"SysProfile": "Custom"}}
    missing = {"firmware": {"BMC": "7.10.30.00"}, "firmware_images": {"BMC": "dell/gone.EXE"}}
    imageless = {"firmware": {"BMC": "7.10.30.00"}}
    targets = [replace(t, host=replace(t.host, config={**t.host.config, **pins}))
               for t, pins in zip(_targets(), (due, missing, imageless), strict=True)]
    lines: list[str] = []
    run = _apply_run(tmp_path, firmware_dir, lines)
    run.errors = {t.name: None for t in targets}
    image_power.check_firmware(run, targets)
    a, b, c = (t.name for t in targets)
    assert run.errors[a] is None
    _, plan = run.firmware_due[a]
    assert [u.image for u in plan.updates] == ["dell/iDRAC_7.10.EXE"]
    assert plan.settings == (("SysProfile", "Custom", "PerfOptimized"),)
    assert set(run.firmware_due) == {a}
    assert (run.errors[b] or "").endswith(
        "--apply-firmware cannot: firmware BMC: its image dell/gone.EXE is not in "
        f"{firmware_dir} (put it there, or fix config_context.racklift.firmware_images.BMC)")
    assert (run.errors[c] or "").endswith(
        "--apply-firmware cannot: firmware BMC: found 6.00.30.00, wanted 7.10.30.00, and no "
        "image brings it there (config_context.racklift.firmware_images.BMC)")
    assert any(f"{a}: off its pins (firmware BMC" in line for line in lines), lines
    # The due host's images are published under firmware/ by its boot server's role.
    assert image_power.firmware_files(run, targets) == [
        {"src": str(firmware_dir / "dell" / "iDRAC_7.10.EXE"),
         "dest": "firmware/dell/iDRAC_7.10.EXE"}]


def test_apply_firmware_journals_each_change_and_fails_the_host_that_did_not_reach_its_pins(
        monkeypatch, tmp_path) -> None:
    lines: list[str] = []
    run = _apply_run(tmp_path, tmp_path, lines)
    good, bad = _targets()[:2]
    run.errors = {good.name: None, bad.name: None}
    plan = firmware.ApplyPlan(settings=(("SysProfile", "Custom", "PerfOptimized"),))
    run.firmware_due = {good.name: (firmware.Pins(), plan), bad.name: (firmware.Pins(), plan)}
    change = bmc_apply.Change("BIOS attribute SysProfile", '"PerfOptimized"', '"Custom"',
                              "/redfish/v1/Systems/1/Bios/Settings, at the next boot")
    urls: list[str] = []

    def applying(bmc: Any, pins: Any, plan: Any, image_url: Any, deadline: float) -> list:
        urls.append(image_url("x/y.bin"))
        if bmc.host == bad.name:
            raise bmc_apply.ApplyError("after the changes and a reboot, the BMC still reports "
                                       "BIOS attribute SysProfile: found \"PerfOptimized\"",
                                       [change])
        return [change]
    monkeypatch.setattr(image_power.apply, "apply", applying)
    monkeypatch.setattr(image_power, "client_for", lambda host, oob_ip, hostvars: _Bmc(host, []))
    recorded: list[Any] = []
    monkeypatch.setattr(image_power.state, "apply",
                        lambda netbox, transitions: recorded.extend(transitions))
    servers = {t.boot_server: image_plan.BootServer(t.boot_server, "10.0.0.2", "10.0.0.0/24")
               for t in (good, bad)}
    image_power.apply_firmware(run, [good, bad], servers)
    assert run.errors[good.name] is None
    assert run.errors[bad.name] == (
        "applying its firmware and BIOS pins: after the changes and a reboot, the BMC still "
        'reports BIOS attribute SysProfile: found "PerfOptimized"')
    assert urls == ["http://10.0.0.2/firmware/x/y.bin"] * 2
    text = 'racklift firmware: BIOS attribute SysProfile: "PerfOptimized" → "Custom" ' \
           "(/redfish/v1/Systems/1/Bios/Settings, at the next boot)"
    assert sorted((t.netbox_id, t.journal, t.kind) for t in recorded) == sorted([
        (good.host.netbox_id, text, "info"), (bad.host.netbox_id, text, "warning")])
