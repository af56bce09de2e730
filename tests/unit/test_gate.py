"""The gate as pure functions: an emulated host's support bundle against its NetBox record.
Every fault the lab can inject must fail the host with the right field and severity."""

import json
from dataclasses import replace

import pytest
import yaml

import emulated
from helpers import REPO
from racklift.facts.bundle import Output
from racklift.facts.host import from_bundle
from racklift.facts.observed import NvlinkFacts, TopologyFacts
from racklift.lab import hwemu
from racklift.verify import compare, health, verdict_report
from racklift.verify.verdict import journal_text, judge, target_status


def verdict_for(profile, expected=None):
    return judge(expected or emulated.expected_host(), from_bundle(emulated.bundle(profile)))


def test_healthy_host_passes_with_zero_mismatches():
    v = verdict_for(emulated.healthy_profile())
    assert v.mismatches == ()
    assert [c.status for c in v.checks] == ["OK"] * len(health.CHECKS)
    assert v.passed and target_status(v) == "active"


# fault → (the mismatch field or check name that must catch it, its severity / status)
CAUGHT_BY = {
    "gpu-missing": ("gpus.count", compare.CRITICAL),
    "gpu-lost": ("gpus.lost[0000:ab:00.0]", compare.CRITICAL),
    "ecc-uncorrected": ("gpu.ecc", health.CRITICAL),
    "xid-79": ("kernel.gpu_errors", health.CRITICAL),
    "pcie-degraded": ("gpu.pcie_link", health.CRITICAL),
    "ib-port-down": ("ib.links", health.CRITICAL),
    "ib-rate-wrong": ("interfaces.mlx5_5.rate", compare.CRITICAL),
    "mac-swapped": ("interfaces.eno1.mac", compare.CRITICAL),
    "wrong-system-serial": ("system.serial", compare.CRITICAL),
    "driver-version-wrong": ("software.nvidia_driver", compare.CRITICAL),
    "nvlink-down": ("nvlink[3].links", compare.CRITICAL),
    "nvlink-errors-rising": ("nvlink[2].errors", compare.CRITICAL),
    "numa-misplaced": ("topology.GPU6.nic", compare.CRITICAL),
    "cable-swapped": ("cable.swapped[mlx5_0]", compare.CRITICAL),
    "cable-wrong-leaf": ("cable.wrong_peer[mlx5_2]", compare.CRITICAL),
    "ib-link-degraded": ("cable.degraded[mlx5_4]", compare.CRITICAL),
    "link-no-neighbor": ("cable.no_neighbor[mlx5_7]", compare.CRITICAL),
}


def test_every_fault_kind_is_covered():
    # The in-band cable's faults are made with real lldpd on the lab's leaf, not in a
    # profile: test_lab and test_verify catch them. Load-only faults pass the gate: acceptance
    # catches them (test_hwemu_acceptance). The real-world forms go through the collector's
    # exit statuses and stderr: test_hwemu_real_forms.
    assert (set(CAUGHT_BY) | {"gpu-serial-changed"} | set(hwemu.ETHERNET_FAULTS)
            | {"hbm-fail", "nvlink-slow", "rail-slow", "dcgm-skip-required"}
            | {"aer-gpu-endpoint", "xid-nvlink5-nonfatal", "gpu-off-bus-open-module",
               "ibstat-panic", "dmi-chassis-only"} == set(hwemu.FAULTS))


@pytest.mark.parametrize("kind", sorted(CAUGHT_BY))
def test_each_fault_fails_the_host_on_the_right_field(kind):
    v = verdict_for(emulated.with_fault(kind))
    field, severity = CAUGHT_BY[kind]
    found = {m.field: m.severity for m in v.mismatches} | {c.name: c.status for c in v.checks}
    assert found.get(field) == severity, v.failures
    assert not v.passed and target_status(v) == "failed"
    assert any(field in line for line in v.failures)


