"""--apply-firmware's pure parts: the plan from pins and a real BMC's inventory, the images'
pins, and the requests racklift would send to each real vendor's BMC (tests/fixtures/real/
redfish): the SimpleUpdate action it posts to, the BIOS settings object it patches, and how it
reads a task."""

from __future__ import annotations

import pytest

from racklift.bmc import firmware
from racklift.bmc.apply import (
    needs_reboot,
    settings_request,
    simple_update_target,
    task_outcome,
    update_body,
)
from racklift.bmc.inventory import read_inventory
from racklift.bmc.payloads import parse_action_info, parse_reset_action
from redfish_trees import DELL, DGX, GIGABYTE, HPE, LENOVO, OPENBMC, SUPERMICRO, Tree

DELL_INVENTORY = read_inventory(Tree(DELL))


def _pins(context: dict) -> firmware.Pins:
    pins, problems = firmware.read(context)
    assert problems == []
    return pins


def test_the_plan_updates_what_is_off_with_its_image_and_sets_what_differs():
    pins = _pins({"firmware": {"BMC": "7.10.30.00", "BIOS": "1.8.2"},
                  "firmware_images": {"BMC": "dell/iDRAC_7.10.30.00.EXE",
                                      "BIOS": "dell/BIOS_1.8.2.EXE"},
                  "bios": {"ProcTurboMode": "Disabled", "SysProfile": "PerfOptimized"}})
    plan = firmware.plan(pins, DELL_INVENTORY)
    assert plan.updates == (firmware.Update("BMC", "6.00.30.00", "7.10.30.00",
                                            "dell/iDRAC_7.10.30.00.EXE"),)
    assert plan.settings == (("ProcTurboMode", "Disabled", "Enabled"),)
    assert plan.cannot == ()
    assert needs_reboot(plan)  # a BIOS setting
    assert not needs_reboot(firmware.ApplyPlan(updates=plan.updates))  # the BMC restarts itself
    assert needs_reboot(firmware.ApplyPlan(updates=(
        firmware.Update("BIOS", "1.8.2", "1.9.0", "b"),)))


def test_what_cannot_be_applied_is_named():
    pins = _pins({"firmware": {"BMC": "7.10.30.00", "NoSuchPart": "1.0"},
                  "firmware_images": {"NoSuchPart": "x/part.bin"},
                  "bios": {"NoSuchAttribute": 1}})
    plan = firmware.plan(pins, DELL_INVENTORY)
    assert plan.updates == () and plan.settings == ()
    assert plan.cannot == (
        "firmware BMC: found 6.00.30.00, wanted 7.10.30.00, and no image brings it there "
        "(config_context.racklift.firmware_images.BMC)",
        "firmware NoSuchPart: not reported by the BMC, so no update could be read back",
        "BIOS attribute NoSuchAttribute: not reported by the BMC, so it cannot be set")


def test_pins_met_plan_nothing():
    pins = _pins({"firmware": {"BMC": "6.00.30.00"}, "firmware_images": {"BMC": "a.bin"},
                  "bios": {"ProcTurboMode": "Enabled"}})
    assert firmware.plan(pins, DELL_INVENTORY) == firmware.ApplyPlan()


IMAGES = "config_context.racklift.firmware_images"


@pytest.mark.parametrize(("images", "field", "says"), [
    ({"BIOS": "../etc/shadow"}, f"{IMAGES}.BIOS", "no part starting with a dot"),
    ({"BIOS": "/srv/bios.bin"}, f"{IMAGES}.BIOS", "path under the controller"),
    ({"BIOS": "dell/.hidden"}, f"{IMAGES}.BIOS", "no part starting with a dot"),
    ({"BIOS": "a b.bin"}, f"{IMAGES}.BIOS", "letters, digits"),
    ({"BIOS": "x" * 256}, f"{IMAGES}.BIOS", "at most 255"),
    ({"BIOS": 3}, f"{IMAGES}.BIOS", "is 3"),
    ({"GPU": "gpu.bin"}, f'{IMAGES}."GPU"', "names no component"),
    (["BIOS"], IMAGES, "mapping of component name"),
])
def test_bad_image_pins_name_the_field_and_are_left_out(images, field, says):
    pins, problems = firmware.read({"firmware": {"BIOS": "1.8.2"}, "firmware_images": images})
    assert pins.images == ()
    assert [p.field for p in problems] == [field]
    assert says in problems[0].message


# What each real BMC offers: (SimpleUpdate's path, whether it lists TransferProtocol inline) or None
# where it has no SimpleUpdate; the BIOS settings object and whether it applies OnReset.
OFFERS = {
    DELL: (("/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", True),
           "/redfish/v1/Systems/System.Embedded.1/Bios/Settings", True),
    HPE: (("/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", True),
          "/redfish/v1/systems/1/bios/settings/", False),  # as iLO writes it
    LENOVO: (("/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", True),
             "/redfish/v1/Systems/1/Bios/Pending", True),
    SUPERMICRO: (("/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", False),
                 "/redfish/v1/Systems/1/Bios/SD", False),
    DGX: (("/redfish/v1/UpdateService/Actions/SimpleUpdate", False),
          "/redfish/v1/Systems/DGX/Bios/SD", False),
    GIGABYTE: (("/redfish/v1/UpdateService/Actions/SimpleUpdate", False),
               # No SettingsObject: <Bios>/Settings.
               "/redfish/v1/Systems/Self/Bios/Settings", False),
    OPENBMC: (None, "/redfish/v1/Systems/system/Bios/Settings", False),
}


