"""Redfish BMC control: power state, reset, boot source override, on `requests`.

One `RedfishClient` talks to one BMC that manages one system, as a server's BMC does. Every
failure becomes a `BmcError` naming the host, the BMC address, the operation and what to do;
credentials never appear in messages, reprs or logs.

Where things come from (`endpoint_for`, `credentials_for`):
- BMC address: the device's OOB IP in NetBox; port 443 unless the host's vars say otherwise
  (`racklift_bmc_port`; the lab's emulators listen on 8443).
- CA bundle: `racklift_bmc_ca_bundle` host var or `RACKLIFT_BMC_CA_BUNDLE`; else the system
  trust store. Certificate checks are never skipped silently: only an explicit
  `racklift_bmc_insecure: true` turns them off, and that is logged.
- Authentication: HTTP basic auth; a BMC that refuses it (401) is asked once for a Redfish
  session (SessionService) with the same credentials, its X-Auth-Token sent from then on and
  the session deleted at close (BMCs have few session slots).
- Credentials: the host's Ansible vars (`racklift_bmc_username` / `racklift_bmc_password`,
  normally from Ansible Vault) when the caller passes them, else the environment
  (`RACKLIFT_BMC_USERNAME` / `RACKLIFT_BMC_PASSWORD`).

Vendor quirks (why the client reads back and never assumes):
- sushy-tools' libvirt driver (the lab's BMC emulator) applies a boot override as
  "Continuous" whatever was asked (it rewrites the domain's boot order) and always reports
  "Continuous": after a network deploy, always set the boot target back to Hdd.
- System ids differ by vendor (Dell iDRAC `System.Embedded.1`, HPE iLO and Supermicro `1`,
  sushy-tools the libvirt domain's UUID or name): discover them from /redfish/v1/Systems.
- Reset types differ (iDRAC and iLO offer `PushPowerButton`; not every BMC offers
  `GracefulRestart` or `ForceOn`): the client only sends a type the BMC lists in
  `ResetType@Redfish.AllowableValues`, and says which ones it offers otherwise.
- A real BMC clears a "Once" override after the next boot (Enabled reads back "Disabled").
- Not every BMC allows a "Continuous" override (Lenovo's XCC allows Once and Disabled): the
  client sends only values the BMC lists in `BootSourceOverride...@Redfish.AllowableValues`,
  and the disk boot after a deploy falls back to Once (`disk_boot_enabled`).
- Busy BMCs answer 503 with Retry-After (firmware jobs, an iDRAC or iLO restarting): honoured,
  bounded, then reported.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3

from racklift.bmc.payloads import (
    BOOT_ENABLED,
    BOOT_MODES,
    BOOT_TARGETS,
    DISK_BOOT,
    NETWORK_BOOT,
    BootOverride,
    disk_boot_enabled,
    error_detail,
    parse_action_info,
    parse_boot,
    parse_members,
    parse_power_state,
    parse_reset_action,
)
from racklift.errors import RackliftError
from racklift.text import printable

log = logging.getLogger(__name__)


class BmcError(RackliftError):
    """A BMC refused, failed or did not answer: names the host, the BMC and what to do."""


class _BasicAuthRefused(Exception):
    """A 401 to basic auth: the client asks for a Redfish session before it gives up."""


DEFAULT_PORT = 443
ENV_USERNAME = "RACKLIFT_BMC_USERNAME"
ENV_PASSWORD = "RACKLIFT_BMC_PASSWORD"
ENV_CA_BUNDLE = "RACKLIFT_BMC_CA_BUNDLE"
VAR_USERNAME = "racklift_bmc_username"
VAR_PASSWORD = "racklift_bmc_password"
VAR_PORT = "racklift_bmc_port"
VAR_CA_BUNDLE = "racklift_bmc_ca_bundle"
VAR_INSECURE = "racklift_bmc_insecure"

CREDENTIALS_HINT = (f"check the BMC credentials source ({VAR_USERNAME}/{VAR_PASSWORD} in the "
                    f"host's Ansible vars or vault, or {ENV_USERNAME}/{ENV_PASSWORD})")
UNREACHABLE_HINT = "check the OOB cabling and the device's OOB IP (oob_ip) in NetBox"
UNSURE_HINT = ("it may have been taken: check the BMC's task list before starting it again, "
               "and the OOB cabling")
NO_OOB_IP = ("no OOB (BMC) IP in NetBox (field oob_ip): assign the BMC's address to the "
             "device's mgmt-only interface and set it as OOB IP")

SESSIONS = "/redfish/v1/SessionService/Sessions"
MAX_ANSWER = 4 * 1024 * 1024  # bytes of one GET's answer read (the largest captured: 38 KB)


@dataclass(frozen=True)
class BmcCredentials:
    username: str
    password: str = field(repr=False)  # never printed

    def __str__(self) -> str:
        return f"{self.username}:<hidden>"


@dataclass(frozen=True)
class BmcEndpoint:
    host: str  # the device's name in NetBox
    address: str
    port: int = DEFAULT_PORT
    ca_bundle: Path | None = None  # None: the system trust store
    insecure: bool = False  # explicit opt-out of certificate checks; never a default
    scheme: str = "https"  # http only where an operator gives an http URL (bmc.inventory)

    @property
    def url(self) -> str:
        address = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.scheme}://{address}:{self.port}"

    @property
    def verify(self) -> bool | str:
        if self.insecure:
            return False
        return str(self.ca_bundle) if self.ca_bundle else True


# ---------------------------------------------------------------------------------------------
# Where endpoint and credentials come from (pure; the caller passes vars and environment)


def endpoint_for(host: str, oob_ip: str | None, hostvars: Mapping[str, Any] | None = None,
                 environ: Mapping[str, str] = os.environ) -> BmcEndpoint:
    """The BMC of `host` from its NetBox OOB IP ('10.32.0.5/16') and its vars."""
    if not oob_ip:
        raise BmcError(f"{host}: {NO_OOB_IP}")
    hostvars = hostvars or {}
    try:
        port = int(hostvars.get(VAR_PORT, DEFAULT_PORT))
    except (TypeError, ValueError):
        raise BmcError(f"{host}: {VAR_PORT} is {hostvars.get(VAR_PORT)!r}, not a port number: "
                       "fix the host's vars") from None
    ca = hostvars.get(VAR_CA_BUNDLE) or environ.get(ENV_CA_BUNDLE)
    if ca and not Path(ca).is_file():
        raise BmcError(f"{host}: BMC CA bundle {ca} does not exist: fix {VAR_CA_BUNDLE} "
                       f"or {ENV_CA_BUNDLE}")
    insecure = hostvars.get(VAR_INSECURE, False) in (True, "true", "yes", "1")
    return BmcEndpoint(host, oob_ip.split("/")[0], port, Path(ca) if ca else None, insecure)


def endpoint_from_url(url: str, ca: str | None = None) -> BmcEndpoint:
    """The BMC at an operator's URL (http(s)://host[:port]), for commands that take one; `ca`:
    the BMC's own CA (PEM) for https. Credentials never come in the URL (nor is a URL that
    may hold them echoed)."""
    if "@" in url:
        raise BmcError(f"the BMC URL holds credentials (user@ or user:password@): take them "
                       f"out, and export {ENV_USERNAME} and {ENV_PASSWORD} instead")
    shown = printable(url)[:200]
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BmcError(f"BMC URL '{shown}' does not parse ({exc}): give "
                       "http(s)://host[:port]") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BmcError(f"BMC URL '{shown}' is not http(s)://host[:port]")
    if parts.path.rstrip("/") or parts.query or parts.fragment:
        raise BmcError(f"BMC URL '{shown}' has a path, query or fragment: give only "
                       "http(s)://host[:port]")
    if ca and parts.scheme != "https":
        raise BmcError("a CA (--ca) is for an https URL: the BMC's URL is http")
    if ca and not Path(ca).is_file():
        raise BmcError(f"BMC CA {printable(ca)} does not exist: give the BMC's CA certificate "
                       "(PEM)")
    default = DEFAULT_PORT if parts.scheme == "https" else 80
    return BmcEndpoint(parts.hostname, parts.hostname, port or default,
                       Path(ca) if ca else None, scheme=parts.scheme)


def credentials_for(host: str, hostvars: Mapping[str, Any] | None = None,
                    environ: Mapping[str, str] = os.environ) -> BmcCredentials:
    """The seam for BMC credentials: the host's Ansible vars (vault) first, then the
    environment. Either source must give both the username and the password."""
    hostvars = hostvars or {}
    for username, password in ((hostvars.get(VAR_USERNAME), hostvars.get(VAR_PASSWORD)),
                               (environ.get(ENV_USERNAME), environ.get(ENV_PASSWORD))):
        if username and password:
            return BmcCredentials(str(username), str(password))
    raise BmcError(f"{host}: no BMC credentials: set {VAR_USERNAME} and {VAR_PASSWORD} in the "
                   f"host's Ansible vars (vault), or export {ENV_USERNAME} and {ENV_PASSWORD}")


# ---------------------------------------------------------------------------------------------
# Pure transport helpers (the payloads racklift reads: racklift.bmc.payloads)


@dataclass(frozen=True)
class Answer:
    """A BMC's answer to an action or a task poll: status, Location header, JSON object."""

    status: int
    location: str | None
    payload: dict[str, Any] | None


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def backoff(attempt: int, base: float, cap: float) -> float:
    """Exponential backoff: base, 2·base, 4·base, ... at most cap."""
    return min(cap, base * 2 ** attempt)


