"""What a new config context would override (src/racklift/netbox/overrides.py): the keys it sets
that an existing context applying to the same devices sets before it, per context."""

from __future__ import annotations

from typing import Any

from racklift.netbox.bootstrap import UNMANAGED
from racklift.netbox.overrides import Override, leaves, may_apply, overrides, sets

NEW = {"racklift": UNMANAGED}
ORDER = (1000, "racklift-gpu-server")
DRIVER = {"racklift": {"nvidia_driver": {"branch": "550", "version": "550.127.08"}}}


def _device(name: str = "gpu-0001", site: int = 1, config: Any = None, local: Any = None,
            tags: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"id": 1, "name": name, "site": {"id": site}, "role": {"id": 2},
            "device_type": {"id": 3}, "platform": None, "tenant": None, "cluster": None,
            "tags": [{"slug": t} for t in tags], "config_context": config or {},
            "local_context_data": local}


def _context(name: str, data: dict, weight: int = 100, **assigned: Any) -> dict[str, Any]:
    return {"name": name, "weight": weight, "is_active": True, "data": data,
            "sites": [], "roles": [], "tags": [], **assigned}


def test_leaves_and_sets_follow_a_deep_merge():
    assert ("racklift", "nvidia_driver", "version") in leaves(NEW)
    assert sets(DRIVER, ("racklift", "nvidia_driver", "version"))
    assert not sets(DRIVER, ("racklift", "ofed", "version"))
    # A value where the merge needs a mapping is replaced too.
    assert sets({"racklift": {"ofed": "doca"}}, ("racklift", "ofed", "version"))


def test_a_site_context_setting_the_driver_version_is_named_with_the_key():
    """Planted: a site context pins the driver; the weight-1000 role context would null it."""
    site = _context("site-lab1", DRIVER, sites=[{"id": 1}])
    device = _device(config=DRIVER)
    assert overrides(NEW, ORDER, [device], [site]) == (
        Override("site-lab1", "racklift.nvidia_driver.version", ("gpu-0001",)),)


def test_no_override_where_nothing_applies_sets_the_key_or_the_new_context_loses():
    site = _context("site-lab1", DRIVER, sites=[{"id": 1}])
    assert overrides(NEW, ORDER, [_device()], [site]) == ()  # its rendered context lacks it
    # Another site's context does not apply to this device.
    assert overrides(NEW, ORDER, [_device(site=2, config=DRIVER)], [site]) == ()
    # The device's local data wins over every context: nothing of it is overridden.
    assert overrides(NEW, ORDER, [_device(config=DRIVER, local=DRIVER)], [site]) == ()
    # A context merged after the new one keeps its value.
    late = _context("zz-late", DRIVER, weight=2000)
    assert overrides(NEW, ORDER, [_device(config=DRIVER)], [late]) == ()
    # A context that sets other keys only.
    hardware = _context("hw", {"racklift": {"hardware": {"nvswitch": True}}})
    assert overrides(NEW, ORDER, [_device(config=hardware["data"])], [hardware]) == ()


def test_a_context_applies_as_netbox_assigns_it():
    device = _device(tags=("gpu",))
    assert may_apply(_context("all", {}), device)
    assert may_apply(_context("tag", {}, tags=["gpu", "other"]), device)
    assert not may_apply(_context("tag", {}, tags=["other"]), device)
    assert not may_apply(_context("type", {}, device_types=[{"id": 9}]), device)
    assert not may_apply({**_context("off", {}), "is_active": False}, device)
    # A tree racklift does not walk counts as applying: a refusal too many, never one missed.
    assert may_apply(_context("region", {}, regions=[{"id": 9}]), device)
