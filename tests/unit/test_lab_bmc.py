"""racklift.lab.vrack.lab_bmc, the lab's stand-in for what real BMCs do and sushy-tools lacks,
installed on sushy-tools' real Flask app in front of sushy-tools' real libvirt driver, on
libvirt's built-in test driver (test:///default: one domain, "test", no daemon; it keeps
sushy-tools' BIOS and version metadata like a real domain). Images come from a real HTTP server
on loopback. And racklift's own reader (read_inventory, firmware.compare) over it; and what
bmc.py runs: the stand-in's program, as the lab launches it."""

from __future__ import annotations

import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

libvirt = pytest.importorskip("libvirt")  # the dev extra's libvirt-python: the test driver
bcrypt = pytest.importorskip("bcrypt")  # sushy-tools' dependency
from sushy_tools.emulator import main as sushy  # noqa: E402 (after the skips)
from werkzeug.serving import make_server  # noqa: E402

import racklift  # noqa: E402
from helpers import http_served  # noqa: E402
from racklift.bmc.apply import ApplyError, apply  # noqa: E402
from racklift.bmc.firmware import Finding, compare, parse  # noqa: E402
from racklift.bmc.firmware import plan as apply_plan  # noqa: E402
from racklift.bmc.inventory import BmcInventory, read_inventory  # noqa: E402
from racklift.bmc.redfish import BmcCredentials, BmcEndpoint, RedfishClient  # noqa: E402
from racklift.lab import vrack  # noqa: E402
from racklift.lab.vrack import bmc, lab_bmc, lab_firmware  # noqa: E402

INVENTORY = "/redfish/v1/UpdateService/FirmwareInventory"
SIMPLE_UPDATE = "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"
TASK_PATH = re.compile(r"/redfish/v1/TaskService/Tasks/([0-9]+)")
TASK_SECONDS = 0.3


image = lab_firmware.lab_image


BIG = b"{" + b" " * lab_firmware.MAX_IMAGE + b"}"  # one byte over
# path -> (body, whether the answer gives its Content-Length)
FILES: dict[str, tuple[bytes, bool]] = {
    "/firmware/bmc-2.00.json": (image("BMC", "2.00"), True),
    "/firmware/bios-2.0.0.json": (image("BIOS", "2.0.0"), True),
    "/firmware/bmc-fails.json": (image("BMC", "9.9", fail="flash write failed at 37%"), True),
    "/firmware/readme.txt": (b"this is not firmware\n", True),
    "/firmware/nic.json": (image("NIC", "1.0"), True),
    "/firmware/bad-version.json": (image("BMC", " 2.0"), True),
    "/firmware/big.bin": (BIG, True),
    "/firmware/big-unsized.bin": (BIG, False),
}


class _Files(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        found = FILES.get(self.path)
        if found is None:
            self.send_error(404)
            return
        body, sized = found
        self.send_response(200)
        if sized:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()  # HTTP/1.0: unsized ends when the connection closes
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def files() -> Iterator[str]:
    with http_served(http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)) as url:
        yield url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def app() -> Any:
    sushy.app.configure(extra_config={"SUSHY_EMULATOR_LIBVIRT_URI": "test:///default"})
    assert sushy.app.systems.driver == "<libvirt>"  # sushy-tools' real libvirt driver
    return sushy.app


@pytest.fixture
def uuid(app: Any) -> str:
    return str(app.systems.systems[0])


def _install(app: Any, state: Path, **config: Any) -> lab_bmc.LabBmc:
    for key in (bmc.STATE_KEY, bmc.FIRMWARE_KEY, bmc.TASK_SECONDS_KEY, bmc.NETNS_KEY):
        app.config.pop(key, None)
    app.config.update({bmc.STATE_KEY: str(state), bmc.TASK_SECONDS_KEY: TASK_SECONDS,
                       **config})
    return lab_bmc.install(app)


@pytest.fixture
def lab(app: Any, uuid: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
        ) -> Iterator[lab_bmc.LabBmc]:
    # As in the lab: the emulator manages one system, by UUID or name.
    monkeypatch.setitem(app.config, "SUSHY_EMULATOR_ALLOWED_INSTANCES", [uuid, "test"])
    app.systems.reset_bios(uuid)  # test:///default lives as long as the process
    app.systems.reset_versions(uuid)
    app.systems.set_power_state(uuid, "On")
    yield _install(app, tmp_path / "bmc-state.json")
    for key in (bmc.STATE_KEY, bmc.FIRMWARE_KEY, bmc.TASK_SECONDS_KEY):
        app.config.pop(key, None)


