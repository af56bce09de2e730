"""The container check, judged: on the host, playbooks/files/container_check.py pulled a small
image through the host's registry mirror and ran it with the nvidia runtime; its steps are
parsed by racklift.facts.container_check. Pure: the desired mirror and the check's steps in, a
CheckResult out, naming the host-side cause of a failure and what to do about it."""

from __future__ import annotations

from racklift.facts.bundle import CONTAINER_CHECK
from racklift.facts.container_check import ContainerCheck, Step
from racklift.facts.host import HostFacts
from racklift.netbox.expected import ExpectedHost
from racklift.verify.check import CRITICAL, OK, UNKNOWN, CheckResult

# The check's name in verdicts, NetBox journals and racklift_result: kept as recorded so far.
NAME = "containers.registry_mirror"
ROLE = "run the container_runtime role"


def container_check(expected: ExpectedHost, facts: HostFacts) -> CheckResult:
    if expected.desired is None:
        return CheckResult(NAME, UNKNOWN, "the config context does not parse: whether the "
                           "host has a registry mirror is unknown")
    mirror = expected.desired.registry_mirror.url
    if not mirror:
        return CheckResult(NAME, OK, "no registry mirror configured")
    check = facts.container_check
    if check is None:
        unusable = [n for n in facts.not_collected if n.startswith(CONTAINER_CHECK)]
        return CheckResult(NAME, UNKNOWN, unusable[0] if unusable else
                           "the container check did not run (verify runs it with "
                           "racklift_container_check=true; support bundles never do)")
    if not _same(check.mirror, mirror):
        return CheckResult(NAME, UNKNOWN, f"the host was checked against {check.mirror}, "
                           f"NetBox wants {mirror}: re-run verify")
    failed = check.failed
    if failed is not None:
        return CheckResult(NAME, CRITICAL, _failure(check, failed, mirror))
    if not check.passed:
        last = check.steps[-1].name if check.steps else "none"
        return CheckResult(NAME, UNKNOWN, f"the container check stopped after step {last} "
                           "without a failure")
    return CheckResult(NAME, OK, _passed(check, mirror))


def _same(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def _docker_run(check: ContainerCheck) -> str:
    gpus = " --gpus all" if check.gpus else ""
    return f"docker run --runtime nvidia{gpus} {check.image} {' '.join(check.command)}"


def _passed(check: ContainerCheck, mirror: str) -> str:
    # The runtime's own --version names it: NVIDIA's runtime, or the lab's stand-in.
    runtime, run = check.step("runtime"), check.step("run")
    assert runtime and run  # a passed check has every step
    lines = [line.strip() for line in run.stdout.splitlines() if line.strip()]
    said = f": {lines[0]}{f' (+{len(lines) - 1} lines)' if len(lines) > 1 else ''}" if lines else ""
    return (f"{check.image} pulled through {mirror}; `{' '.join(check.command)}` ran with the "
            f"nvidia runtime{' and --gpus all' if check.gpus else ''}{said}; runtime: "
            f"{_first(runtime.stdout)}")


def _failure(check: ContainerCheck, step: Step, mirror: str) -> str:
    if step.name == "engine":
        return f"Docker does not answer on the host ({step.why}): start docker, or {ROLE}"
    if step.name == "mirror-configured":
        return f"{step.why}: {ROLE}"
    if step.name == "runtime":
        cause = (step.why if step.command is None else
                 f"the nvidia runtime {step.command[0]} does not run ({step.why})")
        return f"{cause}: {ROLE} (NVIDIA container toolkit)"
    if step.name == "pull":
        served = check.step("mirror-served")
        if served is not None and served.ok:
            return (f"docker pull {check.image} failed ({step.why}), although the mirror has "
                    "the image: check the engine on the host (disk space, docker logs)")
        return (f"docker pull {check.image} failed ({step.why}); "
                f"{served.why if served else 'the mirror was not asked'}: check the mirror "
                f"service at {mirror} and its upstream")
    if step.name == "mirror-served":
        return (f"{step.why}: check the mirror service at {mirror} (Docker falls back to the "
                "upstream when its mirror fails)")
    return (f"`{_docker_run(check)}` failed ({step.why}): check the NVIDIA driver and "
            "container toolkit on the host (nvidia-smi, nvidia-container-cli info)")


def _first(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")
