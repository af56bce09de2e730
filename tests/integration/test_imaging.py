"""The whole run on the virtual rack, real everything: the test NetBox, the pipeline
(`run(..., image=image_hosts)`), Redfish through sushy-tools to libvirt/QEMU (TCG, UEFI) VMs,
the boot_server role on the boot server container (dnsmasq, nginx, the deploy API), the deploy
ramdisk and the disk image, SSH through the namespace, every node role, the gate with its
health checks and the GPU container pulled through the rack's registry mirror. One VM goes from
power-off to `active` in the first run; the gate then fails it on injected faults, each on its
own check. The VMs boot once for the module: every test uses them.

The VMs stand in for GPU servers (racklift.lab.vrack gives their device type two GPUs, an
InfiniBand port each cabled to the rack's rail leaves, and the lab GPU server's hardware context:
NVSwitch, so fabric manager, NVLink topology, NIC affinity; their tag a `racklift` config context
with the OS image), so their NetBox records are complete for the pipeline's preflight and their
verify is a GPU server's. Failure cases, each a per-host error
and `failed` in NetBox: a wrong BMC password (a host var from an extra inventory source), a BMC
that does not answer (the OOB IP moved to an address where nothing listens), a NIC whose MAC is
not NetBox's (short DHCP timeout), a BIOS attribute pinned that the BMC reports otherwise
(before anything is served), a corrupted image (ImagingOptions.images: for one host a
truncated copy of the image, under another build id, with the real image's checksum), a
firmware update whose task fails (--apply-firmware). vm 1's firmware and BIOS are off their
pins and --apply-firmware brings them there before its deploy (the lab's BMC stand-in,
racklift.lab.vrack.lab_bmc, fetching the images from the boot server). One VM
boots Debian's own installer instead (its os_image installer-debian-12), in the re-image's run."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import ipaddress
import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from racklift import podman
from racklift.imaging import deploy_data, diskimage, host_keys
from racklift.lab import hosts as lab_hosts
from racklift.lab import vrack
from racklift.lab.vrack import lab_firmware
from racklift.netbox.expected import CONTEXT_KEY
from racklift.netbox.selection import Selection
from racklift.pipeline import image_plan
from racklift.pipeline import image_stage as imaging
from racklift.pipeline.outcome import FAILED, JOINED
from racklift.pipeline.plan import REIMAGE, Options
from racklift.pipeline.progress import Progress
from racklift.pipeline.provision import run
from racklift.verify.gate import verify

pytestmark = pytest.mark.vm

# The virtual rack layout the vrack tests use (one virtual rack per machine).
RACK = vrack.Vrack("rltest-prov", "rltest0", ipaddress.ip_network("10.91.0.0/24"),
                   ipaddress.ip_network("fd52:4c91::/64"), ipaddress.ip_network("127.0.78.0/24"),
                   rack="V91", mac_base=0x5800, memory_mib=768, disk_gib=4)
VMS = 4
WRONG_PASSWORD = "not-the-bmc-password-3f9c"
SWAPPED_MAC = "02:52:4c:ff:ff:07"
SILENT_BMC = "127.0.78.250/32"  # nothing listens there
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def rack(netbox):
    vrack.down(netbox, RACK)  # leftovers of an interrupted run
    try:
        started = time.monotonic()
        result = vrack.up(netbox, VMS, RACK)
        print(f"\n[imaging] virtual rack up with {VMS} VMs in {time.monotonic() - started:.0f} s")
        yield result
    finally:
        vrack.down(netbox, RACK)


@pytest.fixture(scope="module")
def image() -> diskimage.DiskImage:
    started = time.monotonic()
    result = diskimage.build()
    print(f"\n[imaging] image {result.build_id} {'cached' if result.cached else 'built'} in "
          f"{time.monotonic() - started:.0f} s")
    return result


def _observed(request, module: Any, name: str) -> list[Any]:
    """What `module.name()` (the real generator) makes for the module's tests, kept."""
    made: list[Any] = []
    real = getattr(module, name)

    def observed() -> Any:
        made.append(real())
        return made[-1]

    patch = pytest.MonkeyPatch()
    patch.setattr(module, name, observed)
    request.addfinalizer(patch.undo)
    return made