@pytest.fixture
def client(app: Any, lab: lab_bmc.LabBmc) -> Any:
    return app.test_client()


def _get(client: Any, path: str) -> dict[str, Any]:
    answer = client.get(path)
    assert answer.status_code == 200, (path, answer.status_code, answer.data[:300])
    return dict(answer.json)


def _versions(client: Any) -> dict[str, str]:
    members = _get(client, INVENTORY)["Members"]
    return {m["@odata.id"].rsplit("/", 1)[-1]: _get(client, m["@odata.id"])["Version"]
            for m in members}


def _update(client: Any, uri: str, **extra: Any) -> dict[str, Any]:
    """SimpleUpdate, then poll its task to its end: the last answer, and the states seen."""
    answer = client.post(SIMPLE_UPDATE, json={"ImageURI": uri, "TransferProtocol": "HTTP",
                                               **extra})
    assert answer.status_code == 202, answer.data[:300]
    location = answer.headers["Location"]
    assert TASK_PATH.fullmatch(location)
    assert answer.json["@odata.id"] == location
    seen = [answer.json["TaskState"]]
    deadline = time.monotonic() + 20
    while seen[-1] == "Running" and time.monotonic() < deadline:
        time.sleep(0.05)
        task = _get(client, location)
        seen.append(task["TaskState"])
    assert seen[-1] != "Running", "the task did not end in 20 s"
    return {**task, "seen": seen}


def _reset(client: Any, uuid: str, reset: str) -> None:
    answer = client.post(f"/redfish/v1/Systems/{uuid}/Actions/ComputerSystem.Reset",
                         json={"ResetType": reset})
    assert answer.status_code == 204, answer.data[:300]


def _system(client: Any, uuid: str) -> dict[str, Any]:
    return _get(client, f"/redfish/v1/Systems/{uuid}")


def _manager(client: Any) -> dict[str, Any]:
    return _get(client, _get(client, "/redfish/v1/Managers")["Members"][0]["@odata.id"])


# ---------------------------------------------------------------------------------------------
# Inventory


def test_inventory_lists_the_bmc_and_the_bios_at_their_versions(client: Any, app: Any,
                                                                 uuid: str) -> None:
    assert [m["@odata.id"] for m in _get(client, INVENTORY)["Members"]] == [
        f"{INVENTORY}/BMC", f"{INVENTORY}/BIOS"]
    for component, name, version in (("BMC", "BMC Firmware", "1.00"), ("BIOS", "BIOS", "1.0.0")):
        item = _get(client, f"{INVENTORY}/{component}")
        assert item["@odata.type"].startswith("#SoftwareInventory.v1_")
        assert (item["@odata.id"], item["Id"], item["Name"], item["Version"],
                item["Updateable"]) == (f"{INVENTORY}/{component}", component, name, version,
                                        True)
    # The BIOS's version is the driver's, whatever sets it.
    app.systems.set_versions(uuid, {"BiosVersion": "7.7.1"})
    assert _versions(client) == {"BMC": "1.00", "BIOS": "7.7.1"}
    assert _system(client, uuid)["BiosVersion"] == "7.7.1"
    missing = client.get(f"{INVENTORY}/NIC1")
    assert missing.status_code == 404 and "no firmware component NIC1" in \
        missing.json["error"]["message"]


