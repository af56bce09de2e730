"""racklift.bmc.redfish: payload parsing (sushy-tools, Dell iDRAC and HPE iLO shapes), where
endpoint and credentials come from, and the client's retries and errors against a local
stand-in BMC (a real HTTPS server on loopback with scripted answers)."""

from __future__ import annotations

import json
import logging
import re
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from racklift.bmc.payloads import (
    error_detail,
    parse_boot,
    parse_members,
    parse_power_state,
    parse_reset_action,
)
from racklift.bmc.redfish import (
    BmcCredentials,
    BmcEndpoint,
    BmcError,
    RedfishClient,
    backoff,
    client_for,
    credentials_for,
    endpoint_for,
    endpoint_from_url,
    retry_after,
)
from racklift.errors import RackliftError
from standin_bmc import StandinBmc, serving

SECRET = "s3cret-Pa55-word"

# What sushy-tools 2.2 (libvirt driver) answers for a UEFI domain, trimmed to what matters.
SUSHY_SYSTEMS = {
    "@odata.type": "#ComputerSystemCollection.ComputerSystemCollection",
    "Name": "Computer System Collection", "Members@odata.count": 1,
    "Members": [{"@odata.id": "/redfish/v1/Systems/8030b1a3-477e-54b6-8cc1-1407940cfd07"}],
    "@odata.id": "/redfish/v1/Systems",
}
SUSHY_SYSTEM = {
    "@odata.type": "#ComputerSystem.v1_13_0.ComputerSystem",
    "Id": "8030b1a3-477e-54b6-8cc1-1407940cfd07", "Name": "vm-v91-01",
    "PowerState": "Off",
    "Boot": {
        "BootSourceOverrideEnabled": "Continuous",
        "BootSourceOverrideTarget": "Hdd",
        "BootSourceOverrideTarget@Redfish.AllowableValues": ["Pxe", "Cd", "Hdd", "UefiHttp"],
        "BootSourceOverrideMode": "UEFI",
        "UefiTargetBootSourceOverride": "/0x31/0x33/0x01/0x01",
    },
    "Actions": {"#ComputerSystem.Reset": {
        "target": "/redfish/v1/Systems/8030b1a3-477e-54b6-8cc1-1407940cfd07/Actions/"
                  "ComputerSystem.Reset",
        "ResetType@Redfish.AllowableValues": ["On", "ForceOff", "GracefulShutdown",
                                              "GracefulRestart", "ForceRestart", "Nmi",
                                              "ForceOn"]}},
    "@odata.id": "/redfish/v1/Systems/8030b1a3-477e-54b6-8cc1-1407940cfd07",
}
# Dell iDRAC 9 shape (Dell's Redfish API guide): its own system id, PushPowerButton.
IDRAC_SYSTEM = {
    "@odata.id": "/redfish/v1/Systems/System.Embedded.1", "Id": "System.Embedded.1",
    "PowerState": "On",
    "Boot": {"BootSourceOverrideEnabled": "Once", "BootSourceOverrideTarget": "Pxe",
             "BootSourceOverrideMode": "UEFI",
             "BootSourceOverrideTarget@Redfish.AllowableValues": [
                 "None", "Pxe", "Floppy", "Cd", "Hdd", "BiosSetup", "Utilities", "UefiTarget",
                 "SDCard", "UefiHttp"]},
    "Actions": {"#ComputerSystem.Reset": {
        "target": "/redfish/v1/Systems/System.Embedded.1/Actions/ComputerSystem.Reset",
        "ResetType@Redfish.AllowableValues": ["On", "ForceOff", "ForceRestart",
                                              "GracefulRestart", "GracefulShutdown",
                                              "PushPowerButton", "Nmi", "PowerCycle"]}},
}
# HPE iLO 5 shape: system "1", override disabled, legacy BIOS mode.
ILO_SYSTEM = {
    "@odata.id": "/redfish/v1/Systems/1/", "Id": "1", "PowerState": "Off",
    "Boot": {"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None",
             "BootSourceOverrideMode": "Legacy"},
    "Actions": {"#ComputerSystem.Reset": {
        "target": "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset/",
        "ResetType@Redfish.AllowableValues": ["On", "ForceOff", "GracefulShutdown",
                                              "ForceRestart", "Nmi", "PushPowerButton",
                                              "GracefulRestart"]}},
}
SUSHY_ERROR = {"error": {"code": "Base.1.0.GeneralError", "message": "boom",
                         "@Message.ExtendedInfo": [{"MessageId": "Base.1.0.GeneralError"}]}}
