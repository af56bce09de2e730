"""``dcgmi diag -r N``: DCGM's diagnostic, as its text table or its ``-j`` JSON.

The table is 78 characters wide: a test's name on the left, its result on the right, a long
value wrapped over rows with an empty left column. Sections (``-----  Hardware  ---``) name the
category. Results are "Pass", "Fail - All", "Skip - All", "Pass - GPUs: 1, 2" with "Fail - GPU: 0"
below it (DCGM 3.x), or a test-wide result with one "GPU0: Pass" row per GPU below it (4.x).
"Warning", "Info" and "Error" rows belong to the test above them (an "Error" row before any
test fails the run). Formats follow the real captures in tests/fixtures/real (DCGM 2.x, 3.3.x,
4.0 to 4.4; passes, PCIe and memory failures, a table cut short, text around the table)."""

from __future__ import annotations

import re
from typing import Any

from racklift.facts.observed import DcgmDiag, DcgmTest
from racklift.facts.parsers.common import ParseError, load_json, shown, text_lines

KIND = "dcgmi diag"
MAX_TESTS = 256
MAX_MESSAGE = 4096
RESULTS = ("Pass", "Fail", "Skip", "Warn", "Error")
_ROW = re.compile(r"\|\s(.{25})\s\|\s?(.{0,60}?)\s*\|?")
_SECTION = re.compile(r"[+|]-----\s+(\w[\w ]{0,30}?)\s+-*\+-*[+|]")
_RULE = re.compile(r"\+[-=]{20,}\+[-=]{20,}\+")
_RESULT = re.compile(rf"({'|'.join(RESULTS)})(?: - (All|GPUs?: ([0-9, ]{{1,200}})))?",
                     re.IGNORECASE)
_PER_GPU = re.compile(rf"GPU([0-9]{{1,3}}): ({'|'.join(RESULTS)})", re.IGNORECASE)
_METADATA = {"DCGM Version": "version", "Driver Version Detected": "driver"}
_MESSAGES = {"Warning": "warnings", "Error": "warnings", "Info": "info"}


def _word(result: str) -> str:
    return result.capitalize()


class _Table:
    """What the rows said so far: metadata, tests, and where a wrapped value goes on."""

    def __init__(self) -> None:
        self.meta: dict[str, str] = {}
        self.tests: list[dict[str, Any]] = []
        self.category = ""
        self.open: list[str] | None = None  # the message a continuation row extends
        self.orphans: list[list[str]] = []  # "Error" rows before any test: the run's own

    def row(self, left: str, cell: str) -> None:
        """One row: its left column, stripped, and its right column as printed (45
        characters where the row is whole: a wrapped value's pieces are each that wide)."""
        right = cell.strip()
        if not left:
            self._continue(right, cell)
        elif self.category == "Metadata" or left in _METADATA:
            self.meta[left] = right
            self.open = None
        elif left in _MESSAGES:
            self.open = [cell]
            if self.tests:
                self.tests[-1][_MESSAGES[left]].append(self.open)
            else:
                self.orphans.append(self.open)
        else:
            self._test(left, right)

    def _test(self, name: str, right: str) -> None:
        result = _RESULT.fullmatch(right)
        if result is None:
            raise ParseError(KIND, f"{shown(name)}: {shown(right)} is no result")
        gpus = [(int(g), _word(result[1])) for g in (result[3] or "").replace(",", " ").split()]
        self.tests.append({"category": self.category, "name": name,
                           "result": _word(result[1]), "gpus": gpus, "warnings": [],
                           "info": []})
        self.open = None
        if len(self.tests) > MAX_TESTS:
            raise ParseError(KIND, f"more than {MAX_TESTS} tests")

    def _continue(self, right: str, cell: str) -> None:
        if self.tests and (per_gpu := _PER_GPU.fullmatch(right)):
            self.tests[-1]["gpus"].append((int(per_gpu[1]), _word(per_gpu[2])))
        elif self.tests and (result := _RESULT.fullmatch(right)) and result[3]:
            self.tests[-1]["gpus"] += [(int(g), _word(result[1]))
                                       for g in result[3].replace(",", " ").split()]
        elif self.open is not None:
            self.open.append(cell)
        elif right:
            raise ParseError(KIND, f"a wrapped value with nothing above it: {shown(right)}")

    def result(self) -> DcgmDiag:
        tests = [DcgmTest(t["category"], t["name"],
                          _worst([t["result"], *(r for _, r in t["gpus"])]), tuple(t["gpus"]),
                          tuple(_joined(m) for m in t["warnings"]),
                          tuple(_joined(m) for m in t["info"])) for t in self.tests]
        if self.orphans:
            tests.insert(0, DcgmTest("", "run", "Error",
                                     warnings=tuple(_joined(m) for m in self.orphans)))
        return DcgmDiag(self.meta.get("DCGM Version"), self.meta.get("Driver Version Detected"),
                        tuple(tests))