def test_the_manager_and_the_bios_name_their_images(app: Any, uuid: str, lab: Any,
                                                    tmp_path: Path) -> None:
    _install(app, tmp_path / "other-state.json", **{bmc.FIRMWARE_KEY: "3.10.2"})
    client = app.test_client()
    manager = _manager(client)
    assert manager["FirmwareVersion"] == "3.10.2"
    assert manager["Links"]["ActiveSoftwareImage"] == {"@odata.id": f"{INVENTORY}/BMC"}
    assert manager["Links"]["ManagerForServers"] == [{"@odata.id": f"/redfish/v1/Systems/{uuid}"}]
    assert _versions(client)["BMC"] == "3.10.2"
    bios = _get(client, f"/redfish/v1/Systems/{uuid}/BIOS")
    assert bios["Links"]["ActiveSoftwareImage"] == {"@odata.id": f"{INVENTORY}/BIOS"}
    assert bios["@Redfish.Settings"]["SettingsObject"] == {
        "@odata.id": f"/redfish/v1/Systems/{uuid}/BIOS/Settings"}
    service = _get(client, "/redfish/v1/UpdateService")
    assert service["MaxImageSizeBytes"] == lab_firmware.MAX_IMAGE and "HttpPushUri" not in service
    assert service["FirmwareInventory"] == {"@odata.id": INVENTORY}


def test_racklifts_reader_resolves_the_pins_on_the_stand_in(client: Any, uuid: str,
                                                            files: str) -> None:
    def get(path: str) -> Any:
        answer = client.get(path, follow_redirects=True)
        if answer.status_code != 200:
            raise RuntimeError(f"{path}: HTTP {answer.status_code}")
        return answer.json

    def read() -> BmcInventory:
        return read_inventory(get)

    inventory = read()
    assert (inventory.bmc_image, inventory.bios_image) == ("BMC", "BIOS")
    assert (inventory.bmc_firmware, inventory.bios_version) == ("1.00", "1.0.0")
    assert {c.id: c.version for c in inventory.firmware} == {"BMC": "1.00", "BIOS": "1.0.0"}
    pins = parse({"firmware": {"BMC": "1.00", "BIOS": "1.0.0"}})
    assert not isinstance(pins, list)
    assert compare(pins, inventory) == []
    wanted = parse({"firmware": {"BMC": "2.00", "BIOS": "2.0.0"},
                    "bios": {"ProcTurboMode": "Disabled"}})
    assert not isinstance(wanted, list)
    assert compare(wanted, inventory) == [
        Finding("firmware BMC", "1.00", "2.00"), Finding("firmware BIOS", "1.0.0", "2.0.0"),
        Finding("BIOS attribute ProcTurboMode", '"Enabled"', '"Disabled"')]
    # The apply path, end to end: update both, change the setting, boot; then they are met.
    assert _update(client, f"{files}/firmware/bmc-2.00.json")["TaskState"] == "Completed"
    assert _update(client, f"{files}/firmware/bios-2.0.0.json")["TaskState"] == "Completed"
    answer = client.patch(f"/redfish/v1/Systems/{uuid}/BIOS/Settings",
                          json={"Attributes": {"ProcTurboMode": "Disabled"}})
    assert answer.status_code == 204
    assert compare(wanted, read()) == [  # the BIOS's image and setting wait for the boot
        Finding("firmware BIOS", "1.0.0", "2.0.0"),
        Finding("BIOS attribute ProcTurboMode", '"Enabled"', '"Disabled"')]
    _reset(client, uuid, "ForceRestart")
    assert compare(wanted, read()) == []


# ---------------------------------------------------------------------------------------------
# SimpleUpdate and tasks


def test_a_bmc_image_runs_as_a_task_and_takes_effect_when_it_completes(
        client: Any, files: str) -> None:
    task = _update(client, f"{files}/firmware/bmc-2.00.json")
    assert task["seen"][0] == "Running" and task["seen"].count("Running") >= 2  # polled
    assert (task["TaskState"], task["TaskStatus"], task["PercentComplete"]) == \
        ("Completed", "OK", 100)
    assert task["@odata.type"].startswith("#Task.v1_")
    assert task["StartTime"] <= task["EndTime"]
    assert "BMC firmware 2.00 installed" in task["Messages"][0]["Message"]
    assert _manager(client)["FirmwareVersion"] == "2.00"
    assert _versions(client) == {"BMC": "2.00", "BIOS": "1.0.0"}
    tasks = _get(client, "/redfish/v1/TaskService/Tasks")
    assert {"@odata.id": f"/redfish/v1/TaskService/Tasks/{task['Id']}"} in tasks["Members"]


