"""The image stage end to end on the virtual rack, real everything: the test NetBox, the
pipeline (`run(..., Options(until="image"), image=image_hosts)`), Redfish through sushy-tools
to libvirt/QEMU (TCG, UEFI) VMs, the boot_server role on the boot server container (dnsmasq,
nginx, the deploy API), the deploy ramdisk and the disk image, SSH through the namespace.

The VMs stand in for GPU servers: their device type gets one GPU and one InfiniBand port
template and their tag a `racklift` config context (os_image debian12), so their NetBox
records are complete for the pipeline's preflight. Failure cases, each a per-host error and
`failed` in NetBox: a wrong BMC password (a host var from an extra inventory source), a BMC
that does not answer (the OOB IP moved to an address where nothing listens), a NIC whose MAC
is not NetBox's (short DHCP timeout), a corrupted image (ImagingOptions.image: a copy of the
image with bytes flipped, same build id and checksum as the real one).
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from racklift.imaging import deploy_data, diskimage
from racklift.lab import hosts as lab_hosts
from racklift.lab import netbox_server, seed, vrack
from racklift.netbox.client import NetBox
from racklift.netbox.reader import Selection
from racklift.pipeline import image as imaging
from racklift.pipeline.model import FAILED, STAGED
from racklift.pipeline.plan import REIMAGE, Options
from racklift.pipeline.progress import Progress
from racklift.pipeline.run import run

# The virtual rack layout the vrack tests use (one virtual rack per machine).
RACK = vrack.Vrack("rltest-prov", "rltest0", ipaddress.ip_network("10.91.0.0/24"),
                   ipaddress.ip_network("fd52:4c91::/64"), ipaddress.ip_network("127.0.78.0/24"),
                   rack="V91", mac_base=0x5800, memory_mib=768, disk_gib=2)
VMS = 4
WRONG_PASSWORD = "not-the-bmc-password-3f9c"
SWAPPED_MAC = "02:52:4c:ff:ff:07"
SILENT_BMC = "127.0.78.250/32"  # nothing listens there
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def netbox(instance, settings) -> NetBox:
    netbox_server.reset(instance)
    return NetBox.connect(settings)


def complete_records(netbox: NetBox) -> None:
    """What a GPU server's record has and the VMs' lack: GPU and IB templates, a context."""
    device_type = netbox.get_all("dcim/device-types", {"slug": vrack.VM_TYPE})[0]
    netbox.get_or_create("dcim/interface-templates",
                         {"device_type_id": device_type["id"], "name": "mlx5_0"},
                         {"device_type": device_type["id"], "name": "mlx5_0",
                          "type": "infiniband-ndr"})
    role, _ = netbox.get_or_create("dcim/inventory-item-roles", {"slug": "gpu"},
                                   {"name": "GPU", "color": "8bc34a"})
    maker, _ = netbox.get_or_create("dcim/manufacturers", {"slug": "nvidia"},
                                    {"name": "NVIDIA"})
    netbox.get_or_create("dcim/inventory-item-templates",
                         {"device_type_id": device_type["id"], "name": "GPU0"},
                         {"device_type": device_type["id"], "name": "GPU0", "role": role["id"],
                          "manufacturer": maker["id"], "part_id": "NVIDIA H100 80GB HBM3"})
    netbox.get_or_create("extras/config-contexts", {"name": "racklift-lab-vm"},
                         {"name": "racklift-lab-vm", "tags": [vrack.TAG_VM], "data": {"racklift": {
                             "provisioning_interface": seed.PROVISIONING,
                             "os_image": diskimage.IMAGE_NAME}}})


@pytest.fixture(scope="module")
def rack(netbox):
    vrack.down(netbox, RACK)  # leftovers of an interrupted run
    try:
        started = time.monotonic()
        result = vrack.up(netbox, VMS, RACK)
        complete_records(netbox)
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


@pytest.fixture(scope="module")
def tokens(request) -> list[str]:
    """Every token the stage makes (the real generator, observed), for the secrets check."""
    made: list[str] = []
    real = deploy_data.new_token

    def observed() -> str:
        made.append(real())
        return made[-1]

    patch = pytest.MonkeyPatch()
    patch.setattr(imaging.deploy_data, "new_token", observed)
    request.addfinalizer(patch.undo)
    return made


@pytest.fixture(scope="module")
def runs() -> list:
    return []


OPTIONS = imaging.ImagingOptions(extravars={"racklift_vrack_netns": RACK.netns})


def _run(netbox, names, options, imaging_options=OPTIONS, runs=None):
    lines: list[str] = []
    progress = Progress(lambda line: (lines.append(line), print(line)), heartbeat=30)
    stage = functools.partial(imaging.image_hosts, options=imaging_options)
    result = run(netbox, Selection(names=tuple(names)), options, progress=progress, image=stage)
    if runs is not None:
        runs.append((result, lines))
    return result, lines


def _ssh(address: str, command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ssh", "-i", str(lab_hosts.ssh_key()), "-o",
         f"ProxyCommand={vrack.proxy_command(RACK)}", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes",
         "-o", "ConnectTimeout=10", f"root@{address}", command],
        capture_output=True, text=True, timeout=60)


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


def _since_power_on(lines, host, event):
    """Seconds from the host's power-on to `event`, from the run's progress lines."""
    stamp = {}
    for line in lines:
        seconds = float(line.split("s]")[0].strip("[ "))
        if f"{host}: network boot once" in line:
            stamp["on"] = seconds
        if line.startswith("[") and f"{host}: {event}" in line:
            stamp["event"] = seconds
    return stamp["event"] - stamp["on"]


def test_a_new_vm_is_imaged_through_the_pipeline(netbox, rack, image, tokens, runs):
    vm = rack.vms[0]
    result, lines = _run(netbox, [vm.name], Options(until="image"), runs=runs)
    (host,) = result.hosts
    assert (host.result, host.error) == (STAGED, None)
    _, hostname, marker = _state(vm.address)
    assert hostname == vm.name
    assert marker == f'{{"name":"{image.name}","build_id":"{image.build_id}"}}'
    device = _device(netbox, vm.name)
    assert device["status"]["value"] == "staged"
    assert device["custom_fields"]["racklift_stage"] == "imaged"
    assert device["custom_fields"]["racklift_image"] == f"{image.name} {image.build_id}"
    assert any(": imaged" in entry for entry in _journal(netbox, device["id"]))
    seconds = _since_power_on(lines, vm.name, "answers on SSH")
    print(f"[imaging] {vm.name}: power-on to SSH {seconds:.0f} s (image "
          f"{image.size / MIB:.0f} MiB gz); whole run {result.seconds:.0f} s")
    assert seconds < 600
    # Only this host was given a deploy; its token is spent.
    scripts = _ssh(str(RACK.gateway), "ls /srv/racklift/boot/ipxe /var/lib/racklift/boot/used")
    assert f"{vm.mac.lower()}.ipxe" in scripts.stdout and f"{vm.name}.json" in scripts.stdout


def test_reimage_brings_a_new_boot_id_and_the_same_build(netbox, rack, image, tokens, runs):
    vm = rack.vms[0]
    before, _, _ = _state(vm.address)
    result, _ = _run(netbox, [vm.name], Options(REIMAGE, reason="imaging test", until="image"),
                     runs=runs)
    (host,) = result.hosts
    assert (host.result, host.error) == (STAGED, None)
    after, _, marker = _state(vm.address)
    assert after != before
    assert f'"build_id":"{image.build_id}"' in marker
    assert _device(netbox, vm.name)["status"]["value"] == "staged"


def test_failures_are_per_host_errors(netbox, rack, image, tokens, runs, tmp_path):
    corrupt_vm, password_vm, silent_vm, swapped_vm = rack.vms[:4]
    # Wrong BMC password: a host var from an extra inventory source (as a site's vault would).
    extra = tmp_path / "bmc.yml"
    extra.write_text(f"all:\n  hosts:\n    {password_vm.name}:\n"
                     f"      racklift_bmc_password: {WRONG_PASSWORD}\n")
    # A BMC that does not answer.
    (ip,) = netbox.get_all("ipam/ip-addresses", {"address": f"{silent_vm.bmc}/32"})
    netbox.update("ipam/ip-addresses", [{"id": ip["id"], "address": SILENT_BMC}])
    # A NIC whose MAC is not the one NetBox has.
    vrack.set_vm_mac(RACK, swapped_vm.name, SWAPPED_MAC)
    # A corrupted image: same name, build id and expected checksum, other bytes.
    corrupt = tmp_path / "image"
    corrupt.mkdir()
    shutil.copyfile(image.path, corrupt / "disk.raw.gz")
    shutil.copyfile(f"{image.path}.sha256", corrupt / "disk.raw.gz.sha256")
    with (corrupt / "disk.raw.gz").open("r+b") as f:
        f.seek(4)  # the gzip header's timestamp: it still unpacks, only the checksum differs
        f.write(b"\xff\xff\xff\xff")
    options = imaging.ImagingOptions(
        timeouts=imaging.Timeouts(dhcp=60, deploy=300, ssh=120), extravars=OPTIONS.extravars,
        inventory=(str(extra),), image=diskimage.DiskImage(
            image.name, image.build_id, corrupt, image.sha256, image.size, image.raw_size, 0,
            True))
    try:
        result, _ = _run(netbox, [v.name for v in (corrupt_vm, password_vm, silent_vm,
                                                   swapped_vm)],
                         Options(REIMAGE, reason="imaging failure test", until="image"),
                         options, runs=runs)
    finally:
        vrack.set_vm_mac(RACK, swapped_vm.name, swapped_vm.mac)
    errors = {h.name: h.error or "" for h in result.hosts}
    assert {h.result for h in result.hosts} == {FAILED}, errors
    assert "the deploy ramdisk reported failure in phase verify: image sha256 mismatch: " \
           f"expected {image.sha256}" in errors[corrupt_vm.name]
    assert f"BMC at https://{password_vm.bmc}:8443 rejected the credentials (HTTP 401)" in \
        errors[password_vm.name]
    assert "BMC at https://127.0.78.250:8443 is unreachable" in errors[silent_vm.name]
    assert f"no DHCP request from {swapped_vm.mac.lower()} (the provisioning MAC in NetBox)" \
           f" reached boot server {RACK.boot_server} within 60 s" in errors[swapped_vm.name]
    assert f"ignored DHCP requests from MACs it does not know: {SWAPPED_MAC}" in \
        errors[swapped_vm.name]
    for vm in (corrupt_vm, password_vm, silent_vm, swapped_vm):
        device = _device(netbox, vm.name)
        assert device["status"]["value"] == "failed"
        assert any(errors[vm.name][:60] in entry for entry in _journal(netbox, device["id"]))
    # Hosts that failed after power-on were powered off, to stop them network-booting.
    assert vrack.domains(RACK)[swapped_vm.name] == "shut off"
    assert vrack.domains(RACK)[corrupt_vm.name] == "shut off"


def test_no_secret_in_run_directories_or_output(rack, tokens, runs):
    assert len(runs) == 3 and len(tokens) >= 3
    secrets = [vrack.bmc_password(RACK), WRONG_PASSWORD, *tokens]
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
    for temp in {tempfile.gettempdir(), os.environ.get("XDG_RUNTIME_DIR") or "/tmp"}:
        assert not list(Path(temp).glob("racklift-image-*"))  # the secrets directory is gone
