"""The lab reports what is installed: on lab container hosts the emulated nvidia-smi reports the
installed driver package's version (none installed: it fails as without a driver), and fabric
manager's state is its real systemd unit's. So `provision --no-image` (the node roles, then
verify) catches a driver other than NetBox asks for, and verify a stopped fabric manager, end to
end: real containers, real Ansible, the real test NetBox.

Configure applies nvidia_driver alone: the node role that installs what is checked here (the
driver and fabric manager); the others have their own tests, and with them the run took 8
minutes instead of 3 on this loaded 2-core machine."""

from __future__ import annotations

import pytest

from helpers import NO_ACCEPTANCE, planned_lab
from racklift import podman
from racklift.netbox.expected import CONTEXT_KEY
from racklift.netbox.selection import Selection
from racklift.pipeline.outcome import FAILED, JOINED
from racklift.pipeline.plan import Options
from racklift.pipeline.progress import QUIET, Progress
from racklift.pipeline.provision import run
from racklift.verify.gate import verify

# In the VM lane (tests/lanes.py): its own lab network there.
pytestmark = [pytest.mark.containers, pytest.mark.vm_lane]

RACK = "S01"
SELECT = Selection(racks=(RACK,), roles=("gpu-server",))
ASKED = "550.127.08"  # what the lab's config context asks for (racklift.lab.seed)
OLDER = "550.127.05"  # the stand-in repository's other release of the branch


@pytest.fixture(scope="module")
def lab(netbox, tmp_path_factory):
    with planned_lab(netbox, 2, RACK, tmp_path_factory.mktemp("runs")) as result:
        yield result


def ask_for(netbox, name: str, version: str) -> None:
    """A device-local config context: NetBox asks this one host for another driver version."""
    device = netbox.get_all("dcim/devices", {"name": name}, fields=("id",))[0]
    netbox.update("dcim/devices", [{"id": device["id"], "local_context_data": {
        CONTEXT_KEY: {"nvidia_driver": {"version": version}, **NO_ACCEPTANCE}}}])


def test_wrong_driver_and_stopped_fabric_manager_fail_their_host(netbox, lab):
    """(a) The run installs the branch's older release on both hosts (an operator's pin for
    the run, `nvidia_driver_version` as an extra var, as for a rollback), while NetBox asks one
    host for the lab's version and the other, through its own config context, for the older
    one: the gate judges against NetBox, so the first host fails on software.nvidia_driver with
    what its package says, and the other joins. The emulator's profiles carry the lab's version,
    so neither verdict could come from them. (b) Once NetBox asks the first host for what it
    runs, a stopped fabric manager fails the other host on that check alone."""
    drifted, rolled_back = (h.name for h in lab.hosts)
    # No driver package yet: nvidia-smi fails as without a driver (the profile has one).
    answer = podman.podman("exec", drifted, "sh", "-c", "nvidia-smi; echo rc=$?")
    assert "couldn't communicate with the NVIDIA driver" in answer and "rc=9" in answer

    ask_for(netbox, rolled_back, OLDER)
    result = run(netbox, SELECT, Options(image=False), progress=Progress(print, QUIET),
                 extravars={"racklift_roles": ["nvidia_driver"], "nvidia_driver_version": OLDER})
    got = {h.name: h for h in result.hosts}
    assert got[rolled_back].result == JOINED, got[rolled_back].error
    assert (got[drifted].result, got[drifted].reached) == (FAILED, "verify")
    assert got[drifted].error.startswith(
        f"software.nvidia_driver: expected {ASKED!r}, observed {OLDER!r} [critical]"), \
        got[drifted].error
    assert "; " not in got[drifted].error  # that, and nothing else

    ask_for(netbox, drifted, OLDER)
    podman.podman("exec", rolled_back, "systemctl", "stop", "nvidia-fabricmanager")
    verdicts = {v.host: v for v in verify(netbox, SELECT, mark_active_failed=True).verdicts}
    assert verdicts[drifted].passed, verdicts[drifted].failures
    assert [f.split(":")[0] for f in verdicts[rolled_back].failures] == ["gpu.fabric_manager"]
    assert "nvidia-fabricmanager is inactive" in verdicts[rolled_back].failures[0]