def test_a_bios_image_waits_for_a_boot_and_forceoff_is_none(client: Any, uuid: str,
                                                             files: str) -> None:
    task = _update(client, f"{files}/firmware/bios-2.0.0.json",
                   Targets=[f"/redfish/v1/Systems/{uuid}"])
    assert (task["TaskState"], task["TaskStatus"]) == ("Completed", "OK")
    assert "next boot" in task["Messages"][0]["Message"]
    assert _versions(client)["BIOS"] == "1.0.0"
    _reset(client, uuid, "ForceOff")
    assert _system(client, uuid)["PowerState"] == "Off"
    assert _versions(client)["BIOS"] == "1.0.0"
    _reset(client, uuid, "On")
    assert _system(client, uuid)["PowerState"] == "On"
    assert _versions(client)["BIOS"] == "2.0.0"
    assert _system(client, uuid)["BiosVersion"] == "2.0.0"


def test_a_failing_image_ends_in_exception_with_its_message(client: Any, files: str) -> None:
    task = _update(client, f"{files}/firmware/bmc-fails.json")
    assert (task["TaskState"], task["TaskStatus"]) == ("Exception", "Critical")
    assert "Running" in task["seen"]
    assert task["Messages"][0]["Message"] == "flash write failed at 37%"
    assert "PercentComplete" in task and task["PercentComplete"] != 100
    assert _versions(client)["BMC"] == "1.00"


@pytest.mark.parametrize("path, why", [
    ("/firmware/readme.txt", "not a racklift lab firmware image"),
    ("/firmware/nic.json", "names component 'NIC': this BMC updates BMC or BIOS"),
    ("/firmware/bad-version.json", "is not 1 to 64 printable ASCII characters"),
    ("/firmware/big.bin", f"too big, this BMC takes at most {lab_firmware.MAX_IMAGE}"),
    ("/firmware/big-unsized.bin", "too big for this BMC"),
    ("/firmware/missing.bin", "answered HTTP 404"),
    (None, "unreachable: ConnectionError"),
])
def test_what_is_not_a_lab_image_ends_in_exception(client: Any, files: str, path: str | None,
                                                   why: str) -> None:
    uri = f"{files}{path}" if path else f"http://127.0.0.1:{_free_port()}/firmware/x.json"
    task = _update(client, uri)
    assert (task["TaskState"], task["TaskStatus"]) == ("Exception", "Critical")
    assert why in task["Messages"][0]["Message"]
    assert _versions(client) == {"BMC": "1.00", "BIOS": "1.0.0"}


def test_targets_are_checked_against_the_image(client: Any, uuid: str, files: str) -> None:
    wrong = _update(client, f"{files}/firmware/bmc-2.00.json", Targets=[f"{INVENTORY}/BIOS"])
    assert wrong["TaskState"] == "Exception"
    assert wrong["Messages"][0]["Message"] == "the image is BMC firmware; Targets name BIOS"
    assert _versions(client)["BMC"] == "1.00"
    manager = _manager(client)["@odata.id"]
    right = _update(client, f"{files}/firmware/bmc-2.00.json", Targets=[manager])
    assert right["TaskState"] == "Completed" and _versions(client)["BMC"] == "2.00"


@pytest.mark.parametrize("body, why", [
    ({"ImageURI": "file:///etc/passwd"}, "is not an http:// or https:// URL"),
    ({"ImageURI": "ftp://127.0.0.1/bmc.bin"}, "is not an http:// or https:// URL"),
    ({"ImageURI": "http:///nohost"}, "is not an http:// or https:// URL"),
    ({"ImageURI": "http://127.0.0.1:99999/x"}, "is not an http:// or https:// URL"),
    ({"ImageURI": "http://x/" + "a" * 3000}, "characters: at most 2048"),
    ({"TransferProtocol": "HTTP"}, "needs ImageURI"),
    ({"ImageURI": "http://127.0.0.1/x", "TransferProtocol": "FTP"}, "does not fit ImageURI"),
    ({"ImageURI": "http://127.0.0.1/x", "Targets": "BMC"}, "Targets is not a list"),
    ({"ImageURI": "http://127.0.0.1/x", "Targets": ["/redfish/v1/Chassis/1"]},
     "Targets names something this BMC cannot update"),
    ([1, 2], "not a JSON object"),
])
def test_simple_update_refuses_a_bad_request_without_a_task(client: Any, body: Any,
                                                            why: str) -> None:
    before = _get(client, "/redfish/v1/TaskService/Tasks")["Members"]
    answer = client.post(SIMPLE_UPDATE, json=body)
    assert answer.status_code == 400
    assert why in answer.json["error"]["message"]
    assert why in answer.json["error"]["@Message.ExtendedInfo"][0]["Message"]
    assert _get(client, "/redfish/v1/TaskService/Tasks")["Members"] == before