def test_changed_gpu_serial_is_caught_where_netbox_records_serials():
    healthy = emulated.healthy_profile()
    recorded = {n: g.serial for n, g in enumerate(healthy.gpus)}
    changed = emulated.with_fault("gpu-serial-changed")
    v = verdict_for(changed, emulated.expected_host(gpu_serials=recorded))
    assert [(m.field, m.severity) for m in v.mismatches] == [("gpus[3].serial", "critical")]
    assert v.mismatches[0].expected == healthy.gpus[3].serial
    # Without recorded serials NetBox has nothing to compare: not a mismatch.
    assert verdict_for(changed).passed


def test_driver_missing_is_told_apart_from_gpus_missing():
    bundle = emulated.bundle(emulated.healthy_profile())
    no_driver = Output(hwemu.NVIDIA_SMI_NO_DRIVER + "\n", rc=9)
    lspci = "\n".join(
        f"0000:{bus:02x}:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB]"
        f" [10de:2330] (rev a1)" for bus in hwemu.HGX_H100_BUSES)
    outputs = {**bundle.outputs, "nvidia-smi-q-x.xml": no_driver, "lspci.txt": Output(lspci)}
    facts = from_bundle(type(bundle)(bundle.host, outputs, bundle.sysfs))
    v = judge(emulated.expected_host(), facts)
    assert [m.field for m in v.mismatches] == ["gpus.driver"]
    assert "couldn't communicate with the NVIDIA driver" in str(v.mismatches[0].observed)
    # GPU checks could not run: UNKNOWN, which never counts as passing.
    assert {c.name: c.status for c in v.checks}["gpu.ecc"] == "UNKNOWN" and not v.passed

    seven = "\n".join(lspci.splitlines()[:7])
    facts = from_bundle(type(bundle)(bundle.host, {**outputs, "lspci.txt": Output(seven)},
                                     bundle.sysfs))
    assert [m.field for m in judge(emulated.expected_host(), facts).mismatches] == [
        "gpus.count"]


def test_nothing_collected_is_never_a_pass():
    v = judge(emulated.expected_host(),
              from_bundle(type(emulated.bundle(emulated.healthy_profile()))("h", {})))
    assert not v.passed
    assert "system.serial" in {m.field for m in v.mismatches}


def test_journal_lists_every_reason_and_reports_agree():
    v = verdict_for(hwemu.inject(emulated.with_fault("xid-79"), "ib-port-down"))
    text = journal_text(v)
    assert text.startswith("racklift verify: failed: 2 problem(s).")
    assert "kernel.gpu_errors: CRITICAL" in text and "ib.links: CRITICAL" in text
    data = verdict_report.to_json([v], "test")
    assert data["summary"] == {"hosts": 1, "passed": 0, "failed": 1, "skipped": 0}
    assert data["hosts"][0]["failures"] == v.failures
    junit = verdict_report.to_junit([v, verdict_for(emulated.healthy_profile())])
    assert 'tests="2" failures="1"' in junit and "ib.links: CRITICAL" in junit


def test_cpu_and_memory_facts_from_both_lscpu_layouts():
    facts = from_bundle(emulated.bundle(emulated.healthy_profile()))
    assert facts.cpu is not None
    assert (facts.cpu.model, facts.cpu.sockets, facts.cpu.cores_per_socket, facts.cpu.threads) \
        == ("Intel(R) Xeon(R) Platinum 8480+", 2, 56, 224)
    assert facts.memory_mib == 2113445472 // 1024
    # util-linux 2.38 (Debian 12) prints the same fields flat.
    from racklift.facts.parsers import parse_lscpu_json
    flat = ('{"lscpu": [{"field": "CPU(s):", "data": "2"}, {"field": "Model name:", '
            '"data": "AMD EPYC"}, {"field": "Socket(s):", "data": "1"}]}')
    assert parse_lscpu_json(flat).model == "AMD EPYC"


def test_record_serials_fills_blank_gpu_serials_only():
    from racklift.verify.record_serials import gpu_serials_to_record

    profile = emulated.healthy_profile()
    facts = from_bundle(emulated.bundle(profile))
    blank = gpu_serials_to_record(emulated.expected_host(), facts)
    assert blank == {f"GPU{n}": g.serial for n, g in enumerate(profile.gpus)}
    recorded = gpu_serials_to_record(
        emulated.expected_host(gpu_serials={0: profile.gpus[0].serial}), facts)
    assert "GPU0" not in recorded and len(recorded) == 7