EXTENDED_ERROR = {"error": {"code": "Base.1.8.GeneralError", "message": "See ExtendedInfo",
                            "@Message.ExtendedInfo": [
                                {"MessageId": "Base.1.8.PropertyValueNotInList",
                                 "Message": "The value Foo for BootSourceOverrideTarget is "
                                            "not in the list of acceptable values."},
                                {"Message": "Retry the operation."}]}}


# ---------------------------------------------------------------------------------------------
# Parsing


def test_members_of_each_vendor_shape():
    assert parse_members(SUSHY_SYSTEMS) == [
        "/redfish/v1/Systems/8030b1a3-477e-54b6-8cc1-1407940cfd07"]
    assert parse_members({"Members": [{"@odata.id": "/redfish/v1/Systems/System.Embedded.1"}],
                          "Members@odata.count": 1}) == ["/redfish/v1/Systems/System.Embedded.1"]
    assert parse_members({"Members": []}) == []
    assert parse_members({}) == []


@pytest.mark.parametrize("payload, state", [(SUSHY_SYSTEM, "Off"), (IDRAC_SYSTEM, "On"),
                                            (ILO_SYSTEM, "Off")])
def test_power_state(payload, state):
    assert parse_power_state(payload) == state


def test_power_state_missing_is_an_error():
    with pytest.raises(ValueError, match="PowerState"):
        parse_power_state({"Id": "1"})


def test_reset_action_lists_what_the_bmc_allows():
    sushy = parse_reset_action(SUSHY_SYSTEM)
    assert sushy.target.endswith("/Actions/ComputerSystem.Reset")
    assert "ForceRestart" in sushy.allowed and "PushPowerButton" not in sushy.allowed
    assert "PushPowerButton" in parse_reset_action(IDRAC_SYSTEM).allowed
    assert parse_reset_action(ILO_SYSTEM).target == \
        "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset/"
    with pytest.raises(ValueError, match="Reset"):
        parse_reset_action({"Actions": {}})


def test_boot_override_shapes():
    sushy = parse_boot(SUSHY_SYSTEM)
    assert (sushy.target, sushy.enabled, sushy.mode) == ("Hdd", "Continuous", "UEFI")
    assert sushy.allowed_targets == ("Pxe", "Cd", "Hdd", "UefiHttp")
    idrac = parse_boot(IDRAC_SYSTEM)
    assert (idrac.target, idrac.enabled) == ("Pxe", "Once") and "UefiTarget" in \
        idrac.allowed_targets
    ilo = parse_boot(ILO_SYSTEM)
    assert (ilo.target, ilo.enabled, ilo.mode, ilo.allowed_targets) == \
        ("None", "Disabled", "Legacy", ())
    assert parse_boot({}).target is None


def test_error_detail_prefers_extended_messages():
    assert error_detail(EXTENDED_ERROR) == ("The value Foo for BootSourceOverrideTarget is not "
                                            "in the list of acceptable values.; Retry the "
                                            "operation.")
    assert error_detail(SUSHY_ERROR) == "boom"  # no Message in the extended info
    assert error_detail("plain text") == "plain text"


def test_retry_after_seconds_and_dates():
    assert retry_after("5") == 5.0
    assert retry_after(None) is None and retry_after("soon") is None
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after(later, now=now.timestamp()) == pytest.approx(30.0)
    earlier = format_datetime(now - timedelta(seconds=30), usegmt=True)
    assert retry_after(earlier, now=now.timestamp()) == 0.0


