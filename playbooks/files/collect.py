#!/usr/bin/env python3
"""racklift's fact collector: the thin remote side. Runs read-only commands on the host and
prints their outputs as one JSON document; all parsing happens on the controller.

Standard library only, Python >= 3.6 (Ubuntu 20.04 and later, Debian 11 and later).
Usage: collect.py [--sysfs-root /sys], or on stdin: python3 - [--sysfs-root /sys]
"""

import glob
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

# name -> shell command. Names are the support-bundle file names (racklift.facts.bundle).
COMMANDS = {
    "nvidia-smi-q-x.xml": "nvidia-smi -q -x",
    "nvidia-smi-topo.txt": "nvidia-smi topo -m",
    "nvidia-smi-nvlink.txt": "nvidia-smi nvlink -s",
    # Twice, 5 s apart: error counters that rise meanwhile are a link retraining now.
    "nvidia-smi-nvlink-e.txt": "nvidia-smi nvlink -e && sleep 5 && nvidia-smi nvlink -e",
    "lspci.txt": "lspci -D -nn -vv",
    "ibstat.txt": "ibstat",
    "ibv_devinfo.txt": "ibv_devinfo",
    "dmidecode.txt": "dmidecode -t 0,1,3",  # 3: the chassis, where some boards keep the serial
    "dmesg.txt": "dmesg",
    "ip-link.json": "ip -j link show",
    "ip-addr.json": "ip -j addr show",
    "lscpu.json": "lscpu -J",
    "meminfo.txt": "cat /proc/meminfo",
    "os-release.txt": "cat /etc/os-release",
    "uname.txt": "uname -r",
    "packages.txt": "dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'",
    "services.txt": "for s in nvidia-fabricmanager nvidia-persistenced docker containerd; "
                    "do printf '%s\\t%s\\n' \"$s\" \"$(systemctl is-active \"$s\" 2>/dev/null)\"; "
                    "done",
    "df.txt": "df -P -B1 / /var 2>/dev/null",
    "lldpctl.json": "lldpctl -f json",
    "ibnetdiscover.txt": "ibnetdiscover",
}

# The most of one output (stdout or stderr) a host sends. A real GPU server's largest
# (nvidia-smi -q -x of 8 GPUs, lspci -vv, the kernel's ring buffer) are 2 MiB at most; a larger
# one is not sent, and says so. The controller refuses oversize outputs again: it does not
# trust a host to have run this file.
MAX_OUTPUT = 8 * 2**20

SYSFS_GLOBS = (
    "class/infiniband/*/ports/*/state",
    "class/infiniband/*/ports/*/phys_state",
    "class/infiniband/*/ports/*/rate",
    "class/infiniband/*/ports/*/link_layer",
    "class/infiniband/*/fw_ver",
    "class/infiniband/*/node_guid",
    "class/infiniband/*/hca_type",
    "class/net/*/speed",
    "devices/virtual/dmi/id/sys_vendor",
    "devices/virtual/dmi/id/product_name",
    "devices/virtual/dmi/id/product_serial",
    "devices/virtual/dmi/id/bios_version",
)


def run(command):
    started = time.monotonic()
    try:
        proc = subprocess.run(command, shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=120)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = 124, b"", b"timed out after 120 s"
    if len(out) > MAX_OUTPUT or len(err) > MAX_OUTPUT:
        why = "output of {} bytes (stderr {}) is over the collector's limit of {} MiB: not sent"
        rc, out, err = rc or 1, b"", why.format(len(out), len(err), MAX_OUTPUT // 2**20).encode()
    return {"command": command, "rc": rc, "seconds": round(time.monotonic() - started, 3),
            "stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace")}


def sysfs(root):
    files = {}
    for pattern in SYSFS_GLOBS:
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            try:
                with open(path) as handle:
                    files[os.path.relpath(path, root)] = handle.read().strip()
            except OSError:
                continue  # e.g. class/net/*/speed of a down link: EINVAL
    return files


def main(argv):
    root = argv[argv.index("--sysfs-root") + 1] if "--sysfs-root" in argv else "/sys"
    # At once: on a GPU server nvidia-smi -q -x alone takes seconds; the rest need not wait.
    with ThreadPoolExecutor(len(COMMANDS)) as pool:
        running = {name: pool.submit(run, command) for name, command in COMMANDS.items()}
        outputs = {name: future.result() for name, future in running.items()}
    document = {"hostname": os.uname()[1], "collected_at": time.time(), "sysfs_root": root,
                "outputs": outputs, "sysfs": sysfs(root)}
    json.dump(document, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
