"""racklift.bmc.inventory on real Redfish trees (tests/fixtures/real/redfish, their sources in
tests/fixtures/real/SOURCES.md): Dell iDRAC 9, HPE iLO 5, Lenovo XCC, Supermicro (HGX H100),
NVIDIA DGX H100 (AMI), Gigabyte (AMI MegaRAC) and stock OpenBMC; then the same trees with links
planted to leave /redfish/v1, and with members truncated, malformed or missing."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from racklift.bmc.inventory import (
    MAX_ATTRIBUTE_VALUE,
    MAX_TEXT,
    FirmwareComponent,
    normalize_mac,
    read_inventory,
)
from racklift.bmc.links import ROOT, check_link
from redfish_trees import DELL, DGX, GIGABYTE, HPE, LENOVO, OPENBMC, SUPERMICRO, TREES, Tree


def read(tree: Path) -> tuple[Any, Tree]:
    get = Tree(tree)
    return read_inventory(get), get


def component(inventory: Any, id_: str) -> FirmwareComponent:
    return next(c for c in inventory.firmware if c.id == id_)


# ---------------------------------------------------------------------------------------------
# The vendors' trees


def test_dell_idrac9_poweredge_r750():
    inv, get = read(DELL)
    assert inv.problems == ()
    assert inv.system == "/redfish/v1/Systems/System.Embedded.1"
    assert (inv.manufacturer, inv.model, inv.serial, inv.power_state, inv.bios_version) == (
        "Dell Inc.", "PowerEdge R750", "CNIVC0014M0388", "On", "1.8.2")
    assert (inv.bmc_model, inv.bmc_firmware) == ("15G Monolithic", "6.00.30.00")
    assert inv.macs == (("NIC.Embedded.1-1-1", "70:b5:e8:f0:52:dc"),
                        ("NIC.Integrated.1-2-1", "e4:3d:1a:13:27:f1"),
                        ("NIC.Integrated.1-1-1", "e4:3d:1a:13:27:f0"),
                        ("NIC.Embedded.2-1-1", "70:b5:e8:f0:52:dd"),
                        ("NIC.Slot.5-1", "b8:3f:d2:90:97:c4"))
    assert inv.boot.allowed_targets == ("None", "Pxe", "Floppy", "Cd", "Hdd", "BiosSetup",
                                        "Utilities", "UefiTarget", "SDCard", "UefiHttp")
    assert (inv.boot.target, inv.boot.enabled, inv.boot.mode) == ("None", "Disabled", "UEFI")
    assert (inv.boot.allowed_enabled, inv.boot.allowed_modes) == ((), ())
    # The manager and the Bios name the images they run: the Installed- ones.
    assert inv.bmc_image == "Installed-25227-6.00.30.00__iDRAC.Embedded.1-1"
    assert inv.bios_image == "Installed-159-1.8.2__BIOS.Setup.1-1"
    # Installed-, Current- and Previous- images, each with its Id: the caller tells them apart.
    assert len(inv.firmware) == 29
    assert component(inv, "Installed-25227-6.00.30.00__iDRAC.Embedded.1-1") == (
        "Installed-25227-6.00.30.00__iDRAC.Embedded.1-1",
        "Integrated Dell Remote Access Controller", "6.00.30.00")
    assert component(inv, "Current-159-1.8.2__BIOS.Setup.1-1").version == "1.8.2"
    assert component(inv, "Previous-159-1.2.4__BIOS.Setup.1-1")[1:] == ("BIOS", "1.2.4")
    assert component(inv, "Installed-0-20.31.10.14__InfiniBand.Slot.7-1").name == (
        "Mellanox ConnectX-6 Dual Port 10 GbE QSFP Network Adapter")
    assert len(inv.bios_attributes) == 455
    assert inv.bios_attributes["BootMode"] == "Uefi"
    assert inv.bios_attributes["SysProfile"] == "PerfOptimized"
    assert inv.bios_attributes["AcPwrRcvryUserDelay"] == 120  # a number stays a number
    assert all(path == ROOT or path.startswith(ROOT + "/") for path in get.calls)
    # Each resource once; the Managers collection (kept) is not needed: the system names its
    # manager (ManagedBy).
    assert len(get.calls) == len(set(get.calls)) == 42
    assert "/redfish/v1/Managers" not in get.calls


def test_hpe_ilo5_proliant_dl385_lowercase_bios_link_and_trailing_slashes():
    inv, get = read(HPE)
    assert inv.problems == ()
    assert (inv.manufacturer, inv.model, inv.serial, inv.bios_version) == (
        "HPE", "ProLiant DL385 Gen10 Plus v2", "MXQ302099S", "A42 v2.60 (08/11/2022)")
    assert (inv.bmc_model, inv.bmc_firmware) == ("iLO 5", "iLO 5 v2.72")
    # iLO links the Bios in lower case; it is followed as given.
    assert "/redfish/v1/systems/1/bios" in get.calls
    assert inv.bios_attributes["WorkloadProfile"] == "GeneralPowerEfficientCompute"
    assert inv.bios_attributes["ProcSMT"] == "Enabled"
    assert len(inv.bios_attributes) == 277
    # MACAddress only (no PermanentMACAddress), lower-case.
    assert inv.macs[0] == ("1", "50:7c:6f:11:f2:a6")
    assert inv.macs[-1] == ("7", "b8:3f:d2:d7:f7:4a")
    assert len(inv.macs) == 7
    assert inv.boot.allowed_targets == ("None", "Cd", "Hdd", "Usb", "SDCard", "Utilities",
                                        "Diags", "BiosSetup", "Pxe", "UefiShell", "UefiHttp",
                                        "UefiTarget")
    assert inv.boot.mode == "UEFI"
    assert (inv.bmc_image, inv.bios_image) == (None, None)  # iLO names no active image
    assert len(inv.firmware) == 48
    assert inv.firmware[0] == ("1", "iLO 5", "2.72 Sep 04 2022")
    assert inv.firmware[1] == ("2", "System ROM", "A42 v2.60 (08/11/2022)")
    assert component(inv, "19") == ("19", "BlueField-2 SmartNIC Main Card", "24.40.1000")


def test_lenovo_xcc_thinksystem_sr670_v2():
    inv, _ = read(LENOVO)
    assert inv.problems == ()
    assert (inv.manufacturer, inv.model, inv.serial, inv.power_state, inv.bios_version) == (
        "Lenovo", "ThinkSystem SR670 V2", "J105958B", "On", "U8E122J")
    assert (inv.bmc_model, inv.bmc_firmware) == ("Lenovo XClarity Controller",
                                                 "TGBT42S 2.83 2023-07-05")
    # The host's USB link to the XCC comes first, lower-case; the NICs upper-case.
    assert inv.macs == (("ToManager", "0a:8f:c3:a5:8a:71"), ("NIC1", "00:62:0b:4c:28:4e"),
                        ("NIC2", "00:62:0b:4c:28:4f"), ("NIC3", "00:62:0b:4c:28:50"),
                        ("NIC4", "00:62:0b:4c:28:51"))
    assert inv.boot.allowed_targets == ("None", "Pxe", "Cd", "Usb", "Hdd", "BiosSetup",
                                        "Diags", "UefiTarget")
    assert inv.boot.allowed_enabled == ("Once", "Disabled")  # no Continuous
    assert (inv.bmc_image, inv.bios_image) == ("BMC-Primary", "UEFI")
    assert len(inv.firmware) == 43
    assert component(inv, "BMC-Primary") == ("BMC-Primary", "Firmware:BMC", "42S-2.83")
    assert component(inv, "UEFI") == ("UEFI", "Firmware:UEFI", "22J-1.51")
    assert component(inv, "UEFI-Pending").version is None  # a pending slot, no Version
    assert component(inv, "GPU8") == ("GPU8", "GPU firmware", "95.02.39.00.01")
    assert inv.bios_attributes["OperatingModes_ChooseOperatingMode"] == (
        "Efficiency_FavorPerformance")
    assert inv.bios_attributes["BootModes_SystemBootMode"] == "UEFIMode"
    assert len(inv.bios_attributes) == 348


def test_supermicro_sys_821ge_tnhr_hgx_h100():
    inv, _ = read(SUPERMICRO)
    assert inv.problems == ()
    assert (inv.manufacturer, inv.model, inv.serial, inv.bios_version) == (
        "Supermicro", "SYS-821GE-TNHR", "S889914X3710910", "1.4")
    assert (inv.bmc_model, inv.bmc_firmware) == ("ASPEED", "11.01.01")
    # Captured with a Pxe target left set but disabled; UsbCd is Supermicro's own target.
    assert (inv.boot.target, inv.boot.enabled, inv.boot.mode) == ("Pxe", "Disabled", "UEFI")
    assert inv.boot.allowed_targets == ("None", "Pxe", "Floppy", "Cd", "Usb", "Hdd",
                                        "BiosSetup", "UsbCd", "UefiBootNext", "UefiHttp")
    assert (inv.bmc_image, inv.bios_image) == ("BMC", "BIOS")
    assert len(inv.macs) == 12
    assert inv.macs[0] == ("1", "94:6d:ae:91:fb:22")
    assert ("9", "7c:c2:55:79:3f:8e") in inv.macs
    assert inv.macs[-1] == ("ToManager", "be:3a:f2:b6:05:9f")
    # The host's firmware and its HGX board's, 106 in all.
    assert len(inv.firmware) == 106
    assert component(inv, "BIOS") == ("BIOS", "BIOS", "BIOS Date: 08/04/2023 Ver 1.4")
    assert component(inv, "Backup_BMC").version == "Not Present"
    assert component(inv, "NIC1") == ("NIC1", "NIC1 System Slot1 MCX75310AAS-NEAT",
                                      "28.37.10.14")
    assert component(inv, "HGX_FW_GPU_SXM_1").version == "96.00.61.00.01"
    assert inv.bios_attributes["SecureBootEnable_0122"] is False
    assert len(inv.bios_attributes) == 379


def test_nvidia_dgx_h100_lists_no_boot_targets_and_two_systems():
    inv, get = read(DGX)
    assert inv.system == "/redfish/v1/Systems/DGX"  # the first of DGX and HGX_Baseboard_0
    assert "/redfish/v1/Systems/HGX_Baseboard_0" not in get.calls
    assert (inv.manufacturer, inv.model, inv.serial, inv.bios_version) == (
        "NVIDIA", "DGXH100", "1662923610124", "1.1.3")
    assert (inv.bmc_model, inv.bmc_firmware) == ("77171220", "23.11.20")
    assert inv.boot.allowed_targets == ()
    assert (inv.boot.target, inv.boot.enabled, inv.boot.mode) == ("None", "Disabled", None)
    assert (inv.bmc_image, inv.bios_image) == (None, None)
    assert inv.problems == (
        "the system (/redfish/v1/Systems/DGX): no BootSourceOverrideTarget@Redfish."
        "AllowableValues (the allowable boot targets are unknown)",
        "the system (/redfish/v1/Systems/DGX): no BootSourceOverrideMode")
    assert inv.macs[0] == ("EthernetInterface0", "5c:ff:35:fe:04:b1")
    assert len(inv.macs) == 5
    assert len(inv.firmware) == 66
    assert component(inv, "HGX_FW_GPU_SXM_1").version == "96.00.89.00.01"
    assert component(inv, "HGX_FW_BMC_0").version == "HGX-22.10-1-rc57"
    assert inv.bios_attributes["VTdSupport"] == "Enable"
    assert len(inv.bios_attributes) == 223


def test_gigabyte_ami_megarac_reports_one_mac_for_two_interfaces():
    inv, _ = read(GIGABYTE)
    assert (inv.manufacturer, inv.model, inv.serial, inv.bios_version) == (
        "GIGABYTE", "H262-Z63-00", "GJG9NF512A000302", "C27")
    assert inv.bmc_firmware == "12.84.13"
    assert inv.macs == (("3", "b4:2e:99:ba:de:16"), ("2", "b4:2e:99:ba:de:16"),
                        ("1", "b4:2e:99:ba:de:15"))
    assert inv.problems == ("Ethernet interfaces 3 and 2 report the same MAC b4:2e:99:ba:de:16",)
    assert (inv.boot.enabled, inv.boot.mode) == ("Disabled", "Legacy")
    assert "RemoteDrive" in inv.boot.allowed_targets and len(inv.boot.allowed_targets) == 14
    assert inv.boot.allowed_enabled == ("Disabled", "Once", "Continuous")
    assert inv.boot.allowed_modes == ("Legacy", "UEFI")
    assert (inv.bmc_image, inv.bios_image) == (None, None)
    assert inv.firmware == (("BMC", "BMC", "12.84.13"), ("MB_CPLD1", "MB_CPLD1", "ff"),
                            ("BIOS", "BIOS", "C27"))
    assert len(inv.bios_attributes) == 550
    assert len(inv.bios_attributes["MAPIDS"]) == 5841  # AMI's id map, kept whole


def test_stock_openbmc_says_what_it_does_not_report():
    inv, _ = read(OPENBMC)
    assert inv.system == "/redfish/v1/Systems/system"
    assert (inv.manufacturer, inv.model, inv.serial, inv.bios_version) == (None,) * 4
    assert inv.power_state == "Off"
    assert (inv.bmc_model, inv.bmc_firmware) == ("OpenBmc", "2.15.0-dev-686-g100c36de90")
    assert inv.macs == () and inv.bios_attributes == {}
    assert inv.firmware == (("5d0869c4", "Software Inventory", "2.15.0-dev-686-g100c36de90"),)
    assert inv.boot.allowed_targets == ("None", "Pxe", "Hdd", "Cd", "Diags", "BiosSetup", "Usb")
    assert inv.boot.allowed_modes == ("Legacy", "UEFI")
    # The manager names its image (a hash for an Id); there is no BIOS image to name.
    assert (inv.bmc_image, inv.bios_image) == ("5d0869c4", None)
    assert inv.problems == (
        "the system (/redfish/v1/Systems/system): no Manufacturer",
        "the system (/redfish/v1/Systems/system): no Model",
        "the system (/redfish/v1/Systems/system): no SerialNumber",
        "the system (/redfish/v1/Systems/system): no BiosVersion",
        "MACs unknown: /redfish/v1/Systems/system has no EthernetInterfaces link",
        "BIOS attributes unknown: Bios (/redfish/v1/Systems/system/Bios) has no Attributes "
        "object")


def test_every_tree_is_read_with_links_under_redfish_v1_only():
    for tree in sorted(p for p in TREES.iterdir() if p.is_dir()):
        inv, get = read(tree)
        assert inv.system and inv.firmware and inv.bmc_firmware, tree.name
        assert all(p == ROOT or p.startswith(ROOT + "/") for p in get.calls), tree.name
        assert not any(p.endswith("/") for p in get.calls), tree.name


# ---------------------------------------------------------------------------------------------
# Planted links: none is followed


class Planted(Tree):
    """The Dell tree with `plant(path, payload)` applied to each answer's copy."""

    def __init__(self, plant: Callable[[str, dict[str, Any]], None]) -> None:
        super().__init__(DELL)
        self.plant = plant

    def __call__(self, path: str) -> Any:
        payload = copy.deepcopy(super().__call__(path))
        self.plant(path, payload)
        return payload