def test_a_huge_request_body_is_refused(client: Any) -> None:
    answer = client.post(SIMPLE_UPDATE, data=b"{" + b" " * lab_bmc.MAX_BODY + b"}",
                         content_type="application/json")
    assert answer.status_code == 413


def test_an_unknown_task_is_404(client: Any) -> None:
    for task in ("42", "1", "999999", "x"):  # sushy-tools' own 42 was always "Completed"
        answer = client.get(f"/redfish/v1/TaskService/Tasks/{task}")
        assert answer.status_code == 404, task
    assert client.delete(f"{INVENTORY}/BMC").status_code == 405


# ---------------------------------------------------------------------------------------------
# BIOS settings


def _attributes(client: Any, uuid: str, which: str = "BIOS") -> dict[str, Any]:
    return dict(_get(client, f"/redfish/v1/Systems/{uuid}/{which}")["Attributes"])


def test_bios_settings_wait_for_a_boot(client: Any, uuid: str) -> None:
    settings = f"/redfish/v1/Systems/{uuid}/BIOS/Settings"
    current = _attributes(client, uuid)
    assert current["ProcTurboMode"] == "Enabled" and current["QuietBoot"] == "true"
    answer = client.patch(settings, json={"Attributes": {"ProcTurboMode": "Disabled"}})
    assert answer.status_code == 204
    answer = client.patch(settings, json={"Attributes": {"QuietBoot": "false"}})
    assert answer.status_code == 204
    pending = {**current, "ProcTurboMode": "Disabled", "QuietBoot": "false"}
    assert _attributes(client, uuid, "BIOS/Settings") == pending
    assert _attributes(client, uuid) == current
    _reset(client, uuid, "GracefulShutdown")
    _reset(client, uuid, "ForceOff")
    assert _attributes(client, uuid) == current
    _reset(client, uuid, "On")
    assert _attributes(client, uuid) == pending
    assert _attributes(client, uuid, "BIOS/Settings") == pending  # nothing pending now


def test_on_while_on_boots_nothing_and_a_restart_does(client: Any, uuid: str) -> None:
    answer = client.patch(f"/redfish/v1/Systems/{uuid}/BIOS/Settings",
                          json={"Attributes": {"NicBoot1": "Disabled"}})
    assert answer.status_code == 204
    _reset(client, uuid, "On")  # it is on: no boot
    _reset(client, uuid, "Nmi")
    assert _attributes(client, uuid)["NicBoot1"] == "NetworkBoot"
    _reset(client, uuid, "ForceRestart")
    assert _attributes(client, uuid)["NicBoot1"] == "Disabled"


@pytest.mark.parametrize("body, status, why", [
    ({"Attributes": {"NoSuchKnob": "On"}}, 400, "BIOS attribute NoSuchKnob is not one of"),
    ({"Attributes": {"ProcTurboMode": {"nested": 1}}}, 400, "value is not a string"),
    ({"Attributes": {"ProcTurboMode": "bad\u0000value"}}, 400, "value is not a string"),
    ({"Attributes": {"ProcTurboMode": 1.5}}, 400, "value is not a string"),
    ({"Attributes": {}}, 400, "needs Attributes"),
    ({"ProcTurboMode": "Disabled"}, 400, "needs Attributes"),
    ("not an object", 400, "not a JSON object"),
])
def test_a_bad_bios_patch_is_refused_and_nothing_is_pending(client: Any, uuid: str,
                                                            body: Any, status: int,
                                                            why: str) -> None:
    settings = f"/redfish/v1/Systems/{uuid}/BIOS/Settings"
    good = {"Attributes": {"ProcTurboMode": "Disabled", "NumCores": "8"}}
    # A bad attribute next to good ones: the PATCH is refused whole.
    mixed = {"Attributes": {**good["Attributes"], **body["Attributes"]}} \
        if isinstance(body, dict) and isinstance(body.get("Attributes"), dict) \
        and body["Attributes"] else body
    answer = client.patch(settings, json=mixed)
    assert answer.status_code == status
    assert why in answer.json["error"]["message"]
    assert _attributes(client, uuid, "BIOS/Settings") == _attributes(client, uuid)