@pytest.fixture(scope="module")
def tokens(request) -> list[str]:
    """Every token the stage makes, for the secrets check."""
    return _observed(request, imaging.deploy_data, "new_token")


@pytest.fixture(scope="module")
def made_keys(request) -> list[host_keys.HostKey]:
    """Every host key the stage makes: the secrets check looks for their private halves, the
    re-image's plant gives one host another."""
    return _observed(request, imaging.host_keys, "new_host_key")


@pytest.fixture(scope="module")
def runs() -> list:
    return []


@pytest.fixture(scope="module", autouse=True)
def secret_dirs(request) -> list[Path]:
    """Every secrets directory the stage makes in this module: the secrets check looks for
    these, not for any in the temporary directory (another lane images at the same time)."""
    made: list[Path] = []
    real = imaging.secrets_dir

    @contextlib.contextmanager
    def observed() -> Iterator[Path]:
        with real() as path:
            made.append(path)
            yield path

    patch = pytest.MonkeyPatch()
    patch.setattr(imaging, "secrets_dir", observed)
    request.addfinalizer(patch.undo)
    return made


OPTIONS = imaging.ImagingOptions(extravars={"racklift_vrack_netns": RACK.netns})


def _run(netbox, names, options, imaging_options=OPTIONS, runs=None):
    lines: list[str] = []
    progress = Progress(lambda line: (lines.append(line), print(line)), heartbeat=30)
    stage = functools.partial(imaging.image_hosts, options=imaging_options)
    result = run(netbox, Selection(names=tuple(names)), options, progress=progress, image=stage,
                 extravars=OPTIONS.extravars)
    if runs is not None:
        runs.append((result, lines))
    return result, lines


def _ssh(address: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ssh", "-i", str(lab_hosts.ssh_key()), "-o",
         f"ProxyCommand={vrack.proxy_command(RACK)}", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes",
         "-o", "ConnectTimeout=10", f"root@{address}", command],
        capture_output=True, text=True, timeout=timeout)


def _state(address: str) -> tuple[str, str, str]:
    out = _ssh(address, "cat /proc/sys/kernel/random/boot_id; hostname; "
                        "cat /etc/racklift/image.json | tr -d '\\n '")
    assert out.returncode == 0, out.stderr
    boot_id, hostname, marker = out.stdout.split("\n")[:3]
    return boot_id, hostname, marker


def _device(netbox, name):
    return netbox.get_all("dcim/devices", {"name": name})[0]


def _journal(netbox, device_id):
    return [e["comments"] for e in netbox.get_all("extras/journal-entries",
                                                  {"assigned_object_id": device_id})]


def _stamp(lines, host, event):
    """Seconds into the run of the last progress line `host: event...`."""
    return max(float(line.split("s]")[0].strip("[ ")) for line in lines
               if line.startswith("[") and f"{host}: {event}" in line)


def _power_on_at(lines, host):
    return _stamp(lines, host, "network boot once")


def _since_power_on(lines, host, event):
    """Seconds from the host's power-on to `event`, from the run's progress lines."""
    return _stamp(lines, host, event) - _power_on_at(lines, host)


def _set_local_context(netbox, device, **racklift):
    """The device's own config context with these racklift keys added to what it has."""
    local = device["local_context_data"] or {}
    netbox.update("dcim/devices", [{"id": device["id"], "local_context_data": {
        **local, "racklift": {**local.get("racklift", {}), **racklift}}}])


def _failed_in_netbox(netbox, name, error):
    device = _device(netbox, name)
    assert device["status"]["value"] == "failed"
    assert any(error[:80] in entry for entry in _journal(netbox, device["id"]))


def _apt_runs(run_dir: Path, host: str) -> tuple[set[str], list[str]]:
    """Where configure ran Ansible's apt module on `host` (from the run's events): the packages
    of apt_vendor's "Install P, Q" tasks, and any other apt task by name."""
    asked: set[str] = set()
    other = []
    for path in run_dir.glob("ansible/artifacts/configure-*/job_events/*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data", {})
        if event.get("event") in ("runner_on_ok", "runner_on_failed") and \
                data.get("host") == host and data.get("task_action", "").endswith("apt"):
            task = data.get("task", "?")
            if task.startswith("Install "):
                asked |= set(task.removeprefix("Install ").split(", "))
            else:
                other.append(task)
    return asked, sorted(other)


