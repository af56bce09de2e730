"""racklift.bmc.firmware on the real Redfish trees (tests/fixtures/real/redfish): a desired
state taken from what each BMC reports passes, one wrong version or BIOS value fails naming it,
every vendor alias is one a real tree uses; malformed pins get their error. And the boot
overrides racklift sends (racklift.bmc.redfish) against what each BMC allows."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import emulated
from racklift.bmc.firmware import (
    ALIASES,
    NOT_REPORTED,
    NOT_RUNNING,
    ApplyPlan,
    Finding,
    Pins,
    by_alias,
    compare,
    components,
    host_version,
    parse,
    plan,
    read,
    running,
    version_of,
)
from racklift.bmc.inventory import BmcInventory, read_inventory
from racklift.bmc.payloads import DISK_BOOT, NETWORK_BOOT, disk_boot_enabled
from racklift.netbox.record_problems import find_problems
from redfish_trees import ALL, DELL, DGX, GIGABYTE, HPE, LENOVO, OPENBMC, SUPERMICRO, TREES, Tree

_READ: dict[Path, BmcInventory] = {}


def inventory(tree: Path) -> BmcInventory:
    if tree not in _READ:
        _READ[tree] = read_inventory(Tree(tree))
    return _READ[tree]


# Per tree: pins taken from what the BMC reports, as an operator would copy them from
# `racklift bmc.inventory`, in the names that vendor's components go by.
FROM_TREE = {
    DELL: {"firmware": {"BMC": "6.00.30.00", "BIOS": "1.8.2", "TPM": "7.2.2.0",
                        "Mellanox ConnectX-6 Dual Port 10 GbE QSFP Network Adapter":
                            "20.31.10.14"},
           "bios": {"SysProfile": "PerfOptimized", "BootMode": "Uefi",
                    "AcPwrRcvryUserDelay": 120}},
    HPE: {"firmware": {"iLO": "2.72 Sep 04 2022", "System ROM": "A42 v2.60 (08/11/2022)",
                       "ConnectX-6": "20.29.1016",
                       "BlueField-2 SmartNIC Main Card": "24.40.1000"},
          "bios": {"WorkloadProfile": "GeneralPowerEfficientCompute", "ProcSMT": "Enabled"}},
    LENOVO: {"firmware": {"XCC": "42S-2.83", "UEFI": "22J-1.51", "GPU": "95.02.39.00.01",
                          "Firmware:DEVICE-NetworkAdapter": "24.41.1000"},
             "bios": {"OperatingModes_ChooseOperatingMode": "Efficiency_FavorPerformance",
                      "BootModes_SystemBootMode": "UEFIMode"}},
    SUPERMICRO: {"firmware": {"BMC": "11.01.01", "BIOS": "BIOS Date: 08/04/2023 Ver 1.4",
                              "GPU": "96.00.61.00.01", "MCX75310AAS-NEAT": "28.37.10.14",
                              "HGX_FW_BMC_0": "HGX-22.10-1-rc34"},
                 "bios": {"SecureBootEnable_0122": False}},
    DGX: {"firmware": {"BMC": "23.11.21", "BIOS": "01.01.03", "GPU": "96.00.89.00.01",
                       "HGX_FW_NVSwitch_0": "96.10.4A.00.01"},
          "bios": {"VTdSupport": "Enable"}},
    GIGABYTE: {"firmware": {"BMC": "12.84.13", "BIOS": "C27", "MB_CPLD1": "ff"},
               "bios": {"FBO001": "UEFI", "GBT0001": "Enabled"}},
    OPENBMC: {"firmware": {"BMC": "2.15.0-dev-686-g100c36de90"}, "bios": {}},
}
# How many components each pin covers: every one must have the version.
COVERS = {
    DELL: {"BMC": 1, "BIOS": 1, "TPM": 1,
           "Mellanox ConnectX-6 Dual Port 10 GbE QSFP Network Adapter": 2},
    HPE: {"iLO": 1, "System ROM": 1, "ConnectX-6": 2, "BlueField-2 SmartNIC Main Card": 1},
    LENOVO: {"XCC": 1, "UEFI": 1, "GPU": 8, "Firmware:DEVICE-NetworkAdapter": 1},
    SUPERMICRO: {"BMC": 1, "BIOS": 1, "GPU": 16, "MCX75310AAS-NEAT": 8, "HGX_FW_BMC_0": 1},
    DGX: {"BMC": 1, "BIOS": 1, "GPU": 8, "HGX_FW_NVSwitch_0": 1},
    GIGABYTE: {"BMC": 1, "BIOS": 1, "MB_CPLD1": 1},
    OPENBMC: {"BMC": 1},
}
# The component each tree's BMC and BIOS pins are held to.
BMC_AND_BIOS = {
    DELL: (["Installed-25227-6.00.30.00__iDRAC.Embedded.1-1"],
           ["Installed-159-1.8.2__BIOS.Setup.1-1"]),
    HPE: (["1"], ["2"]),
    LENOVO: (["BMC-Primary"], ["UEFI"]),
    SUPERMICRO: (["BMC"], ["BIOS"]),
    DGX: (["HostBMC_0"], ["HostBIOS_0"]),
    GIGABYTE: (["BMC"], ["BIOS"]),
    OPENBMC: (["5d0869c4"], []),
}


def pins(tree: Path) -> Pins:
    parsed = parse(FROM_TREE[tree])
    assert isinstance(parsed, Pins), parsed
    return parsed


def ids(found: list) -> list[str]:
    return [c.id for c in found]


def test_every_tree_has_its_pins():
    assert set(FROM_TREE) == set(COVERS) == set(BMC_AND_BIOS) == set(ALL)
    assert {p for p in TREES.iterdir() if p.is_dir()} == set(ALL)


@pytest.mark.parametrize("tree", ALL, ids=lambda p: p.name)
def test_pins_taken_from_the_tree_pass(tree):
    inv = inventory(tree)
    assert compare(pins(tree), inv) == []
    assert {name: len(components(inv, name)) for name in FROM_TREE[tree]["firmware"]} == (
        COVERS[tree])


@pytest.mark.parametrize("tree", ALL, ids=lambda p: p.name)
def test_one_wrong_version_fails_naming_component_found_and_wanted(tree):
    good = pins(tree)
    name, version = good.firmware[0]
    wrong = Pins(((name, "9.99.99"), *good.firmware[1:]), good.bios)
    (finding,) = compare(wrong, inventory(tree))
    assert finding.component.startswith(f"firmware {name}")
    assert (finding.found, finding.wanted) == (version, "9.99.99")
    assert str(finding) == f"{finding.component}: found {version}, wanted 9.99.99"


@pytest.mark.parametrize("tree", [t for t in ALL if FROM_TREE[t]["bios"]],
                         ids=lambda p: p.name)
def test_one_wrong_bios_attribute_fails_naming_it(tree):
    good = pins(tree)
    name, value = good.bios[-1]
    wrong = Pins(good.firmware, (*good.bios[:-1], (name, "NotThis")))
    assert compare(wrong, inventory(tree)) == [
        Finding(f"BIOS attribute {name}", json.dumps(value), '"NotThis"')]


@pytest.mark.parametrize("tree", ALL, ids=lambda p: p.name)
def test_bmc_and_bios_are_the_images_each_vendor_runs(tree):
    inv = inventory(tree)
    bmc, bios = BMC_AND_BIOS[tree]
    assert (ids(components(inv, "BMC")), ids(components(inv, "BIOS"))) == (bmc, bios)


@pytest.mark.parametrize("tree", [t for t in ALL if inventory(t).bmc_image],
                         ids=lambda p: p.name)
def test_the_vendor_table_agrees_with_the_image_the_bmc_names(tree):
    inv = inventory(tree)
    if tree == OPENBMC:  # its image's Id is a hash and its Name generic: only the link says
        assert by_alias(inv, "BMC") == []
        return
    assert ids(by_alias(inv, "BMC")) == [inv.bmc_image]
    assert ids(by_alias(inv, "BIOS")) == [inv.bios_image]


def test_every_alias_and_held_image_pattern_is_one_a_real_tree_uses():
    for role, matches in ALIASES.items():
        for match in matches:
            for name in match.seen_in:
                assert any(match.covers(c) and running(c)
                           for c in inventory(TREES / name).firmware), (role, match, name)
    for match in NOT_RUNNING:
        for name in match.seen_in:
            assert any(match.covers(c) for c in inventory(TREES / name).firmware), match


def test_dell_previous_and_current_images_are_not_what_runs():
    # The rollback BIOS is 1.2.4: a pin of 1.2.4 fails on the running 1.8.2.
    parsed = parse({"firmware": {"BIOS": "1.2.4", "iDRAC": "4.40.29.00"}})
    assert isinstance(parsed, Pins)
    assert compare(parsed, inventory(DELL)) == [
        Finding("firmware BIOS (Installed-159-1.8.2__BIOS.Setup.1-1)", "1.8.2", "1.2.4"),
        Finding("firmware iDRAC (Installed-25227-6.00.30.00__iDRAC.Embedded.1-1)",
                "6.00.30.00", "4.40.29.00")]
    # A NIC by its name: the Installed- image of each port, not the Current- copies.
    nics = components(inventory(DELL), "Broadcom Gigabit Ethernet BCM5720 - 70:B5:E8:F0:52:DC")
    assert ids(nics) == ["Installed-108255-21.80.9__NIC.Embedded.1-1-1"]


def test_lenovo_pending_and_backup_slots_are_not_what_runs():
    inv = inventory(LENOVO)
    assert ids(components(inv, "Firmware:BMC")) == ["BMC-Primary"]
    assert ids(components(inv, "Firmware:UEFI")) == ["UEFI"]
    # Named by its Id, a slot is taken as asked: a pending slot with no Version fails.
    assert compare(Pins(firmware=(("UEFI-Pending", "22J-1.51"),)), inv) == [
        Finding("firmware UEFI-Pending", NOT_REPORTED, "22J-1.51")]


def test_supermicro_spare_images_only_by_their_id():
    inv = inventory(SUPERMICRO)
    assert ids(components(inv, "BIOS Golden")) == []
    assert compare(Pins(firmware=(("Golden_BIOS", "BIOS Date: 05/04/2023 Ver 1.3"),)),
                   inv) == []


def test_a_component_the_bmc_does_not_report_is_a_failure():
    assert compare(Pins(firmware=(("BIOS", "1.0"),), bios=(("ProcSMT", "Enabled"),)),
                   inventory(OPENBMC)) == [
        Finding("firmware BIOS", NOT_REPORTED, "1.0"),
        Finding("BIOS attribute ProcSMT", NOT_REPORTED, '"Enabled"')]
    assert compare(Pins(firmware=(("MCX75310AAS-NEAT", "28.37.10.14"),)),
                   inventory(DELL)) == [
        Finding("firmware MCX75310AAS-NEAT", NOT_REPORTED, "28.37.10.14")]
    # An empty inventory (the BMC answered nothing) fails every pin.
    assert [f.found for f in compare(pins(DELL), BmcInventory())] == [NOT_REPORTED] * 7


# Each real BMC's ConnectX adapters, as the host's ibv_devinfo would print their firmware.
HCAS = {DELL: ["20.31.1014", "20.31.1014", "24.40.1000"],  # Dell writes 20.31.10.14
        HPE: ["20.29.1016", "20.29.1016"],  # the BlueField-2 DPU is no HCA
        SUPERMICRO: ["28.37.1014"] * 8}  # 8x MCX75310AAS-NEAT (ConnectX-7), not the BlueField


@pytest.mark.parametrize("tree", [DELL, HPE, SUPERMICRO], ids=lambda t: t.name)
def test_every_hca_the_bmc_lists_is_held_to_the_hca_pin_in_ibv_devinfos_form(tree):
    found = components(inventory(tree), "HCA")
    assert [version_of("HCA", c) for c in found] == HCAS[tree]
    wanted = HCAS[tree][-1]
    findings = compare(Pins(firmware=(("HCA", wanted),)), inventory(tree))
    assert [f.wanted for f in findings] == [wanted] * sum(v != wanted for v in HCAS[tree])
    assert all(f.found != NOT_REPORTED and f.component.startswith("firmware HCA (")
               for f in findings)


def test_an_hca_pin_a_bmc_cannot_show_is_left_to_the_host_it_is_checked_on():
    """Lenovo's, the DGX's, Gigabyte's and OpenBMC's trees list no ConnectX by name: the pin is
    no finding there (the ofed role checks every HCA's fw_ver on the host), and --apply-firmware
    plans no update it could not read back; the host's check gets the pin."""
    for tree in (LENOVO, DGX, GIGABYTE, OPENBMC):
        pins = Pins(firmware=(("HCA", "28.39.1002"),), images=(("HCA", "fw/cx7.bin"),))
        assert components(inventory(tree), "HCA") == []
        assert compare(pins, inventory(tree)) == []
        assert plan(pins, inventory(tree)) == ApplyPlan()
        assert host_version(pins) == "28.39.1002"
    assert host_version(Pins(firmware=(("BMC", "1.0"),))) is None


def test_every_gpu_must_have_the_version():
    inv = inventory(SUPERMICRO)
    findings = compare(Pins(firmware=(("GPU", "96.00.89.00.01"),)), inv)
    assert len(findings) == 16
    assert findings[0] == Finding("firmware GPU (GPU1)", "96.00.61.00.01", "96.00.89.00.01")
    assert findings[-1].component == "firmware GPU (HGX_FW_GPU_SXM_8)"


def test_bios_values_compare_in_kind_too():
    assert compare(Pins(bios=(("AcPwrRcvryUserDelay", "120"),)), inventory(DELL)) == [
        Finding("BIOS attribute AcPwrRcvryUserDelay", "120", '"120"')]
    assert compare(Pins(bios=(("SecureBootEnable_0122", 0),)), inventory(SUPERMICRO)) == [
        Finding("BIOS attribute SecureBootEnable_0122", "false", "0")]
    # AMI's 5,841-character id map: shown cut.
    (finding,) = compare(Pins(bios=(("MAPIDS", "x"),)), inventory(GIGABYTE))
    assert len(finding.found) == 123 and finding.found.endswith("...")


# ---------------------------------------------------------------------------------------------
# The pins from the config context


def test_pins_read_in_the_contexts_order():
    assert parse({"firmware": {"BMC": "1.2", "GPU": "96.00.61.00.01"},
                  "bios": {"ProcSMT": "Enabled", "Delay": 120, "Secure": False},
                  "hardware": {"nvswitch": True}}) == Pins(
        (("BMC", "1.2"), ("GPU", "96.00.61.00.01")),
        (("ProcSMT", "Enabled"), ("Delay", 120), ("Secure", False)))
    assert parse(None) == parse({}) == parse([]) == Pins()  # desired.read reports a non-mapping


F = "config_context.racklift.firmware"
B = "config_context.racklift.bios"


@pytest.mark.parametrize(("context", "field", "says"), [
    ({"firmware": ["BMC", "1.2"]}, F, 'is ["BMC", "1.2"]: make it a mapping of component '
                                      "name to version"),
    ({"firmware": "BMC=1.2"}, F, "make it a mapping"),
    ({"firmware": {"BMC": 6}}, f"{F}.BMC", "is 6: set it to the version as `racklift "
                                           "bmc.inventory` shows it"),
    ({"firmware": {"BMC": None}}, f"{F}.BMC", "is null: set it to the version"),
    ({"firmware": {"BMC": "1" * 129}}, f"{F}.BMC", "1 to 128 printable ASCII characters"),
    ({"firmware": {"BMC": ""}}, f"{F}.BMC", "1 to 128 printable ASCII"),
    ({"firmware": {"BMC": "1.2\n; reboot"}}, f"{F}.BMC", 'is "1.2\\n; reboot"'),
    ({"firmware": {"BMC": "1.2 "}}, f"{F}.BMC", "no space at either end"),
    ({"firmware": {"BMC": "1.2\u202e"}}, f"{F}.BMC", "printable ASCII"),
    ({"firmware": {"BMC\x1b[31m": "1.2"}}, f'{F}."BMC\\u001b[31m"', "is not a component name"),
    ({"firmware": {" BMC": "1.2"}}, f'{F}." BMC"', "is not a component name"),
    ({"firmware": {"B" * 129: "1.2"}}, f'{F}."{"B" * 79}...', "is not a component name"),
    ({"firmware": {"BMC": "1.2", "iDRAC": "1.2"}}, f"{F}.iDRAC",
     "names the same component as BMC: keep one of them"),
    ({"firmware": {f"c{i}": "1" for i in range(257)}}, F, "has 257 entries: pin at most 256"),
    ({"firmware": {"HCA": "28.37.10.14"}}, f"{F}.HCA", "as ibv_devinfo prints it (fw_ver)"),
    ({"firmware": {"HCA": "28.39"}}, f"{F}.HCA", 'e.g. "28.39.1002"'),
    # Where the HCA firmware was pinned before: refused, not ignored, saying where it is now.
    ({"ofed": {"hca_firmware_version": "28.39.1002"}}, "config_context.racklift.ofed."
     "hca_firmware_version", "has moved to config_context.racklift.firmware.HCA"),
    ({"bios": "ProcSMT=Enabled"}, B, "make it a mapping of BIOS attribute name to value"),
    ({"bios": {"Proc SMT": "Enabled"}}, f'{B}."Proc SMT"', "is not a BIOS attribute name"),
    ({"bios": {"_ProcSMT": "Enabled"}}, f'{B}."_ProcSMT"', "a letter first"),
    ({"bios": {"ProcSMT": None}}, f"{B}.ProcSMT", "is null: set it to the value"),
    ({"bios": {"ProcSMT": 1.5}}, f"{B}.ProcSMT", "a string of at most 1024 printable ASCII "
                                                 "characters, an integer or true/false"),
    ({"bios": {"ProcSMT": {"a": 1}}}, f"{B}.ProcSMT", 'is {"a": 1}'),
    ({"bios": {"ProcSMT": ["Enabled"]}}, f"{B}.ProcSMT", "set it to the value"),
    ({"bios": {"ProcSMT": "x" * 1025}}, f"{B}.ProcSMT", "set it to the value"),
    ({"bios": {"ProcSMT": "En\x00abled"}}, f"{B}.ProcSMT", "set it to the value"),
    ({"bios": {"Delay": 2 ** 70}}, f"{B}.Delay", "set it to the value"),
])
def test_malformed_pins_say_the_field_and_what_to_do(context, field, says):
    problems = parse(context)
    assert isinstance(problems, list) and len(problems) == 1, problems
    (problem,) = problems
    assert problem.field == field
    assert says in problem.message, problem.message
    assert problem.message.isprintable() and problem.field.isprintable()
    assert len(problem.message) < 400


def test_a_bad_entry_is_left_out_and_the_rest_read():
    found, problems = read({"firmware": {"BMC": "1.2", "BIOS": 3},
                            "bios": {"ProcSMT": "Enabled", "Bad Name": "x"}})
    assert found == Pins((("BMC", "1.2"),), (("ProcSMT", "Enabled"),))
    assert [p.field for p in problems] == [f"{F}.BIOS", f'{B}."Bad Name"']


# ---------------------------------------------------------------------------------------------
# The boot overrides racklift sends, against what each BMC allows


def _sent(tree: Path) -> dict[str, tuple[str, str]]:
    """The overrides racklift would send this BMC, as RedfishClient chooses them."""
    boot = inventory(tree).boot
    return {"network boot": NETWORK_BOOT,
            "disk boot": (DISK_BOOT[0], disk_boot_enabled(boot.allowed_enabled))}


def _refusals(tree: Path) -> list[str]:
    boot = inventory(tree).boot
    refused = []
    for why, (target, enabled) in _sent(tree).items():
        if boot.allowed_targets and target not in boot.allowed_targets:
            refused.append(f"{why}: target {target}")
        if boot.allowed_enabled and enabled not in boot.allowed_enabled:
            refused.append(f"{why}: {enabled}")
    return refused


def test_the_boot_overrides_racklift_sends_against_each_bmc():
    assert NETWORK_BOOT == ("Pxe", "Once") and DISK_BOOT == ("Hdd", "Continuous")
    # Every BMC allows what racklift sends it. Lenovo's XCC allows Once and Disabled only: its
    # disk boot is Once, the others' Continuous. The DGX lists no allowable targets: unknown.
    assert {tree.name: _refusals(tree) for tree in ALL if _refusals(tree)} == {}
    assert {tree.name: _sent(tree)["disk boot"] for tree in ALL
            if _sent(tree)["disk boot"] != DISK_BOOT} == {LENOVO.name: ("Hdd", "Once")}
    assert inventory(DGX).boot.allowed_targets == ()
    # racklift sends no mode (the BMC's stays): Gigabyte's is Legacy, the others' UEFI or
    # unsaid.
    assert {tree.name: inventory(tree).boot.mode for tree in ALL if
            inventory(tree).boot.mode != "UEFI"} == {GIGABYTE.name: "Legacy", DGX.name: None}


def test_a_malformed_pin_is_a_problem_of_the_host_naming_the_field():
    """The reader's problems refuse the host in the pipeline's preflight, whatever its stages."""
    base = emulated.expected_host()
    host = replace(base, config={**base.config, "firmware": {"BMC": ["6.00"]},
                                 "bios": {"SysProfile": "PerfOptimized"}})
    problems = find_problems(host, has_context=True, type_name="lab-gpu", iface_templates=[],
                             gpu_templates=1)
    (pin,) = [p for p in problems if "firmware" in p.field]
    assert (pin.host, pin.field) == (base.name, "config_context.racklift.firmware.BMC")
    assert "racklift bmc.inventory" in pin.message
    assert not [p for p in problems if "bios" in p.field]
