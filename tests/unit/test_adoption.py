"""The adoption report (pure): per device type, how many devices lack each thing racklift
needs, one gap per kind (not per port), each device's problems, and the names it cannot use."""

from dataclasses import replace

import emulated
from racklift.netbox.adoption import adoption_report, gap
from racklift.netbox.expected import DeviceTypeRef, Problem

READY = emulated.expected_host()


def host(name: str, netbox_id: int, *problems: tuple[str, str], model: str = "HGX") -> object:
    return replace(READY, name=name, netbox_id=netbox_id, parsed=READY.desired,
                   device_type=DeviceTypeRef("x", model, model.lower(), None),
                   problems=tuple(Problem(name, f, m) for f, m in problems))


def test_gaps_are_counted_per_device_type_and_kind():
    report = adoption_report([
        host("gpu-001", 1),
        host("gpu-002", 2, ("serial", "no serial number: set it"),
             ("interfaces.eno1.primary_mac_address", "no MAC address: add one")),
        host("gpu-003", 3, ("interfaces.ens1f0.primary_mac_address", "no MAC address: add")),
        host("sw-01", 4, ("config_context.racklift", "no context: scope one"), model="SN4600"),
    ])
    assert report.devices == 4 and report.ready == ("gpu-001",)
    hgx, sn = report.types
    assert (hgx.model, hgx.devices, hgx.ready) == ("HGX", 3, 1)
    assert hgx.gaps == {"interfaces.<port>.primary_mac_address": 2, "serial": 1}
    assert (sn.model, sn.gaps) == ("SN4600", {"config_context.racklift": 1})
    assert report.gaps["interfaces.<port>.primary_mac_address"] == 2
    assert report.hints["serial"] == "no serial number: set it"
    assert report.by_device["gpu-002"] == ["serial: no serial number: set it",
                                           "interfaces.eno1.primary_mac_address: no MAC "
                                           "address: add one"]


def test_names_racklift_cannot_use_are_listed_and_kept_apart_by_id():
    report = adoption_report([
        host("PP:MDF", 5, ("name", "'PP:MDF' is not a host name"),
             ("name.ambiguous", "'PP:MDF' also names device 6")),
        host("PP:MDF", 6, ("name", "'PP:MDF' is not a host name"),
             ("name.ambiguous", "'PP:MDF' also names device 5")),
        host("device-7", 7, ("name", "the device has no name")),
    ])
    assert report.refused == ("PP:MDF", "PP:MDF", "device-7")
    assert set(report.by_device) == {"PP:MDF (device 5)", "PP:MDF (device 6)",
                                     "device-7 (device 7)"}
    assert report.to_dict()["device_types"][0]["gaps"] == {"name": 3, "name.ambiguous": 2}


def test_a_gap_is_per_kind_not_per_port():
    assert gap("interfaces.ibp12s0.primary_mac_address") == "interfaces.<port>.primary_mac_address"
    assert gap("serial") == "serial"
