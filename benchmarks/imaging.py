"""How long the image stage takes for 1, 2 and 4 VMs deployed at once on this machine, and the
image bytes per second it moves (each ramdisk's report gives its stream's seconds; a verified
stream is the whole compressed image, image.size bytes).

Needs the lab NetBox (`invoke netbox.up`) and no other virtual rack (one per machine): uses
its own (namespace racklift-bench, rack B91), VMs imaged through the real pipeline
(`run(..., Options(REIMAGE, until="image"), image=image_hosts)`), and removes everything at
the end. Not run in CI. Usage: .venv/bin/python benchmarks/imaging.py [N ...]
"""

from __future__ import annotations

import functools
import ipaddress
import re
import sys
import time

from common import connect, lab, load, machine

from racklift.imaging import diskimage
from racklift.lab import vrack
from racklift.netbox.selection import Selection
from racklift.pipeline.image_stage import ImagingOptions, image_hosts
from racklift.pipeline.plan import REIMAGE, Options
from racklift.pipeline.progress import Progress
from racklift.pipeline.provision import run

BENCH = vrack.Vrack("racklift-bench", "rlbench0", ipaddress.ip_network("10.92.0.0/24"),
                    ipaddress.ip_network("fd52:4c92::/64"), ipaddress.ip_network("127.0.79.0/24"),
                    rack="B91", mac_base=0x5c00, memory_mib=768, disk_gib=2)
STREAMED = re.compile(r"(\S+): deployed: .* streamed and verified in (\d+) s")
ON_SSH = re.compile(r"\[\s*([\d.]+)s\] (\S+): answers on SSH")
POWER_ON = re.compile(r"\[\s*([\d.]+)s\] (\S+): network boot once")
MIB = 1024 * 1024


def main(counts: list[int]) -> None:
    _, settings = lab()
    netbox = connect(settings)
    image = diskimage.build()
    print(f"{machine()}; image {image.name} {image.build_id}: {image.size / MIB:.0f} MiB zstd, "
          f"{image.raw_size / MIB:.0f} MiB raw")
    vrack.down(netbox, BENCH)
    rows = []
    try:
        vrack.up(netbox, max(counts), BENCH)
        stage = functools.partial(image_hosts, options=ImagingOptions(
            extravars={"racklift_vrack_netns": BENCH.netns}))
        for count in counts:
            names = [vm.name for vm in vrack.plan(count, BENCH)]
            lines: list[str] = []
            progress = Progress(lines.append)
            started = time.monotonic()
            result = run(netbox, Selection(names=tuple(names)),
                         Options(REIMAGE, reason="benchmark", until="image"),
                         progress=progress, image=stage)
            wall = time.monotonic() - started
            failed = {h.name: h.error for h in result.hosts if h.error}
            text = "\n".join(lines)
            streamed = {m[1]: (image.size, int(m[2])) for m in STREAMED.finditer(text)}
            on = {m[2]: float(m[1]) for m in POWER_ON.finditer(text)}
            ssh = {m[2]: float(m[1]) - on.get(m[2], 0) for m in ON_SSH.finditer(text)}
            total = sum(b for b, _ in streamed.values())
            stream_s = max((s for _, s in streamed.values()), default=0)
            rows.append((count, wall, max(ssh.values(), default=0), total / max(stream_s, 1)))
            print(f"{count} VMs: run {wall:.0f} s, power-on to SSH "
                  f"{', '.join(f'{n} {s:.0f} s' for n, s in sorted(ssh.items()))}; "
                  f"streamed {total / MIB:.0f} MiB in {stream_s} s = "
                  f"{total / MIB / max(stream_s, 1):.1f} MiB/s together; {load()}"
                  + (f"; FAILED {failed}" if failed else ""))
    finally:
        vrack.down(netbox, BENCH)
    print("summary: " + "; ".join(f"{n} VM(s) {wall:.0f} s (slowest power-on to SSH "
                                  f"{ssh:.0f} s, {rate / MIB:.1f} MiB/s)"
                                  for n, wall, ssh, rate in rows))


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 2, 4])
