import pytest

from racklift.pipeline.plan import PROVISION, REIMAGE, Options, plan_host

ALL = ("image", "configure", "verify")


@pytest.mark.parametrize(("status", "completed", "options", "stages"), [
    ("planned", None, Options(), ALL),
    ("planned", "configured", Options(), ALL),  # a planned host starts over, whatever it says
    ("planned", None, Options(image=False), ("configure", "verify")),
    ("staged", None, Options(), ALL),  # imaging was interrupted: image again
    ("staged", "imaged", Options(), ("configure", "verify")),
    ("staged", "configured", Options(), ("verify",)),
    ("staged", "imaged", Options(reimage=True), ALL),
    ("staged", "imaged", Options(image=False), ("configure", "verify")),
    ("staged", "bogus", Options(), ALL),
    ("failed", "imaged", Options(retry_failed=True), ("configure", "verify")),
    ("offline", "configured", Options(REIMAGE), ALL),
    ("active", "configured", Options(REIMAGE, force=True), ALL),
    ("failed", None, Options(REIMAGE, image=False), ("configure", "verify")),
    ("planned", None, Options(until="image"), ("image",)),
    ("staged", "imaged", Options(until="configure"), ("configure",)),
])
def test_stages(status, completed, options, stages):
    plan = plan_host(status, completed, options)
    assert plan.skip is None
    assert plan.stages == stages


@pytest.mark.parametrize(("status", "options", "says"), [
    ("active", Options(), "never touches hosts in the pool"),
    ("active", Options(PROVISION, retry_failed=True, reimage=True), "reimage --force"),
    ("failed", Options(), "--retry-failed"),
    ("offline", Options(), "status offline"),
    ("decommissioning", Options(), "provision takes planned hosts"),
    ("active", Options(REIMAGE), "pass --force"),
])
def test_skips(status, options, says):
    plan = plan_host(status, None, options)
    assert plan.stages == ()
    assert says in plan.skip


def test_until_a_stage_the_host_is_past_skips_it():
    assert plan_host("staged", "configured", Options(until="configure")).skip == \
        "already past configure"

