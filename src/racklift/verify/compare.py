"""What a host is, against what NetBox says it should be: a list of structured mismatches.

Pure: an ExpectedHost and HostFacts in, Mismatches out. A `critical` mismatch keeps the host
out of the pool; a `warning` is reported and does not.
"""

from __future__ import annotations

from collections.abc import Iterator

from racklift.facts.host import HostFacts
from racklift.natural import natural_key
from racklift.netbox.expected import IB_LINK_TYPES, ExpectedGPU, ExpectedHost
from racklift.verify.cabling import cabling
from racklift.verify.mismatch import CRITICAL, WARNING, Mismatch
from racklift.verify.ports import match_ib_ports, match_nics


def _same(a: str | None, b: str | None) -> bool:
    return (a or "").strip().casefold() == (b or "").strip().casefold()


# What separates the components of a Debian version ("24.10-1.1.4.0", "1:2.3+dfsg~rc1").
_VERSION_SEPARATORS = ".-+~:"


# The package whose version an OFED source's pin is (the ofed role pins and holds it:
# ofed_doca_packages, ofed_mlnx_ofed_packages, the inbox rdma-core). Only that one: the others a
# source installs carry their own numbering (DOCA-OFED 2.9.1-1 installs mlnx-ofed-kernel-utils
# 24.10.OFED.24.10.1.1.4.1-1 and rdma-core 2410mlnx54-1.2410068), so reading one of them
# against the pin would refuse every host at it.
OFED_PACKAGE = {"inbox": "rdma-core", "doca": "doca-ofed", "mlnx_ofed": "mlnx-ofed-basic"}


def version_matches(have: str | None, want: str) -> bool:
    """Whether installed version ``have`` is ``want``, or ``want`` made more precise: compared
    on component boundaries, so "24.10" and "24.10*" match "24.10-1.1.4.0" but "24.1" never
    matches "24.10". A trailing '*' (an apt pattern's "any rest") says the same as none."""
    prefix = want.removesuffix("*")
    if have is None or not prefix or not have.startswith(prefix):
        return False
    rest = have[len(prefix):]
    return not rest or prefix[-1] in _VERSION_SEPARATORS or rest[0] in _VERSION_SEPARATORS


def gpu_slots(expected: ExpectedHost) -> list[ExpectedGPU]:
    """The device type's GPU slots in natural order of their names (GPU2 before GPU10): slot n
    holds the n-th GPU nvidia-smi lists, in PCI bus order."""
    return sorted(expected.gpus, key=lambda slot: natural_key(slot.name))


def compare(expected: ExpectedHost, facts: HostFacts) -> list[Mismatch]:
    return [*_identity(expected, facts), *_gpus(expected, facts), *_hcas(expected, facts),
            *_interfaces(expected, facts), *_software(expected, facts), *_partial(facts),
            *_topology(expected, facts), *_nvlinks(expected, facts),
            *_nvlink_errors(expected, facts), *cabling(expected, facts)]


# What a tool that stopped part-way says about the host, by output.
_PARTIAL_HINTS = {
    "ibstat.txt": "ibstat stopped at a CA it could not read (a device that vanished while it "
                  "ran): check the kernel log for mlx5 errors, reseat or replace that HCA",
}


def _partial(facts: HostFacts) -> Iterator[Mismatch]:
    for output, said in facts.partial:
        yield Mismatch(f"tools.{output.split('.')[0]}", "completes", said, CRITICAL,
                       _PARTIAL_HINTS.get(output, f"{output} failed part-way: run it on the "
                                          "host and read its error"))


def identity(expected: ExpectedHost, facts: HostFacts) -> list[Mismatch]:
    """The critical mismatches that say the host may not be the machine NetBox records, or its
    GPUs not the ones in the slots NetBox records: nothing observed on it is worth recording."""
    return [m for m in (*_identity(expected, facts), *_gpus(expected, facts))
            if m.severity == CRITICAL]


def _identity(expected: ExpectedHost, facts: HostFacts) -> Iterator[Mismatch]:
    system = facts.system
    if system is None:
        yield Mismatch("system.serial", expected.serial, None, CRITICAL,
                       "dmidecode gave no system information: run it on the host as root")
        return
    if not _same(system.serial, expected.serial) and not _same(system.chassis_serial,
                                                                 expected.serial):
        yield Mismatch("system.serial", expected.serial, system.serial, CRITICAL,
                       "this is not the chassis NetBox records here: check the host's "
                       "cabling/BMC mapping, or correct the serial in NetBox")
    dt = expected.device_type
    if not _same(system.product, dt.model) and not _same(system.product, dt.part_number):
        yield Mismatch("device_type.model", dt.model, system.product, WARNING,
                       "the chassis model differs from the NetBox device type: check the "
                       "device type (DMI product names can differ from NetBox models)")


