"""What NVIDIA Xid (GPU) and SXid (NVSwitch) codes mean, kept as data.

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog",
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (catalog for Ampere and
newer GPUs: code, mnemonic, description, "Resolution Bucket (Immediate Action)",
"Resolution Bucket (Investigatory Action)"). Names and buckets below are copied from that
table; ``action`` is our one-line reading of the bucket and the catalog's trigger notes.

Severity is racklift's, for a host in the pool (admission is stricter, below). It follows
the immediate-action bucket:

* ``critical``: RESTART_BM, RESET_GPU, CHECK_MECHANICALS, RESTART_VM, UPDATE_SWFW, XID_154,
  and the WORKFLOW_* buckets (XID_48, NVLINK_ERR, NVLINK5_ERR): the GPU or host needs an
  intervention before it may run jobs.
* ``warning``: RESTART_APP, CHECK_UVM and the "not solo" WORKFLOW_XID_45: an application
  fault; the GPU is expected to be healthy, but a host that logs them during validation is
  suspect.
* ``info``: IGNORE.

Overrides, where the catalog's IGNORE would hide something an admission gate must see:
63 (a remapped row is only in use after a GPU reset), 92 (a high single-bit error rate
precedes uncorrectable errors) and 157 (no spare resources left) are ``warning``.

Xid 144-150 are the NVLink5 (B100/GB200) units; their real severity depends on the
IntrInfo sub-code and error status of each message (the catalog's per-subcode table), which
is not decoded here: they are ``critical``, except where the driver's message calls the
error "Nonfatal" (``warning``; the kernel-log parser reads it).

The gate judges an Xid by the host's NetBox status (:func:`admission_severity`):

* at admission (any status but ``active``: a host being provisioned or reimaged), a host must
  be clean: an Xid outside the application's own bucket (RESTART_APP) refuses it, whatever
  its severity above or the driver's word, unless the device type's config context lists its
  number in ``racklift.hardware.tolerated_xids``; a listed or RESTART_APP Xid keeps its
  severity.
* on an ``active`` host (drift), the severity above, with the driver's word on 144-150,
  decides.

SXid (NVSwitch) errors: NVIDIA publishes no per-code catalog for Hopper-generation
NVSwitches that racklift keeps; the driver itself prints the class of each SXid in the
message ("Fatal" / "Non-fatal"). :func:`classify_sxid` uses that, and treats an SXid whose
message carries no class as critical.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"

CRITICAL = "critical"
WARNING = "warning"
INFO = "info"
SEVERITIES = (CRITICAL, WARNING, INFO)
APP_BUCKET = "RESTART_APP"  # the application's fault: the only bucket a host is admitted with


@dataclass(frozen=True, slots=True)
class XidInfo:
    code: int
    name: str  # the catalog's short description
    severity: str  # "critical" | "warning" | "info"
    action: str  # what to do, in one line
    mnemonic: str | None = None  # e.g. ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS
    bucket: str | None = None  # NVIDIA's immediate-action bucket
    known: bool = True


def _x(code: int, mnemonic: str, name: str, bucket: str, severity: str, action: str) -> XidInfo:
    return XidInfo(code, name, severity, action, mnemonic, bucket)


_RESET = "Drain the GPU and reset it (nvidia-smi -r); if it recurs, contact the vendor (RMA)."
_APP = "Restart the application; the GPU should be healthy. Repeated on one GPU: investigate."
_NVLINK5 = (
    "NVLink5 error: decode the IntrInfo sub-code with NVIDIA's NVLink catalog; fatal "
    "sub-codes need a GPU reset."
)

XID_TABLE: dict[int, XidInfo] = {
    x.code: x
    for x in (
        _x(8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing",
           "RESTART_APP", WARNING, _APP),
        _x(13, "ROBUST_CHANNEL_GR_EXCEPTION", "Graphics Engine Exception", "RESTART_APP",
           WARNING, "Usually an application fault (out-of-bounds access): debug it with "
           "compute-sanitizer; rarely hardware."),
        _x(31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "RESTART_APP",
           WARNING, "Usually an application illegal address; debug with cuda-gdb / "
           "compute-sanitizer; rarely driver or hardware."),
        _x(32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream",
           "RESTART_APP", WARNING, "Fault of the DMA stream over PCIe; mostly PCIe link "
           "quality: check the link and AER errors of this GPU."),
        _x(43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing", "IGNORE",
           INFO, "An application hit a software fault and was stopped; the GPU stays healthy."),
        _x(45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors",
           "WORKFLOW_XID_45", WARNING, "Follows other Xids (act on those); alone, an "
           "application was aborted - restart the fabric manager if it persists."),
        _x(46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "RESET_GPU",
           CRITICAL, _RESET),
        _x(48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "WORKFLOW_XID_48",
           CRITICAL, "Uncorrectable ECC error: reset the GPU or reboot; check SRAM threshold "
           "(sram_threshold_exceeded) and follow the RMA flow if exceeded."),
        _x(54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING",
           "Auxiliary power is not connected to the GPU board", "CHECK_MECHANICALS", CRITICAL,
           "Check the GPU's power cabling."),
        _x(61, "PMU_BREAKPOINT", "Internal micro-controller breakpoint/warning",
           "CONTACT_SUPPORT", WARNING, "Listed as unused on Ampere and newer; on older GPUs "
           "contact support if it repeats."),
        _x(62, "PMU_HALT_ERROR", "Internal micro-controller halt", "RESET_GPU", CRITICAL,
           _RESET),
        _x(63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", "IGNORE", WARNING,
           "A row remap / page retirement was recorded: reset the GPU so it takes effect, "
           "then check the remapped-rows counters."),
        _x(64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "RESET_GPU",
           CRITICAL, _RESET),
        _x(68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", "RESTART_APP", WARNING, _APP),
        _x(69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", "RESTART_APP",
           WARNING, _APP),
        _x(74, "NVLINK_ERROR", "NVLINK Error", "WORKFLOW_NVLINK_ERR", CRITICAL,
           "NVLink problem to a GPU or NVSwitch: reset the GPU or reboot; check "
           "`nvidia-smi nvlink`; repeated: vendor support (may be the far end)."),
        _x(79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus",
           "RESTART_BM", CRITICAL, "Reboot the node; check PCIe/AER and system event logs; "
           "repeated: hardware (riser, baseboard, GPU) - contact the vendor."),
        _x(92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "IGNORE", WARNING,
           "Correctable errors at a high rate: watch the GPU; contact support if it persists."),
        _x(94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", "RESTART_APP",
           WARNING, "Restart the affected application; reset the GPU when convenient."),
        _x(95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", "RESET_GPU",
           CRITICAL, "Reset the GPU before any application runs again."),
        _x(109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error",
           "RESET_GPU", CRITICAL, _RESET),
        _x(119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", "RESET_GPU", CRITICAL,
           "GSP firmware stopped answering: reset the GPU or power-cycle the node; recurring "
           "after a power cycle: follow NVIDIA's GPU debug guidelines."),
        _x(120, "GSP_ERROR", "GSP Error", "RESET_GPU", CRITICAL,
           "Error in GSP firmware: reset the GPU or power-cycle the node."),
        _x(121, "C2C_ERROR", "C2C Error", "IGNORE", INFO,
           "Corrected errors on the Grace C2C link; reset the GPU at a service window."),
        _x(136, "ALI_TRAINING_FAIL", "Link Training Failed", "RESET_GPU", CRITICAL,
           "NVLink training failed: reset the GPU; investigate link signal integrity."),
        _x(137, "NVLINK_PRIV_ERR", "NVLink Privilege Error", "IGNORE", INFO,
           "Illegal NVLink peer access, usually an application bug."),
        _x(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "RESET_GPU",
           CRITICAL, "Uncorrectable memory errors that could not be remapped: reset the GPU; "
           "recurring: vendor support."),
        _x(143, "GPU_INIT_ERROR", "GPU Initialization Error", "RESET_GPU", CRITICAL, _RESET),
        _x(144, "NVLINK_SAW_ERROR", "NVLINK: SAW Error", "WORKFLOW_NVLINK5_ERR", CRITICAL,
           _NVLINK5),
        _x(145, "NVLINK_RLW_ERROR", "NVLINK: RLW Error", "WORKFLOW_NVLINK5_ERR", CRITICAL,
           _NVLINK5),
        _x(146, "NVLINK_TLW_ERROR", "NVLINK: TLW Error", "WORKFLOW_NVLINK5_ERR", CRITICAL,
           _NVLINK5),
        _x(147, "NVLINK_TREX_ERROR", "NVLINK: TREX Error", "WORKFLOW_NVLINK5_ERR", CRITICAL,
           _NVLINK5),
        _x(148, "NVLINK_NVLPW_CTRL_ERROR", "NVLINK: NVLPW_CTRL Error", "WORKFLOW_NVLINK5_ERR",
           CRITICAL, _NVLINK5),
        _x(149, "NVLINK_NETIR_ERROR", "NVLINK: NETIR Error", "WORKFLOW_NVLINK5_ERR", CRITICAL,
           _NVLINK5),
        _x(150, "NVLINK_MSE_ERROR", "NVLINK: MSE Error", "WORKFLOW_NVLINK5_ERR", CRITICAL,
           _NVLINK5),
        _x(154, "GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed", "XID_154",
           CRITICAL, "Summarises the recovery the other Xids need (drain, GPU reset, node "
           "reboot): do what the message says."),
        _x(155, "NVLINK_SW_DEFINED_ERROR", "NVLINK: SW Defined Error", "RESET_GPU", CRITICAL,
           _RESET),
        _x(156, "RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", "RESET_GPU",
           CRITICAL, "A resource was retired: reset the GPU for it to take effect."),
        _x(157, "RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure", "IGNORE",
           WARNING, "No spare resources left to repair; the same Xid may recur: plan an RMA."),
        _x(158, "GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", "RESET_GPU", CRITICAL, _RESET),
    )
}


def classify_xid(code: int | None) -> XidInfo:
    """The meaning of Xid ``code``; unknown codes are a ``warning`` that says so."""
    if code is not None and code in XID_TABLE:
        return XID_TABLE[code]
    return XidInfo(
        code=code if code is not None else -1,
        name=f"unknown Xid {code}",
        severity=WARNING,
        action=f"Xid {code} is not in racklift's table: look it up in NVIDIA's Xid catalog "
        f"({CATALOG_URL}).",
        known=False,
    )


def admission_severity(code: int | None, severity: str, tolerated: Collection[int]) -> str:
    """The severity of Xid ``code`` (``severity``: the catalog's and the driver's) for a host
    being admitted: ``critical`` unless it is the application's (RESTART_APP) or
    ``tolerated``."""
    if code in tolerated or classify_xid(code).bucket == APP_BUCKET:
        return severity
    return CRITICAL


def classify_sxid(code: int | None, message: str = "") -> XidInfo:
    """An NVSwitch SXid, classed by what the driver printed ("Fatal" / "Non-fatal")."""
    head = message.split(",", 1)[0].strip().lower()
    if head in ("non-fatal", "nonfatal"):
        severity, note = WARNING, "non-fatal per the driver"
    elif head == "fatal":
        severity, note = CRITICAL, "fatal per the driver"
    else:
        severity, note = CRITICAL, "no class in the message; racklift treats any SXid as fatal"
    return XidInfo(
        code=code if code is not None else -1,
        name=f"NVSwitch SXid {code} ({note})",
        severity=severity,
        action="Check the NVSwitch and its links (fabric manager log, `nvidia-smi nvlink`); "
        "fatal SXids need the GPUs behind the switch reset or the node rebooted.",
        known=False,
    )