def test_a_system_by_name_is_redirected_as_sushy_does(client: Any, uuid: str) -> None:
    answer = client.get("/redfish/v1/Systems/test/BIOS/Settings")
    assert answer.status_code == 307
    assert answer.headers["Location"].endswith(f"/redfish/v1/Systems/{uuid}/BIOS/Settings")
    answer = client.patch("/redfish/v1/Systems/other/BIOS/Settings",
                          json={"Attributes": {"ProcTurboMode": "Disabled"}})
    assert answer.status_code == 404  # not the system this BMC manages


# ---------------------------------------------------------------------------------------------
# State


def test_state_survives_a_restart(app: Any, client: Any, uuid: str, lab: lab_bmc.LabBmc,
                                  files: str) -> None:
    assert _update(client, f"{files}/firmware/bmc-2.00.json")["TaskState"] == "Completed"
    assert _update(client, f"{files}/firmware/bios-2.0.0.json")["TaskState"] == "Completed"
    assert client.patch(f"/redfish/v1/Systems/{uuid}/BIOS/Settings",
                        json={"Attributes": {"NumCores": 4}}).status_code == 204
    assert lab.state_file is not None
    saved = json.loads(lab.state_file.read_text())
    assert saved["bmc_firmware"] == "2.00"
    assert saved["pending_bios"] == {uuid: {"NumCores": 4}}
    assert saved["pending_bios_version"] == {uuid: "2.0.0"}
    assert not list(lab.state_file.parent.glob(".bmc-state.json.*"))  # no temporary left
    # A task running when the emulator stopped, and a configured version the state overrides.
    saved["tasks"]["7"] = {"@odata.id": "/redfish/v1/TaskService/Tasks/7", "Id": "7",
                           "TaskState": "Running", "TaskStatus": "OK", "PercentComplete": 50,
                           "Messages": []}
    lab.state_file.write_text(json.dumps(saved))
    _install(app, lab.state_file, **{bmc.FIRMWARE_KEY: "1.50"})
    client = app.test_client()
    assert _versions(client) == {"BMC": "2.00", "BIOS": "1.0.0"}
    interrupted = _get(client, "/redfish/v1/TaskService/Tasks/7")
    assert (interrupted["TaskState"], interrupted["TaskStatus"]) == ("Exception", "Critical")
    assert "interrupted" in interrupted["Messages"][0]["Message"]
    assert _attributes(client, uuid, "BIOS/Settings")["NumCores"] == 4
    _reset(client, uuid, "GracefulRestart")
    assert _versions(client)["BIOS"] == "2.0.0"
    assert _attributes(client, uuid)["NumCores"] == "4"  # sushy-tools' driver keeps text
    # A new task takes the next number, not one the restart forgot.
    task = _update(client, f"{files}/firmware/readme.txt")
    assert int(task["Id"]) == saved["next_task"]


def test_an_unreadable_state_file_starts_afresh(app: Any, lab: lab_bmc.LabBmc,
                                                tmp_path: Path) -> None:
    state = tmp_path / "broken.json"
    state.write_text('{"bmc_firmware": ["not", "a", "version"]}')
    fresh = _install(app, state, **{bmc.FIRMWARE_KEY: "5.0"})
    assert fresh.state.bmc_firmware == "5.0" and fresh.state.tasks == {}


@pytest.mark.parametrize("key, value", [(bmc.FIRMWARE_KEY, " 1.0"), (bmc.FIRMWARE_KEY, 2),
                                        (bmc.TASK_SECONDS_KEY, -1),
                                        (bmc.TASK_SECONDS_KEY, "1")])
def test_a_bad_configuration_is_refused(app: Any, lab: lab_bmc.LabBmc, tmp_path: Path,
                                        key: str, value: Any) -> None:
    with pytest.raises(ValueError, match=key):
        _install(app, tmp_path / "state.json", **{key: value})


# ---------------------------------------------------------------------------------------------
# What the lab runs