@pytest.mark.parametrize("tree", list(OFFERS), ids=lambda t: t.name)
def test_the_requests_racklift_sends_are_those_each_real_bmc_offers(tree):
    get = Tree(tree)
    update, settings, on_reset = OFFERS[tree]
    service = get("/redfish/v1/UpdateService")
    if update is None:
        with pytest.raises(ValueError, match=r"offers no UpdateService\.SimpleUpdate"):
            simple_update_target(service)
    else:
        action = simple_update_target(service)
        assert (action.target, bool(action.protocols)) == update
        body = update_body("http://10.16.0.2/firmware/a.bin", action.protocols)
        assert body["ImageURI"] == "http://10.16.0.2/firmware/a.bin"
        assert ("TransferProtocol" in body) is update[1]
    system_path = get("/redfish/v1/Systems")["Members"][0]["@odata.id"]
    bios_path = get(system_path)["Bios"]["@odata.id"].rstrip("/")
    path, body = settings_request(bios_path, get(bios_path), {"ProcTurboMode": "Disabled"})
    assert path == settings
    assert body["Attributes"] == {"ProcTurboMode": "Disabled"}
    assert ("@Redfish.SettingsApplyTime" in body) is on_reset


def test_an_update_action_that_takes_no_http_or_points_elsewhere_is_refused():
    action = simple_update_target({"Actions": {"#UpdateService.SimpleUpdate": {
        "target": "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
        "TransferProtocol@Redfish.AllowableValues": ["NFS", "CIFS"]}}})
    with pytest.raises(ValueError, match="takes images by NFS, CIFS, not HTTP"):
        update_body("http://b/firmware/x", action.protocols)
    with pytest.raises(ValueError, match="not followed"):
        simple_update_target({"Actions": {"#UpdateService.SimpleUpdate": {
            "target": "https://elsewhere.example/update"}}})
    with pytest.raises(ValueError, match="not followed"):
        settings_request("/redfish/v1/Systems/1/Bios", {"@Redfish.Settings": {
            "SettingsObject": {"@odata.id": "/redfish/v1/../../etc"}}}, {"A": 1})


@pytest.mark.parametrize(("status", "payload", "outcome"), [
    (202, None, None),  # a task monitor while its task runs
    (202, {"TaskState": "Running", "PercentComplete": 40}, None),
    (200, {"TaskState": "New"}, None),
    (200, {"TaskState": "Completed", "TaskStatus": "OK"}, ""),
    (200, {"TaskState": "Completed", "TaskStatus": "Warning"}, ""),
    (204, None, ""),  # the monitor's final answer, no task
    (200, {"TaskState": "Completed", "TaskStatus": "Critical",
           "Messages": [{"Message": "Image signature invalid"}]},
     "completed with status Critical: Image signature invalid"),
    (200, {"TaskState": "Exception", "Messages": [{"Message": "Flash\x00 failed"}, {"x": 1},
                                                  {"Message": "Retry"}]},
     "ended Exception: Flash\\x00 failed; Retry"),
    (200, {"TaskState": "Killed"}, "ended Killed: the BMC gave no message"),
    (200, {"TaskState": "Cancelled", "Messages": "not a list"},
     "ended Cancelled: the BMC gave no message"),
])
def test_a_task_is_read_as_running_done_or_failed(status, payload, outcome):
    assert task_outcome(status, payload) == outcome


# What each real BMC allows where racklift asks: ResetType (inline or in its ActionInfo), and
# SimpleUpdate's TransferProtocol the same way. HTTP is how racklift's boot server serves
# images; every BMC with a SimpleUpdate takes it.
ALLOWS = {
    DELL: ({"On", "ForceOff", "ForceRestart", "GracefulShutdown", "PowerCycle"}, True),
    HPE: ({"On", "ForceOff", "ForceRestart", "GracefulShutdown"}, True),
    LENOVO: ({"On", "ForceOn", "ForceOff", "ForceRestart"}, True),
    SUPERMICRO: ({"On", "ForceOn", "ForceOff", "ForceRestart", "PowerCycle"}, True),
    DGX: ({"On", "ForceOff", "ForceRestart", "GracefulShutdown"}, True),
    GIGABYTE: ({"On", "ForceOff", "ForceRestart", "GracefulShutdown"}, True),
    OPENBMC: ({"On", "ForceOn", "ForceOff", "ForceRestart", "PowerCycle"}, None),
}


@pytest.mark.parametrize("tree", list(ALLOWS), ids=lambda t: t.name)
def test_the_reset_types_and_protocol_racklift_uses_are_allowed_by_each_real_bmc(tree):
    get = Tree(tree)
    resets, http = ALLOWS[tree]
    system = get(get("/redfish/v1/Systems")["Members"][0]["@odata.id"])
    action = parse_reset_action(system)
    allowed = action.allowed or parse_action_info(get(action.action_info), "ResetType")
    assert resets <= set(allowed)
    # What the image stage and --apply-firmware send: On, ForceOff, ForceRestart.
    assert {"On", "ForceOff", "ForceRestart"} <= set(allowed)
    service = get("/redfish/v1/UpdateService")
    if http is None:
        with pytest.raises(ValueError):
            simple_update_target(service)
        return
    update = simple_update_target(service)
    protocols = update.protocols or parse_action_info(get(update.action_info),
                                                       "TransferProtocol")
    assert "HTTP" in protocols
    assert update_body("http://b/firmware/x", protocols)["TransferProtocol"] == "HTTP"
