"""Verify results for people (a table, report.html), for scripts (JSON) and for CI dashboards
(JUnit XML)."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from racklift import __version__, report_html
from racklift.console import plain
from racklift.verify.verdict import HostVerdict


def summary(verdicts: Sequence[HostVerdict]) -> dict[str, int]:
    return {"hosts": len(verdicts), "passed": sum(1 for v in verdicts if v.passed),
            "failed": sum(1 for v in verdicts if v.failed),
            "skipped": sum(1 for v in verdicts if v.skipped)}


def table(verdicts: Sequence[HostVerdict], title: str) -> Table:
    out = Table(title=title, title_justify="left")
    for column in ("host", "status", "result", "mismatches", "checks", "first problem",
                   "NetBox"):
        out.add_column(column, overflow="fold")
    for v in verdicts:
        bad_checks = [c for c in v.checks if c.status not in ("OK",)]
        out.add_row(
            plain(v.host), v.status,
            "[green]PASS[/]" if v.passed else "[dim]SKIP[/]" if v.skipped else "[red]FAIL[/]",
            str(len(v.mismatches)),
            f"{len(v.checks) - len(bad_checks)}/{len(v.checks)} OK" if v.checks else "-",
            plain((v.failures or v.warnings or [v.skipped or "-"])[0]),
            plain(f"left as it is: {v.held}" if v.held else ", ".join(v.changes) or "-"))
    return out


def to_json(verdicts: Sequence[HostVerdict], selection: str,
            seconds: float | None = None) -> dict[str, Any]:
    return {"racklift": __version__, "verb": "verify",
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "selection": selection,
            **({"seconds": round(seconds, 1)} if seconds is not None else {}),
            "summary": summary(verdicts), "hosts": [v.to_dict() for v in verdicts]}


def to_junit(verdicts: Sequence[HostVerdict]) -> str:
    """One test suite, one test case per host; a failed host lists every reason."""
    counts = summary(verdicts)
    suite = ET.Element("testsuite", name="racklift.verify", tests=str(counts["hosts"]),
                       failures=str(counts["failed"]), errors="0",
                       skipped=str(counts["skipped"]))
    for v in verdicts:
        case = ET.SubElement(suite, "testcase", classname=f"racklift.verify.{v.status}",
                             name=v.host)
        if v.skipped:
            ET.SubElement(case, "skipped", message=v.skipped)
        elif not v.passed:
            reasons = v.failures or ["no checks ran"]
            failure = ET.SubElement(case, "failure", message=reasons[0], type="gate")
            failure.text = "\n".join(reasons)
        if v.warnings:
            ET.SubElement(case, "system-out").text = "\n".join(v.warnings)
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def write(run_dir: Path, verdicts: Sequence[HostVerdict], selection: str,
          seconds: float | None = None) -> tuple[Path, Path]:
    """report.json, report.html and junit.xml in the run directory."""
    run_dir.mkdir(parents=True, exist_ok=True)
    report = report_html.save(run_dir, to_json(verdicts, selection, seconds))
    junit = run_dir / "junit.xml"
    junit.write_text(to_junit(verdicts))
    return report, junit