def _gpus(expected: ExpectedHost, facts: HostFacts) -> Iterator[Mismatch]:
    want = len(expected.gpus)
    if facts.nvidia is None:
        on_bus = len(facts.pci_gpus)
        if want and on_bus >= want:
            yield Mismatch("gpus.driver", "NVIDIA driver answering", facts.nvidia_error,
                           CRITICAL, f"{on_bus} NVIDIA GPUs are on the PCI bus but nvidia-smi "
                           "failed: install or repair the driver (nvidia_driver role), reboot")
        else:
            yield Mismatch("gpus.count", want, on_bus, CRITICAL,
                           f"nvidia-smi failed ({facts.nvidia_error}) and the PCI bus shows "
                           f"{on_bus} NVIDIA GPUs: reseat or replace the missing GPUs")
        return
    seen = facts.nvidia.gpus
    if len(seen) != want or facts.nvidia.attached_gpus != want:
        yield Mismatch("gpus.count", want, len(seen), CRITICAL,
                       "GPUs missing (fallen off the bus, or not seated): check `nvidia-smi`, "
                       "the kernel log for Xid 79, reseat or RMA")
    for bus in facts.nvidia.lost_gpus:
        yield Mismatch(f"gpus.lost[{bus}]", "answering", "no device handle", CRITICAL,
                       f"nvidia-smi cannot reach the GPU at {bus} (fallen off the bus or "
                       "failed): check the kernel log for Xid 79, reseat or RMA it")
    slots = gpu_slots(expected)
    for slot, gpu in zip(slots, seen, strict=False):
        if not _same(gpu.name, slot.part_id):
            yield Mismatch(f"gpus[{gpu.index}].model", slot.part_id, gpu.name, CRITICAL,
                           "a different GPU model than the device type's: fix the device "
                           "type in NetBox or the hardware")
    by_index = {g.index: g for g in seen}
    for number, slot in enumerate(slots):
        gpu = by_index.get(number)
        if slot.serial and gpu is not None and not _same(gpu.serial, slot.serial):
            yield Mismatch(f"gpus[{number}].serial", slot.serial, gpu.serial, CRITICAL,
                           f"GPU in slot {slot.name} is not the one NetBox records: "
                           "update the inventory item after an RMA, or find the swap")


def _hcas(expected: ExpectedHost, facts: HostFacts) -> Iterator[Mismatch]:
    ib = [p for p in facts.hca_ports if (p.link_layer or "").lower() == "infiniband"
          and not p.is_vf]
    want = expected.ib_ports
    if len(ib) != len(want):
        yield Mismatch("hcas.ib_ports", len(want), len(ib), CRITICAL,
                       "InfiniBand ports missing: check `ibstat`, HCA seating and firmware")
    matched = match_ib_ports(want, ib)
    for iface in want:
        if iface.name not in matched:
            continue
        port, rule = matched[iface.name]
        rate = IB_LINK_TYPES.get(iface.type, (None, None))[1]
        if rate and port.rate_gbps is not None and port.rate_gbps != rate \
                and (port.state or "").lower() == "active":
            yield Mismatch(f"interfaces.{iface.name}.rate", rate, port.rate_gbps, CRITICAL,
                           f"{iface.name} ({port.ca}, matched by {rule}) trained at "
                           f"{port.rate_gbps} Gb/s, not {rate} ({iface.type}): check the cable "
                           "and the switch port")


