"""What racklift reads of a BMC's Redfish payloads for control (racklift.bmc.redfish's client
sends only what these say the BMC allows), and the boot overrides it sends. Pure: a BMC's answer
is data, its links checked (racklift.bmc.links) before anything follows them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from racklift.bmc.links import as_given, check_link

# Redfish's BootSource enum (DSP8010); a BMC may offer fewer (BootSourceOverrideTarget@...).
BOOT_TARGETS = ("None", "Pxe", "Floppy", "Cd", "Usb", "Hdd", "BiosSetup", "Utilities", "Diags",
                "UefiShell", "UefiTarget", "SDCard", "UefiHttp", "RemoteDrive", "UefiBootNext",
                "Recovery")
MAX_ALLOWABLE = 64  # allowable values kept of each (Redfish defines 16 boot targets)
BOOT_ENABLED = ("Disabled", "Once", "Continuous")
BOOT_MODES = ("UEFI", "Legacy")
BOOT_KEYS = ("Target", "Enabled", "Mode")  # BootSourceOverride<key>, in BootOverride's order
# The overrides racklift sends (target, enabled): the deploy's network boot, then the disk.
NETWORK_BOOT = ("Pxe", "Once")
DISK_BOOT = ("Hdd", "Continuous")
# Where a BMC does not allow Continuous (Lenovo's XCC allows Once and Disabled only), the disk
# boot is Once: the host's iPXE script is gone once its deploy ends, so a later network boot
# falls through to the disk anyway.
DISK_BOOT_FALLBACK = "Once"


@dataclass(frozen=True)
class BootOverride:
    target: str | None
    enabled: str | None
    mode: str | None  # None: the BMC does not say (BIOS-only or not reported)
    allowed_targets: tuple[str, ...] = ()  # each empty: the BMC does not say
    allowed_enabled: tuple[str, ...] = ()
    allowed_modes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResetAction:
    target: str
    allowed: tuple[str, ...]  # empty: the BMC does not say here
    action_info: str | None = None  # where it says it instead (@Redfish.ActionInfo), checked


def parse_members(payload: Mapping[str, Any]) -> list[str]:
    """A collection's member paths."""
    return [m["@odata.id"] for m in payload.get("Members") or [] if "@odata.id" in m]


def parse_power_state(payload: Mapping[str, Any]) -> str:
    state = payload.get("PowerState")
    if not isinstance(state, str):
        raise ValueError("the system reports no PowerState")
    return state


def parse_reset_action(payload: Mapping[str, Any]) -> ResetAction:
    action = (payload.get("Actions") or {}).get("#ComputerSystem.Reset")
    if not isinstance(action, dict) or "target" not in action:
        raise ValueError("the system offers no #ComputerSystem.Reset action")
    target, why = as_given(action["target"])
    if target is None:
        raise ValueError(f"its #ComputerSystem.Reset target {why}")
    info = check_link(action.get("@Redfish.ActionInfo"))[0]
    return ResetAction(target, allowable(action.get("ResetType@Redfish.AllowableValues")), info)


def allowable(values: Any) -> tuple[str, ...]:
    """An AllowableValues list as a BMC gives it: its strings, at most MAX_ALLOWABLE."""
    return tuple(v for v in values if isinstance(v, str))[:MAX_ALLOWABLE] \
        if isinstance(values, list) else ()


def parse_action_info(payload: Mapping[str, Any], parameter: str) -> tuple[str, ...]:
    """The values an ActionInfo resource allows for one of its action's parameters (DSP0266:
    Parameters[].Name, .AllowableValues); empty where it does not say."""
    found = payload.get("Parameters")
    for entry in found if isinstance(found, list) else ():
        if isinstance(entry, dict) and entry.get("Name") == parameter:
            return allowable(entry.get("AllowableValues"))
    return ()


def parse_boot(payload: Mapping[str, Any]) -> BootOverride:
    boot = payload.get("Boot") or {}
    return BootOverride(*(boot.get(f"BootSourceOverride{key}") for key in BOOT_KEYS),
                        *(tuple(boot.get(f"BootSourceOverride{key}@Redfish.AllowableValues")
                                or ()) for key in BOOT_KEYS))


def disk_boot_enabled(allowed: tuple[str, ...]) -> str:
    """How the disk boot is set on a BMC that allows `allowed` (empty: it does not say)."""
    preferred = DISK_BOOT[1]
    return DISK_BOOT_FALLBACK if allowed and preferred not in allowed \
        and DISK_BOOT_FALLBACK in allowed else preferred


def error_detail(payload: Any) -> str:
    """A Redfish error body ({"error": {"message", "@Message.ExtendedInfo": [...]}}) as one
    line; anything else as a short text."""
    if isinstance(payload, Mapping) and isinstance(payload.get("error"), Mapping):
        error = payload["error"]
        messages = [str(i.get("Message")) for i in error.get("@Message.ExtendedInfo") or []
                    if isinstance(i, Mapping) and i.get("Message")]
        return "; ".join(messages or [str(error.get("message") or error.get("code") or "")])
    return str(payload).strip()[:300]