def test_a_stopped_fabric_manager_fails_a_host_of_an_nvswitch_type():
    bundle = emulated.bundle(emulated.healthy_profile())
    assert "nvidia-fabricmanager\tactive" in bundle.outputs["services.txt"].stdout
    stopped = {**bundle.outputs, "services.txt": Output("nvidia-fabricmanager\tinactive\n")}
    nvswitch = emulated.expected_host()  # the seed's HGX type says NVSwitch
    assert nvswitch.desired.hardware.nvswitch
    v = judge(nvswitch, from_bundle(type(bundle)(bundle.host, stopped, bundle.sysfs)))
    fabric = {c.name: c for c in v.checks}["gpu.fabric_manager"]
    assert (fabric.status, fabric.detail) == (health.CRITICAL, (
        "nvidia-fabricmanager is inactive: NVSwitch systems cannot run CUDA jobs without it"))
    assert not v.passed and target_status(v) == "failed"
    # The same host where the service runs, and a type without NVSwitch, pass the check.
    assert {c.name: c.status for c in verdict_for(emulated.healthy_profile()).checks}[
        "gpu.fabric_manager"] == health.OK
    plain = replace(nvswitch, config={**nvswitch.config, "hardware": {}})
    facts = from_bundle(type(bundle)(bundle.host, stopped, bundle.sysfs))
    assert {c.name: c.status for c in judge(plain, facts).checks}[
        "gpu.fabric_manager"] == health.OK


def test_a_context_that_does_not_parse_never_passes():
    host = emulated.expected_host()
    broken = replace(host, config={**host.config, "hardware": {"nvswitch": "yes"}})
    assert broken.desired is None
    v = judge(broken, from_bundle(emulated.bundle(emulated.healthy_profile())))
    assert {c.name: c.status for c in v.checks}["gpu.fabric_manager"] == health.UNKNOWN
    assert [m.field for m in v.mismatches] == ["config_context.racklift"]
    assert not v.passed


# --- issue 16: versions as versions, a missing NIC, slot order, what --record-serials takes ---

@pytest.mark.parametrize(("have", "want", "ok"), [
    ("24.10-1.1.4.0", "24.10-1.1.4.0", True), ("24.10-1.1.4.0", "24.10", True),
    ("24.10-1.1.4.0", "24.10*", True), ("24.10-1.1.4.0", "24.10-*", True),
    ("24.10-1.1.4.0", "24.1", False), ("24.10-1.1.4.0", "24.1*", False),
    ("1.17.3-1", "1.17.3", True), ("1.17.30-1", "1.17.3", False), ("1.17.3", "1.17.3.1", False),
    ("2:1.17.3-1", "1.17.3", False), (None, "1.17.3", False)])
def test_versions_compare_on_component_boundaries(have, want, ok):
    assert compare.version_matches(have, want) is ok


def test_a_package_version_that_only_starts_like_the_wanted_one_fails():
    host = emulated.expected_host()
    host = replace(host, config={**host.config, "ofed": {"source": "doca", "version": "24.1*"}})
    bundle = emulated.bundle(emulated.healthy_profile())
    packages = Output("doca-ofed\t24.10-1.1.4.0\tii \n")
    facts = from_bundle(replace(bundle, outputs={**bundle.outputs, "packages.txt": packages}))
    assert [(m.field, m.observed, m.severity) for m in compare.compare(host, facts)] == [
        ("software.ofed", "24.10-1.1.4.0", compare.CRITICAL)]


@pytest.mark.parametrize("nic", ["eno1", "eno2"])  # the provisioning NIC, the in-band one
def test_a_missing_in_band_nic_is_critical(nic):
    bundle = emulated.bundle(emulated.healthy_profile())
    links = [link for link in json.loads(bundle.outputs["ip-link.json"].stdout)
             if link["ifname"] != nic]
    outputs = {**bundle.outputs, "ip-link.json": Output(json.dumps(links))}
    v = judge(emulated.expected_host(), from_bundle(replace(bundle, outputs=outputs)))
    assert (f"interfaces.{nic}", compare.CRITICAL) in {(m.field, m.severity)
                                                       for m in v.mismatches}
    assert not v.passed


