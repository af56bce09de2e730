"""What the image stage waits for on each host's boot server (playbooks/image_wait.yml, one run per
boot server; racklift.pipeline.image_stage, step 4): the host's DHCP request, then the deploy
ramdisk's report, each within the host's window on that boot server's own clock."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from racklift.pipeline.image_plan import API_DATA, WAIT_TASK, Target
from racklift.pipeline.image_run import ImageRun


def wait_on_boot_servers(run: ImageRun, phase: str, targets: list[Target],
          windows: Mapping[str, tuple[float, float]], tokens: dict[str, str],
          ident: str) -> dict[str, Any]:
    """Per boot server, the wait script's answer for `targets` (see playbooks/files), each
    host's window (since, deadline) on its boot server's clock."""
    answers: dict[str, Any] = {"hosts": {}, "ignored": []}
    for server in sorted({t.boot_server for t in targets}):
        mine = [t for t in targets if t.boot_server == server]
        # An installed host has no token: the DHCP phase reads none.
        request = {"phase": phase, "api_data": API_DATA, "poll": 2, "hosts": [
            {"name": t.name, "mac": t.mac, "since": windows[t.name][0],
             "deadline": windows[t.name][1],
             **({"token_sha256": hashlib.sha256(tokens[t.name].encode()).hexdigest()}
                if t.name in tokens else {})}
            for t in mine]}
        result = run.playbook("image_wait.yml", [server], f"image-wait-{phase}-{server}-{ident}",
                              {"racklift_image_wait": request}, (WAIT_TASK,))
        res = result.captured.get(server, {}).get(WAIT_TASK)
        if res is None:
            for t in mine:
                run.fail(t.name, f"waiting on boot server {server}: "
                                 f"{result.failed.get(server, 'no answer')}")
            continue
        try:
            answer = json.loads(res["stdout"])
            answers["hosts"].update({t.name: answer["hosts"][t.name] for t in mine
                                     if t.name in answer["hosts"]})
            answers["ignored"] += [str(mac) for mac in answer["ignored"]]
        except (KeyError, TypeError, ValueError) as exc:
            for t in mine:
                run.fail(t.name, f"waiting on boot server {server}: its wait script's answer "
                                 f"cannot be read ({type(exc).__name__}): see its run's "
                                 "Ansible artifacts")
    return answers