def test_new_vm_from_power_off_to_the_pool_while_bmc_and_mac_failures_stay_per_host(
        netbox, rack, image, tokens, made_keys, runs, tmp_path):
    """One `provision`, as a rack would go: vm 1 never booted and goes from power-off to the
    pool (imaged, every node role, verify with every health check and the GPU container pulled
    through the rack's mirror, active); vm 2's BMC rejects the password, vm 3's BMC does not
    answer, vm 4's NIC has a MAC NetBox does not know."""
    new_vm, password_vm, silent_vm, swapped_vm = rack.vms[:4]
    # vm 1's firmware and BIOS are off its pins (its BMC stand-in starts at BMC 1.00, BIOS
    # 1.0.0, ProcTurboMode Enabled): --apply-firmware brings it to them before the deploy, the
    # images from the controller's firmware directory through the boot server. The pins stay:
    # every later run and verify reads them again.
    firmware_dir = tmp_path / "firmware"
    (firmware_dir / "lab").mkdir(parents=True)
    for component, version in FIRMWARE.items():
        (firmware_dir / IMAGES[component]).write_bytes(lab_firmware.lab_image(component, version))
    _set_local_context(netbox, _device(netbox, new_vm.name), firmware=FIRMWARE,
                       firmware_images=IMAGES, bios={"ProcTurboMode": "Disabled"})
    # Wrong BMC password: a host var from an extra inventory source (as a site's vault would).
    extra = tmp_path / "bmc.yml"
    extra.write_text(f"all:\n  hosts:\n    {password_vm.name}:\n"
                     f"      racklift_bmc_password: {WRONG_PASSWORD}\n")
    (ip,) = netbox.get_all("ipam/ip-addresses", {"address": f"{silent_vm.bmc}/32"})
    netbox.update("ipam/ip-addresses", [{"id": ip["id"], "address": SILENT_BMC}])
    vrack.set_vm_mac(RACK, swapped_vm.name, SWAPPED_MAC)
    options = imaging.ImagingOptions(timeouts=image_plan.Timeouts(dhcp=60, deploy=600, ssh=300),
                                     extravars=OPTIONS.extravars, inventory=(str(extra),),
                                     apply_firmware=True, firmware_dir=firmware_dir)
    try:
        result, lines = _run(netbox, [v.name for v in rack.vms[:4]], Options(), options,
                             runs=runs)
    finally:
        vrack.set_vm_mac(RACK, swapped_vm.name, swapped_vm.mac)
    errors = {h.name: h.error or "" for h in result.hosts}
    results = {h.name: h.result for h in result.hosts}
    assert results == {new_vm.name: JOINED, password_vm.name: FAILED, silent_vm.name: FAILED,
                       swapped_vm.name: FAILED}, errors

    _, hostname, marker = _state(new_vm.address)
    assert hostname == new_vm.name
    assert marker == f'{{"name":"{image.name}","build_id":"{image.build_id}"}}'
    # What the ramdisk wrote from the deploy data: the record of the deploy, the static address
    # (DHCP leases say "dynamic"), and the host key the controller made, which the run's
    # known_hosts pinned for every stage after the image (the other types are the first boot's).
    deployed, addresses, key_files, presented = _ssh(
        new_vm.address, "cat /etc/racklift/deploy.json; echo @; ip -4 -o addr show scope "
                        "global; echo @; ls /etc/ssh/ssh_host_*_key | wc -l; echo @; "
                        "cat /etc/ssh/ssh_host_ed25519_key.pub").stdout.split("@\n")
    assert json.loads(deployed) == {"host": new_vm.name, "image": image.name,
                                    "build_id": image.build_id}
    assert f"inet {new_vm.ip} " in addresses and "dynamic" not in addresses, addresses
    assert int(key_files) >= 3
    pinned = (Path(result.run_dir) / "known_hosts" / new_vm.name).read_text()
    assert pinned == f"{new_vm.name} {presented.strip()}\n"
    assert presented.strip() in {k.public for k in made_keys}
    device = _device(netbox, new_vm.name)
    assert device["status"]["value"] == "active"
    assert device["custom_fields"]["racklift_image"] == f"{image.name} {image.build_id}"
    journal = "\n".join(_journal(netbox, device["id"]))
    for transition in ("started; stages image, configure, verify", ": imaged", ": configured",
                       "passed: the host matches NetBox and is healthy.",
                       # A journal entry per change --apply-firmware made, before the image.
                       "racklift firmware: firmware BMC: 1.00 → 1.01 (image http://"
                       f"{RACK.gateway}/firmware/lab/bmc-1.01.json, task /redfish/v1/TaskService/"
                       "Tasks/",
                       "racklift firmware: firmware BIOS: 1.0.0 → 1.0.1 (image http://"
                       f"{RACK.gateway}/firmware/lab/bios-1.0.1.json",
                       'racklift firmware: BIOS attribute ProcTurboMode: "Enabled" → "Disabled"'):
        assert transition in journal, (transition, journal)
    joined = next(h for h in result.hosts if h.name == new_vm.name)
    assert joined.verdict is not None and joined.verdict.passed
    passed = {c.name: c.detail for c in joined.verdict.checks if c.status == "OK"}
    assert {"containers.registry_mirror", "gpu.ecc", "ib.links", "kernel.gpu_errors",
            "disk.space", "gpu.fabric_manager"} <= set(passed), joined.verdict.checks
    # The device type's NVSwitch board: the driver role installed fabric manager, the gate
    # found it running; every tool the board's links and cables are read from answered.
    assert passed["gpu.fabric_manager"] == "nvidia-fabricmanager active"
    assert passed["ib.links"] == f"{vrack.VM_GPUS} ports Active/LinkUp"
    assert joined.verdict.not_collected == (), joined.verdict.not_collected
    report = json.loads((Path(result.run_dir) / "report.json").read_text())
    stage_seconds = next(h for h in report["hosts"] if h["host"] == new_vm.name)["stage_seconds"]
    assert set(stage_seconds) == {"image", "configure", "verify"}, stage_seconds
    # racklift's image holds what the roles install from Debian: configure asked dpkg first and
    # ran apt for the vendor's packages only (the driver and the toolkit, from their repositories).
    asked, other = _apt_runs(Path(result.run_dir), new_vm.name)
    assert "nvidia-open-550" in asked and "nvidia-container-toolkit" in asked, asked
    assert asked.isdisjoint(diskimage.PACKAGES), asked & set(diskimage.PACKAGES)
    assert other == [], other
    seconds = _since_power_on(lines, new_vm.name, "answers on SSH")
    active = joined.seconds - _power_on_at(lines, new_vm.name)
    print(f"[imaging] {new_vm.name}: power-on to SSH {seconds:.0f} s, to active {active:.0f} s "
          f"(image {image.size / MIB:.0f} MiB zstd; stages {stage_seconds}); whole run "
          f"{result.seconds:.0f} s")
    assert seconds < 600

    assert f"BMC at https://{password_vm.bmc}:8443 rejected the credentials (HTTP 401)" in \
        errors[password_vm.name]
    assert "BMC at https://127.0.78.250:8443 is unreachable" in errors[silent_vm.name]
    assert f"no DHCP request from {swapped_vm.mac.lower()} (the provisioning MAC in NetBox)" \
           f" reached boot server {RACK.boot_server} within 60 s" in errors[swapped_vm.name]
    assert f"ignored DHCP requests from MACs it does not know: {SWAPPED_MAC}" in \
        errors[swapped_vm.name]
    for vm in (password_vm, silent_vm, swapped_vm):
        _failed_in_netbox(netbox, vm.name, errors[vm.name])
    # Powered off after its DHCP timeout, so it does not keep network-booting.
    assert vrack.domains(RACK)[swapped_vm.name] == "shut off"
    # The stage's end left no deploy script (tokens) and no deploy data (their hashes) on the
    # boot server; the imaged host's token was spent.
    listing = _ssh(str(RACK.gateway), "ls /srv/racklift/boot/ipxe; echo @; "
                                      "ls /var/lib/racklift/boot/hosts; echo @; "
                                      "ls /var/lib/racklift/boot/used").stdout.split("@")
    assert listing[0].split() == []
    assert listing[1].split() == []
    assert listing[2].split() == [f"{new_vm.name}.json"]