def _twelve_gpus():
    """The emulated host with 12 GPU slots, as NetBox may list them (by name as text: GPU10
    before GPU2), and the facts of a host whose nvidia-smi lists 12 GPUs in bus order."""
    host = emulated.expected_host()
    slot = host.gpus[0]
    slots = sorted((replace(slot, name=f"GPU{n}") for n in range(12)), key=lambda s: s.name)
    facts = from_bundle(emulated.bundle(emulated.healthy_profile()))
    gpus = tuple(replace(facts.nvidia.gpus[0], index=n, serial=f"16500000000{n:02d}")
                 for n in range(12))
    facts = replace(facts, nvidia=replace(facts.nvidia, gpus=gpus, attached_gpus=12))
    return replace(host, gpus=tuple(slots)), facts


def test_gpu_slots_are_in_natural_order():
    host, facts = _twelve_gpus()
    assert [s.name for s in host.gpus][:4] == ["GPU0", "GPU1", "GPU10", "GPU11"]
    assert [s.name for s in compare.gpu_slots(host)] == [f"GPU{n}" for n in range(12)]
    # Slot GPU2 holds the third GPU nvidia-smi lists, not the eleventh.
    from racklift.verify.record_serials import gpu_serials_to_record
    assert gpu_serials_to_record(host, facts)["GPU2"] == "1650000000002"
    recorded = replace(host, gpus=tuple(replace(s, serial="1650000000002") if s.name == "GPU2"
                                        else s for s in host.gpus))
    assert compare.compare(recorded, facts) == []


def test_record_serials_refuses_a_host_that_fails_an_identity_check():
    from racklift.verify.record_serials import gpu_serials_to_record

    facts = from_bundle(emulated.bundle(emulated.with_fault("wrong-system-serial")))
    assert facts.nvidia.gpus[0].serial  # there would be serials to record
    assert [m.field for m in compare.identity(emulated.expected_host(), facts)] == [
        "system.serial"]
    assert gpu_serials_to_record(emulated.expected_host(), facts) == {}
    # A GPU serial that differs from NetBox's: the slots may not hold what NetBox says.
    swapped = from_bundle(emulated.bundle(emulated.with_fault("gpu-serial-changed")))
    recorded = {n: g.serial for n, g in enumerate(emulated.healthy_profile().gpus) if n == 3}
    assert gpu_serials_to_record(emulated.expected_host(gpu_serials=recorded), swapped) == {}
    # So does a host whose GPUs are not all there.
    missing = from_bundle(emulated.bundle(emulated.with_fault("gpu-missing")))
    assert gpu_serials_to_record(emulated.expected_host(), missing) == {}


def test_record_serials_takes_only_what_looks_like_a_serial():
    from racklift.verify.record_serials import gpu_serials_to_record

    facts = from_bundle(emulated.bundle(emulated.healthy_profile()))
    odd = ("x" * 51, "1650\x00522003820", "ok-serial.1", "../../x", "serial with space")
    gpus = tuple(replace(g, serial=odd[g.index]) if g.index < len(odd) else g
                 for g in facts.nvidia.gpus)
    facts = replace(facts, nvidia=replace(facts.nvidia, gpus=gpus))
    taken = gpu_serials_to_record(emulated.expected_host(), facts)
    assert taken["GPU2"] == "ok-serial.1"
    assert not {"GPU0", "GPU1", "GPU3", "GPU4"} & set(taken) and len(taken) == 4


# --- compare at its edges (mutation testing, issue 34) ---------------------------------------

def _healthy():
    return from_bundle(emulated.bundle(emulated.healthy_profile()))


def _found(host=None, facts=None) -> dict:
    """compare's findings by field, for `host` (the lab's record) and `facts` (healthy)."""
    return {m.field: m for m in compare.compare(host or emulated.expected_host(),
                                                facts or _healthy())}


def _with_context(**context):
    """The lab's record with these config context keys replaced."""
    host = emulated.expected_host()
    host = replace(host, config={**host.config, **context})
    assert host.desired is not None
    return host


