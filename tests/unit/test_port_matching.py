"""InfiniBand ports matched the way real NetBoxes record them: the lab host's eight CAs, with
NetBox interfaces named by netdev (`ibp...`), found by the port GUID in the interface's WWN
field or by its label; the gate's rate and cabling checks then follow the matched CA."""

from dataclasses import replace

import emulated
from racklift.facts.host import from_bundle
from racklift.lab import hwemu
from racklift.verify.compare import compare
from racklift.verify.ports import match_ib_ports
from racklift.verify.verdict import judge


def _colons(guid: str) -> str:
    digits = guid.removeprefix("0x").zfill(16)
    return ":".join(digits[i:i + 2] for i in range(0, 16, 2))  # NetBox's WWN form


def _renamed(profile):
    """The lab host's record with its InfiniBand interfaces named by netdev: mlx5_0..3 keep
    the CA as label, mlx5_4..7 have their port GUID as WWN."""
    record = emulated.expected_host()
    guids = {h.ca: h.port_guid for h in profile.hcas}
    interfaces = []
    for i in record.interfaces:
        if i.is_infiniband:
            n = int(i.name.removeprefix("mlx5_"))
            i = replace(i, name=f"ibp{24 + n}s0", label=i.name if n < 4 else None,
                        wwn=_colons(guids[i.name]) if n >= 4 else None)
        interfaces.append(i)
    return replace(record, interfaces=tuple(interfaces), parsed=None)


def test_ports_named_by_netdev_match_by_label_or_port_guid():
    profile = emulated.healthy_profile()
    record = _renamed(profile)
    facts = from_bundle(emulated.bundle(profile))
    matched = match_ib_ports(record.ib_ports, facts.hca_ports)
    assert {name: (port.ca, rule) for name, (port, rule) in matched.items()} == {
        **{f"ibp{24 + n}s0": (f"mlx5_{n}", "label") for n in range(4)},
        **{f"ibp{24 + n}s0": (f"mlx5_{n}", "port GUID") for n in range(4, 8)}}
    assert compare(record, facts) == []  # rates and cables checked through the matched CAs
    # And the health checks: each port's link state is its matched CA's.
    verdict = judge(record, facts)
    assert verdict.passed, verdict.failures


def test_a_finding_names_the_netbox_port_its_ca_and_the_rule():
    profile = hwemu.inject(emulated.healthy_profile(), "ib-rate-wrong")  # mlx5_5 at 200
    found = {m.field: m for m in compare(_renamed(profile),
                                         from_bundle(emulated.bundle(profile)))}
    rate = found["interfaces.ibp29s0.rate"]
    assert (rate.expected, rate.observed) == (400, 200)
    assert "mlx5_5, matched by port GUID" in rate.hint


def test_a_guid_decides_before_a_name_and_each_port_is_taken_once():
    profile = emulated.healthy_profile()
    facts = from_bundle(emulated.bundle(profile))
    record = emulated.expected_host()
    # NetBox's mlx5_0 carries mlx5_1's GUID: the GUID wins, and mlx5_1's interface is left
    # without a port rather than given mlx5_1 twice.
    mlx5_1 = next(h.port_guid for h in profile.hcas if h.ca == "mlx5_1")
    swapped = [replace(i, wwn=mlx5_1) if i.name == "mlx5_0" else i for i in record.ib_ports]
    matched = match_ib_ports(swapped, facts.hca_ports)
    assert (matched["mlx5_0"][0].ca, matched["mlx5_0"][1]) == ("mlx5_1", "port GUID")
    assert "mlx5_1" not in matched
    assert sorted(port.ca for port, _ in matched.values()) == [
        f"mlx5_{n}" for n in (1, 2, 3, 4, 5, 6, 7)]


def test_nics_the_os_names_otherwise_are_matched_by_mac_and_only_warn():
    record = emulated.expected_host()
    renamed = {"eno1": "eth0", "eno2": "eth1"}  # NetBox filled in from another template
    record = replace(record, interfaces=tuple(replace(i, name=renamed.get(i.name, i.name))
                                              for i in record.interfaces),
                     provisioning_interface="eth0", primary_ip_interface="eth0", parsed=None)
    verdict = judge(record, from_bundle(emulated.bundle(emulated.healthy_profile())))
    assert {(m.field, m.observed, m.severity) for m in verdict.mismatches} == {
        ("interfaces.eth0.name", "eno1", "warning"), ("interfaces.eth1.name", "eno2", "warning")}
    assert verdict.passed  # the primary IP found on the NIC the MAC names
    # A MAC on another NetBox port's name is still a swap, not a naming scheme.
    swapped = judge(emulated.expected_host(),
                    from_bundle(emulated.bundle(emulated.with_fault("mac-swapped"))))
    assert ("interfaces.eno1.mac", "critical") in {(m.field, m.severity)
                                                   for m in swapped.mismatches}