def _interfaces(expected: ExpectedHost, facts: HostFacts) -> Iterator[Mismatch]:
    owner = {(n.mac or "").upper(): n.name for n in facts.nics if n.mac}
    matched = match_nics(expected, facts.nics)
    for iface in expected.interfaces:
        if iface.mgmt_only or iface.is_infiniband or not iface.mac:
            continue  # the BMC is not visible from the OS; IB ports are checked by CA
        if iface.name not in matched:
            where = owner.get(iface.mac.upper())
            if where:
                yield Mismatch(f"interfaces.{iface.name}.mac", iface.mac, f"on {where}",
                               CRITICAL, f"{iface.name}'s MAC is on {where}: NIC names or "
                               "cables are swapped")
            else:
                # Every interface checked here is in band (provisioning or data): without it
                # the host is not reachable, or not the host NetBox describes.
                yield Mismatch(f"interfaces.{iface.name}", "present", "absent", CRITICAL,
                               f"no interface {iface.name} on the host: check the NIC and "
                               "its name (udev), or the NetBox interface")
            continue
        nic, rule = matched[iface.name]
        if rule == "MAC":
            yield Mismatch(f"interfaces.{iface.name}.name", iface.name, nic.name, WARNING,
                           f"{iface.name}'s MAC is on {nic.name} (matched by MAC): rename the "
                           "NetBox interface to what the host calls it")
        elif not _same(nic.mac, iface.mac):
            yield Mismatch(f"interfaces.{iface.name}.mac", iface.mac, nic.mac, CRITICAL,
                           "the MAC differs from NetBox: a swapped NIC or cable, or a "
                           "replaced NIC not yet recorded (update the MAC object)")
    if expected.primary_ip and expected.primary_ip_interface:
        holder = matched.get(expected.primary_ip_interface)
        nic = holder[0] if holder else facts.nic(expected.primary_ip_interface)
        if nic is None or expected.primary_ip not in nic.addresses:
            yield Mismatch(f"interfaces.{expected.primary_ip_interface}.ip",
                           expected.primary_ip, list(nic.addresses) if nic else None, CRITICAL,
                           "the primary IP is not on the interface NetBox assigns it to")


def _software(expected: ExpectedHost, facts: HostFacts) -> Iterator[Mismatch]:
    desired = expected.desired
    if desired is None:
        yield Mismatch("config_context.racklift", "a desired state racklift can read", None,
                       CRITICAL, "fix the host's config context: `racklift netbox.expected "
                       f"--host {expected.name}` names each value racklift cannot take")
        return
    driver = desired.nvidia_driver.version
    if driver and facts.nvidia is not None and facts.nvidia.driver_version != driver:
        yield Mismatch("software.nvidia_driver", driver, facts.nvidia.driver_version,
                       CRITICAL, "run the nvidia_driver role with the config context's "
                       "version, then reboot")
    for key, want, package in (
            ("ofed", desired.ofed.version, OFED_PACKAGE[desired.ofed.source]),
            ("container_toolkit", desired.container_toolkit.version,
             "nvidia-container-toolkit")):
        if not want:
            continue  # not managed for this host
        have = facts.packages.get(package)
        if not version_matches(have, want):
            yield Mismatch(f"software.{key}", want, have, CRITICAL,
                           f"install {key.replace('_', ' ')} {want} (its role), or correct "
                           "the config context")


# PCIe distances in `nvidia-smi topo -m`, nearest first (SOC is SYS before driver 384).
_PCIE = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5, "SOC": 5}
_SHOWN = 8  # pairs or links named in one finding


def _listed(items: list[str]) -> str:
    more = len(items) - _SHOWN
    return ", ".join(items[:_SHOWN]) + (f" and {more} more" if more > 0 else "")


def _uncollected(facts: HostFacts, field: str, command: str) -> Iterator[Mismatch]:
    """A tool the link checks need gave nothing. Silent where the GPU findings already say why:
    no driver answering, or a GPU nvidia-smi cannot reach (it then fails every subcommand)."""
    if facts.nvidia is not None and not facts.nvidia.lost_gpus:
        yield Mismatch(field, command, "not collected", CRITICAL,
                       f"run `{command}` on the host and read its error")


