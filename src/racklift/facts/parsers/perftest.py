"""perftest's bandwidth tests (``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw``): the banner
(test, device, link type, queue pairs) and the result table, one row per message size
(``-a`` sweeps all). Bandwidth in Gb/s whatever the run printed: ``--report_gbits`` (Gb/sec),
MiB/sec (current perftest) or MB/sec (older releases, 2^20 bytes as well). Formats follow
the real captures in tests/fixtures/real (ConnectX-5 RoCE default, ConnectX-6 IB ``-a`` in
Gb/sec, a bidirectional 4-QP sweep)."""

from __future__ import annotations

import re

from racklift.facts.observed import PerftestRow, PerftestRun
from racklift.facts.parsers.common import ParseError, text_lines

KIND = "perftest"
MAX_ROWS = 64
_TITLE = re.compile(r"\s*((?:RDMA_\w{1,8}|Send)(?: Bidirectional)? BW Test)\s*")
_FIELD = re.compile(r"(Device|Number of qps|Link type)\s*: (\S{1,32})")  # two to a line
_HEADER = re.compile(r"\s*#bytes\s+#iterations\s+BW peak\[(Gb|MiB|MB)/sec\]\s+"
                     r"BW average\[(?:Gb|MiB|MB)/sec\]\s+MsgRate\[Mpps\]\s*")
_ROW = re.compile(r"\s*([0-9]{1,12})\s+([0-9]{1,12})\s+([0-9]+\.[0-9]+)\s+([0-9]+\.[0-9]+)\s+"
                  r"([0-9]+\.[0-9]+)\s*")
# Bytes per second in a MiB/sec (and perftest's MB/sec), as bits, per Gb.
_TO_GBPS = {"Gb": 1.0, "MiB": 2**20 * 8 / 1e9, "MB": 2**20 * 8 / 1e9}


def parse_perftest_bw(text: str) -> PerftestRun:
    test, fields, unit, rows = None, {}, None, []
    for line in text_lines(text):
        if match := _TITLE.fullmatch(line):
            test = match[1]
        elif found := list(_FIELD.finditer(line)):
            for match in found:
                fields.setdefault(match[1], match[2])
        elif match := _HEADER.fullmatch(line):
            unit = match[1]
        elif unit and (match := _ROW.fullmatch(line)):
            scale = _TO_GBPS[unit]
            rows.append(PerftestRow(int(match[1]), int(match[2]),
                                    round(float(match[3]) * scale, 3),
                                    round(float(match[4]) * scale, 3)))
            if len(rows) > MAX_ROWS:
                raise ParseError(KIND, f"more than {MAX_ROWS} rows")
    if test is None or unit is None:
        raise ParseError(KIND, "no 'BW Test' banner and '#bytes #iterations BW peak' header "
                               "(not a perftest bandwidth run)")
    qps = fields.get("Number of qps")
    return PerftestRun(test, fields.get("Device"), fields.get("Link type"),
                       int(qps) if qps and qps.isdigit() else None,
                       "Bidirectional" in test, tuple(rows))
