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


def test_the_suites_lanes_share_no_netbox_and_no_lab_network():
    """Both lanes start test NetBoxes and lab containers: side by side they must not share an
    instance, a port, Redis databases or a podman network (one lane's `lab_rack.down` removes
    every container on its network)."""
    keys = ("RACKLIFT_TEST_NETBOX", "RACKLIFT_TEST_NETBOX_PORT", "RACKLIFT_TEST_REDIS_BASE",
            "RACKLIFT_TEST_NET")
    seen = [tuple(lane.env.get(k, "") for k in keys) for lane in lanes.LANES]
    for column in zip(*seen, strict=True):
        assert len(set(column)) == len(lanes.LANES), seen


def test_each_lane_has_its_own_test_network(monkeypatch):
    import helpers

    nets = []
    for lane in lanes.LANES:
        monkeypatch.delenv("RACKLIFT_TEST_NET", raising=False)
        for key, value in lane.env.items():
            monkeypatch.setenv(key, value)
        nets.append(helpers._test_net())
    assert len({n.name for n in nets}) == len(nets)
    assert not any(a.subnet.overlaps(b.subnet) or a.oob.overlaps(b.oob)
                   for i, a in enumerate(nets) for b in nets[i + 1:])
    macs = [range(n.mac_base, n.mac_base + n.capacity) for n in nets]
    assert not set(macs[0]) & set(macs[1])
