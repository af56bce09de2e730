#!/usr/bin/python3
"""Run on a boot server by playbooks/image_wait.yml: wait for the hosts being imaged.

Argument: base64 of a JSON document from the controller (racklift.pipeline.image_stage):
  {"phase": "dhcp" | "report", "api_data": DIR, "poll": SECONDS,
   "hosts": [{"name", "mac", "token_sha256", "since": EPOCH, "deadline": EPOCH}]}

phase dhcp: until each host's MAC has sent a DHCP request after its `since` (dnsmasq's
  `log-dhcp` lines in the journal), or its deadline passed. Requests from MACs dnsmasq
  ignored (not in its reservations) are listed too: a NIC whose MAC does not match NetBox.
phase report: until each host's deploy report for this token (the deploy API's
  reports/<name>.json) is there, or its deadline passed.

Prints {"hosts": {name: {"at": EPOCH or null, "report": {...} or null}}, "ignored": [MAC]}.
Read-only; standard library only (the boot server's python3).
"""

import base64
import json
import re
import subprocess
import sys
import time
from pathlib import Path

# dnsmasq-dhcp: DHCPDISCOVER(rlprov0) 02:52:4c:00:58:00 [ignored]
REQUEST = re.compile(r"DHCP(?:DISCOVER|REQUEST)\(\S+\)(?: \S+)? ((?:[0-9a-f]{2}:){5}[0-9a-f]{2})"
                     r"( ignored)?", re.IGNORECASE)


def dhcp_requests(since):
    """[(epoch, mac, ignored)] of the DHCP requests dnsmasq logged since `since`."""
    out = subprocess.run(
        ["journalctl", "--no-pager", "-q", "-o", "short-unix", f"--since=@{int(since)}",
         "SYSLOG_IDENTIFIER=dnsmasq-dhcp"], capture_output=True, text=True, check=False).stdout
    found = []
    for line in out.splitlines():
        match = REQUEST.search(line)
        if match:
            try:
                at = float(line.split()[0])
            except (IndexError, ValueError):
                continue
            found.append((at, match[1].lower(), bool(match[2])))
    return found


def report(api_data, host):
    try:
        data = json.loads((Path(api_data) / "reports" / f"{host['name']}.json").read_text())
    except (OSError, ValueError):
        return None
    return data if data.get("token_sha256") == host["token_sha256"] else None


def main():
    request = json.loads(base64.b64decode(sys.argv[1]))
    hosts = request["hosts"]
    result = {h["name"]: {"at": None, "report": None} for h in hosts}
    ignored = set()
    while True:
        now = time.time()
        if request["phase"] == "dhcp":
            requests = dhcp_requests(min(h["since"] for h in hosts))
            for h in hosts:
                seen = [at for at, mac, _ in requests if mac == h["mac"] and at >= h["since"]]
                if seen and result[h["name"]]["at"] is None:
                    result[h["name"]]["at"] = min(seen)
            ignored = {mac for _, mac, was_ignored in requests if was_ignored}
        else:
            for h in hosts:
                if result[h["name"]]["report"] is None:
                    got = report(request["api_data"], h)
                    if got is not None:
                        result[h["name"]] = {"at": got.get("received_at", now), "report": got}
        waiting = [h for h in hosts if result[h["name"]]["at"] is None and h["deadline"] > now]
        if not waiting:
            break
        time.sleep(request.get("poll", 2))
    print(json.dumps({"hosts": result, "ignored": sorted(ignored)}))


if __name__ == "__main__":
    main()
