"""nccl-tests (``all_reduce_perf`` and the others): the table of message sizes with each one's
bandwidths and wrong values, the out-of-bounds verdict, the average bus bandwidth, and the
failures it printed. Lines launched through srun (``srun -l``: " 0: ") or Open MPI
(``--tag-output``: "[1,0]<stdout>:") lose their prefix; NCCL's own INFO lines and other noise
are not the test's and are skipped. Formats follow the real captures in tests/fixtures/real
(8x H100 on one node, 16 ranks on two under srun with validation off, a GH200 run with wrong
values and failed bounds, one that failed before its table)."""

from __future__ import annotations

import re

from racklift.facts.observed import NcclRow, NcclRun
from racklift.facts.parsers.common import ParseError, text_lines

KIND = "nccl-tests"
MAX_ROWS = 4096
MAX_ERRORS = 64
_PREFIX = re.compile(r"\s*[0-9]{1,6}: |\[[0-9]{1,6},[0-9]{1,6}\]<std(?:out|err)>:")
_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_WRONG = r"([0-9]+|N/A)"
# size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
_ROW = re.compile(rf"\s*([0-9]{{1,15}})\s+[0-9]{{1,15}}\s+\w{{1,16}}\s+\w{{1,8}}\s+-?[0-9]{{1,6}}"
                  rf"\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+{_WRONG}\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+{_WRONG}\s*")
_RANK = re.compile(r"#\s+Rank\s+[0-9]{1,6} Group")
_STARTING = re.compile(r"# Collective test starting: (\w{1,32})")
_BOUNDS = re.compile(r"# Out of bounds values : ([0-9]{1,12}) (?:OK|FAILED)\s*")
_AVG = re.compile(rf"# Avg bus bandwidth\s*: {_NUM}\s*")
_FAILURE = re.compile(r".{0,200}Test (?:\w{1,8} )?failure.{0,400}")


def _wrong(value: str) -> int | None:
    return None if value == "N/A" else int(value)


def parse_nccl_tests(text: str) -> NcclRun:
    test, ranks, rows, bounds, avg, errors = None, 0, [], None, None, []
    header = False
    for raw in text_lines(text):
        line = _PREFIX.sub("", raw, count=1) if _PREFIX.match(raw) else raw
        if line.startswith("# nThread"):
            header = True
        elif match := _STARTING.fullmatch(line.strip()):
            test = match[1]
        elif _RANK.match(line):
            ranks += 1
        elif match := _ROW.fullmatch(line):
            rows.append(NcclRow(int(match[1]), float(match[4]), float(match[3]),
                                _wrong(match[5]), float(match[8]), _wrong(match[9])))
            if len(rows) > MAX_ROWS:
                raise ParseError(KIND, f"more than {MAX_ROWS} rows")
        elif match := _BOUNDS.fullmatch(line.strip()):
            bounds = int(match[1])
        elif match := _AVG.fullmatch(line.strip()):
            avg = float(match[1])
        elif _FAILURE.fullmatch(line.strip()) and len(errors) < MAX_ERRORS:
            errors.append(line.strip())
    if not header:
        raise ParseError(KIND, "no '# nThread ...' header (not nccl-tests' output)")
    return NcclRun(test, ranks, tuple(rows), bounds, avg, tuple(errors))
