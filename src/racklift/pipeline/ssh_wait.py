"""The image stage's wait for its deployed hosts' SSH, on the controller.

Each host is tried with the ssh command Ansible would run for it (racklift.verify.reach: its
inventory, the run's pinned host key among the options), every few seconds until it answers or
its deadline passes. A host presenting another key than the one racklift gave it fails at once:
asking the same machine again cannot make it the deployed one. Ansible's own wait
(playbooks/image_check.yml) then finds the answering hosts up at its first try.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from racklift.child_env import without_secrets
from racklift.imaging import host_keys

POLL = 3.0  # seconds between tries of one host
TRY_LIMIT = 60.0  # one try: ssh's ConnectTimeout (in its argv) and the login


def one_try(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([*argv, "true"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=TRY_LIMIT,
                              env=without_secrets())
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 255, "", "no answer within "
                                           f"{TRY_LIMIT:.0f} s")


def wait_for_ssh(ssh: Mapping[str, list[str]], deadline: float,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> dict[str, str | None]:
    """Host → None once `ssh[host]` (an argv up to the destination) runs a command on it, else
    why not: its key is not the pinned one (host_keys.MISMATCH_ERROR), or no answer by
    `deadline` (monotonic) with ssh's last words."""
    def one(host: str) -> tuple[str, str | None]:
        last = ""
        while True:
            done = one_try(ssh[host])
            if done.returncode == 0:
                return host, None
            text = " ".join((done.stderr or "").split())
            if host_keys.mismatch(text):
                return host, host_keys.MISMATCH_ERROR
            last = text[-300:] or f"ssh exit {done.returncode}"
            if clock() + POLL >= deadline:
                return host, f"no answer by its deadline ({last})"
            sleep(POLL)

    if not ssh:
        return {}
    with ThreadPoolExecutor(max_workers=min(32, len(ssh))) as pool:
        return dict(pool.map(one, sorted(ssh)))