SYSTEM = "/redfish/v1/Systems/System.Embedded.1"
FIRMWARE = "/redfish/v1/UpdateService/FirmwareInventory"
NICS = SYSTEM + "/EthernetInterfaces"


def _set(at: str, key: str, value: Any) -> Callable[[str, dict[str, Any]], None]:
    def plant(path: str, payload: dict[str, Any]) -> None:
        if path == at:
            payload[key] = {"@odata.id": value}
    return plant


def _member(at: str, value: Any) -> Callable[[str, dict[str, Any]], None]:
    def plant(path: str, payload: dict[str, Any]) -> None:
        if path == at:
            payload["Members"][0] = {"@odata.id": value}
    return plant


PLANTED = [
    ("another host, absolute", _set(ROOT, "Systems", "https://evil.example/redfish/v1/Systems")),
    ("another host, network path", _set(SYSTEM, "EthernetInterfaces",
                                        "//evil.example/redfish/v1/Systems/1/NICs")),
    ("cloud metadata", _set(ROOT, "UpdateService", "http://169.254.169.254/latest/meta-data")),
    ("dot-dot out of the tree", _set(SYSTEM, "Bios", SYSTEM + "/../../../../../etc/passwd")),
    ("dot-dot within redfish", _set(ROOT, "UpdateService", "/redfish/v1/Systems/../UpdateService")),
    ("encoded dot-dot", _member(FIRMWARE, FIRMWARE + "/%2e%2e/%2E%2E/AccountService")),
    ("encoded slash", _member(FIRMWARE, FIRMWARE + "/x%2F..%2F..%2Fsecret")),
    ("member outside its collection", _member(FIRMWARE, "/redfish/v1/AccountService/Accounts/2")),
    ("member beside its collection", _member(NICS, SYSTEM + "/EthernetInterfacesX/1")),
    ("not /redfish/v1 but its prefix", _set(ROOT, "Systems", "/redfish/v10/Systems")),
    ("relative", _set(SYSTEM, "Bios", "Bios")),
    ("backslash", _set(SYSTEM, "Bios", "/redfish/v1\\..\\..\\etc")),
    ("query", _set(ROOT, "UpdateService", "/redfish/v1/UpdateService?$expand=*")),
    ("control character", _set(SYSTEM, "Bios", SYSTEM + "/Bios\r\nX-Injected: 1")),
    ("empty segment", _set(SYSTEM, "Bios", "/redfish/v1//Systems/Bios")),
    ("too long", _set(SYSTEM, "Bios", SYSTEM + "/" + "a" * 600)),
    ("not a string", _set(SYSTEM, "Bios", ["/redfish/v1/Systems"])),
    ("ActiveSoftwareImage elsewhere", lambda path, payload: (
        payload["Links"].__setitem__("ActiveSoftwareImage",
                                     {"@odata.id": "/redfish/v1/../../etc/passwd"})
        if path == "/redfish/v1/Managers/iDRAC.Embedded.1" else None)),
    ("ManagedBy another host", lambda path, payload: (
        payload["Links"].__setitem__("ManagedBy", [{"@odata.id": "https://evil.example/bmc"}])
        if path == SYSTEM else None)),
]


