"""The gate's health checks that depend on the host's NetBox status or desired state: Xids at
admission (racklift.facts.xid) and fabric manager (DesiredState.fabric_manager)."""

from dataclasses import replace
from pathlib import Path

import pytest

import emulated
from racklift.facts.host import DiskFacts, HostFacts, from_bundle
from racklift.facts.observed import KernelEvent
from racklift.facts.parsers.kernel_log import parse_dmesg
from racklift.facts.xid import CRITICAL, INFO, WARNING, admission_severity
from racklift.netbox.desired import Invalid, parse, role_vars
from racklift.verify import health

REAL = Path(__file__).parent.parent / "fixtures" / "real"
NVLINK5 = REAL / "kmsg_xid-144-145-149_nvlink5-gb200.txt"
XID45 = REAL / "syslog_xid45-caused-by-previous-xid_590.48.01.txt"


def host(status: str, **hardware: object):
    """The lab's HGX host in `status`, its device type's context with `hardware` added."""
    expected = emulated.expected_host()
    config = {**expected.config, "hardware": {**expected.config["hardware"], **hardware}}
    return replace(expected, status=status, config=config)


def nonfatal_nvlink5() -> tuple:
    """The real GB200 lines the driver calls "Nonfatal": Xid 144 and 145."""
    events = tuple(e for e in parse_dmesg(NVLINK5.read_text()) if "Nonfatal" in e.message)
    assert [(e.code, e.severity) for e in events] == [(144, WARNING), (145, WARNING)]
    return events


def kernel_log(expected, events) -> health.CheckResult:
    return health.kernel_log(expected, HostFacts(host="h", kernel_events=events))


# ----------------------------------------------------------------- Xids at admission

@pytest.mark.parametrize("status", ["staged", "failed", "planned", "offline"])
def test_a_nonfatal_nvlink5_xid_refuses_a_host_being_admitted(status):
    result = kernel_log(host(status), nonfatal_nvlink5())
    assert result.status == health.CRITICAL
    assert result.detail.startswith("XID 144 on 0000:01:00: SAW_MVB Nonfatal")
    assert result.detail.endswith("; a host being admitted must be clean of Xid 144, 145 "
                                  "unless racklift.hardware.tolerated_xids lists them")


def test_on_an_active_host_the_drivers_word_decides_as_before():
    result = kernel_log(host("active"), nonfatal_nvlink5())
    assert result.status == health.WARNING
    assert result.detail.startswith("2 non-fatal events, first: NVRM: Xid (PCI:0000:01:00): 144")


def test_the_device_type_tolerates_xids_by_number_at_admission():
    events = nonfatal_nvlink5()
    assert kernel_log(host("staged", tolerated_xids=[144, 145]), events).status == \
        health.WARNING
    only_144 = kernel_log(host("staged", tolerated_xids=[144]), events)
    assert only_144.status == health.CRITICAL
    assert only_144.detail.endswith("clean of Xid 145 unless racklift.hardware.tolerated_xids "
                                    "lists them")


def test_tolerating_an_xid_keeps_its_own_severity():
    # Fatal per the driver (149) or the catalog (79): tolerance lifts only the admission rule.
    fatal = tuple(e for e in parse_dmesg(NVLINK5.read_text()) if e.code == 149)
    result = kernel_log(host("staged", tolerated_xids=[149]), fatal)
    assert result.status == health.CRITICAL
    assert "must be clean" not in result.detail


def test_an_xid_45_refuses_admission_and_warns_on_an_active_host():
    events = tuple(parse_dmesg(XID45.read_text()))
    assert {e.severity for e in events} == {WARNING}
    assert kernel_log(host("staged"), events).status == health.CRITICAL
    assert kernel_log(host("active"), events).status == health.WARNING