def _topology(expected: ExpectedHost, facts: HostFacts) -> Iterator[Mismatch]:
    hw = expected.desired.hardware if expected.desired else None
    if hw is None or not (hw.gpu_link or hw.nic_affinity):
        return
    topo = facts.topology
    if topo is None:
        yield from _uncollected(facts, "topology", "nvidia-smi topo -m")
        return
    gpus = topo.gpus
    if hw.gpu_link:
        other = [f"{a}-{b} {link}" for i, a in enumerate(gpus) for b in gpus[i + 1:]
                 if (link := topo.link(a, b)) != hw.gpu_link]
        if other:
            yield Mismatch("topology.gpu_link", hw.gpu_link, _listed(other), CRITICAL,
                           "GPU pairs not joined as the device type's board is: check "
                           "`nvidia-smi nvlink -s` for inactive links, the NVSwitch tray and "
                           "fabric manager; reseat the GPU named in every pair")
    if hw.nic_affinity and gpus and not topo.nics:
        # Nothing to measure is not a pass: the HCAs the affinity is about are unseen.
        yield Mismatch("topology.nic_affinity", f"{hw.nic_affinity} or nearer",
                       "no NIC in the matrix", CRITICAL,
                       "the GPUs' distance to their HCAs cannot be checked: `nvidia-smi topo "
                       "-m` lists no NIC (the HCAs missing, or their driver not loaded)")
    if hw.nic_affinity and topo.nics:
        for gpu in gpus:
            seen = {nic: topo.link(gpu, nic) or "SYS" for nic in topo.nics}
            nic, link = min(seen.items(), key=lambda kv: _PCIE.get(kv[1], 9))
            if _PCIE.get(link, 9) > _PCIE[hw.nic_affinity]:
                name = topo.nic_names.get(nic, nic)
                yield Mismatch(f"topology.{gpu}.nic", f"{hw.nic_affinity} or nearer",
                               f"{link} ({name})", CRITICAL,
                               f"{gpu}'s nearest NIC is {link}: its RDMA traffic crosses the "
                               "CPU. Check which slot each HCA sits in against the board's "
                               "rail layout (`lspci -t`)")


def _nvlinks(expected: ExpectedHost, facts: HostFacts) -> Iterator[Mismatch]:
    hw = expected.desired.hardware if expected.desired else None
    if hw is None or not (hw.nvlinks or hw.nvlink_speed):
        return
    if facts.nvlinks is None:
        yield from _uncollected(facts, "nvlink", "nvidia-smi nvlink -s")
        return
    if not facts.nvlinks and facts.nvidia is not None and facts.nvidia.gpus:
        yield Mismatch("nvlink", "NVLinks on every GPU", "no GPU reports NVLinks", CRITICAL,
                       "check fabric manager and the NVSwitch tray, then `nvidia-smi nvlink -s`")
    for gpu in facts.nvlinks:
        active = [n for n, speed in enumerate(gpu.links) if speed is not None]
        if hw.nvlinks and len(active) != hw.nvlinks:
            down = "all" if gpu.all_inactive else _listed([str(n) for n in gpu.inactive])
            yield Mismatch(f"nvlink[{gpu.gpu}].links", hw.nvlinks,
                           f"{len(active)} active (inactive: {down or 'none'})", CRITICAL,
                           f"GPU {gpu.gpu} has NVLinks down: reset the GPU or reboot; if they "
                           "stay down, reseat the GPU or RMA (the kernel log names Xid 74/149)")
        slow = [f"{n} at {speed:g}" for n, speed in enumerate(gpu.links)
                if speed is not None and hw.nvlink_speed and speed < hw.nvlink_speed * 0.99]
        if slow:
            yield Mismatch(f"nvlink[{gpu.gpu}].speed", f"{hw.nvlink_speed:g} GB/s",
                           _listed(slow), CRITICAL,
                           f"GPU {gpu.gpu}'s NVLinks trained slow: reset the GPU; if they stay "
                           "slow, reseat it or RMA")


def _nvlink_errors(expected: ExpectedHost, facts: HostFacts) -> Iterator[Mismatch]:
    """NVLink error counters that rose between the collector's two readings: a link that
    retrains while the host is idle will stall collectives under load."""
    hw = expected.desired.hardware if expected.desired else None
    if hw is None or not hw.nvlinks:
        return
    if facts.nvlink_errors is None:
        yield from _uncollected(facts, "nvlink.errors", "nvidia-smi nvlink -e")
        return
    first = {r.gpu: r.by_counter() for r in facts.nvlink_errors if r.reading == 0}
    for later in (r for r in facts.nvlink_errors if r.reading == 1):
        before = first.get(later.gpu, {})
        rose = [f"link {link} {name} +{value - before[(link, name)]:g}"
                for (link, name), value in later.by_counter().items()
                if (link, name) in before and value > before[(link, name)]]
        if rose:
            yield Mismatch(f"nvlink[{later.gpu}].errors", "counters steady", _listed(rose),
                           CRITICAL, f"GPU {later.gpu}'s NVLink error counters rise while the "
                           "host is idle: reset the GPU; if they keep rising, reseat it or RMA "
                           "(the kernel log may name Xid 74)")