def test_the_lab_launches_the_stand_in_with_its_state_beside_the_config(tmp_path: Path) -> None:
    vm = vrack.plan(1, vrack.LAB)[0]
    text = bmc.emulator_config(vm, Path("/c.pem"), Path("/c.key"), Path("/auth"),
                               state=Path("/vm/bmc-state.json"), bmc_firmware="1.20")
    config: dict[str, Any] = {}
    exec(text, config)
    assert (config[bmc.STATE_KEY], config[bmc.FIRMWARE_KEY]) == ("/vm/bmc-state.json", "1.20")
    assert bmc.STATE_KEY not in bmc.emulator_config(vm, Path("/c"), Path("/k"), Path("/a"))
    command = bmc.emulator_command(Path("/vm/bmc.conf"))
    assert command == [sys.executable, "-m", "racklift.lab.vrack.lab_bmc",
                       "--config", "/vm/bmc.conf"]
    assert lab_bmc.__name__ == bmc.LAB_BMC_MODULE
    assert bmc.LAB_BMC in b"\0".join(c.encode() for c in command)  # how the lab finds it


def test_the_program_serves_sushy_tools_with_the_stand_in(tmp_path: Path) -> None:
    """`python -m racklift.lab.vrack.lab_bmc --config ...` as the lab runs it: sushy-tools'
    configuration, its basic auth in front of the stand-in's paths too."""
    port = _free_port()
    auth = tmp_path / "htpasswd"
    auth.write_text(f"admin:{bcrypt.hashpw(b'secret', bcrypt.gensalt(4)).decode()}\n")
    config = tmp_path / "bmc.conf"
    config.write_text(f"SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\n"
                      f"SUSHY_EMULATOR_LISTEN_PORT = {port}\n"
                      f"SUSHY_EMULATOR_AUTH_FILE = {str(auth)!r}\n"
                      "SUSHY_EMULATOR_LIBVIRT_URI = 'test:///default'\n"
                      f"{bmc.STATE_KEY} = {str(tmp_path / 'state.json')!r}\n"
                      f"{bmc.FIRMWARE_KEY} = '4.5'\n")
    source = str(Path(racklift.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [source, *filter(None, [os.environ.get("PYTHONPATH")])])}
    log = tmp_path / "bmc.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(bmc.emulator_command(config), stdout=out,
                                   stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if requests.get(f"{url}/redfish/v1", timeout=1).ok:
                    break
            except requests.RequestException:
                pass
            assert process.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.1)
        assert requests.get(f"{url}{INVENTORY}/BMC", timeout=5).status_code == 401
        answer = requests.get(f"{url}{INVENTORY}/BMC", auth=("admin", "secret"), timeout=5)
        assert answer.status_code == 200 and answer.json()["Version"] == "4.5"
        systems = requests.get(f"{url}/redfish/v1/Systems", auth=("admin", "secret"),
                               timeout=5).json()
        assert systems["Members@odata.count"] == 1  # sushy-tools' own paths as before
    finally:
        process.terminate()
        process.wait(timeout=10)


# racklift's --apply-firmware (racklift.bmc.apply, through racklift's Redfish client over HTTP)
# against the stand-in: sushy-tools' real app and libvirt driver, served by werkzeug.


@pytest.fixture
def served(app: Any, lab: lab_bmc.LabBmc) -> Iterator[RedfishClient]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    endpoint = BmcEndpoint("lab-vm", "127.0.0.1", server.port, scheme="http")
    try:
        with RedfishClient(endpoint, BmcCredentials("admin", "unused"), timeout=(2, 10)) as c:
            yield c
    finally:
        server.shutdown()


def _plan(bmc: RedfishClient, context: dict[str, Any]) -> tuple[Any, Any]:
    pins = parse(context)
    assert not isinstance(pins, list), pins
    return pins, apply_plan(pins, read_inventory(bmc.get))


PINS = {"firmware": {"BMC": "2.00", "BIOS": "2.0.0"},
        "firmware_images": {"BMC": "bmc-2.00.json", "BIOS": "bios-2.0.0.json"},
        "bios": {"ProcTurboMode": "Disabled"}}


