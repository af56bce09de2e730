"""The image stage of the pipeline (docs/architecture.md, step 3): each host PXE-boots
racklift's deploy ramdisk from its site's boot server, which streams the OS image onto its
disk; the host comes back on SSH with a new boot id and the image's marker. A host whose
os_image is `installer-<os>` (e.g. installer-debian-12) PXE-boots that OS's own installer
instead, with a preseed or autoinstall rendered from the same data (racklift.imaging.installer),
which powers the host off when it is done.

`image_hosts` is the pipeline's ImageStage: host name → error (None: imaged). Per host, with
a timeout per phase and one clear error each; one host's failure never stops the others (the
run they share, its errors, notes and playbook runs: racklift.pipeline.image_run):

1. From NetBox: provisioning MAC and IP, BMC (OOB IP), the host's desired state
   (racklift.netbox.desired: the OS image, racklift builds `debian12`; the disk to write it
   to, `os_disk`; the device type's `hardware.boot_timeout`), the boot server: THE active
   device with role `boot-server` in the host's site (none or several is an error naming the
   site).
   From the inventory (racklift.hostvars): BMC port, CA and
   credentials (vault or environment), the SSH key Ansible uses (its .pub is authorized on the
   deployed host, or the host var `racklift_authorized_keys`), and the boot id of a host that
   already runs (over racklift's own SSH clients).
   Then, before anything is served: the firmware and BIOS pins over Redfish
   (racklift.pipeline.image_power). With --apply-firmware, a host off its pins is brought to
   them after step 2 instead (racklift.bmc.apply: its boot server serves the images), before
   it is powered on to deploy.
2. A one-time token, a nonce and deploy data per host (racklift.imaging.deploy_data); the
   boot_server role on the boot server (playbooks/image_boot.yml) with only these hosts
   deploying and those the run's other racks still deploy there
   (racklift.pipeline.boot_server_hosts: a site's racks deploy at once), the ramdisk and the
   image (copied when their checksum differs). An installed host gets a nonce and its
   installer files instead (no token: the installer fetches nothing secret), its mirror and
   proxy from the host vars racklift_installer_mirror and racklift_installer_proxy, and
   Debian's netboot installer from the controller's debian-installer-12-netboot-amd64.
3. Redfish (racklift.pipeline.image_power): one-time network boot, then power on (or force
   restart when on).
4. On the boot server (playbooks/image_wait.yml, racklift.pipeline.boot_server_waits): the
   MAC's DHCP request (timeout: the MAC, and MACs the boot server ignored), then the ramdisk's
   report (failure: its phase and reason).
   Times there are the boot server's own: its journal is compared with its clock only.
   An installed host: after its DHCP request, Redfish until it is powered off (the installer's
   end; timeout: Timeouts.install), with a progress note every few minutes (image_power).
5. Redfish (image_power): boot from disk again, always (sushy-tools keeps "Once" forever and
   its VM reboots into the network: then a power cycle makes the disk boot take effect). Hosts
   that failed after power-on are powered off, so they do not loop through network boots.
6. SSH (the inventory's connection, the lab's ProxyCommand), accepting only the host key
   racklift made for this deploy (racklift.imaging.host_keys: it went to the host with its
   deploy data or installer files; the run's known_hosts holds its public half), waited for
   by racklift.pipeline.ssh_wait (another key fails the host at once), then
   playbooks/image_check.yml: a new boot id, this deploy's nonce on the disk (the ramdisk or the
   installer wrote it: an older disk of the same image has another or none) and the marker
   (name + build id); NetBox's custom field `racklift_image` records it. Installed hosts are
   powered on again first.
7. However the stage ends, after step 5: each boot server drops the deploy scripts and deploy
   data (tokens, their hashes) of the hosts it was given (playbooks/image_release.yml).

Secrets: tokens, host keys and the vars file with them, and the host vars file with the BMC
credentials, live in a 0700 directory outside the run directory (racklift.secret_files),
deleted at the end; tokens and private keys never appear in errors or progress. The pipeline
writes NetBox status and journal.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from racklift.ansible import PlaybookResult, script
from racklift.errors import RackliftError
from racklift.hostvars import read_hostvars
from racklift.imaging import deploy_data, diskimage, host_keys, installer, ramdisk
from racklift.lifecycle.state import IMAGE_FIELD, Transition, apply
from racklift.netbox.client import NetBox
from racklift.netbox.desired import FIELD_PREFIX
from racklift.netbox.expected import ExpectedHost
from racklift.pipeline.boot_server_hosts import BootServerHosts
from racklift.pipeline.boot_server_waits import wait_on_boot_servers
from racklift.pipeline.image_plan import (
    BOOT_SERVER_ROLE,
    CHECK_TASK,
    FACTS_TASK,
    BootClock,
    BootServer,
    ImagingOptions,
    Target,
    authorized_keys,
    boot_clock,
    boot_server_for,
    boot_vars,
    check_error,
    dhcp_error,
    dhcp_timeout,
    dhcp_window,
    image_marker,
    image_problem,
    imaging_problems,
    parse_check,
    ramdisk_boot_id,
    report_error,
    ssh_timeout,
)
from racklift.pipeline.image_power import (
    apply_firmware,
    boot_disk,
    check_firmware,
    firmware_files,
    power_on,
    wait_installs,
)
from racklift.pipeline.image_run import ImageRun
from racklift.pipeline.progress import Progress
from racklift.pipeline.ssh_wait import wait_for_ssh
from racklift.secret_files import secrets_dir, write_secret
from racklift.verify.direct_collect import HostFailed, run_everywhere
from racklift.verify.reach import reach

# What image_check.sh prints is a boot id, a nonce and a small JSON marker.
CHECK_LIMIT = 64 * 1024
CHECK_TIMEOUT = 60.0  # the host already answered SSH (the wait before): a few seconds
BOOT_ID_TIMEOUT = 30.0  # a host that runs answers at once; one that is off within ssh's timeout


def _resolve(run: ImageRun, hosts: list[ExpectedHost], image: diskimage.DiskImage,
             ) -> tuple[list[Target], dict[str, BootServer]]:
    images = run.options.images
    servers = run.netbox.get_all("dcim/devices", {"role": BOOT_SERVER_ROLE, "status": "active",
                                                  "site": sorted({h.site for h in hosts})},
                                 fields=("id", "name", "site", "primary_ip4"))
    targets, by_name = [], {}
    for host in hosts:
        host_image = images.get(host.name, image)
        problems = [*map(str, imaging_problems(host)), image_problem(host, host_image)]
        desired = host.desired
        try:
            if not host.provisioning_mac:
                raise RackliftError(f"{host.name}: no MAC on its provisioning interface "
                                    f"{host.provisioning_interface} in NetBox: add it")
            if desired is None:
                raise RackliftError(f"{host.name}: {FIELD_PREFIX}: the config context does not "
                                    f"parse: `racklift netbox.expected --host {host.name}` "
                                    "names each value racklift cannot take")
            if desired.os_disk is None or any(problems):
                raise RackliftError("; ".join(p for p in problems if p))
            server = boot_server_for(host, servers)
        except RackliftError as exc:
            run.fail(host.name, str(exc))
            continue
        by_name[server.name] = server
        targets.append(Target(host, deploy_data.normalize_mac(host.provisioning_mac),
                              server.name, host_image, desired.os_disk,
                              desired.hardware.boot_timeout,
                              installer=installer.installer_os(desired.os_image)))
    return targets, by_name


def _hostvars(run: ImageRun, targets: list[Target], ident: str) -> tuple[list[Target],
                                                                     dict[str, str]]:
    """Targets with their inventory vars (racklift.hostvars), and the boot ids of hosts that
    already run."""
    names = [t.name for t in targets]
    with_vars = []
    for t, values in zip(targets, read_hostvars(names, run.netbox.settings, env=run.env,
                                                extravars=run.options.extravars).values(),
                         strict=True):
        if isinstance(values, str):
            run.fail(t.name, f"reading its inventory vars: {values}")
        else:
            with_vars.append(replace(t, hostvars=values))
    return with_vars, _boot_ids(run, with_vars)


def _boot_ids(run: ImageRun, targets: list[Target]) -> dict[str, str]:
    """The boot id of each host that already answers on SSH (a re-image: the imaged host must
    come back with another one), over racklift's own SSH clients. A host that has never
    booted does not answer: no boot id, and no failure."""
    entries = reach([t.name for t in targets], run.netbox.settings, run.options.extravars,
                    run.env)
    ran = run_everywhere({n: e["ssh"] for n, e in entries.items() if "ssh" in e},
                         ["cat", "/proc/sys/kernel/random/boot_id"], b"", limit=CHECK_LIMIT,
                         timeout=BOOT_ID_TIMEOUT)
    return {name: got.stdout.strip() for name, got in ran.items()
            if not isinstance(got, HostFailed) and got.rc == 0 and got.stdout.strip()}


def _entry(run: ImageRun, t: Target, server: BootServer) -> dict[str, Any]:
    """The host's boot_server_hosts entry: its deploy (image, with a token) or its install;
    RackliftError naming the field when its data cannot be rendered."""
    nonce, key = deploy_data.new_nonce(), host_keys.new_host_key()
    spec = deploy_data.HostDeploy(host=t.name, mac=t.mac, address=t.host.primary_ip or "",
                                  authorized_keys=authorized_keys(t.name, t.hostvars),
                                  target_disk=t.disk, host_key=key)
    entry = {"name": t.name, "mac": t.mac, "ip": t.host.address, "deploy": True}
    if t.installer:
        rendered = installer.render_installer(spec, t.installer_spec(), server.url, nonce)
        entry.update(installer.boot_server_installer(rendered))
        marker = rendered.marker
    else:
        data = deploy_data.render(spec, deploy_data.ImageArtifact(
            t.image.name, t.image.build_id, t.image.sha256), server.url, nonce)
        entry.update(method="image", token=deploy_data.new_token(), deploy_data=data)
        marker = image_marker(t.image)
    host_keys.write_known_hosts(run.run_dir, t.name, key)
    run.nonces[t.name], run.markers[t.name] = nonce, marker
    return entry


def _prepare_boot_servers(run: ImageRun, targets: list[Target], servers: dict[str, BootServer],
                          disk: ramdisk.Ramdisk, ident: str, listed: BootServerHosts,
                          ) -> dict[str, str]:
    """Tokens per host deployed with an image; each boot server set up to deploy its hosts,
    and those of other racks still deploying there (`listed`)."""
    tokens: dict[str, str] = {}
    for name, server in sorted(servers.items()):
        mine = [t for t in run.live(targets) if t.boot_server == name]
        entries, media = [], []
        for t in mine:
            try:
                entry = _entry(run, t, server)
                for item in installer.packaged_media(t.installer) if t.installer else ():
                    if item not in media:
                        media.append(item)
            except RackliftError as exc:
                run.fail(t.name, str(exc))
                continue
            if "token" in entry:
                tokens[t.name] = entry["token"]
            entries.append(entry)
        if not entries:
            continue
        settings = partial(boot_vars, server, images=_images(
            [t for t in mine if not t.installer]), disk=disk,
            media=[*media, *firmware_files(run, mine)])
        why, clock = listed.serve(
            name, entries, json.dumps(settings([]), sort_keys=True),
            partial(_serve, run, name, settings, len(entries), ident),
            waiting=partial(_waits, run, name, ident))
        if why is None:
            run.clocks[name] = clock
        for entry in entries if why else ():
            run.fail(entry["name"], f"boot server {name}: {why}")
    return tokens


def _waits(run: ImageRun, name: str, ident: str) -> None:
    run.progress.note(f"rack {ident}: boot server {name} is busy with another rack's role run "
                      "or release; waiting (one run then serves every rack waiting)")


def _serve(run: ImageRun, name: str, settings: Callable[[list[dict[str, Any]]], dict[str, Any]],
           count: int, ident: str, listed: list[dict[str, Any]], whole: bool,
           ) -> tuple[str | None, BootClock | None]:
    """The role run on boot server `name` for the `listed` hosts (`count` of them this
    rack's), `whole` or its hosts' part; its error (None when it serves them and its clock is
    known) and the boot server's clock."""
    vars_file = write_secret(run.secrets / f"boot-{name}.json", settings(listed))
    others = len(listed) - count
    run.progress.note(f"rack {ident}: boot server {name}: serving {count} deploys"
                      + (f" (and {others} of other racks)" if others else "")
                      + ("" if whole else ", the role's hosts part"))
    received: dict[str, float] = {}
    try:
        result = run.playbook("image_boot.yml", [name], f"image-boot-{name}-{ident}",
                              {"racklift_image_vars_file": str(vars_file),
                               "racklift_image_hosts_only": not whole}, (FACTS_TASK,),
                              received=received)
    finally:
        vars_file.unlink()
    facts = result.captured.get(name, {}).get(FACTS_TASK)
    clock = boot_clock(facts, received[name]) if facts and name in received else None
    if name in result.failed or name not in result.ok:
        return result.failed.get(name, "the playbook did not run on it"), None
    if clock is None:
        return "the facts Ansible gathered on it hold no time (ansible_date_time)", None
    return None, clock


def _images(targets: list[Target]) -> list[diskimage.DiskImage]:
    return list({t.image.path: t.image for t in targets}.values())


def _check(run: ImageRun, targets: list[Target], old_ids: dict[str, set[str]],
           ident: str) -> None:
    if not targets:
        return
    timeout = ssh_timeout(targets, run.options.timeouts)
    pinned = host_keys.extravars(run.run_dir, [t.name for t in targets])
    targets, ssh = _wait_for_ssh(run, targets, pinned, time.monotonic() + timeout)
    shown = _shown(run, [t for t in targets if t.name in ssh], ssh)
    if others := [t for t in targets if t.name not in ssh]:
        result = run.playbook("image_check.yml", [t.name for t in others],
                              f"image-check-{ident}",
                              {"racklift_image_ssh_timeout": int(timeout), **pinned},
                              (CHECK_TASK,))
        for t in others:
            res = result.captured.get(t.name, {}).get(CHECK_TASK)
            if res is None:
                run.fail(t.name, f"after the deploy, SSH: "
                                 f"{result.failed.get(t.name, 'no answer')} "
                                 f"(timeout {timeout:.0f} s)")
            else:
                shown[t.name] = str(res.get("stdout", ""))
    updates = []
    for t in targets:
        if t.name not in shown:
            continue
        want = run.markers[t.name]
        marker = f"{want['name']} {want['build_id']}"
        try:
            found = parse_check(shown[t.name])
        except ValueError:
            run.fail(t.name, "the deployed host has no readable /etc/racklift/image.json")
            continue
        why = check_error(t.name, want, run.nonces[t.name], found, old_ids.get(t.name, set()))
        if why:
            run.fail(t.name, why)
            continue
        run.note(t.name, f"answers on SSH with boot id {found.boot_id}, this deploy's nonce and "
                         f"image {marker}")
        # The stage's journal entry ("imaged") follows, when the stage completes.
        updates.append(Transition(t.host.netbox_id, None, fields={IMAGE_FIELD: marker}))
    apply(run.netbox, updates)


def _shown(run: ImageRun, targets: list[Target], ssh: Mapping[str, list[str]]
           ) -> dict[str, str]:
    """What each host reached over plain ssh printed of files/image_check.sh, asked over
    racklift's own SSH clients (a playbook's module runs cost the controller ~0.4 s a host); a
    host that does not answer fails here."""
    ran = run_everywhere({t.name: ssh[t.name] for t in targets}, ["sh", "-s"],
                         script("image_check.sh"), limit=CHECK_LIMIT, timeout=CHECK_TIMEOUT,
                         on_event=run.progress.event, task=CHECK_TASK)
    shown = {}
    for name, got in ran.items():
        if isinstance(got, HostFailed):
            run.fail(name, f"after the deploy, SSH: {got.message}")
        else:  # a missing marker fails the script: what it printed says so
            shown[name] = got.stdout
    return shown


def _wait_for_ssh(run: ImageRun, targets: list[Target], pinned: Mapping[str, Any],
                  deadline: float) -> tuple[list[Target], dict[str, list[str]]]:
    """The targets that answer on SSH with the key racklift gave them, by `deadline`, the others
    failed here; and the ssh argv of each host reached over plain ssh. A host Ansible reaches
    another way than ssh is left to image_check.yml's own wait."""
    entries = reach([t.name for t in targets], run.netbox.settings,
                    {**run.options.extravars, **pinned}, run.env)
    for name, entry in entries.items():
        if "error" in entry:
            run.fail(name, f"after the deploy, SSH: {entry['error']}")
    ssh = {n: e["ssh"] for n, e in entries.items() if "ssh" in e}
    answers = wait_for_ssh(ssh, deadline)
    for name, why in answers.items():
        if why:
            run.fail(name, f"after the deploy, SSH: {why}")
    live = run.live(targets)
    return live, {t.name: ssh[t.name] for t in live if t.name in ssh}


def image_hosts(netbox: NetBox, hosts: list[ExpectedHost], run_dir: Path, progress: Progress,
                options: ImagingOptions | None = None, *,
                boot_servers: BootServerHosts | None = None) -> dict[str, str | None]:
    """Image `hosts` (the pipeline's ImageStage); host name → error, None when imaged.
    `boot_servers`: what each boot server deploys for the run's other racks (a role run here
    lists them too, so they go on deploying)."""
    options = options or ImagingOptions()
    listed = boot_servers or BootServerHosts()
    ident = (hosts[0].rack or "no-rack").lower() if hosts else "none"
    if options.image is None and not (diskimage.image_dir() / "image.json").exists():
        # Minutes the first time on a machine, and the stage is silent meanwhile otherwise.
        progress.note(f"building the disk image {diskimage.IMAGE_NAME} "
                      f"{diskimage.build_id()} and the deploy ramdisk (once per recipe, a few "
                      "minutes)")
    image = options.image or diskimage.build()
    disk = ramdisk.build(image)
    progress.note(f"image {image.name} {image.build_id} ({image.size // 2**20} MiB"
                  f"{'' if image.cached else f', built in {image.seconds:.0f} s'}), ramdisk "
                  f"{disk.build_id}")
    with secrets_dir() as secrets:
        run = ImageRun(netbox, run_dir, progress, options, secrets)
        run.errors = {h.name: None for h in hosts}
        targets, servers = _resolve(run, hosts, image)
        targets, boot_ids = _hostvars(run, run.live(targets), ident)
        check_firmware(run, run.live(targets))
        if not run.live(targets):
            return run.errors
        try:
            tokens = _prepare_boot_servers(run, targets, servers, disk, ident, listed)
            apply_firmware(run, run.live(targets), servers)
            checks = _deploy(run, run.live(targets), tokens, boot_ids, ident)
        finally:
            # Whatever ended the stage, an error included, no host is left network-booting:
            # the disk again, and those not deployed powered off; then, even if that failed,
            # no boot server keeps a token of this run.
            try:
                boot_disk(run, [t for t in targets if t.name in run.started
                                 and t.name not in run.disk_boot_set], set())
            finally:
                _release(run, [t for t in targets if t.name in run.nonces], ident, listed)
        # Their boot server is done with them: each host reboots into what was written and is
        # checked over SSH.
        for group, old_ids in checks:
            _check(run, run.live(group), old_ids, ident)
    return run.errors


def _release(run: ImageRun, targets: list[Target], ident: str, listed: BootServerHosts) -> None:
    """Per boot server, one run of playbooks/image_release.yml: the deploy scripts and deploy
    data of the hosts it was given removed, and those hosts no longer `listed` there. Where
    that fails, the operator is told what is left (the hosts' own results stand: their tokens
    are bound to their addresses)."""
    for server in sorted({t.boot_server for t in targets}):
        mine = [t for t in targets if t.boot_server == server]
        result = listed.release(server, [{"name": t.name, "mac": t.mac} for t in mine],
                                partial(_remove, run, server, ident),
                                waiting=partial(_waits, run, server, ident))
        if server in result.failed or server not in result.ok:
            run.progress.note(
                f"boot server {server}: the deploy scripts and deploy data of "
                f"{', '.join(t.name for t in mine)} could not be removed "
                f"({result.failed.get(server, 'the playbook did not run on it')}): the next "
                "image run there removes them, or remove ipxe/<mac>.ipxe and "
                "hosts/<name>.json there by hand")


def _remove(run: ImageRun, server: str, ident: str, hosts: list[dict[str, Any]],
            ) -> PlaybookResult:
    """The release run on `server` for `hosts` ({name, mac}: this rack's, and those of the
    racks that waited with it)."""
    return run.playbook("image_release.yml", [server], f"image-release-{server}-{ident}",
                        {"racklift_image_release": hosts})


def _deploy(run: ImageRun, live: list[Target], tokens: dict[str, str],
            boot_ids: dict[str, str], ident: str) -> list[tuple[list[Target], dict[str, set[str]]]]:
    """Power on, wait for DHCP and the deploy report (or the installer's power-off), boot the
    disk again; the hosts to check over SSH then, each group with its old boot ids."""
    timeouts = run.options.timeouts
    power_on(run, live)
    powered = run.live(live)
    windows = {t.name: dhcp_window(run.clocks[t.boot_server], run.started[t.name],
                                   dhcp_timeout(t, timeouts)) for t in powered}
    dhcp = wait_on_boot_servers(run, "dhcp", powered, windows, tokens, ident)
    for t in powered:
        at = dhcp["hosts"].get(t.name, {}).get("at")
        if at is None:
            run.fail(t.name, dhcp_error(t, dhcp_timeout(t, timeouts), dhcp["ignored"]))
        else:
            after = at - run.clocks[t.boot_server].server_time(run.started[t.name])
            run.progress.note(f"{t.name}: DHCP request seen by the boot server "
                              f"{after:.0f} s after power-on")
            windows[t.name] = (at, at + timeouts.deploy)
    requested = run.live(powered)
    # Off now, not after the others' deploys: a host without DHCP keeps network-booting.
    boot_disk(run, [t for t in powered if t not in requested], set())
    installs = [t for t in requested if t.installer]
    install_deadline = time.monotonic() + timeouts.install
    deploys = [t for t in requested if not t.installer]
    reports = wait_on_boot_servers(run, "report", deploys, windows, tokens, ident)
    old_ids: dict[str, set[str]] = {}
    for t in deploys:
        report = reports["hosts"].get(t.name, {}).get("report")
        why = report_error(t, report, timeouts.deploy)
        if why:
            run.fail(t.name, why)
            continue
        run.note(t.name, f"deployed: {report.get('reason')}")
        old_ids[t.name] = {i for i in (boot_ids.get(t.name), ramdisk_boot_id(report)) if i}
    # Deployed hosts first: an install takes far longer, and a deployed host whose BMC keeps
    # network-booting (sushy-tools) reboots until its disk boot is set.
    boot_disk(run, deploys, {t.name for t in run.live(deploys)})
    if not installs:
        return [(deploys, old_ids)]  # checked once their boot server is released
    _check(run, run.live(deploys), old_ids, ident)  # not after the installs' hour
    wait_installs(run, run.live(installs), install_deadline)
    boot_disk(run, installs, {t.name for t in run.live(installs)})
    return [(installs, {t.name: {boot_ids[t.name]} for t in installs if t.name in boot_ids})]


