"""The suite's lanes (tests/lanes.py): every lane runs, a failure in any fails the run, and the
closing line counts both."""

import re

import lanes

MARKED = '''
import pytest

@pytest.mark.vm
def test_in_the_vm_lane():
    assert True

def test_in_the_other_lane():
    assert {outcome}
'''
LANES = (lanes.Lane("vm", "vm"), lanes.Lane("rest", "not vm"))


def _run(tmp_path, capsys, outcome: str) -> tuple[int, list[str]]:
    (tmp_path / "test_marked.py").write_text(MARKED.format(outcome=outcome))
    code = lanes.run(LANES, extra=["-p", "no:cacheprovider", str(tmp_path)], work=tmp_path)
    return code, capsys.readouterr().out.splitlines()


def test_each_lane_runs_its_own_tests_and_the_closing_line_counts_all(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, "True")
    assert code == 0
    assert any(re.match(r"\[lanes\] vm ended with exit status 0 .*: 1 passed, 0 failed$", line)
               for line in out), out
    assert any(re.match(r"\[lanes\] rest ended with exit status 0 .*: 1 passed, 0 failed$",
                        line) for line in out), out
    assert any(line.startswith("[vm] ") and "test_marked.py ." in line for line in out), out
    assert out[-1] == "2 passed, 0 failed"


def test_a_failure_in_one_lane_fails_the_run_and_names_the_lane(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, "False")
    assert code == 1
    assert re.match(r"\[lanes\] all lanes in \d+ s; failed: rest$", out[-2]), out
    assert out[-1] == "1 passed, 1 failed"


def test_a_lane_that_collects_nothing_fails(tmp_path, capsys):
    (tmp_path / "test_marked.py").write_text("def test_unmarked():\n    pass\n")
    code = lanes.run(LANES, extra=["-p", "no:cacheprovider", str(tmp_path)], work=tmp_path)
    assert code == 1  # pytest's exit 5 in the vm lane: an empty lane is not a pass
    assert capsys.readouterr().out.splitlines()[-1] == "1 passed, 0 failed"
