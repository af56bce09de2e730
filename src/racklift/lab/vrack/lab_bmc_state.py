"""What the lab's BMC stand-in keeps (racklift.lab.vrack.lab_bmc, LAB ONLY): the BMC's
version, each system's pending BIOS attributes and staged BIOS version, and the update tasks;
read back from its JSON file untrusted (a restarted emulator keeps it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from racklift.bmc.firmware import is_bios_value
from racklift.lab.vrack.lab_firmware import VERSION

DEFAULT_BMC_FIRMWARE = "1.00"  # sushy-tools' Manager says FirmwareVersion "1.00"
INT_BOUND = 2 ** 63

Scalar = str | int | bool
TaskBody = dict[str, Any]


def now() -> str:
    """A task's time stamp, as Redfish writes one."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class State:
    """What the stand-in keeps: the BMC's version, each system's pending BIOS attributes and
    staged BIOS version (by system UUID), and the tasks (by Id)."""

    bmc_firmware: str = DEFAULT_BMC_FIRMWARE
    next_task: int = 1
    pending_bios: dict[str, dict[str, Scalar]] = field(default_factory=dict)
    pending_bios_version: dict[str, str] = field(default_factory=dict)
    tasks: dict[str, TaskBody] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"bmc_firmware": self.bmc_firmware, "next_task": self.next_task,
                "pending_bios": self.pending_bios,
                "pending_bios_version": self.pending_bios_version, "tasks": self.tasks}

    @classmethod
    def from_json(cls, data: Any) -> State:
        """The state a file holds; ValueError when it is not one."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        state = cls(data.get("bmc_firmware"), data.get("next_task"),
                    data.get("pending_bios"), data.get("pending_bios_version"),
                    data.get("tasks"))
        if not (isinstance(state.bmc_firmware, str) and VERSION.fullmatch(state.bmc_firmware)):
            raise ValueError("bmc_firmware is not a version")
        if not (isinstance(state.next_task, int) and 0 < state.next_task < INT_BOUND):
            raise ValueError("next_task is not a positive integer")
        if not (isinstance(state.pending_bios, dict) and all(
                isinstance(v, dict) and all(is_bios_value(x) for x in v.values())
                for v in state.pending_bios.values())):
            raise ValueError("pending_bios is not attributes by system")
        if not (isinstance(state.pending_bios_version, dict) and all(
                isinstance(v, str) and VERSION.fullmatch(v)
                for v in state.pending_bios_version.values())):
            raise ValueError("pending_bios_version is not versions by system")
        if not (isinstance(state.tasks, dict) and all(
                isinstance(t, dict) and t.get("Id") == k for k, t in state.tasks.items())):
            raise ValueError("tasks is not tasks by Id")
        return state
