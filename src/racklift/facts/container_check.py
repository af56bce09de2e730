"""The container check's result (playbooks/files/container_check.py): the steps it ran on the
host, typed. Judged by racklift.verify.containers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from racklift.facts.parsers import ParseError

KIND = "container-check"
# The script's steps, in the order it runs them.
STEPS = ("engine", "mirror-configured", "runtime", "pull", "mirror-served", "run")


@dataclass(frozen=True)
class Step:
    name: str
    ok: bool
    why: str  # the host-side cause when not ok
    command: tuple[str, ...] | None  # None: decided from an earlier step's output
    rc: int | None
    stdout: str
    stderr: str
    seconds: float


@dataclass(frozen=True)
class ContainerCheck:
    mirror: str
    image: str
    command: tuple[str, ...]
    gpus: bool
    steps: tuple[Step, ...]

    @property
    def failed(self) -> Step | None:
        """The step the check stopped at (after a failed pull, the mirror's answer follows)."""
        return next((s for s in self.steps if not s.ok), None)

    def step(self, name: str) -> Step | None:
        return next((s for s in self.steps if s.name == name), None)

    @property
    def passed(self) -> bool:
        return self.failed is None and [s.name for s in self.steps] == list(STEPS)


def parse_container_check(text: str) -> ContainerCheck:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ParseError(KIND, f"not JSON ({exc})") from None
    try:
        return ContainerCheck(
            mirror=str(doc["mirror"]), image=str(doc["image"]),
            command=tuple(map(str, doc["command"])), gpus=bool(doc["gpus"]),
            steps=tuple(_step(raw) for raw in doc["steps"]))
    except KeyError as exc:
        raise ParseError(KIND, f"not container_check.py's document: no {exc}") from None
    except TypeError as exc:
        raise ParseError(KIND, f"not container_check.py's document: {exc}") from None


def _step(raw: dict[str, Any]) -> Step:
    if raw["step"] not in STEPS:
        raise ParseError(KIND, f"unknown step {raw['step']!r}")
    command = raw["command"]
    return Step(name=raw["step"], ok=bool(raw["ok"]), why=str(raw["why"]),
                command=tuple(map(str, command)) if command is not None else None,
                rc=raw["rc"], stdout=str(raw["stdout"]), stderr=str(raw["stderr"]),
                seconds=float(raw["seconds"]))
