"""Planted: a host reports text with terminal escape sequences (retitle, clipboard write, clear
screen) and rich markup. The operator's terminal shows it written out, and the tables render."""

import io
from dataclasses import replace
from importlib import import_module

import pytest
from invoke import Context
from invoke.exceptions import Exit
from rich.console import Console

import emulated
from racklift.console import expected_table, plain
from racklift.errors import RackliftError
from racklift.facts.host import from_bundle
from racklift.lifecycle.lock import Ticket, ticket
from racklift.pipeline.progress import Progress
from racklift.tasks.common import operator_errors
from racklift.tasks.pipeline import locked_line, unlocked_line
from racklift.verify import verdict_report
from racklift.verify.verdict import judge

# The module (racklift.tasks names its `verify` task as the package's attribute).
verify_tasks = import_module("racklift.tasks.verify")

PLANTED = "SN[/]\x1b]52;c;ZXZpbA==\x07\x1b[2J[link=https://evil.example]x[/link]\x9b1m"


def shown(*renderables) -> str:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=400)
    for r in renderables:
        console.print(r)
    return out.getvalue()


def test_plain_text_writes_control_characters_out_and_keeps_brackets():
    text = plain(PLANTED)
    assert "\x1b" not in text.plain and "\x07" not in text.plain and "\x9b" not in text.plain
    assert "\\x1b]52;c;ZXZpbA==\\x07" in text.plain and "[/]" in text.plain
    assert plain("line one\n\tline two").plain == "line one\n\tline two"


def test_a_hostile_serial_reaches_the_verdict_table_as_text():
    profile = emulated.healthy_profile()
    profile = replace(profile, system=replace(profile.system, serial=PLANTED))
    verdict = judge(emulated.expected_host(), from_bundle(emulated.bundle(profile)))
    assert verdict.failed and any("[/]" in line for line in verdict.failures)
    out = shown(verdict_report.table([verdict], "verify"))
    assert "\x1b]52" not in out and "\x1b[2J" not in out and "\x1b]8;" not in out
    assert "\\x1b]52;c;ZXZpbA==" in out


def test_a_hostile_netbox_record_reaches_the_expected_table_as_text():
    host = replace(emulated.expected_host(), name="gpu[/]\x1b]0;x\x07", serial=PLANTED)
    out = shown(expected_table([host], "expected"))
    assert "\x1b]0;x" not in out and "\x1b]52" not in out and "gpu[/]" in out


def test_progress_lines_carry_no_escape_sequences():
    lines: list[str] = []
    progress = Progress(lambda line: lines.append(shown(plain(line))))
    progress.failed("gpu-01", "verify", PLANTED)
    assert lines and all("\x1b]52" not in line and "\x1b[2J" not in line for line in lines)


def test_plain_text_writes_out_a_bidi_override():
    # Planted: a bidi override that would show the rest of a line reversed.
    assert plain("gpu-01\u202e10-upg").plain == "gpu-01\\u202e10-upg"


# Planted: whoever took a lock wrote its holder record (a NetBox saved filter anyone with edit
# rights can write): rich markup, a link and an OSC 52 clipboard write in its fields.
HOLDER_PLANTED = "[link=https://evil]x[/link][bold red]\x1b]52;c;ZXZpbA==\x07"


def planted_ticket() -> Ticket:
    row = {"id": 7, "slug": "racklift-lock-42", "created": f"2026-11-30{HOLDER_PLANTED}",
           "parameters": {"id": [42], "racklift_lock": {
               "run": f"run-{HOLDER_PLANTED}", "owner": f"eve@{HOLDER_PLANTED}", "pid": 1,
               "verb": HOLDER_PLANTED}}}
    held = ticket(row)
    assert held is not None
    return held


@pytest.mark.parametrize("line", [
    lambda: locked_line("gpu-01", planted_ticket()),
    lambda: unlocked_line("gpu-01", planted_ticket()),
], ids=["locks", "unlock"])
def test_a_locks_holder_fields_are_printed_as_text(line):
    out = shown(line())
    assert "\x1b]52" not in out and "\x1b]8;" not in out  # no clipboard write, no link
    assert "\x1b[1;31m" not in out and "\x1b[1m" not in out  # [bold red] not applied
    assert "[link=https://evil]x[/link][bold red]\\x1b]52;c;ZXZpbA==\\x07" in out


# Planted: a captured output (a support bundle's, a host's) whose first line is an OSC 52
# clipboard write; `racklift parse` quotes it in the error it stops with. A record's text in a
# NetBox error (the object it names) ends a command the same way.
@pytest.mark.parametrize("stop", [
    lambda tmp_path: verify_tasks.parse(Context(), "dmidecode", str(written(tmp_path))),
    lambda _: stopped_by(RackliftError(f"NetBox rejected name={HOLDER_PLANTED}")),
], ids=["parse", "operator-error"])
def test_what_a_command_stops_with_is_printed_as_text(stop, tmp_path):
    with pytest.raises(Exit) as caught:
        stop(tmp_path)
    message = str(caught.value.message)
    assert "\x1b" not in message and "\x07" not in message
    assert "\\x1b]52;c;ZXZpbA==\\x07" in message


def written(tmp_path):
    capture = tmp_path / "dmidecode.txt"
    capture.write_text(f"{HOLDER_PLANTED}\nnot dmidecode\n")
    return capture


def stopped_by(error: Exception) -> None:
    with operator_errors():
        raise error