@pytest.mark.parametrize(("model", "part_number", "warned"), [
    ("SYS-421GE-TNHR2-LCC", "SYS-421GE-TNHR2-LCC", False),
    ("SYS-421GE-TNHR2-LCC", "MCP-SYS-421", False), ("HGX H100 8-GPU", "sys-421ge-tnhr2-lcc", False),
    ("HGX H100 8-GPU", "MCP-SYS-421", True)])
def test_the_chassis_is_the_device_types_model_or_its_part_number(model, part_number, warned):
    host = emulated.expected_host()
    host = replace(host, device_type=replace(host.device_type, model=model,
                                             part_number=part_number))
    found = _found(host)
    if warned:
        m = found["device_type.model"]
        assert (m.expected, m.observed, m.severity) == (
            "HGX H100 8-GPU", "SYS-421GE-TNHR2-LCC", compare.WARNING)
    else:
        assert found == {}


def test_gpus_are_missing_when_nvidia_smi_lists_fewer_or_counts_fewer():
    facts = _healthy()
    listed = replace(facts, nvidia=replace(facts.nvidia, gpus=facts.nvidia.gpus[:7]))
    m = _found(facts=listed)["gpus.count"]
    assert (m.expected, m.observed, m.severity) == (8, 7, compare.CRITICAL)
    counted = replace(facts, nvidia=replace(facts.nvidia, attached_gpus=7))
    m = _found(facts=counted)["gpus.count"]
    assert (m.expected, m.observed, m.severity) == (8, 8, compare.CRITICAL)


def test_roce_ports_and_virtual_functions_are_not_infiniband_ports():
    facts = _healthy()
    port = facts.hca_ports[0]
    roce = replace(port, ca="mlx5_8", link_layer="Ethernet", port_guid=None, node_guid=None)
    vf = replace(port, ca="mlx5_9", is_vf=True, port_guid=None, node_guid=None)
    assert _found(facts=replace(facts, hca_ports=(*facts.hca_ports, roce, vf))) == {}


def test_a_missing_ib_port_does_not_hide_a_slow_one_after_it():
    facts = _healthy()
    ports = tuple(replace(p, rate_gbps=200) if p.ca == "mlx5_1" else p
                  for p in facts.hca_ports if p.ca != "mlx5_0")
    found = _found(facts=replace(facts, hca_ports=ports))
    assert (found["hcas.ib_ports"].expected, found["hcas.ib_ports"].observed) == (8, 7)
    slow = found["interfaces.mlx5_1.rate"]
    assert (slow.expected, slow.observed, slow.severity) == (400, 200, compare.CRITICAL)


def test_an_ib_port_of_a_type_racklift_has_no_rate_for_is_not_rate_checked():
    host = emulated.expected_host()
    host = replace(host, interfaces=tuple(
        replace(i, type="infiniband-gdr") if i.name == "mlx5_0" else i for i in host.interfaces))
    facts = _healthy()
    ports = tuple(replace(p, rate_gbps=1600) if p.ca == "mlx5_0" else p for p in facts.hca_ports)
    assert not [f for f in _found(host, replace(facts, hca_ports=ports))
                if f.startswith(("hcas", "interfaces"))]


def test_a_netbox_ports_mac_on_another_netbox_named_nic_says_where_it_is():
    """The host has no eno1, and eno1's MAC is on eno2 (a NetBox port of its own): the MAC is
    reported where it is, not the port as absent."""
    facts = _healthy()
    eno1, eno2 = facts.nic("eno1"), facts.nic("eno2")
    facts = replace(facts, nics=(replace(eno2, mac=eno1.mac),))
    found = _found(facts=facts)
    m = found["interfaces.eno1.mac"]
    assert (m.expected, m.observed, m.severity) == (eno1.mac, "on eno2", compare.CRITICAL)
    assert "interfaces.eno1" not in found