def test_only_the_applications_own_bucket_keeps_its_severity_at_admission():
    assert admission_severity(13, WARNING, ()) == WARNING  # RESTART_APP
    assert admission_severity(31, WARNING, ()) == WARNING  # RESTART_APP
    assert admission_severity(43, INFO, ()) == CRITICAL  # IGNORE
    assert admission_severity(63, WARNING, ()) == CRITICAL  # IGNORE, racklift's warning
    assert admission_severity(144, WARNING, ()) == CRITICAL  # "Nonfatal" per the driver
    assert admission_severity(999, WARNING, ()) == CRITICAL  # not in the catalog
    assert admission_severity(None, WARNING, ()) == CRITICAL
    assert admission_severity(144, WARNING, (144,)) == WARNING


def test_tolerated_xids_is_a_list_of_xid_numbers():
    state = parse({"hardware": {"tolerated_xids": [144, 145]}})
    assert not isinstance(state, list) and state.hardware.tolerated_xids == (144, 145)
    for wrong in (144, "144", [144, "145"], [True], [0], [1000], [[144]], list(range(1, 66))):
        problems = parse({"hardware": {"tolerated_xids": wrong}})
        assert isinstance(problems, list)
        assert [p.field for p in problems] == [
            "config_context.racklift.hardware.tolerated_xids"], wrong
        assert isinstance(problems[0], Invalid) and "list of at most 64 Xid numbers" in \
            problems[0].message


# ----------------------------------------------------------------- fabric manager

def fabric(nvswitch: bool, override: bool | None, service: str | None) -> health.CheckResult:
    expected = host("staged", nvswitch=nvswitch)
    driver = {**expected.config.get("nvidia_driver", {}), "fabricmanager": override}
    expected = replace(expected, config={**expected.config, "nvidia_driver": driver})
    services = {} if service is None else {"nvidia-fabricmanager": service}
    return health.fabric_manager(expected, HostFacts(host="h", services=services))


def test_the_override_asks_for_fabric_manager_on_a_type_without_nvswitch():
    assert fabric(False, True, "inactive").status == health.CRITICAL
    assert fabric(False, True, None).status == health.UNKNOWN
    assert fabric(False, True, "active").status == health.OK


def test_the_override_turns_fabric_manager_off_on_an_nvswitch_type():
    result = fabric(True, False, "inactive")
    assert (result.status, result.detail) == (health.OK, (
        "fabric manager not wanted (racklift.hardware.nvswitch, "
        "racklift.nvidia_driver.fabricmanager)"))


def test_no_override_follows_the_nvswitches():
    assert fabric(True, None, "inactive").status == health.CRITICAL
    assert fabric(False, None, "inactive").status == health.OK


@pytest.mark.parametrize("nvswitch", [True, False])
@pytest.mark.parametrize("override", [True, False, None])
def test_the_check_requires_the_service_exactly_where_the_role_installs_it(nvswitch, override):
    state = parse({"hardware": {"nvswitch": nvswitch},
                   "nvidia_driver": {"fabricmanager": override}})
    assert not isinstance(state, list)
    installed = role_vars(state)["nvidia_driver"]["fabricmanager"]
    required = fabric(nvswitch, override, "inactive").status == health.CRITICAL
    assert required == installed


# ----------------------------------------------------------------- GPU, InfiniBand, disk checks

def healthy_facts() -> HostFacts:
    """The lab host's facts, every check OK."""
    facts = from_bundle(emulated.bundle(emulated.healthy_profile()))
    assert all(c.status == health.OK for c in health.run_checks(host("staged"), facts))
    return facts


def with_gpu(facts: HostFacts, index: int, **changes: object) -> HostFacts:
    """`facts` with GPU `index` changed."""
    gpus = tuple(replace(g, **changes) if g.index == index else g for g in facts.nvidia.gpus)
    return replace(facts, nvidia=replace(facts.nvidia, gpus=gpus))


def check(name: str, facts: HostFacts, expected=None) -> health.CheckResult:
    results = {c.name: c for c in health.run_checks(expected or host("staged"), facts)}
    return results[name]


