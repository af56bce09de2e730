from racklift.ansible import HostEvent
from racklift.pipeline.progress import NORMAL, QUIET, VERBOSE, Progress


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def make(level):
    lines, clock = [], Clock()
    return Progress(lines.append, level, heartbeat=10, clock=clock), lines, clock


def test_normal_shows_stages_failures_and_a_heartbeat():
    progress, lines, clock = make(NORMAL)
    progress.stage(["h1", "h2"], "configure")
    progress.event(HostEvent("h1", "start", "base_os : chrony"))
    assert lines == ["[   0.0s] configure: h1, h2"]
    clock.now += 12
    progress.event(HostEvent("h2", "start", "nvidia_driver : packages"))
    assert lines[-1] == ("[  12.0s] h1: configure 12s, base_os : chrony; "
                         "h2: configure 12s, nvidia_driver : packages")
    progress.event(HostEvent("h1", "start", "nvidia_driver : packages"))
    clock.now += 10
    progress.event(HostEvent("h2", "ok", "nvidia_driver : packages"))
    assert lines[-1] == "[  22.0s] 2 hosts: configure 22s, nvidia_driver : packages"
    progress.event(HostEvent("h2", "failed", "nvidia_driver : packages", "no such version"))
    assert lines[-1].endswith("h2: configure FAILED: failed at 'nvidia_driver : packages': "
                              "no such version")


def test_quiet_shows_only_failures_verbose_every_task():
    progress, lines, clock = make(QUIET)
    progress.stage(["h1"], "verify")
    progress.event(HostEvent("h1", "start", "collect"))
    clock.now += 60
    progress.event(HostEvent("h1", "unreachable", "collect", "timed out"))
    assert lines == ["[  60.0s] h1: verify FAILED: unreachable: timed out"]
    progress, lines, _ = make(VERBOSE)
    progress.stage(["h1"], "configure")
    progress.event(HostEvent("h1", "start", "base_os : chrony"))
    progress.event(HostEvent("h1", "changed", "base_os : chrony"))
    assert lines[1:] == ["[   0.0s] h1: configure base_os : chrony",
                         "[   0.0s] h1: changed: base_os : chrony"]


def test_a_helper_host_of_a_stage_shows_without_a_stage():
    progress, lines, clock = make(NORMAL)
    progress.stage(["vm1"], "image")
    progress.event(HostEvent("boot1", "start", "Wait on the boot server"))
    clock.now += 11
    progress.event(HostEvent("boot1", "ok", "Wait on the boot server"))
    progress.event(HostEvent("boot1", "failed", "Wait on the boot server", "dnsmasq died"))
    assert lines[1:] == [
        "[  11.0s] boot1: 11s, Wait on the boot server",
        "[  11.0s] boot1: FAILED: failed at 'Wait on the boot server': dnsmasq died"]


def test_a_failed_host_and_a_finished_rack_leave_the_heartbeat():
    progress, lines, clock = make(NORMAL)
    progress.stage(["a1", "a2"], "verify")
    progress.stage(["b1"], "configure")
    for host in ("a1", "a2", "b1"):
        progress.event(HostEvent(host, "start", "Run the collector" if host < "b"
                                 else "base_os : chrony"))
    progress.failed("a2", "verify", "XID 79")
    clock.now += 11
    progress.beat()
    assert lines[-1] == ("[  11.0s] a1: verify 11s, Run the collector; "
                         "b1: configure 11s, base_os : chrony")
    progress.done(["a1", "a2"])  # rack a has finished; rack b goes on
    clock.now += 11
    progress.beat()
    assert lines[-1] == "[  22.0s] b1: configure 22s, base_os : chrony"


def test_a_helper_host_leaves_the_heartbeat_when_the_next_stage_starts():
    progress, lines, clock = make(NORMAL)
    progress.stage(["vm1"], "image")
    progress.event(HostEvent("boot1", "start", "Wait on the boot server"))
    progress.stage(["vm1"], "configure")
    progress.event(HostEvent("vm1", "start", "base_os : chrony"))
    clock.now += 11
    progress.event(HostEvent("vm1", "start", "base_os : sshd"))
    assert lines[-1] == "[  11.0s] vm1: configure 11s, base_os : sshd"