# vm 1's firmware pins and the lab images (racklift.lab.vrack.lab_firmware's format) that bring its
# BMC stand-in there.
FIRMWARE = {"BMC": "1.01", "BIOS": "1.0.1"}
IMAGES = {"BMC": "lab/bmc-1.01.json", "BIOS": "lab/bios-1.0.1.json"}


# NetBox asks for the stand-in repository's other release of the branch (not installed).
OTHER_DRIVER = "550.127.05"
DAEMON_JSON = "/etc/docker/daemon.json"
# The real-world form: a daemon.json rewritten without the nvidia runtime (by hand, or by a
# package's default config), Docker restarted.
DROP_NVIDIA_RUNTIME = (
    f"cp {DAEMON_JSON} {DAEMON_JSON}.before-test && python3 -c \"import json; "
    f"d = json.load(open('{DAEMON_JSON}')); d.pop('runtimes'); d['default-runtime'] = 'runc'; "
    f"json.dump(d, open('{DAEMON_JSON}', 'w'))\" && systemctl restart docker")
RESTORE_RUNTIME = f"mv {DAEMON_JSON}.before-test {DAEMON_JSON} && systemctl restart docker"
FABRIC_MANAGER = "nvidia-fabricmanager"
MIRROR_UNIT = "racklift-registry-mirror@dockerhub"
RESTART = 300  # seconds for Docker's restart under TCG on a loaded machine (about 20 s idle)