# ---------------------------------------------------------------------------------------------
# The client (I/O)


RETRY_STATUS = frozenset({500, 502, 503, 504})


class RedfishClient:
    """One BMC. Requests retry on connection errors and 5xx with exponential backoff (503
    honours Retry-After, capped); each attempt has a connect and a read timeout."""

    def __init__(self, endpoint: BmcEndpoint, credentials: BmcCredentials,
                 timeout: tuple[float, float] = (5.0, 30.0), attempts: int = 4,
                 backoff_base: float = 0.5, backoff_cap: float = 8.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.attempts = attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._sleep = sleep
        self._session = requests.Session()
        self._credentials = (credentials.username, credentials.password)
        self._session.auth = self._credentials
        self._session_path: str | None = None  # the Redfish session to delete at close
        self._session.headers.update({"Accept": "application/json",
                                      "OData-Version": "4.0"})
        self._system: str | None = None
        if endpoint.insecure:
            log.warning("%s: BMC certificate checks are OFF (%s set)", endpoint.host,
                        VAR_INSECURE)

    def __repr__(self) -> str:
        return f"RedfishClient({self.endpoint.host} at {self.endpoint.url})"

    def close(self) -> None:
        if self._session_path is not None:  # a BMC has few session slots: give ours back
            with contextlib.suppress(requests.RequestException):
                self._session.delete(f"{self.endpoint.url}{self._session_path}",
                                     timeout=self.timeout, verify=self.endpoint.verify).close()
            self._session_path = None
        self._session.close()

    def __enter__(self) -> RedfishClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport ----------------------------------------------------------------------------

    def _fail(self, operation: str, problem: str, todo: str) -> BmcError:
        return BmcError(f"{self.endpoint.host}: BMC at {self.endpoint.url} {problem} while "
                        f"{operation}: {todo}")

    def _request(self, method: str, path: str, operation: str,
                 body: Mapping[str, Any] | None = None,
                 stream: bool = False, repeatable: bool = True) -> requests.Response:
        """`repeatable`: False for a request the BMC may have acted on even when it answered
        5xx or dropped the connection (starting a firmware update): then only a 503, which
        says the BMC took nothing, is retried. A BMC that refuses basic auth is asked for a
        Redfish session once, and the request sent again with its token."""
        try:
            return self._attempts(method, path, operation, body, stream, repeatable)
        except _BasicAuthRefused:
            if not self._open_session(operation):
                raise self._fail(operation, "rejected the credentials (HTTP 401)",
                                 CREDENTIALS_HINT) from None
            return self._attempts(method, path, operation, body, stream, repeatable)

    def _open_session(self, operation: str) -> bool:
        """Basic auth refused: a Redfish session (SessionService) with the same credentials,
        its token on every later request. False where the BMC gives none."""
        username, password = self._credentials
        self._session.auth = None
        try:
            response = self._session.post(f"{self.endpoint.url}{SESSIONS}",
                                          json={"UserName": username, "Password": password},
                                          timeout=self.timeout, verify=self.endpoint.verify)
        except requests.RequestException:
            return False
        token = response.headers.get("X-Auth-Token")
        response.close()
        if response.status_code not in (200, 201) or not token:
            return False
        self._session.headers["X-Auth-Token"] = token
        location = response.headers.get("Location") or ""
        # Only a path on this BMC is kept, to be deleted at close (an absolute URL is cut to
        # its path; one elsewhere is not followed).
        parts = urlsplit(location)
        if parts.path.startswith(SESSIONS + "/") and (
                not parts.netloc or parts.netloc == urlsplit(self.endpoint.url).netloc):
            self._session_path = parts.path
        log.info("%s: BMC %s refused basic auth; using a Redfish session (%s)",
                 self.endpoint.host, self.endpoint.url, operation)
        return True

    def _attempts(self, method: str, path: str, operation: str,
                  body: Mapping[str, Any] | None, stream: bool,
                  repeatable: bool) -> requests.Response:
        started = time.monotonic()
        problem, answered = "", False  # answered: the BMC spoke, with a 5xx
        for attempt in range(self.attempts):
            wait = backoff(attempt, self.backoff_base, self.backoff_cap)
            try:
                # verify per request: a session's verify loses to REQUESTS_CA_BUNDLE.
                response = self._session.request(method, f"{self.endpoint.url}{path}",
                                                 json=body, timeout=self.timeout,
                                                 verify=self.endpoint.verify, stream=stream)
            except requests.exceptions.SSLError:
                raise self._fail(operation, "presented a certificate that does not verify",
                                 f"give racklift the BMC's CA ({VAR_CA_BUNDLE} or "
                                 f"{ENV_CA_BUNDLE})") from None
            except requests.Timeout:
                problem, answered = "did not answer in time", False
                if not repeatable:
                    raise self._fail(operation, problem, UNSURE_HINT) from None
            except requests.ConnectionError:
                problem, answered = "refused or dropped the connection", False
                if not repeatable:
                    raise self._fail(operation, problem, UNSURE_HINT) from None
            else:
                if response.status_code not in RETRY_STATUS or (
                        not repeatable and response.status_code != 503):
                    return self._checked(response, operation)
                problem, answered = f"answered HTTP {response.status_code}", True
                response.close()  # a streamed answer holds its connection until closed
                hinted = retry_after(response.headers.get("Retry-After"))
                if response.status_code == 503 and hinted is not None:
                    wait = min(hinted, self.backoff_cap)
            if attempt + 1 < self.attempts:
                log.info("%s: BMC %s %s (%s); retrying in %.1f s", self.endpoint.host,
                         self.endpoint.url, problem, operation, wait)
                self._sleep(wait)
        seconds = time.monotonic() - started
        if answered:
            raise self._fail(operation, f"{problem} {self.attempts} times in {seconds:.0f} s",
                             "the BMC is busy or failing: retry later, or reset the BMC")
        raise self._fail(operation, f"is unreachable ({problem}, {self.attempts} attempts in "
                         f"{seconds:.0f} s)", UNREACHABLE_HINT)

    def _checked(self, response: requests.Response, operation: str) -> requests.Response:
        if response.ok:
            return response
        if response.status_code == 401:
            if self._session.auth is not None:  # basic auth: a session may be offered
                raise _BasicAuthRefused
            raise self._fail(operation, "rejected the credentials (HTTP 401)",
                             CREDENTIALS_HINT)
        if response.status_code == 403:
            raise self._fail(operation, "refused the request (HTTP 403)",
                             "the BMC account lacks the privilege: give it the Operator or "
                             "Administrator role")
        try:
            detail = error_detail(response.json())
        except ValueError:
            detail = response.text.strip()[:300] or response.reason
        raise self._fail(operation, f"answered HTTP {response.status_code} ({detail})",
                         "check the request against the BMC's Redfish support")

    def _body(self, response: requests.Response, path: str, operation: str) -> bytes:
        """The answer's body, read up to MAX_ANSWER bytes (the BMC is not trusted to end its
        answer); the response must have been requested with stream=True."""
        try:
            body = response.raw.read(MAX_ANSWER + 1, decode_content=True)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # A connection dropped or timed out mid-answer, a broken gzip stream.
            raise self._fail(operation, f"broke off its answer for {path} "
                             f"({type(exc).__name__})", "retry, or reset the BMC") from None
        if len(body) > MAX_ANSWER:
            raise self._fail(operation, f"sent more than {MAX_ANSWER} bytes for {path}",
                             "is this address a Redfish BMC?")
        return body

    def _get(self, path: str, operation: str) -> dict[str, Any]:
        """The JSON object at `path`."""
        with self._request("GET", path, operation, stream=True) as response:
            body = self._body(response, path, operation)
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise self._fail(operation, f"sent an answer for {path} that is not a JSON object",
                             "is this address a Redfish BMC?")
        return payload

    def send(self, method: str, path: str, body: Mapping[str, Any] | None, operation: str,
             repeatable: bool = True) -> Answer:
        """`method` (POST, PATCH; GET for `poll`) with `body` at `path`: the answer's status, its
        Location header (a task monitor) and its JSON object, if any. Errors as every
        request's (BmcError)."""
        with self._request(method, path, operation, body, stream=True,
                           repeatable=repeatable) as response:
            raw = self._body(response, path, operation)
            status, location = response.status_code, response.headers.get("Location")
        try:
            payload = json.loads(raw) if raw.strip() else None
        except ValueError:
            payload = None
        return Answer(status, location, payload if isinstance(payload, dict) else None)

    def poll(self, path: str, operation: str) -> Answer:
        """GET a task monitor or task: a task monitor answers 202 while the task runs."""
        return self.send("GET", path, None, operation)

    def get(self, path: str) -> dict[str, Any]:
        """GET a Redfish resource: what racklift.bmc.inventory.read_inventory calls."""
        return self._get(path, f"reading {path}")

    # -- the system ---------------------------------------------------------------------------

    def system_path(self) -> str:
        """The one system this BMC manages (discovered once)."""
        if self._system is None:
            members = parse_members(self._get("/redfish/v1/Systems", "listing its systems"))
            if len(members) != 1:
                raise self._fail("listing its systems", f"manages {len(members)} systems",
                                 "racklift expects one system per BMC: check the OOB IP of "
                                 "this device in NetBox")
            self._system = members[0]
        return self._system

    def system(self) -> dict[str, Any]:
        return self._get(self.system_path(), "reading the system")

    def power_state(self) -> str:
        try:
            return parse_power_state(self.system())
        except ValueError as exc:
            raise self._fail("reading the power state", str(exc), "check the BMC") from None

    def reset(self, reset_type: str) -> None:
        """On, ForceOff, ForceRestart, GracefulShutdown, ... as the BMC allows."""
        operation = f"resetting the system ({reset_type})"
        try:
            action = parse_reset_action(self.system())
        except ValueError as exc:
            raise self._fail(operation, str(exc), "check the BMC's firmware") from None
        allowed = action.allowed or self.action_info(action.action_info, "ResetType")
        if allowed and reset_type not in allowed:
            raise self._fail(operation, f"does not offer ResetType {reset_type}",
                             f"use one it offers: {', '.join(allowed)}")
        self._request("POST", action.target, operation, {"ResetType": reset_type})
        log.info("%s: reset %s sent", self.endpoint.host, reset_type)

    def action_info(self, path: str | None, parameter: str) -> tuple[str, ...]:
        """What an action's ActionInfo allows for `parameter`; empty where there is none, or it
        cannot be read (the BMC then judges the request itself, as where it lists nothing)."""
        if path is None:
            return ()
        try:
            return parse_action_info(self._get(path, f"reading {path}"), parameter)
        except BmcError as exc:
            log.info("%s: %s", self.endpoint.host, exc)
            return ()

    def boot_override(self) -> BootOverride:
        return parse_boot(self.system())

    def set_boot_override(self, target: str, enabled: str = "Once",
                          mode: str | None = None) -> BootOverride:
        """Set the boot source override, then read it back. The target must read back as
        asked; `enabled` may read back otherwise (see the module's vendor quirks)."""
        return self._set_boot_override(target, enabled, mode)

    def _set_boot_override(self, target: str, enabled: str, mode: str | None = None,
                           before: BootOverride | None = None) -> BootOverride:
        """set_boot_override, with the override as just read (`before`) where the caller has
        it (one GET of the system less)."""
        operation = f"setting boot override {target}/{enabled}" + (f"/{mode}" if mode else "")
        for value, allowed, name in ((target, BOOT_TARGETS, "target"),
                                     (enabled, BOOT_ENABLED, "enabled"),
                                     (mode, (None, *BOOT_MODES), "mode")):
            if value not in allowed:
                raise BmcError(f"{self.endpoint.host}: boot override {name} {value!r} is not "
                               f"one of {', '.join(map(str, allowed))}")
        before = before or self.boot_override()
        for value, offered, what in ((target, before.allowed_targets, "boot target"),
                                     (enabled, before.allowed_enabled, "override")):
            if offered and value not in offered:
                raise self._fail(operation, f"does not offer {what} {value}",
                                 f"use one it offers: {', '.join(offered)}")
        body: dict[str, Any] = {"BootSourceOverrideTarget": target,
                                "BootSourceOverrideEnabled": enabled}
        if mode:
            body["BootSourceOverrideMode"] = mode
        self._request("PATCH", self.system_path(), operation, {"Boot": body})
        now = self.boot_override()
        if now.target != target or (mode and now.mode != mode):
            raise self._fail(operation, f"reads back target {now.target}, mode {now.mode}",
                             "the BMC did not apply the override: retry, or set it in the "
                             "BMC's web interface")
        if now.enabled != enabled:
            log.warning("%s: boot override reads back %s, not %s (a BMC quirk): set Hdd "
                        "again after the deploy", self.endpoint.host, now.enabled, enabled)
        return now

    # -- what imaging needs -------------------------------------------------------------------

    def power_on(self) -> None:
        if self.power_state() != "On":
            self.reset("On")

    def power_off(self) -> None:
        if self.power_state() != "Off":
            self.reset("ForceOff")

    def network_boot_once(self) -> BootOverride:
        """Next boot from the network, then power-cycle (or power on)."""
        override = self.set_boot_override(*NETWORK_BOOT)
        self.reset("ForceRestart" if self.power_state() == "On" else "On")
        return override

    def boot_from_disk(self) -> BootOverride:
        before = self.boot_override()
        return self._set_boot_override(DISK_BOOT[0], disk_boot_enabled(before.allowed_enabled),
                                       before=before)


def client_for(host: str, oob_ip: str | None, hostvars: Mapping[str, Any] | None = None,
               environ: Mapping[str, str] = os.environ) -> RedfishClient:
    """The BMC client of `host`: its NetBox OOB IP, its vars (port, CA, credentials from the
    vault) or the environment. What imaging calls per host."""
    return RedfishClient(endpoint_for(host, oob_ip, hostvars, environ),
                         credentials_for(host, hostvars, environ))
