"""Quick health checks in the spirit of production GPU health checkers. Pure: facts in,
results out. A check that could not run is UNKNOWN, and UNKNOWN never counts as OK."""

from __future__ import annotations

from collections.abc import Callable

from racklift.facts.host import HostFacts
from racklift.facts.observed import GPUFacts, KernelEvent
from racklift.facts.xid import admission_severity
from racklift.netbox.expected import ExpectedHost
from racklift.verify.check import CRITICAL, OK, UNKNOWN, WARNING, Check, CheckResult
from racklift.verify.container_check import container_check
from racklift.verify.ports import match_ib_ports

GpuCheck = Callable[[tuple[GPUFacts, ...]], tuple[str, str]]


def _gpu_check(name: str) -> Callable[[GpuCheck], Check]:
    """A check over the GPUs nvidia-smi reported; UNKNOWN when it reported none."""
    def decorate(judge: GpuCheck) -> Check:
        def check(expected: ExpectedHost, facts: HostFacts) -> CheckResult:
            if facts.nvidia is None:
                return CheckResult(name, UNKNOWN, f"no GPU facts: {facts.nvidia_error}")
            return CheckResult(name, *judge(facts.nvidia.gpus))
        check.__name__ = judge.__name__
        return check
    return decorate


@_gpu_check("gpu.ecc")
def ecc(gpus: tuple[GPUFacts, ...]) -> tuple[str, str]:
    off = [g.index for g in gpus if (g.ecc_mode_current or "") != "Enabled"]
    bad = {g.index: g.ecc_volatile_uncorrected for g in gpus if g.ecc_volatile_uncorrected}
    if bad:
        return CRITICAL, (f"uncorrected volatile ECC errors on GPU "
                          f"{', '.join(f'{i} ({n})' for i, n in bad.items())}: drain, reset "
                          "the GPU, and RMA if they return")
    if off:
        return CRITICAL, f"ECC not enabled on GPU {off}: nvidia-smi -e 1 and reboot"
    return OK, "ECC enabled, no uncorrected errors"


@_gpu_check("gpu.memory_remapping")
def memory_remapping(gpus: tuple[GPUFacts, ...]) -> tuple[str, str]:
    failed = [g.index for g in gpus if g.remapped_rows_failure]
    pending = [g.index for g in gpus if g.remapped_rows_pending or g.retired_pages_pending]
    if failed:
        return CRITICAL, f"row remapping failed on GPU {failed}: RMA"
    if pending:
        return CRITICAL, (f"row remap / page retirement pending on GPU {pending}: reset the "
                          "GPU (or reboot) before it joins the pool")
    return OK, "no pending or failed remapping"


@_gpu_check("gpu.pcie_link")
def pcie_links(gpus: tuple[GPUFacts, ...]) -> tuple[str, str]:
    # Width is what degrades with a bad riser or cable; the link *speed* drops to a lower
    # generation at idle by design, so a lower current generation alone is not a fault.
    narrow = [f"GPU {g.index} x{g.pcie_width_current} of x{g.pcie_width_max}" for g in gpus
              if g.pcie_width_current and g.pcie_width_max
              and g.pcie_width_current < g.pcie_width_max]
    if narrow:
        return CRITICAL, f"PCIe link degraded: {', '.join(narrow)}: reseat the GPU / riser"
    return OK, "all GPU links at full width"


@_gpu_check("gpu.persistence_mode")
def persistence(gpus: tuple[GPUFacts, ...]) -> tuple[str, str]:
    off = [g.index for g in gpus if (g.persistence_mode or "") != "Enabled"]
    if off:
        return WARNING, f"persistence mode off on GPU {off}: enable nvidia-persistenced"
    return OK, "persistence mode on"


def _event_text(e: KernelEvent) -> str:
    """"XID 79 on 0000:91:00: ...", "AER on nvidia 0000:03:00.0 (reported by 0000:00:03.0):
    ...", "XID 45 on 0000:dc:00 (caused by Xid 149): ..."."""
    where = e.endpoint or e.device or "?"
    also = [f"reported by {e.reported_by}"] if e.reported_by else []
    also += [f"caused by Xid {e.caused_by}"] if e.caused_by is not None else []
    code = f" {e.code}" if e.code is not None else ""
    return (f"{e.kind.upper()}{code} on {where}"
            f"{f' ({', '.join(also)})' if also else ''}: {e.message}")


def admitting(expected: ExpectedHost) -> bool:
    """Whether the gate is admitting the host (provisioned or reimaged), not checking an
    `active` one for drift."""
    return expected.status != "active"


