"""One VM of a virtual rack from power-off to the pool, timed: power-on to SSH, the configure
stage, verify, power-on to `active`, and where configure's time went (seconds per Ansible
module, from the run's own events).

With --src PATH, another checkout's racklift runs it (say the previous commit's, in a git
worktree: `git worktree add /tmp/before HEAD~1`): the same machine's figure for that code, to
set beside this one's (run them one after the other, not at once: each VM takes a core).

Needs the lab NetBox (`invoke netbox.up`) and no other virtual rack (one per machine): uses the
imaging benchmark's (namespace racklift-bench, rack B91) and removes it at the end. Not run in
CI. Usage: .venv/bin/python benchmarks/vm_run.py [--src PATH]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _reexec_with(src: Path) -> None:
    """Run this script again with `src`'s racklift first on the path (and its roles)."""
    if os.environ.get("RACKLIFT_BENCH_SRC") == str(src):
        return
    env = {**os.environ, "RACKLIFT_BENCH_SRC": str(src),
           "PYTHONPATH": os.pathsep.join([str(src), str(HERE)])}
    os.execve(sys.executable, [sys.executable, __file__, *sys.argv[1:]], env)


def module_seconds(events_dir: Path) -> tuple[float, int, list[tuple[str, float, int]]]:
    """(seconds, module runs, [(module, seconds, runs)] by time) over a playbook run's events."""
    total: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for path in events_dir.glob("*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data", {})
        if event.get("event") not in ("runner_on_ok", "runner_on_failed") or \
                not (data.get("start") and data.get("end")):
            continue
        action = str(data.get("task_action", "?")).rsplit(".", 1)[-1]
        total[action] += (datetime.fromisoformat(data["end"]) -
                          datetime.fromisoformat(data["start"])).total_seconds()
        count[action] += 1
    rows = [(action, seconds, count[action]) for action, seconds in total.most_common()]
    return sum(total.values()), sum(count.values()), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, help="another checkout's src/ to run")
    parser.add_argument("--vcpus", type=int, default=2, help="the VM's vCPUs (TCG: a host "
                        "thread each); 2, as the demo's rack (racklift.lab.vrack.LAB)")
    args = parser.parse_args()
    if args.src:
        _reexec_with(args.src.resolve())

    import dataclasses
    import functools

    from common import connect, lab, load, machine
    from imaging import BENCH, POWER_ON

    import racklift
    from racklift.imaging import diskimage
    from racklift.lab import vrack
    from racklift.netbox.selection import Selection
    from racklift.pipeline.image_stage import ImagingOptions, image_hosts
    from racklift.pipeline.plan import Options
    from racklift.pipeline.progress import Progress
    from racklift.pipeline.provision import run

    rack = dataclasses.replace(BENCH, vcpus=args.vcpus) if args.vcpus != 1 else BENCH
    _, settings = lab()
    netbox = connect(settings)
    image = diskimage.build()
    print(f"{machine()}; racklift from {Path(racklift.__file__).parent}; image {image.name} "
          f"{image.build_id}: {image.size / 2**20:.0f} MiB compressed, "
          f"{image.raw_size / 2**20:.0f} MiB raw; the VM {rack.vcpus} vCPU", flush=True)
    vrack.down(netbox, rack)
    try:
        (vm,) = vrack.up(netbox, 1, rack).vms
        extravars = {"racklift_vrack_netns": rack.netns}
        lines: list[str] = []
        result = run(netbox, Selection(names=(vm.name,)), Options(),
                     progress=Progress(lambda line: (lines.append(line), print(line))),
                     image=functools.partial(image_hosts,
                                             options=ImagingOptions(extravars=extravars)),
                     extravars=extravars)
        (host,) = result.hosts
        on = next(float(m[1]) for m in map(POWER_ON.match, lines) if m)
        ssh = next(float(line.split("s]")[0].strip("[ ")) for line in lines
                   if f"{vm.name}: answers on SSH" in line)
        events = next(Path(result.run_dir, "ansible", "artifacts").glob("configure-*"))
        seconds, runs, rows = module_seconds(events / "job_events")
        print(f"{vm.name} {host.result}{f' ({host.error})' if host.error else ''}: power-on "
              f"to SSH {ssh - on:.0f} s, configure {host.timings.get('configure', 0):.0f} s, "
              f"verify {host.timings.get('verify', 0):.0f} s; power-on to {host.result} "
              f"{host.seconds - on:.0f} s; {load()}")
        print(f"configure: {runs} module runs, {seconds:.0f} s in modules: " + ", ".join(
            f"{action} {s:.0f} s/{n}" for action, s, n in rows[:10]))
    finally:
        vrack.down(netbox, rack)


if __name__ == "__main__":
    main()