@pytest.mark.parametrize("power", ["On", "Off"])
def test_apply_brings_the_bmc_to_its_pins_and_leaves_the_power_as_it_was(
        served: RedfishClient, app: Any, uuid: str, files: str, power: str) -> None:
    app.systems.set_power_state(uuid, "On" if power == "On" else "ForceOff")
    assert served.power_state() == power
    pins, plan = _plan(served, PINS)
    assert [u.name for u in plan.updates] == ["BMC", "BIOS"]
    assert plan.settings == (("ProcTurboMode", "Disabled", "Enabled"),)
    changes = apply(served, pins, plan, f"{files}/firmware/".__add__, deadline=60, poll=0.1)
    assert [(c.what, c.found, c.wanted) for c in changes] == [
        ("firmware BMC", "1.00", "2.00"), ("firmware BIOS", "1.0.0", "2.0.0"),
        ("BIOS attribute ProcTurboMode", '"Enabled"', '"Disabled"')]
    assert TASK_PATH.search(changes[0].how)  # the task it followed
    assert compare(pins, read_inventory(served.get)) == []
    assert served.power_state() == power  # a host that was off was on for the reboot alone


def test_apply_fails_on_a_failing_update_task_with_its_message(
        served: RedfishClient, files: str) -> None:
    pins, plan = _plan(served, {"firmware": {"BMC": "9.9"},
                                "firmware_images": {"BMC": "bmc-fails.json"},
                                "bios": {"ProcTurboMode": "Disabled"}})
    with pytest.raises(ApplyError, match=r"firmware BMC: the BMC's update task "
                       r"/redfish/v1/TaskService/Tasks/[0-9]+ ended Exception: flash write "
                       r"failed at 37%") as caught:
        apply(served, pins, plan, f"{files}/firmware/".__add__, deadline=60, poll=0.1)
    assert caught.value.done == []
    # Nothing after the failed update: the BIOS setting was not even sent.
    assert _bios_settings(served)["ProcTurboMode"] == "Enabled"


def test_apply_that_does_not_reach_the_pins_says_what_is_still_off(
        served: RedfishClient, files: str) -> None:
    # The image is the BMC's 2.00, the pin wants 2.01: the task completes, the version is off.
    pins, plan = _plan(served, {"firmware": {"BMC": "2.01"},
                                "firmware_images": {"BMC": "bmc-2.00.json"}})
    with pytest.raises(ApplyError, match=r"after the changes, the BMC still reports firmware "
                       r"BMC: found 2.00, wanted 2.01") as caught:
        apply(served, pins, plan, f"{files}/firmware/".__add__, deadline=1, poll=0.1)
    assert [c.what for c in caught.value.done] == ["firmware BMC"]


def _bios_settings(bmc: RedfishClient) -> dict[str, Any]:
    system = bmc.system()
    return dict(bmc.get(system["Bios"]["@odata.id"] + "/Settings")["Attributes"])


def test_a_task_fetches_in_the_network_namespace_it_is_given(app: Any, uuid: str,
                                                             tmp_path: Path) -> None:
    """The lab's BMCs listen on the host's loopback, the boot server is in the rack's
    namespace: the task's thread fetches there (NETNS_KEY), nothing else moves."""
    ns = f"racklift-labbmc-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    server = None
    try:
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"], check=True)
        (tmp_path / "bmc-3.00.json").write_bytes(image("BMC", "3.00"))
        port = _free_port()
        server = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-m",
                                   "http.server", str(port), "--bind", "127.0.0.1"],
                                  cwd=tmp_path, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        uri = f"http://127.0.0.1:{port}/bmc-3.00.json"
        for _ in range(100):  # until it listens, inside the namespace
            if subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c",
                               f"import socket; socket.create_connection(('127.0.0.1', {port}))"],
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        with pytest.raises(requests.ConnectionError):  # not on the host's loopback
            requests.get(uri, timeout=2)
        _install(app, tmp_path / "state.json", **{bmc.NETNS_KEY: ns})
        task = _update(app.test_client(), uri)
        assert task["TaskState"] == "Completed", task["Messages"]
        assert _versions(app.test_client())["BMC"] == "3.00"
    finally:
        if server is not None:
            server.terminate()
            server.wait()
        subprocess.run(["ip", "netns", "del", ns], check=False)
        app.config.pop(bmc.NETNS_KEY, None)
