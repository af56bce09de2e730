import pytest

from racklift.pipeline.plan import ACCEPT_ONLY, PROVISION, REIMAGE, Options, plan_host

ALL = ("image", "configure", "verify", "accept")
NO_ACCEPT = Options(accept=False)


@pytest.mark.parametrize(("status", "completed", "options", "stages"), [
    ("planned", None, Options(), ALL),
    ("planned", "configured", Options(), ALL),  # a planned host starts over, whatever it says
    ("planned", None, Options(image=False), ("configure", "verify", "accept")),
    ("planned", None, NO_ACCEPT, ("image", "configure", "verify")),
    ("staged", None, Options(), ALL),  # imaging was interrupted: image again
    ("staged", "imaged", Options(), ("configure", "verify", "accept")),
    ("staged", "configured", Options(), ("verify", "accept")),
    ("staged", "verified", Options(), ("accept",)),
    ("failed", "verified", Options(retry_failed=True), ("accept",)),  # failed acceptance
    # Verified, acceptance skipped: verify again, which then admits it.
    ("staged", "verified", NO_ACCEPT, ("verify",)),
    ("staged", "imaged", Options(reimage=True), ALL),
    ("staged", "imaged", Options(image=False), ("configure", "verify", "accept")),
    ("staged", "bogus", Options(), ALL),
    ("failed", "imaged", Options(retry_failed=True), ("configure", "verify", "accept")),
    ("offline", "configured", Options(REIMAGE), ALL),
    ("active", "configured", Options(REIMAGE, force=True), ALL),
    ("failed", None, Options(REIMAGE, image=False), ("configure", "verify", "accept")),
    ("planned", None, Options(until="image"), ("image",)),
    ("staged", "imaged", Options(until="configure"), ("configure",)),
    ("staged", "imaged", Options(until="verify"), ("configure", "verify")),
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



@pytest.mark.parametrize(("status", "completed", "options", "stages", "says"), [
    ("staged", "verified", Options(ACCEPT_ONLY), ("accept",), None),
    ("failed", "verified", Options(ACCEPT_ONLY, retry_failed=True), ("accept",), None),
    ("failed", "verified", Options(ACCEPT_ONLY), (), "--retry-failed"),
    ("staged", "configured", Options(ACCEPT_ONLY), (), "hosts verify has passed"),
    ("active", "verified", Options(ACCEPT_ONLY), (), "pass --force"),
    ("active", None, Options(ACCEPT_ONLY, force=True), ("accept",), None),
    ("planned", None, Options(ACCEPT_ONLY), (), "status planned"),
])
def test_accept_alone(status, completed, options, stages, says):
    plan = plan_host(status, completed, options)
    assert plan.stages == stages
    assert (says is None and plan.skip is None) or says in plan.skip