@pytest.mark.parametrize(("why", "plant"), PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_link_is_refused_and_never_followed(why, plant):
    get = Planted(plant)
    inv = read_inventory(get)
    assert any("refused" in p for p in inv.problems), (why, inv.problems)
    for path in get.calls:
        assert path == ROOT or path.startswith(ROOT + "/"), (why, path)
        assert "/." not in path and "%" not in path and "?" not in path, (why, path)
        assert not path.lower().startswith(ROOT + "/accountservice"), (why, path)
    # What the planted link did not touch is still read.
    assert inv.bmc_firmware == "6.00.30.00"


def test_a_refused_link_leaves_the_rest_read():
    get = Planted(_set(SYSTEM, "Bios", SYSTEM + "/../../../../../etc/passwd"))
    inv = read_inventory(get)
    assert inv.bios_attributes == {}
    assert inv.problems == (
        "BIOS attributes unknown: /redfish/v1/Systems/System.Embedded.1's Bios link refused: "
        "it '/redfish/v1/Systems/System.Embedded.1/../../../../../etc/passwd' has an empty, "
        "'.' or '..' segment",)
    assert (inv.serial, len(inv.macs), len(inv.firmware)) == ("CNIVC0014M0388", 5, 29)


@pytest.mark.parametrize(("link", "path"), [
    ("/redfish/v1", "/redfish/v1"),
    ("/redfish/v1/", "/redfish/v1"),
    ("/redfish/v1/Systems/1/", "/redfish/v1/Systems/1"),
    ("/redfish/v1/systems/1/bios", "/redfish/v1/systems/1/bios"),
    ("/redfish/v1/Chassis/a%3Ab", "/redfish/v1/Chassis/a%3Ab"),
    ("/redfish/v1/UpdateService/FirmwareInventory/Installed-0-2.1.3__Disk.Bay.0:Enclosure."
     "Internal.0-1", "/redfish/v1/UpdateService/FirmwareInventory/Installed-0-2.1.3__Disk.Bay.0:"
     "Enclosure.Internal.0-1"),
])
def test_check_link_accepts_what_real_bmcs_link(link, path):
    assert check_link(link) == (path, "")


@pytest.mark.parametrize("link", [
    "https://10.0.0.1/redfish/v1", "//x/redfish/v1", "redfish/v1", "/redfish", "/redfish/v2",
    "/redfish/v1/..", "/redfish/v1/./Systems", "/redfish/v1/a/../../x", "/redfish/v1/%2e%2e",
    "/redfish/v1/a%5cb", "/redfish/v1/%252e%252e", "/redfish/v1/a%00", "/redfish/v1/a%zz",
    "/redfish/v1/a%2", "/redfish/v1/a%20b", "/redfish/v1/Syst\u0435ms", "/redfish/v1/a b",
    "/redfish/v1/\x00", "/redfish/v1/a#frag", "",
    None, 42, {"@odata.id": "/redfish/v1"}])
def test_check_link_refuses(link):
    path, why = check_link(link)
    assert path is None and why


def test_check_link_within_a_collection_ignores_case_only():
    assert check_link("/redfish/v1/systems/1/EthernetInterfaces/1/",
                      within="/redfish/v1/Systems/1/EthernetInterfaces")[0] == (
        "/redfish/v1/systems/1/EthernetInterfaces/1")
    assert check_link("/redfish/v1/Systems/1/EthernetInterfaces",
                      within="/redfish/v1/Systems/1/EthernetInterfaces")[0] is None


# ---------------------------------------------------------------------------------------------
# Truncated, malformed and missing members; bounds


@pytest.mark.parametrize(("text", "mac"), [
    ("E4:3D:1A:13:27:F0", "e4:3d:1a:13:27:f0"), ("e4-3d-1a-13-27-f0", "e4:3d:1a:13:27:f0"),
    ("e43d.1a13.27f0", "e4:3d:1a:13:27:f0"), (" E43D1A1327F0 ", "e4:3d:1a:13:27:f0"),
    ("e4:3d:1a:13:27", None), ("e4:3d:1a:13:27:f0:00", None), ("e4:3d-1a:13:27:f0", None),
    ("zz:3d:1a:13:27:f0", None), ("", None), ("e4:3d:1a:13:27:f\u0660", None)])
def test_normalize_mac(text, mac):
    assert normalize_mac(text) == mac


def _edit(tree: Path, path: str, change: Callable[[dict[str, Any]], None]) -> None:
    file = tree.joinpath(*path.strip("/").split("/"), "index.json")
    payload = json.loads(file.read_text())
    change(payload)
    file.write_text(json.dumps(payload))


def test_truncated_malformed_and_missing_members_are_problems(tmp_path):
    tree = tmp_path / "dell"
    shutil.copytree(DELL, tree)
    # A firmware member cut mid-answer, as a dropped connection leaves it.
    cut = tree / "redfish/v1/UpdateService/FirmwareInventory/Installed-159-1.8.2__BIOS.Setup.1-1"
    text = (cut / "index.json").read_text()
    (cut / "index.json").write_text(text[:len(text) // 2])
    # A member that is gone.
    shutil.rmtree(tree / "redfish/v1/Systems/System.Embedded.1/EthernetInterfaces/NIC.Slot.5-1")
    # MACs that do not parse, one with a terminal escape in it; one all zeros.
    nics = "/redfish/v1/Systems/System.Embedded.1/EthernetInterfaces/"
    _edit(tree, nics + "NIC.Embedded.1-1-1", lambda p: p.update(
        MACAddress="70:B5:E8:F0:52", PermanentMACAddress="zz:\x1b[31m:E8:F0:52:DC"))
    _edit(tree, nics + "NIC.Embedded.2-1-1", lambda p: p.update(
        MACAddress="bad", PermanentMACAddress="70:B5:E8:F0:52:DD"))
    _edit(tree, nics + "NIC.Integrated.1-2-1", lambda p: p.update(
        MACAddress="00:00:00:00:00:00", PermanentMACAddress=None))
    # The system: a number for a string, a huge serial with control characters, a member
    # list entry that is not an object.
    _edit(tree, "/redfish/v1/Systems/System.Embedded.1", lambda p: p.update(
        Model=750, SerialNumber="CN\x00IVC" + "9" * 10_000, PowerState=""))
    _edit(tree, "/redfish/v1/UpdateService/FirmwareInventory",
          lambda p: p["Members"].insert(0, "Installed-25227"))
    _edit(tree, "/redfish/v1/Systems/System.Embedded.1/Bios",
          lambda p: p["Attributes"].update(Nested={"a": 1}, Listed=[1], Long="x" * 10_000,
                                           **{"Esc\x1b": "a\u202eb"}))

    inv = read_inventory(Tree(tree))

    assert inv.model is None and inv.power_state is None
    assert inv.serial is not None and inv.serial.startswith("CN\\x00IVC")
    assert len(inv.serial) == MAX_TEXT
    # The interfaces that parse: one by its PermanentMACAddress.
    assert inv.macs == (("NIC.Integrated.1-1-1", "e4:3d:1a:13:27:f0"),
                        ("NIC.Embedded.2-1-1", "70:b5:e8:f0:52:dd"))
    assert len(inv.firmware) == 28  # 29 less the cut one
    assert "Installed-159-1.8.2__BIOS.Setup.1-1" not in {c.id for c in inv.firmware}
    assert len(inv.bios_attributes) == 457 and "Nested" not in inv.bios_attributes
    assert inv.bios_attributes["Long"] == "x" * MAX_ATTRIBUTE_VALUE
    assert inv.bios_attributes["Esc\\x1b"] == "a\\u202eb"
    problems = "\n".join(inv.problems)
    for expected in [
        "the system (/redfish/v1/Systems/System.Embedded.1): Model is int, not text",
        "SerialNumber had non-printable characters (escaped)",
        f"SerialNumber is 10009 characters: cut to {MAX_TEXT}",
        "PowerState is empty",
        "Ethernet interface NIC.Embedded.1-1-1: MACAddress '70:B5:E8:F0:52' is not a MAC",
        "Ethernet interface NIC.Embedded.1-1-1: PermanentMACAddress 'zz:\\x1b[31m:E8:F0:52:DC' "
        "is not a MAC",
        "Ethernet interface NIC.Embedded.1-1-1: no MAC address read",
        "Ethernet interface NIC.Embedded.2-1-1: MACAddress 'bad' is not a MAC",
        "NIC.Integrated.1-2-1: MACAddress is 00:00:00:00:00:00 (none)",
        "Ethernet interface (/redfish/v1/Systems/System.Embedded.1/EthernetInterfaces/"
        "NIC.Slot.5-1) unknown: reading it failed: FileNotFoundError",
        "firmware component (/redfish/v1/UpdateService/FirmwareInventory/Installed-159-1.8.2__"
        "BIOS.Setup.1-1) unknown: reading it failed: JSONDecodeError",
        "FirmwareInventory (/redfish/v1/UpdateService/FirmwareInventory) member 0 refused: it "
        "is str, not an object with an @odata.id",
        "2 attributes with a value that is not a string, number, boolean or null left out",
        "Bios (/redfish/v1/Systems/System.Embedded.1/Bios): 2 attribute names or values had "
        "non-printable characters (escaped) or were too long",
    ]:
        assert expected in problems, expected
    assert "\x1b" not in problems and "\x00" not in problems


def test_members_beyond_the_bound_are_not_read():
    def get(path: str) -> Any:
        if path == FIRMWARE:
            return {"Members": [{"@odata.id": f"{FIRMWARE}/{i}"} for i in range(300)]}
        if path.startswith(FIRMWARE + "/"):
            return {"Id": path.rsplit("/", 1)[1], "Name": "NIC", "Version": "1"}
        return Tree(DELL)(path)

    inv = read_inventory(get)
    assert len(inv.firmware) == 256 and inv.firmware[-1].id == "255"
    assert (f"FirmwareInventory ({FIRMWARE}) lists 300 members: the first 256 read"
            in inv.problems)
    assert len(read_inventory(get, max_members=10).firmware) == 10


def test_the_request_budget_bounds_the_walk():
    get = Tree(DELL)
    inv = read_inventory(get, max_requests=5)
    assert len(get.calls) == 5
    assert inv.serial == "CNIVC0014M0388"
    assert any("not read: 5 requests made" in p for p in inv.problems)


@pytest.mark.parametrize("answer", [ValueError("not JSON"), ["a", "list"], "text", None])
def test_a_root_that_cannot_be_read_leaves_everything_unknown(answer):
    def get(path: str) -> Any:
        if isinstance(answer, Exception):
            raise answer
        return answer

    inv = read_inventory(get)
    assert (inv.system, inv.serial, inv.macs, inv.firmware) == (None, None, (), ())
    assert len(inv.problems) == 1 and inv.problems[0].startswith("the service root (/redfish/v1)")


def test_a_paged_collection_is_said_to_be_read_in_part():
    def get(path: str) -> Any:
        payload = copy.deepcopy(Tree(DELL)(path))
        if path == NICS:
            payload["Members@odata.nextLink"] = NICS + "?$skip=5"
        return payload

    inv = read_inventory(get)
    assert len(inv.macs) == 5
    assert inv.problems == (f"EthernetInterfaces ({NICS}) is paged (Members@odata.nextLink): "
                            "only its first page read",)


# ---------------------------------------------------------------------------------------------
# Any answer at all: the reader neither raises nor follows a link out


PROPERTY = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
LINK_KEYS = ("Systems", "Managers", "UpdateService", "FirmwareInventory", "EthernetInterfaces",
             "Bios")
HOSTILE_LINKS = st.one_of(
    st.sampled_from(["https://evil.example/redfish/v1/Systems", "//evil/redfish/v1",
                     "/redfish/v1/../../etc/passwd", "/redfish/v1/%2e%2e/x", "/redfish/v1?x",
                     "/redfish/v1/Systems/System.Embedded.1", "/redfish/v1", FIRMWARE, NICS]),
    st.text(max_size=40), st.integers(), st.none())
JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                              st.text(max_size=20)),
                    lambda inner: st.one_of(st.lists(inner, max_size=4),
                                            st.dictionaries(st.text(max_size=12), inner,
                                                            max_size=4)),
                    max_leaves=12)
MUTATION = st.tuples(st.integers(min_value=0, max_value=60),
                     st.one_of(st.tuples(st.just("link"), st.sampled_from(LINK_KEYS),
                                         HOSTILE_LINKS),
                               st.tuples(st.just("member"), st.integers(0, 3), HOSTILE_LINKS),
                               st.tuples(st.just("answer"), st.none(), JSON),
                               st.tuples(st.just("field"),
                                         st.sampled_from(["SerialNumber", "Model", "MACAddress",
                                                          "Version", "Attributes", "Boot",
                                                          "Members", "Links"]), JSON)))


@PROPERTY
@given(st.sampled_from([DELL, HPE, SUPERMICRO, DGX, OPENBMC]),
       st.lists(MUTATION, max_size=6))
def test_any_answer_is_read_without_raising_or_leaving_redfish_v1(tree, mutations):
    base = Tree(tree)
    calls: list[str] = []

    def get(path: str) -> Any:
        calls.append(path)
        answer: Any = base(path)
        for at, (kind, key, value) in mutations:
            if at != len(calls) - 1:
                continue
            if kind == "answer":
                return value
            if not isinstance(answer, dict):
                continue
            if kind == "link":
                answer[key] = {"@odata.id": value}
            elif kind == "member" and isinstance(answer.get("Members"), list):
                answer["Members"].insert(key, {"@odata.id": value})
            elif kind == "field":
                answer[key] = value
        return answer

    inv = read_inventory(get, max_requests=200)
    assert len(calls) <= 200
    for path in calls:
        assert path == ROOT or path.startswith(ROOT + "/"), path
        assert path.isascii() and "?" not in path and "//" not in path, path
        assert "/../" not in path + "/" and "/./" not in path + "/", path
    texts = [inv.manufacturer, inv.model, inv.serial, inv.power_state, inv.bios_version,
             inv.bmc_model, inv.bmc_firmware, *[c.version for c in inv.firmware]]
    assert all(t is None or (len(t) <= MAX_TEXT and t.isprintable()) for t in texts)
    assert all(normalize_mac(mac) == mac for _, mac in inv.macs)