def _checks_failed(verdict) -> dict[str, str]:
    return {f.split(":")[0]: f for f in verdict.failures}


def _move_cable(netbox, interface: dict, to: int) -> int:
    """Move the far end of the cable on `interface` to interface `to` (a cable moved in NetBox
    and not on the floor); returns the interface it was on."""
    (cable,) = netbox.get_all("dcim/cables", {"interface_id": interface["id"]})
    near_a = any(t["object_id"] == interface["id"] for t in cable["a_terminations"])
    far = "b_terminations" if near_a else "a_terminations"
    netbox.update("dcim/cables", [{"id": cable["id"], far: [
        {"object_type": "dcim.interface", "object_id": to}]}])
    return int(cable[far][0]["object_id"])


def test_faults_on_the_pool_vm_fail_it_on_their_own_check(netbox, rack):
    """The VM the whole run put in the pool, verified again as an operator checks pool hosts
    (`verify`, active hosts marked failed): (a) NetBox asks for a driver release the host does
    not run, Docker lost its nvidia runtime, fabric manager stopped on the NVSwitch board, and
    NetBox has an HCA's cable on another leaf port: four failures, each on its own check;
    (b) all healed and the rack's registry mirror stopped: the container check alone fails,
    naming the mirror. The mirror is started again after."""
    vm = rack.vms[0]
    device = _device(netbox, vm.name)
    assert device["status"]["value"] == "active"  # the whole run's (the test above)
    select = Selection(names=(vm.name,))
    out = _ssh(vm.address, f"systemctl stop {FABRIC_MANAGER} && {DROP_NVIDIA_RUNTIME}",
               timeout=RESTART)
    assert out.returncode == 0, out.stderr
    netbox.update("dcim/devices", [{"id": device["id"], "local_context_data": {
        CONTEXT_KEY: {"nvidia_driver": {"version": OTHER_DRIVER}}}}])
    (port,) = netbox.get_all("dcim/interfaces", {"device_id": device["id"], "name": "mlx5_1"})
    leaf = port["link_peers"][0]["device"]["name"]
    (spare,) = netbox.get_all("dcim/interfaces", {"device": leaf, "name": "p9"})
    was = _move_cable(netbox, port, spare["id"])
    try:
        (verdict,) = verify(netbox, select, mark_active_failed=True,
                            extravars=OPTIONS.extravars).verdicts
    finally:
        netbox.update("dcim/devices", [{"id": device["id"],
                                        "local_context_data": device["local_context_data"]}])
        _move_cable(netbox, port, was)
        restored = _ssh(vm.address, f"{RESTORE_RUNTIME} && systemctl start {FABRIC_MANAGER}",
                        timeout=RESTART)
    failed = _checks_failed(verdict)
    assert set(failed) == {"software.nvidia_driver", "containers.registry_mirror",
                           "gpu.fabric_manager", "cable.wrong_peer[mlx5_1]"}, failed
    assert f"expected {OTHER_DRIVER!r}, observed '550.127.08'" in failed["software.nvidia_driver"]
    assert "the engine has no nvidia runtime (its runtimes: " in \
        failed["containers.registry_mirror"]
    assert f"{FABRIC_MANAGER} is inactive: NVSwitch systems" in failed["gpu.fabric_manager"]
    assert f"expected '{leaf} p9', observed 'MF0;{leaf}:MQM9700/U1" in \
        failed["cable.wrong_peer[mlx5_1]"]
    assert _device(netbox, vm.name)["status"]["value"] == "failed"
    assert restored.returncode == 0, restored.stderr

    stopped = _ssh(str(RACK.gateway), f"systemctl stop {MIRROR_UNIT}")
    assert stopped.returncode == 0, stopped.stderr
    try:
        (verdict,) = verify(netbox, select, mark_active_failed=True,
                            extravars=OPTIONS.extravars).verdicts
    finally:
        started = _ssh(str(RACK.gateway), f"systemctl start {MIRROR_UNIT}")
    failed = _checks_failed(verdict)
    assert list(failed) == ["containers.registry_mirror"], failed
    assert f"check the mirror service at {vrack.mirror_url(RACK)}" in \
        failed["containers.registry_mirror"]
    assert started.returncode == 0, started.stderr


