"""The container check's result (playbooks/files/container_check.py): the steps it ran on the
host, typed. Judged by racklift.verify.container_check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from racklift.facts.parsers import ParseError, load_json

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
    doc = load_json(text, KIND)
    try:
        return ContainerCheck(
            mirror=_text(doc["mirror"], "mirror"), image=_text(doc["image"], "image"),
            command=_command(doc["command"], "command"), gpus=bool(doc["gpus"]),
            steps=tuple(_step(raw) for raw in _list(doc["steps"], "steps")))
    except KeyError as exc:
        raise _malformed(f"no {exc}") from None
    except TypeError as exc:
        raise _malformed(str(exc)) from None


def _malformed(why: str) -> ParseError:
    return ParseError(KIND, f"not container_check.py's document: {why}")


# The host wrote these: each value is held to the type the script writes, so that nothing
# later (str() of a deep nesting, float() of a 400-digit number, command[0]) can fail on it.
def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise _malformed(f"{what} is not a list")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise _malformed(f"{what} is not text")
    return value


def _command(value: Any, what: str) -> tuple[str, ...]:
    words = _list(value, what)
    if not words:
        raise _malformed(f"{what} is empty")
    return tuple(_text(w, what) for w in words)


def _step(raw: Any) -> Step:
    name = raw["step"]
    if name not in STEPS:
        raise ParseError(KIND, f"unknown step {str(name)[:40]!r}")
    command, rc, seconds = raw["command"], raw["rc"], raw["seconds"]
    if rc is not None and (type(rc) is not int or not -2**31 <= rc < 2**31):
        raise _malformed(f"step {name}: rc is not an exit code")
    # Compared, not float()ed: NaN fails both comparisons, a huge int raises nothing.
    if type(seconds) not in (int, float) or not 0 <= seconds < 10**9:
        raise _malformed(f"step {name}: seconds is not a duration")
    return Step(name=name, ok=bool(raw["ok"]), why=_text(raw["why"], f"step {name} why"),
                command=_command(command, f"step {name} command") if command is not None
                else None,
                rc=rc, stdout=_text(raw["stdout"], f"step {name} stdout"),
                stderr=_text(raw["stderr"], f"step {name} stderr"), seconds=float(seconds))