def test_a_missing_nic_does_not_hide_a_wrong_mac_after_it():
    facts = _healthy()
    eno2 = facts.nic("eno2")
    facts = replace(facts, nics=(replace(eno2, mac="02:52:4C:01:00:99"),))
    found = _found(facts=facts)
    assert (found["interfaces.eno1"].expected, found["interfaces.eno1"].observed) == (
        "present", "absent")
    m = found["interfaces.eno2.mac"]
    assert (m.expected, m.observed, m.severity) == (
        "02:52:4C:01:00:02", "02:52:4C:01:00:99", compare.CRITICAL)


def test_the_primary_ip_must_be_on_its_interface_where_netbox_records_one():
    facts = _healthy()
    eno1 = facts.nic("eno1")
    moved = replace(facts, nics=tuple(replace(n, addresses=()) if n is eno1 else n
                                      for n in facts.nics))
    m = _found(facts=moved)["interfaces.eno1.ip"]
    assert (m.expected, m.observed, m.severity) == ("10.89.0.11/24", [], compare.CRITICAL)
    # A record without a primary IP, or without the interface it is on: nothing to check.
    host = emulated.expected_host()
    assert _found(replace(host, primary_ip=None), moved) == {}
    assert _found(replace(host, primary_ip_interface=None), moved) == {}


# What DOCA-OFED 2.9.1 and MLNX_OFED 24.10-1.1.4 install (the ofed role's stand-ins, shaped on
# NVIDIA's repositories): the metapackage at the pin, the rest at the vendor's own numbering.
VENDOR = {"mlnx-ofed-kernel-utils": "24.10.OFED.24.10.1.1.4.1-1",
          "rdma-core": "2410mlnx54-1.2410068", "mlnx-tools": "24.10-0.2410068"}


@pytest.mark.parametrize(("source", "pin", "packages"), [
    ("doca", "2.9.1-1", {"doca-ofed": "2.9.1-1", **VENDOR}),
    ("mlnx_ofed", "24.10-OFED.24.10.1.1.4.1",
     {"mlnx-ofed-basic": "24.10-OFED.24.10.1.1.4.1", **VENDOR}),
    ("inbox", "44.0-2", {"rdma-core": "44.0-2", "ibverbs-utils": "44.0-2"}),
])
def test_the_ofed_pin_is_read_from_the_sources_own_package_only(source, pin, packages):
    host = _with_context(ofed={"source": source, "version": pin})
    facts = replace(_healthy(), packages=packages)
    # A host at its pin passes, whatever the packages beside the metapackage are numbered.
    assert _found(host, facts) == {}
    own = compare.OFED_PACKAGE[source]
    older = _found(host, replace(facts, packages={**packages, own: "0.1-1"}))
    assert (older["software.ofed"].expected, older["software.ofed"].observed) == (pin, "0.1-1")
    # Without the source's own package, what the others say proves nothing: refused.
    gone = _found(host, replace(facts, packages={k: v for k, v in packages.items() if k != own}))
    assert gone["software.ofed"].observed is None


def test_the_ofed_packages_read_are_the_ones_the_role_pins():
    defaults = yaml.safe_load((REPO / "roles" / "ofed" / "defaults" / "main.yml").read_text())
    assert compare.OFED_PACKAGE["doca"] in defaults["ofed_doca_packages"]
    assert compare.OFED_PACKAGE["mlnx_ofed"] in defaults["ofed_mlnx_ofed_packages"]
    assert compare.OFED_PACKAGE["inbox"] in defaults["ofed_inbox_packages"]


def test_an_unmanaged_ofed_does_not_skip_the_container_toolkit():
    host = _with_context(ofed={"source": "inbox", "version": None},
                         container_toolkit={"version": "1.17.3"})
    m = _found(host)["software.container_toolkit"]
    assert (m.expected, m.observed, m.severity) == ("1.17.3", None, compare.CRITICAL)
    facts = replace(_healthy(), packages={"nvidia-container-toolkit": "1.17.3-1"})
    assert _found(host, facts) == {}


def _topology(devices, rows):
    return TopologyFacts(tuple(devices), tuple(tuple(r.split()) for r in rows))


@pytest.mark.parametrize(("affinity", "link", "refused"), [
    ("PIX", "PIX", False), ("PIX", "PXB", True), ("PXB", "PXB", False), ("PXB", "PHB", True),
    ("PHB", "PHB", False), ("PHB", "NODE", True), ("NODE", "NODE", False), ("NODE", "SYS", True)])