_SEVERITY = ("Error", "Fail", "Warn", "Pass", "Skip")  # worst first


def _worst(results: list[str]) -> str:
    """A test's result: the worst of what it says overall and per GPU ("Pass - GPUs: 1-7"
    over "Fail - GPU: 0" is a failed test)."""
    return next((r for r in _SEVERITY if r in results), "Skip")


def _joined(parts: list[str]) -> str:
    """A wrapped value: DCGM cuts it every 45 characters, mid-word or at a space, so its
    pieces join as they are."""
    return "".join(parts).strip()[:MAX_MESSAGE]


def parse_dcgmi_diag(text: str) -> DcgmDiag:
    stripped = text.lstrip()
    if "{" in stripped[:200] and '"DCGM GPU Diagnostic"' in stripped:
        return _json(text)
    table: _Table | None = None
    for line in text_lines(text):
        line = line.rstrip()
        if table is None:
            if not (_RULE.fullmatch(line) or _ROW.fullmatch(line)):
                continue  # what the command printed before the table ("Successfully ran ...")
            table = _Table()
        if _RULE.fullmatch(line):
            continue
        if section := _SECTION.fullmatch(line):
            table.category, table.open = section[1], None
        elif row := _ROW.fullmatch(line):
            left = row[1].strip()
            if (left, row[2].strip()) == ("Diagnostic", "Result"):
                if table.tests or table.meta:
                    break  # the table printed again
            else:
                table.row(left, line[30:75])
        elif table.tests or table.meta:
            break  # after the table: another command's output
    if table is None or not (table.tests or table.orphans):
        raise ParseError(KIND, "no diagnostic table (a '| Diagnostic | Result |' box)")
    return table.result()


def _json(text: str) -> DcgmDiag:
    """``dcgmi diag -j`` (3.x: test_categories, each test's results by "gpu_ids" or
    "entity_id"); a warning line before the document is not part of it."""
    document = load_json(text[text.index("{"):], KIND)
    try:
        categories = document["DCGM GPU Diagnostic"]["test_categories"]
        tests = []
        for category in categories:
            for test in filter(None, category["tests"]):
                gpus, warnings, info = [], [], []
                for result in filter(None, test["results"]):
                    status = _word(str(result["status"]))
                    ids = str(result.get("gpu_ids", result.get("entity_id", "")))
                    gpus += [(int(g), status) for g in ids.replace(",", " ").split()]
                    warnings += [str(w.get("warning", w) if isinstance(w, dict) else w)
                                 for w in result.get("warnings", [])]
                    info += [str(i) for i in result.get("info", [])]
                tests.append(DcgmTest(str(category["category"]), str(test["name"]),
                                      _worst([s for _, s in gpus]),
                                      tuple(gpus), tuple(w[:MAX_MESSAGE] for w in warnings),
                                      tuple(i[:MAX_MESSAGE] for i in info)))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ParseError(KIND, f"not dcgmi's JSON: {type(exc).__name__}: {exc}") from None
    version = document.get("version")
    return DcgmDiag(str(version) if version else None, None, tuple(tests))