@pytest.mark.parametrize("mode", ["Disabled", None])
def test_ecc_off_on_one_gpu_is_critical_and_names_it(mode):
    result = check("gpu.ecc", with_gpu(healthy_facts(), 3, ecc_mode_current=mode))
    assert (result.status, result.detail) == (
        health.CRITICAL, "ECC not enabled on GPU [3]: nvidia-smi -e 1 and reboot")


@pytest.mark.parametrize("pending", [{"retired_pages_pending": True},
                                     {"remapped_rows_pending": True}])
def test_a_pending_page_retirement_or_row_remap_alone_is_critical(pending):
    result = check("gpu.memory_remapping", with_gpu(healthy_facts(), 5, **pending))
    assert result.status == health.CRITICAL
    assert result.detail.startswith("row remap / page retirement pending on GPU [5]: reset")


def test_a_failed_row_remapping_is_critical_and_asks_for_an_rma():
    facts = with_gpu(with_gpu(healthy_facts(), 1, remapped_rows_failure=True), 2,
                     remapped_rows_pending=True)
    result = check("gpu.memory_remapping", facts)
    assert (result.status, result.detail) == (
        health.CRITICAL, "row remapping failed on GPU [1]: RMA")


def test_persistence_mode_off_is_a_warning_that_names_the_gpu():
    facts = with_gpu(healthy_facts(), 6, persistence_mode="Disabled")
    result = check("gpu.persistence_mode", facts)
    assert (result.status, result.detail) == (
        health.WARNING, "persistence mode off on GPU [6]: enable nvidia-persistenced")


def test_the_kernel_check_lists_only_the_first_five_critical_events():
    events = tuple(KernelEvent(kind="xid", code=79, device=f"0000:{n:02x}:00", timestamp=None,
                               message="GPU has fallen off the bus.", severity=CRITICAL,
                               line=f"NVRM: Xid (PCI:0000:{n:02x}:00): 79") for n in range(7))
    result = kernel_log(host("active"), events)
    assert result.status == health.CRITICAL
    assert result.detail.count("XID 79 on") == 5
    assert "XID 79 on 0000:04:00:" in result.detail and "0000:05:00" not in result.detail


def test_a_host_without_infiniband_ports_passes_the_ib_check_without_hca_facts():
    expected = host("staged")
    no_ib = replace(expected, interfaces=tuple(i for i in expected.interfaces
                                               if not i.is_infiniband))
    result = check("ib.links", replace(healthy_facts(), hca_ports=()), no_ib)
    assert (result.status, result.detail) == (health.OK, "no InfiniBand ports expected")
    # The same facts where NetBox expects InfiniBand ports: not known, never OK.
    assert check("ib.links", replace(healthy_facts(), hca_ports=())).status == health.UNKNOWN


@pytest.mark.parametrize("state, phys_state", [("Active", "Polling"), ("Down", "LinkUp"),
                                               ("Down", "Disabled")])
def test_an_ib_port_must_be_both_active_and_linked_up(state, phys_state):
    facts = healthy_facts()
    ports = tuple(replace(p, state=state, phys_state=phys_state) if p.ca == "mlx5_2" else p
                  for p in facts.hca_ports)
    result = check("ib.links", replace(facts, hca_ports=ports))
    assert result.status == health.CRITICAL
    assert result.detail.startswith(f"ports not Active/LinkUp: mlx5_2 {state}/{phys_state}: ")


@pytest.mark.parametrize("free_percent, status", [
    (4, health.CRITICAL), (5, health.WARNING), (14, health.WARNING), (15, health.OK)])
def test_disk_space_thresholds_five_and_fifteen_percent_free(free_percent, status):
    disks = (DiskFacts("/", 100, 80), DiskFacts("/var", 100, free_percent))
    result = check("disk.space", replace(healthy_facts(), disks=disks))
    assert (result.status, result.detail.split(":")[0]) == (status, f"/var {free_percent}% free")