def test_backoff_doubles_up_to_the_cap():
    assert [backoff(n, 0.5, 3.0) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


# ---------------------------------------------------------------------------------------------
# Endpoint and credentials


def test_endpoint_from_the_oob_ip_and_vars(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    endpoint = endpoint_for("gpu-0001", "10.32.0.5/16")
    assert (endpoint.url, endpoint.verify) == ("https://10.32.0.5:443", True)
    lab = endpoint_for("vm-v01-01", "127.0.77.1/32",
                       {"racklift_bmc_port": "8443", "racklift_bmc_ca_bundle": str(ca)})
    assert (lab.url, lab.verify) == ("https://127.0.77.1:8443", str(ca))
    assert endpoint_for("h", "fd00::5/64").url == "https://[fd00::5]:443"
    assert endpoint_for("h", "10.0.0.1/24", environ={"RACKLIFT_BMC_CA_BUNDLE": str(ca)}) \
        .verify == str(ca)


def test_endpoint_from_an_operators_url(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    assert endpoint_from_url("http://127.0.0.1:8000").url == "http://127.0.0.1:8000"
    assert endpoint_from_url("http://bmc.example/").url == "http://bmc.example:80"
    secure = endpoint_from_url("https://[fd00::5]", str(ca))
    assert (secure.url, secure.verify) == ("https://[fd00::5]:443", str(ca))


@pytest.mark.parametrize(("url", "ca", "says"), [
    ("ftp://bmc", None, "is not http(s)://host[:port]"),
    ("bmc.example", None, "is not http(s)://host[:port]"),
    ("https://bmc:99999", None, "does not parse"),
    ("https://bmc/redfish/v1", None, "has a path, query or fragment"),
    ("https://bmc?x=1", None, "has a path, query or fragment"),
    ("http://bmc", "/etc/hostname", "a CA (--ca) is for an https URL"),
    ("https://bmc", "/nonexistent/ca.pem", "does not exist"),
])
def test_a_bad_url_says_what_to_give(url, ca, says):
    with pytest.raises(BmcError, match=re.escape(says)):
        endpoint_from_url(url, ca)


@pytest.mark.parametrize("url", [f"https://admin:{SECRET}@bmc", f"https://admin:{SECRET}@bmc:x",
                                 "https://admin@bmc"])
def test_credentials_in_a_url_are_refused_and_never_echoed(url):
    with pytest.raises(BmcError, match="RACKLIFT_BMC_PASSWORD") as caught:
        endpoint_from_url(url)
    assert SECRET not in str(caught.value) and "admin" not in str(caught.value)


def test_certificate_checks_are_off_only_when_asked():
    assert endpoint_for("h", "10.0.0.1/24", {"racklift_bmc_insecure": "no"}).verify is True
    assert endpoint_for("h", "10.0.0.1/24", {"racklift_bmc_insecure": True}).verify is False


@pytest.mark.parametrize("oob, hostvars, field", [
    (None, {}, "oob_ip"),
    ("10.0.0.1/24", {"racklift_bmc_port": "https"}, "racklift_bmc_port"),
    ("10.0.0.1/24", {"racklift_bmc_ca_bundle": "/nonexistent/ca.pem"}, "racklift_bmc_ca_bundle"),
])
def test_bad_endpoint_input_names_host_and_field(oob, hostvars, field):
    with pytest.raises(BmcError) as caught:
        endpoint_for("gpu-0042", oob, hostvars, environ={})
    assert "gpu-0042" in str(caught.value) and field in str(caught.value)
    assert isinstance(caught.value, RackliftError)


def test_credentials_host_vars_win_over_the_environment():
    env = {"RACKLIFT_BMC_USERNAME": "env-user", "RACKLIFT_BMC_PASSWORD": "env-pass"}
    assert credentials_for("h", {"racklift_bmc_username": "vault-user",
                                 "racklift_bmc_password": "vault-pass"}, env) == \
        BmcCredentials("vault-user", "vault-pass")
    assert credentials_for("h", {"racklift_bmc_username": "only-user"}, env) == \
        BmcCredentials("env-user", "env-pass")


def test_missing_credentials_say_where_to_put_them():
    with pytest.raises(BmcError) as caught:
        credentials_for("gpu-0007", {}, {"RACKLIFT_BMC_USERNAME": "admin"})
    message = str(caught.value)
    assert "gpu-0007" in message and "RACKLIFT_BMC_PASSWORD" in message
    assert "racklift_bmc_password" in message


def test_client_for_a_host_from_its_vars_never_shows_the_password():
    client = client_for("gpu-0003", "10.32.0.3/16", {"racklift_bmc_username": "admin",
                                                     "racklift_bmc_password": SECRET}, {})
    assert repr(client) == "RedfishClient(gpu-0003 at https://10.32.0.3:443)"
    with pytest.raises(BmcError, match="gpu-0003: no BMC credentials"):
        client_for("gpu-0003", "10.32.0.3/16", {}, {})


def test_credentials_never_show_the_password():
    credentials = BmcCredentials("admin", SECRET)
    assert SECRET not in repr(credentials) and SECRET not in str(credentials)
    assert "admin" in str(credentials)


# ---------------------------------------------------------------------------------------------
# The client against a local stand-in BMC (HTTPS on loopback, scripted answers)



@pytest.fixture
def standin(tls) -> Iterator[StandinBmc]:
    server = StandinBmc(*tls)
    server.resources = {"/redfish/v1/Systems": {"Members": [
        {"@odata.id": "/redfish/v1/Systems/System.Embedded.1"}]},
        "/redfish/v1/Systems/System.Embedded.1": IDRAC_SYSTEM}
    with serving(server):
        yield server


def _client(server: StandinBmc, ca: Path | None, waits: list[float],
            password: str = SECRET) -> RedfishClient:
    endpoint = BmcEndpoint("gpu-0042", "127.0.0.1", server.server_address[1], ca)
    return RedfishClient(endpoint, BmcCredentials("admin", password), timeout=(2, 5),
                         sleep=waits.append)


def test_discovers_the_system_and_resets_with_an_allowed_type(standin, tls):
    waits: list[float] = []
    client = _client(standin, tls[0], waits)
    assert client.system_path() == "/redfish/v1/Systems/System.Embedded.1"
    assert client.power_state() == "On"
    client.reset("PushPowerButton")
    assert standin.received[-1] == (
        "POST", "/redfish/v1/Systems/System.Embedded.1/Actions/ComputerSystem.Reset",
        {"ResetType": "PushPowerButton"})
    assert waits == []


def test_a_reset_type_the_bmc_does_not_offer_is_refused_before_sending(standin, tls):
    client = _client(standin, tls[0], [])
    with pytest.raises(BmcError, match="does not offer ResetType GracefulReboot") as caught:
        client.reset("GracefulReboot")
    assert "PushPowerButton" in str(caught.value)  # says what it does offer
    assert all(method != "POST" for method, _, _ in standin.received)


def _with_reset(action: dict) -> dict:
    system = json.loads(json.dumps(IDRAC_SYSTEM))
    system["Actions"]["#ComputerSystem.Reset"] = action
    return system


RESET = "/redfish/v1/Systems/System.Embedded.1/Actions/ComputerSystem.Reset"
RESET_INFO = "/redfish/v1/Systems/System.Embedded.1/ResetActionInfo"


def test_reset_types_listed_only_in_an_action_info_are_read_from_it(standin, tls):
    """Supermicro, the DGX's AMI BMC, Gigabyte and OpenBMC list their reset types in the
    action's @Redfish.ActionInfo, not inline."""
    standin.resources[IDRAC_SYSTEM["@odata.id"]] = _with_reset(
        {"target": RESET, "@Redfish.ActionInfo": RESET_INFO})
    standin.resources[RESET_INFO] = {"Parameters": [
        {"Name": "Other", "AllowableValues": ["GracefulReboot"]},
        {"Name": "ResetType", "AllowableValues": ["On", "ForceOff", "ForceRestart", 7]}]}
    client = _client(standin, tls[0], [])
    with pytest.raises(BmcError, match="does not offer ResetType GracefulReboot") as caught:
        client.reset("GracefulReboot")
    assert "use one it offers: On, ForceOff, ForceRestart" in str(caught.value)
    client.reset("ForceRestart")
    assert standin.received[-1] == ("POST", RESET, {"ResetType": "ForceRestart"})


def test_an_action_info_that_cannot_be_read_or_is_elsewhere_leaves_the_choice_to_the_bmc(
        standin, tls):
    for info in ("/redfish/v1/Systems/System.Embedded.1/Missing", "https://elsewhere/info"):
        standin.resources[IDRAC_SYSTEM["@odata.id"]] = _with_reset(
            {"target": RESET, "@Redfish.ActionInfo": info})
        standin.received.clear()
        _client(standin, tls[0], []).reset("GracefulReboot")
        assert standin.received[-1] == ("POST", RESET, {"ResetType": "GracefulReboot"})
        assert all("elsewhere" not in path for _, path, _ in standin.received)


@pytest.mark.parametrize("target", ["https://elsewhere.example/reset", "/redfish/v1/../admin",
                                    "//elsewhere/reset", 3])
def test_a_reset_target_that_is_not_a_path_on_the_bmc_is_never_posted(standin, tls, target):
    standin.resources[IDRAC_SYSTEM["@odata.id"]] = _with_reset(
        {"target": target, "ResetType@Redfish.AllowableValues": ["On"]})
    with pytest.raises(BmcError, match=r"#ComputerSystem\.Reset target"):
        _client(standin, tls[0], []).reset("On")
    assert all(method != "POST" for method, _, _ in standin.received)


def test_503_with_retry_after_is_honoured_then_succeeds(standin, tls):
    waits: list[float] = []
    standin.script = [(503, {"Retry-After": "3"}, None), (502, {}, None)]
    assert _client(standin, tls[0], waits).power_state() == "On"
    assert waits == [3.0, 1.0]  # Retry-After, then the backoff of the second attempt


def test_persistent_5xx_ends_in_a_clear_error_after_bounded_retries(standin, tls):
    waits: list[float] = []
    standin.script = [(500, {}, SUSHY_ERROR)] * 4
    with pytest.raises(BmcError) as caught:
        _client(standin, tls[0], waits).power_state()
    message = str(caught.value)
    assert "gpu-0042" in message and "HTTP 500 4 times" in message
    assert waits == [0.5, 1.0, 2.0]


def test_rejected_credentials_name_the_source_and_never_the_password(standin, tls, caplog):
    caplog.set_level(logging.DEBUG)
    standin.script = [(401, {"WWW-Authenticate": 'Basic realm="BMC"'}, None)]
    with pytest.raises(BmcError) as caught:
        _client(standin, tls[0], []).power_state()
    message = str(caught.value)
    assert "gpu-0042" in message and "127.0.0.1" in message and "credentials" in message
    assert "RACKLIFT_BMC_PASSWORD" in message
    for text in (message, repr(caught.value), caplog.text, repr(_client(standin, tls[0], []))):
        assert SECRET not in text


def test_a_bmc_that_refuses_basic_auth_is_asked_for_a_session_given_back_at_close(
        standin, tls, caplog):
    caplog.set_level(logging.DEBUG)
    session = "/redfish/v1/SessionService/Sessions/7"
    standin.script = [(401, {}, None),
                      (201, {"X-Auth-Token": "tok-123", "Location": session}, {"Id": "7"})]
    with _client(standin, tls[0], []) as client:
        assert client.power_state() == "On"
    assert [(m, p) for m, p, _ in standin.received] == [
        ("GET", "/redfish/v1/Systems"), ("POST", "/redfish/v1/SessionService/Sessions"),
        ("GET", "/redfish/v1/Systems"), ("GET", "/redfish/v1/Systems/System.Embedded.1"),
        ("DELETE", session)]
    assert standin.received[1][2] == {"UserName": "admin", "Password": SECRET}
    # Basic auth until refused, then the session's token alone, to the end.
    assert list(zip(standin.users, standin.tokens, strict=True)) == [
        ("admin", None), ("", None), ("", "tok-123"), ("", "tok-123"), ("", "tok-123")]
    assert "using a Redfish session" in caplog.text
    assert SECRET not in caplog.text and "tok-123" not in caplog.text


def test_a_session_refused_too_is_a_credentials_error(standin, tls):
    standin.script = [(401, {}, None), (401, {}, None)]
    with pytest.raises(BmcError, match=r"rejected the credentials \(HTTP 401\)"):
        _client(standin, tls[0], []).power_state()
    assert [(m, p) for m, p, _ in standin.received] == [
        ("GET", "/redfish/v1/Systems"), ("POST", "/redfish/v1/SessionService/Sessions")]


def test_a_bmc_error_body_is_shown(standin, tls):
    standin.script = [(400, {}, EXTENDED_ERROR)]
    with pytest.raises(BmcError, match="not in the list of acceptable values"):
        _client(standin, tls[0], []).set_boot_override("Pxe")


def test_boot_override_is_read_back(standin, tls, caplog):
    system = json.loads(json.dumps(IDRAC_SYSTEM))
    system["Boot"]["BootSourceOverrideTarget"] = "Hdd"
    standin.resources["/redfish/v1/Systems/System.Embedded.1"] = system
    client = _client(standin, tls[0], [])
    with pytest.raises(BmcError, match="reads back target Hdd"):
        client.set_boot_override("Pxe", "Once")
    assert ("PATCH", "/redfish/v1/Systems/System.Embedded.1",
            {"Boot": {"BootSourceOverrideTarget": "Pxe",
                      "BootSourceOverrideEnabled": "Once"}}) in standin.received
    assert client.set_boot_override("Hdd", "Continuous").target == "Hdd"
    assert "reads back Once, not Continuous" in caplog.text  # the quirk is said, not hidden


def test_a_boot_target_the_bmc_does_not_offer_is_refused_before_patching(standin, tls):
    with pytest.raises(BmcError, match="does not offer boot target Usb") as caught:
        _client(standin, tls[0], []).set_boot_override("Usb")  # iDRAC's list has no Usb
    assert "UefiHttp" in str(caught.value)
    assert all(method != "PATCH" for method, _, _ in standin.received)


def test_an_override_the_bmc_does_not_allow_is_refused_and_the_disk_boot_falls_back(
        standin, tls):
    """Lenovo's XCC allows Once and Disabled only (tests/fixtures/real/redfish)."""
    system = json.loads(json.dumps(IDRAC_SYSTEM))
    system["Boot"]["BootSourceOverrideEnabled@Redfish.AllowableValues"] = ["Once", "Disabled"]
    standin.resources["/redfish/v1/Systems/System.Embedded.1"] = system
    client = _client(standin, tls[0], [])
    with pytest.raises(BmcError, match="does not offer override Continuous") as caught:
        client.set_boot_override("Hdd", "Continuous")
    assert "use one it offers: Once, Disabled" in str(caught.value)
    assert all(method != "PATCH" for method, _, _ in standin.received)
    system["Boot"]["BootSourceOverrideTarget"] = "Hdd"  # what the BMC reads back after
    client.boot_from_disk()
    assert ("PATCH", "/redfish/v1/Systems/System.Embedded.1",
            {"Boot": {"BootSourceOverrideTarget": "Hdd",
                      "BootSourceOverrideEnabled": "Once"}}) in standin.received


def test_bad_boot_override_values_are_refused_locally(standin, tls):
    with pytest.raises(BmcError, match="target 'Network'"):
        _client(standin, tls[0], []).set_boot_override("Network")
    assert standin.received == []


def test_an_untrusted_certificate_is_an_error_not_a_retry(standin):
    waits: list[float] = []
    with pytest.raises(BmcError, match="certificate") as caught:
        _client(standin, None, waits).power_state()  # the system trust store: not our CA
    assert "racklift_bmc_ca_bundle" in str(caught.value)
    assert waits == []


def test_a_bmc_that_accepts_but_never_answers_times_out_per_attempt():
    # A listening socket nobody accepts from: TCP connects, TLS never starts (a hung BMC).
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        endpoint = BmcEndpoint("gpu-0009", "127.0.0.1", hung.getsockname()[1])
        waits: list[float] = []
        client = RedfishClient(endpoint, BmcCredentials("admin", SECRET), timeout=(0.3, 0.3),
                               attempts=2, sleep=waits.append)
        started = time.monotonic()
        with pytest.raises(BmcError) as caught:
            client.power_state()
    assert time.monotonic() - started < 3
    assert "did not answer in time, 2 attempts" in str(caught.value)
    assert "oob_ip" in str(caught.value) and waits == [0.5]


def test_a_get_reads_a_json_object_up_to_its_cap(standin, tls, monkeypatch):
    client = _client(standin, tls[0], [])
    standin.resources["/redfish/v1"] = {"Id": "RootService", "Name": "x" * 3000}
    assert client.get("/redfish/v1")["Id"] == "RootService"
    monkeypatch.setattr("racklift.bmc.redfish.MAX_ANSWER", 1000)
    with pytest.raises(BmcError, match="sent more than 1000 bytes for /redfish/v1"):
        client.get("/redfish/v1")
    standin.resources["/redfish/v1"] = ["a", "list"]
    with pytest.raises(BmcError, match="not a JSON object"):
        client.get("/redfish/v1")


def test_more_than_one_system_is_refused(standin, tls):
    standin.resources["/redfish/v1/Systems"] = {"Members": [
        {"@odata.id": "/redfish/v1/Systems/1"}, {"@odata.id": "/redfish/v1/Systems/2"}]}
    with pytest.raises(BmcError, match="manages 2 systems"):
        _client(standin, tls[0], []).power_state()
