import ipaddress

import pytest

from racklift.errors import LabError
from racklift.lab import hosts, seed
from racklift.lab.rack import parse_size


def test_lab_hosts_get_fixed_identities_inside_the_lab_network():
    plan = hosts.plan(32, "L01")
    names = [h.name for h in plan.hosts]
    assert names[:2] == ["lab-l01-01", "lab-l01-02"] and len(set(names)) == 32
    ips = [ipaddress.ip_interface(h.primary_ip) for h in plan.hosts]
    assert all(ip.network == hosts.LAB.subnet for ip in ips)
    assert str(ips[0].ip) == "10.89.0.11" and len(set(ips)) == 32
    macs = [m for h in plan.hosts for m in h.macs.values()]
    assert len(set(macs)) == len(macs)
    demo_macs = {m for h in seed.plan(racks=1250).hosts for m in h.macs.values()}
    assert not demo_macs & set(macs), "lab MACs must not clash with seeded hosts"
    assert plan == hosts.plan(32, "L01")


def test_lab_network_capacity_is_enforced():
    with pytest.raises(LabError, match="holds 1 to 244 hosts, not 300"):
        hosts.plan(300)


@pytest.mark.parametrize(("text", "size"), [
    ("15.77MB", 15.77e6), ("1.2GB", 1.2e9), ("900kB", 9e5), ("512B", 512), ("2MiB", 2 << 20)])
def test_podman_sizes(text, size):
    assert parse_size(text) == pytest.approx(size)


def test_emulated_hardware_is_what_the_seeded_device_type_expects():
    """hwemu runs on lab hosts without racklift, so it keeps its own copy of these values:
    they must not drift from the NetBox model the lab seeds."""
    from racklift.lab import hwemu

    profile = hwemu.generate_profile("lab-l01-01", "LABL010001", seed=1)
    assert profile.system.product == seed.DEVICE_TYPE["model"]
    assert profile.system.vendor == seed.DEVICE_TYPE["manufacturer"]
    assert {g.product_name for g in profile.gpus} == {seed.GPU_PART}
    assert len(profile.gpus) == len(seed.DEVICE_TYPE["gpus"])
    assert [p.ca for p in profile.hcas] == list(seed.IB_PORTS)
    assert {p.rate for p in profile.hcas} == {400}  # NDR, as the interface templates say
    assert profile.driver_version == seed.DESIRED_SOFTWARE["nvidia_driver"]["version"]
    assert profile.cuda_version == seed.DESIRED_SOFTWARE["cuda_version"]