# The installer asks the mirror within about 150 s of DHCP alone on an Intel machine; here it
# shares the two cores with a re-image.
INSTALL_SECONDS = 420


def test_reimage_a_corrupted_image_and_the_debian_installer_in_one_run(netbox, rack, image,
                                                                       tokens, made_keys, runs,
                                                                       tmp_path, monkeypatch):
    """One re-image run of four hosts, as a rack of mixed hosts would go (and one run of VM
    boots instead of two):

    - vm 1 is re-imaged (a new boot id, the image's marker), but planted: its deploy data
      carries another host key than the one the controller pins (as another machine answering
      at its address would present). The stage's SSH wait fails it at its first try, saying
      so, and nothing runs on it; the pinned key held through the whole first run.
    - vm 4 (its NIC fixed) is given a corrupted copy of the image with the real one's expected
      checksum: its first 8 MiB, as a transfer cut short would leave it (short, so the test
      does not stream a second image: the ramdisk refuses any stream whose sha256 is not the
      image's, which is all this shows).
    - vm 3 (its BMC answering again) has a BIOS attribute pinned (racklift.bios) that its BMC
      reports otherwise: it fails before anything is served to it or powered on, naming the
      attribute, found and wanted.
    - vm 2's NetBox record asks for Debian's own installer (os_image installer-debian-12): the
      stage serves Debian's netboot installer and the preseed rendered from NetBox's data,
      powers the VM on to the network, and the installer boots, fetches its preseed and asks
      the Debian mirror for the release through the rack's uplink, as the preseed's proxy says.
      It cannot finish here: this machine's Debian mirror answers 404 for most of the
      installer's own packages (udebs: 290 of the 439 bookworm's installer index lists,
      apt-mirror-setup among them), so the installer stops at its first download and the stage
      ends the install at its timeout, failing the host alone and powering it off. A complete
      install (the installer's power-off, the disk booted, the nonce and marker read over SSH)
      is the unit tier's (test_image_stage.py), with Ansible and the BMC stood in for."""
    imaged_vm, installer_vm, pinned_vm, corrupt_vm = rack.vms[:4]
    (ip,) = netbox.get_all("ipam/ip-addresses", {"address": SILENT_BMC})  # the first run's
    netbox.update("ipam/ip-addresses", [{"id": ip["id"], "address": f"{pinned_vm.bmc}/32"}])
    before, _, _ = _state(imaged_vm.address)
    corrupt = tmp_path / "image"
    corrupt.mkdir()
    with image.path.open("rb") as whole:
        (corrupt / image.path.name).write_bytes(whole.read(8 * MIB))
    shutil.copyfile(f"{image.path}.sha256", corrupt / f"{image.path.name}.sha256")
    bad = diskimage.DiskImage(image.name, "0badc0de0badc0de", corrupt, image.sha256,
                              image.size, image.raw_size, 0, True)
    options = imaging.ImagingOptions(
        timeouts=image_plan.Timeouts(dhcp=120, deploy=600, install=INSTALL_SECONDS, ssh=300),
        extravars=OPTIONS.extravars, images={corrupt_vm.name: bad})
    real_render = deploy_data.render

    def other_key_for_vm1(spec, *args, **kwargs):
        if spec.host == imaged_vm.name:
            spec = dataclasses.replace(spec, host_key=host_keys.new_host_key())
        return real_render(spec, *args, **kwargs)
    monkeypatch.setattr(imaging.deploy_data, "render", other_key_for_vm1)
    devices = {vm.name: _device(netbox, vm.name) for vm in (installer_vm, pinned_vm)}
    _set_local_context(netbox, devices[installer_vm.name], os_image="installer-debian-12")
    # sushy-tools' libvirt driver reports ProcTurboMode Enabled (its default BIOS attributes).
    _set_local_context(netbox, devices[pinned_vm.name], bios={"ProcTurboMode": "Disabled"})
    try:
        result, _ = _run(netbox, [imaged_vm.name, installer_vm.name, pinned_vm.name,
                                  corrupt_vm.name],
                         Options(REIMAGE, reason="imaging test", until="image"), options,
                         runs=runs)
    finally:
        netbox.update("dcim/devices", [{"id": d["id"], "local_context_data":
                                        d["local_context_data"]} for d in devices.values()])
    errors = {h.name: h.error or "" for h in result.hosts}
    console = vrack.console_log(RACK, installer_vm.name).read_text(errors="replace")
    assert {h.name: h.result for h in result.hosts} == {
        imaged_vm.name: FAILED, installer_vm.name: FAILED, pinned_vm.name: FAILED,
        corrupt_vm.name: FAILED}, (errors, console[-3000:])

    after, _, marker = _state(imaged_vm.address)
    assert after != before
    assert f'"build_id":"{image.build_id}"' in marker
    assert errors[imaged_vm.name] == f"after the deploy, SSH: {host_keys.MISMATCH_ERROR}"
    _failed_in_netbox(netbox, imaged_vm.name, errors[imaged_vm.name])

    assert errors[pinned_vm.name].startswith(
        "its firmware and BIOS are not as its device type pins them: BIOS attribute "
        'ProcTurboMode: found "Enabled", wanted "Disabled"'), errors[pinned_vm.name]
    _failed_in_netbox(netbox, pinned_vm.name, errors[pinned_vm.name])
    assert vrack.domains(RACK)[pinned_vm.name] == "shut off"  # never powered on

    assert "the deploy ramdisk reported failure in phase verify: image sha256 mismatch: " \
           f"expected {image.sha256}" in errors[corrupt_vm.name]
    _failed_in_netbox(netbox, corrupt_vm.name, errors[corrupt_vm.name])
    assert vrack.domains(RACK)[corrupt_vm.name] == "shut off"  # the ramdisk powered it off

    assert errors[installer_vm.name].startswith(
        f"the debian-12 installer did not finish within {INSTALL_SECONDS} s of the DHCP "
        "request"), errors[installer_vm.name]
    _failed_in_netbox(netbox, installer_vm.name, errors[installer_vm.name])
    assert vrack.domains(RACK)[installer_vm.name] == "shut off"
    # The boot server served the installer and this host's preseed to the host's address.
    served = _ssh(str(RACK.gateway), "cat /var/log/nginx/access.log").stdout
    for path in ("installer/debian-12/linux", "installer/debian-12/initrd.gz",
                 f"installer/{installer_vm.name}/preseed.cfg"):
        assert re.search(rf"^{re.escape(installer_vm.address)} .*\"GET /{re.escape(path)} "
                         r"HTTP/1\.[01]\" 200 ", served, re.MULTILINE), \
            (path, served[-2000:], console[-3000:])
    # The installer, configured by the preseed (static address, mirror, proxy), asked the
    # mirror for the release through the rack's only way out.
    uplink = (vrack.vrack_dir(RACK) / "uplink.log").read_text(errors="replace")
    release = f"GET {podman.DEBIAN_MIRROR}/dists/{podman.DEBIAN_SUITE}/"
    assert re.search(rf"{re.escape(release)}(In)?Release ", uplink), (uplink[-2000:],
                                                                      console[-3000:])