def test_a_gpus_nearest_nic_may_be_as_far_as_the_affinity_and_no_farther(affinity, link,
                                                                         refused):
    host = _with_context(hardware={"nic_affinity": affinity})
    topo = _topology(("GPU0", "NIC0", "NIC1"), (f"X {link} SYS", f"{link} X SYS", "SYS SYS X"))
    found = _found(host, replace(_healthy(), topology=topo))
    if refused:
        m = found["topology.GPU0.nic"]
        assert (m.expected, m.observed) == (f"{affinity} or nearer", f"{link} (NIC0)")
    else:
        assert "topology.GPU0.nic" not in found


def test_a_nic_affinity_that_cannot_be_measured_refuses_the_host():
    # Found by mutation testing: a matrix without NICs skipped the check, a pass by omission.
    host = _with_context(hardware={"nic_affinity": "PXB"})
    topo = _topology(("GPU0", "GPU1"), ("X NV18", "NV18 X"))
    m = _found(host, replace(_healthy(), topology=topo))["topology.nic_affinity"]
    assert (m.expected, m.observed, m.severity) == ("PXB or nearer", "no NIC in the matrix",
                                                    compare.CRITICAL)
    # A matrix without GPUs says nothing of their NICs (the GPU findings say why).
    assert "topology.nic_affinity" not in _found(
        host, replace(_healthy(), topology=_topology((), ())))


def test_only_the_gpu_link_checked_where_the_device_type_names_no_nic_affinity():
    host = _with_context(hardware={"gpu_link": "NV18"})
    topo = _topology(("GPU0", "GPU1", "GPU2", "NIC0"),
                     ("X NV17 NV18 SYS", "NV17 X NV18 SYS", "NV18 NV18 X SYS", "SYS SYS SYS X"))
    found = _found(host, replace(_healthy(), topology=topo))
    # Neighbours in the matrix are a pair too; the far NIC is no finding.
    assert {f: m.observed for f, m in found.items()} == {"topology.gpu_link": "GPU0-GPU1 NV17"}


@pytest.mark.parametrize(("slow", "shown"), [
    (8, "0 at 13, 1 at 13, 2 at 13, 3 at 13, 4 at 13, 5 at 13, 6 at 13, 7 at 13"),
    (9, "0 at 13, 1 at 13, 2 at 13, 3 at 13, 4 at 13, 5 at 13, 6 at 13, 7 at 13 and 1 more"),
    (18, "0 at 13, 1 at 13, 2 at 13, 3 at 13, 4 at 13, 5 at 13, 6 at 13, 7 at 13 and 10 more")])
def test_a_finding_names_eight_links_and_counts_the_rest(slow, shown):
    host = _with_context(hardware={"nvlink_speed": 26})
    links = (13.0,) * slow + (26.0,) * (18 - slow)
    facts = replace(_healthy(), nvlinks=(NvlinkFacts(0, "GPU", links),))
    assert {f: m.observed for f, m in _found(host, facts).items()} == {"nvlink[0].speed": shown}


def test_nvlinks_counted_where_the_device_type_gives_no_speed():
    host = _with_context(hardware={"nvlinks": 18})
    facts = replace(_healthy(), nvlinks=(NvlinkFacts(0, "GPU", (26.0,) * 17 + (None,)),),
                    nvlink_errors=())
    assert {f: m.observed for f, m in _found(host, facts).items()} == {
        "nvlink[0].links": "17 active (inactive: 17)"}


def test_an_nvlink_at_99_percent_of_its_speed_is_not_slow():
    host = _with_context(hardware={"nvlink_speed": 100})
    at_99 = replace(_healthy(), nvlinks=(NvlinkFacts(0, "GPU", (99.0, 100.0)),))
    assert _found(host, at_99) == {}
    below = replace(_healthy(), nvlinks=(NvlinkFacts(0, "GPU", (98.9, 100.0)),))
    assert {f: m.observed for f, m in _found(host, below).items()} == {
        "nvlink[0].speed": "0 at 98.9"}