def _severity(event: KernelEvent, expected: ExpectedHost) -> str:
    """The event's severity for this host: one being admitted must be clean of Xids
    (racklift.facts.xid)."""
    if event.kind != "xid" or not admitting(expected):
        return event.severity
    tolerated = expected.desired.hardware.tolerated_xids if expected.desired else ()
    return admission_severity(event.code, event.severity, tolerated)


def kernel_log(expected: ExpectedHost, facts: HostFacts) -> CheckResult:
    name = "kernel.gpu_errors"
    if any(n.startswith("dmesg.txt") for n in facts.not_collected):
        return CheckResult(name, UNKNOWN, "kernel log not readable (dmesg needs root)")
    judged = [(e, _severity(e, expected)) for e in facts.kernel_events]
    critical = [e for e, severity in judged if severity == "critical"]
    warnings = [e for e, severity in judged if severity == "warning"]
    if critical:
        # Xids only the admission rule makes critical: say why, and how to tolerate them.
        raised = sorted({e.code for e, severity in judged if severity != e.severity
                         and e.code is not None})
        why = (f"; a host being admitted must be clean of Xid {', '.join(map(str, raised))} "
               "unless racklift.hardware.tolerated_xids lists them") if raised else ""
        return CheckResult(name, CRITICAL, "; ".join(map(_event_text, critical[:5])) + why)
    if warnings:
        return CheckResult(name, WARNING, f"{len(warnings)} non-fatal events, first: "
                           f"{warnings[0].line.strip()}")
    return CheckResult(name, OK, "no Xid, SXid or PCIe AER errors")


def ib_links(expected: ExpectedHost, facts: HostFacts) -> CheckResult:
    name = "ib.links"
    if not expected.ib_ports:
        return CheckResult(name, OK, "no InfiniBand ports expected")
    if not facts.hca_ports:
        return CheckResult(name, UNKNOWN, "no HCA facts (ibstat and sysfs both empty)")
    # Each NetBox port's CA, however NetBox names the port (racklift.verify.ports).
    matched = match_ib_ports(expected.ib_ports, facts.hca_ports)
    down = []
    for iface in expected.ib_ports:
        port = matched[iface.name][0] if iface.name in matched else None
        if port is None:
            down.append(f"{iface.name} missing")
        elif (port.state or "").lower() != "active" or (port.phys_state or "").lower() != \
                "linkup":
            down.append(f"{iface.name} {port.state}/{port.phys_state}")
    if down:
        return CheckResult(name, CRITICAL, f"ports not Active/LinkUp: {', '.join(down)}: "
                           "check cable, switch port and subnet manager")
    return CheckResult(name, OK, f"{len(expected.ib_ports)} ports Active/LinkUp")


def fabric_manager(expected: ExpectedHost, facts: HostFacts) -> CheckResult:
    name = "gpu.fabric_manager"
    if expected.desired is None:
        return CheckResult(name, UNKNOWN, "the config context does not parse: whether the "
                           "host runs fabric manager is unknown")
    # The desired state's one answer, the one the nvidia_driver role is given (role_vars).
    if not expected.desired.fabric_manager:
        return CheckResult(name, OK, "fabric manager not wanted (racklift.hardware.nvswitch, "
                           "racklift.nvidia_driver.fabricmanager)")
    state = facts.services.get("nvidia-fabricmanager")
    if state == "active":
        return CheckResult(name, OK, "nvidia-fabricmanager active")
    if state is None:
        return CheckResult(name, UNKNOWN, "service state not collected")
    return CheckResult(name, CRITICAL, f"nvidia-fabricmanager is {state}: NVSwitch systems "
                       "cannot run CUDA jobs without it")


def disk_space(expected: ExpectedHost, facts: HostFacts) -> CheckResult:
    name = "disk.space"
    if not facts.disks:
        return CheckResult(name, UNKNOWN, "df not collected")
    worst = min(facts.disks, key=lambda d: d.free_fraction)
    text = f"{worst.mount} {worst.free_fraction:.0%} free"
    if worst.free_fraction < 0.05:
        return CheckResult(name, CRITICAL, f"{text}: free space before admitting")
    if worst.free_fraction < 0.15:
        return CheckResult(name, WARNING, text)
    return CheckResult(name, OK, text)


CHECKS: tuple[Check, ...] = (ecc, memory_remapping, pcie_links, persistence, kernel_log,
                             ib_links, fabric_manager, disk_space, container_check)


def run_checks(expected: ExpectedHost, facts: HostFacts) -> list[CheckResult]:
    return [check(expected, facts) for check in CHECKS]