def test_an_update_task_that_fails_fails_its_host_before_power_on(netbox, rack, runs, tmp_path):
    """--apply-firmware on vm 3 (off its BMC pin, never powered on since the first run): the
    boot server serves the image, the BMC's update task fails (a lab image that says so), and
    the host fails there with the BMC's message, before anything else is done or it is powered
    on; nothing was changed, so no change is journaled."""
    vm = rack.vms[2]
    (firmware_dir := tmp_path / "firmware").mkdir()
    (firmware_dir / "bmc-1.02.json").write_bytes(
        lab_firmware.lab_image("BMC", "1.02", fail="flash verify failed: image CRC mismatch"))
    device = _device(netbox, vm.name)
    _set_local_context(netbox, device, firmware={"BMC": "1.02"},
                       firmware_images={"BMC": "bmc-1.02.json"})
    options = imaging.ImagingOptions(extravars=OPTIONS.extravars, apply_firmware=True,
                                     firmware_dir=firmware_dir)
    try:
        result, _ = _run(netbox, [vm.name], Options(REIMAGE, reason="firmware test",
                                                    until="image"), options, runs=runs)
    finally:
        netbox.update("dcim/devices", [{"id": device["id"], "local_context_data":
                                        device["local_context_data"]}])
    (host,) = result.hosts
    assert host.result == FAILED
    assert re.search(r"applying its firmware and BIOS pins: firmware BMC: the BMC's update "
                     r"task /redfish/v1/TaskService/Tasks/[0-9]+ ended Exception: flash verify "
                     r"failed: image CRC mismatch", host.error or ""), host.error
    _failed_in_netbox(netbox, vm.name, host.error)
    assert not any("racklift firmware:" in e for e in _journal(netbox, device["id"]))
    assert vrack.domains(RACK)[vm.name] == "shut off"  # never powered on
    # The BMC fetched the image from the boot server, as a real BMC on the OOB network would.
    served = _ssh(str(RACK.gateway), "cat /var/log/nginx/access.log").stdout
    assert '"GET /firmware/bmc-1.02.json HTTP/1.1" 200 ' in served, served[-2000:]


def test_no_secret_in_run_directories_or_output(rack, tokens, made_keys, runs, secret_dirs):
    assert len(runs) == 3 and len(tokens) >= 3 and len(made_keys) >= 4
    # Private keys as the files hold them and as the deploy data carries them (base64).
    private = [k.private.splitlines()[1] for k in made_keys] + \
        [k.private_base64()[40:100] for k in made_keys]
    secrets = [vrack.bmc_password(RACK), WRONG_PASSWORD, *tokens, *private]
    for result, lines in runs:
        files = [p for p in Path(result.run_dir).rglob("*") if p.is_file()]
        assert files
        for path in files:
            text = path.read_text(errors="replace")
            leaked = [i for i, s in enumerate(secrets) if s in text]
            assert not leaked, f"{path} holds secret #{leaked}"
        output = "\n".join(lines) + "\n".join(h.error or "" for h in result.hosts)
        assert not [s for s in secrets if s in output]
        assert not re.search(r"racklift\.token=\w", output)
    # The secrets directory of each run is gone.
    assert secret_dirs and not [p for p in secret_dirs if p.exists()]
