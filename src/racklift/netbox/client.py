"""The one way racklift talks to NetBox: connection checks, paginated bulk reads and chunked
bulk writes, with every failure turned into one clear line for the operator.

pynetbox carries the session and the token; the hot read path asks for raw JSON pages with
only the fields it needs, since building pynetbox Records for 100,000 interfaces costs seconds.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import pynetbox
import requests
from requests.adapters import HTTPAdapter

from racklift.errors import NetBoxError

MIN_VERSION = (4, 2)  # MAC addresses became objects of their own in 4.2
# `?start=<id>` pages by primary key without COUNT or OFFSET (NetBox >= 4.6).
CURSOR_VERSION = (4, 6)
PAGE_SIZE = 1000  # NetBox's default MAX_PAGE_SIZE
WRITE_CHUNK = 250  # objects per bulk request: one transaction each
READ_WORKERS = 4
READ_CONNECTIONS = 4 * READ_WORKERS


@dataclass(frozen=True)
class NetBoxSettings:
    url: str
    token: str = field(repr=False)  # never printed

    @classmethod
    def from_env(cls, default: NetBoxSettings | None = None) -> NetBoxSettings:
        url = os.environ.get("NETBOX_URL") or os.environ.get("NETBOX_API")
        token = os.environ.get("NETBOX_TOKEN")
        if url and token:
            return cls(url.rstrip("/"), token)
        if default is not None and not url and not token:
            return default
        names = (("NETBOX_URL", url), ("NETBOX_TOKEN", token))
        missing = " and ".join(name for name, value in names if not value)
        raise NetBoxError(f"{missing} not set: export NETBOX_URL=https://netbox.example "
                          "and NETBOX_TOKEN=<an API token with write permission>")


def auth_header(token: str) -> str:
    """v2 tokens (NetBox >= 4.5, 'nbt_<key>.<secret>') are Bearer tokens; v1 tokens are not."""
    if token.startswith("nbt_") and "." in token:
        return f"Bearer {token}"
    return f"Token {token}"


def parse_version(text: str) -> tuple[int, ...]:
    """'4.7.3' → (4, 7, 3); '4.2.0-Docker-3.2.0' → (4, 2, 0); 'v4.1' → (4, 1)."""
    numbers: list[int] = []
    for part in text.lstrip("v").split("-")[0].split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    if not numbers:
        raise NetBoxError(f"cannot read a NetBox version from {text!r}")
    return tuple(numbers)


def check_version(version: str, url: str) -> None:
    if parse_version(version)[:2] < MIN_VERSION:
        need = ".".join(map(str, MIN_VERSION))
        raise NetBoxError(f"NetBox at {url} is {version}; racklift needs NetBox >= {need} "
                          "(MAC addresses as objects): upgrade NetBox")


def _label(obj: Mapping[str, Any]) -> str:
    for key in ("name", "address", "mac_address", "slug", "id"):
        if obj.get(key) is not None:
            return f"{key}={obj[key]}"
    return "object"


def _explain(response: requests.Response,
             objects: list[dict[str, Any]] | None = None) -> str:
    """NetBox's error body as one line; a bulk request's per-object errors name the object."""
    try:
        body: Any = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason
    if isinstance(body, Mapping) and "detail" in body:
        parts = [str(body["detail"])]
        for error in body.get("errors") or []:
            index = error.get("index")
            who = (_label(objects[index]) if objects and isinstance(index, int)
                   and index < len(objects) else f"object {index}")
            fields = "; ".join(f"{k}: {' '.join(map(str, v))}"
                               for k, v in (error.get("errors") or {}).items())
            parts.append(f"{who}: {fields}")
        return " ".join(parts)[:1500]
    return str(body)[:500]


@contextmanager
def _errors(url: str, what: str,
            objects: list[dict[str, Any]] | None = None) -> Iterator[None]:
    try:
        yield
    except pynetbox.RequestError as exc:
        raise _http_error(url, what, exc.req, objects) from None
    except requests.ConnectionError:
        raise NetBoxError(f"cannot reach NetBox at {url} ({what}): is it running and is "
                          "NETBOX_URL right?") from None
    except requests.Timeout:
        raise NetBoxError(f"NetBox at {url} did not answer in time ({what})") from None


def _http_error(url: str, what: str, response: requests.Response,
                objects: list[dict[str, Any]] | None = None) -> NetBoxError:
    detail = _explain(response, objects)
    if response.status_code in (401, 403):
        return NetBoxError(f"NetBox at {url} refused the token (HTTP {response.status_code}: "
                           f"{detail}) while {what}: set NETBOX_TOKEN to a valid API token "
                           "with the permissions racklift needs")
    if response.status_code == 404:
        return NetBoxError(f"NetBox at {url} has no {response.request.path_url} (while {what}):"
                           " is NETBOX_URL the NetBox root URL?")
    return NetBoxError(f"NetBox at {url} rejected the request while {what} "
                       f"(HTTP {response.status_code}): {detail}")


# gunicorn, which serves NetBox, refuses request lines over 4094 bytes: leave room for the
# path, the fields and the other filters.
ID_QUERY_BUDGET = 3000


def id_groups(key: str, ids: Iterable[int], budget: int = ID_QUERY_BUDGET) -> Iterator[list[int]]:
    """Sorted unique ids in groups whose `key=id&...` query string stays within `budget`."""
    group: list[int] = []
    used = 0
    for value in sorted(set(ids)):
        cost = len(key) + len(str(value)) + 2
        if group and used + cost > budget:
            yield group
            group, used = [], 0
        group.append(value)
        used += cost
    if group:
        yield group


def id_windows(low: int, high: int, expected: int,
               page: int = PAGE_SIZE) -> list[tuple[int, int]]:
    """Ids low..high cut into windows [start, stop) that each hold about one page, were
    `expected` objects spread evenly over them; each window can then be read on its own."""
    if high < low or expected <= 0:
        return []
    width = max(1, math.ceil((high - low + 1) / math.ceil(expected / page)))
    return [(start, min(start + width, high + 1)) for start in range(low, high + 1, width)]


def _int_ids(value: Any) -> Any:
    """GraphQL returns ids as strings; NetBox ids are ints, and REST returns them so."""
    if isinstance(value, dict):
        return {k: (int(v) if k == "id" and isinstance(v, str) else _int_ids(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_int_ids(v) for v in value]
    return value


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


class NetBox:
    """A checked connection to one NetBox."""

    def __init__(self, settings: NetBoxSettings, timeout: float = 300.0) -> None:
        self.settings = settings
        self.url = settings.url
        self.api = pynetbox.api(settings.url, token=settings.token)
        self.api.http_session.headers.update(
            {"Authorization": auth_header(settings.token), "Accept": "application/json"})
        # Reads overlap (racklift.netbox.bulk_reads), each with READ_WORKERS threads: keep a
        # connection for each, where requests' default pool keeps 10 and opens the rest anew.
        adapter = HTTPAdapter(pool_maxsize=READ_CONNECTIONS)
        for scheme in ("http://", "https://"):
            self.api.http_session.mount(scheme, adapter)
        self.timeout = timeout
        self.version = ""

    @classmethod
    def connect(cls, settings: NetBoxSettings) -> NetBox:
        """Reach NetBox, prove the token works, and refuse a NetBox older than 4.2."""
        netbox = cls(settings)
        status = netbox._get("/api/status/", {}, "reading /api/status/")
        netbox.version = str(status.get("netbox-version", ""))
        check_version(netbox.version, netbox.url)
        # /api/status/ answers without a token when LOGIN_REQUIRED is off: prove the token.
        netbox._get("/api/dcim/devices/", {"limit": 1, "brief": 1}, "checking the API token")
        return netbox

    # -- reads --------------------------------------------------------------------------------

    def _response(self, path: str, params: Mapping[str, Any], what: str) -> requests.Response:
        with _errors(self.url, what):
            response = self.api.http_session.get(f"{self.url}{path}", params=params,
                                                 timeout=self.timeout)
        if not response.ok:
            raise _http_error(self.url, what, response)
        return response

    def _get(self, path: str, params: Mapping[str, Any], what: str) -> Any:
        return self._response(path, params, what).json()

    def get_dated(self, endpoint: str, params: Mapping[str, Any]) -> tuple[Any, datetime]:
        """One page of `endpoint`, and NetBox's clock when it answered (its `Date` header,
        to the second; this machine's clock may differ from NetBox's)."""
        what = f"reading {endpoint}"
        response = self._response(f"/api/{endpoint}/", params, what)
        try:
            date = parsedate_to_datetime(response.headers["Date"])
        except (KeyError, TypeError, ValueError):
            raise NetBoxError(f"NetBox at {self.url} sent no usable Date header when "
                              f"{what}: check the proxy in front of it") from None
        return response.json(), date

    def get_all(self, endpoint: str, params: Mapping[str, Any] | None = None,
                fields: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Every object of `endpoint` (e.g. 'dcim/devices') matching `params`, as JSON.

        The first page tells the count; the other pages are fetched in parallel.
        """
        query: dict[str, Any] = {**(params or {}), "limit": PAGE_SIZE}
        if fields:
            query["fields"] = ",".join(fields)
        what = f"reading {endpoint}"
        path = f"/api/{endpoint}/"
        first = self._get(path, {**query, "offset": 0}, what)
        results: list[dict[str, Any]] = list(first["results"])
        count = int(first["count"])
        page = len(first["results"]) or PAGE_SIZE  # the server may cap the page size lower
        offsets = range(page, count, page)
        if offsets:
            with ThreadPoolExecutor(READ_WORKERS) as pool:
                for body in pool.map(lambda o: self._get(path, {**query, "offset": o}, what),
                                     offsets):
                    results.extend(body["results"])
        return results

    def has_cursor_pages(self) -> bool:
        """Whether this NetBox reads by id windows (`scan`) and GraphQL (`graph_scan`)."""
        return bool(self.version) and parse_version(self.version)[:2] >= CURSOR_VERSION

    def _windows(self, low: int, high: int, expected: int, page: int,
                 read: Callable[[int, int], tuple[list[dict[str, Any]], bool]],
                 ) -> list[dict[str, Any]]:
        """Ids low..high read in windows, in parallel; `read(start, stop)` returns the page of
        ids >= start and < stop, and whether more may follow."""
        def window(bounds: tuple[int, int]) -> list[dict[str, Any]]:
            start, stop = bounds
            rows: list[dict[str, Any]] = []
            while start < stop:
                page_rows, more = read(start, stop)
                rows.extend(page_rows)
                if not more or not page_rows:
                    break
                start = page_rows[-1]["id"] + 1
            return rows

        results: list[dict[str, Any]] = []
        with ThreadPoolExecutor(READ_WORKERS) as pool:
            for rows in pool.map(window, id_windows(low, high, expected, page)):
                results.extend(rows)
        return results

    def scan(self, endpoint: str, params: Mapping[str, Any] | None = None,
             fields: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Every object of `endpoint` matching `params`, in id order: `get_all` for big reads.

        Offset pages make NetBox count the whole result and skip `offset` rows for every page:
        at 110,000 interfaces that is half its work. From NetBox 4.6 on, the lowest page tells
        the count, and the other ids are read in windows, in parallel, each with cursor pages
        (`start=<id>`), which need neither.
        """
        if not self.has_cursor_pages():
            return self.get_all(endpoint, params, fields)
        base = dict(params or {})
        query: dict[str, Any] = {**base, "limit": PAGE_SIZE}
        if fields:
            query["fields"] = ",".join(dict.fromkeys(("id", *fields)))  # the cursor needs ids
        what = f"reading {endpoint}"
        path = f"/api/{endpoint}/"
        first = self._get(path, {**query, "ordering": "id"}, what)
        results: list[dict[str, Any]] = list(first["results"])
        count = int(first["count"])
        if len(results) >= count:
            return results
        highest = self._get(path, {**base, "ordering": "-id", "limit": 1, "fields": "id"},
                            what)["results"]
        if not highest:  # everything after the first page went away meanwhile
            return results

        def read(start: int, stop: int) -> tuple[list[dict[str, Any]], bool]:
            body = self._get(path, {**query, "start": start, "id__lt": stop}, what)
            # `next`, not a short page, says the end: the server may cap the page size lower.
            return body["results"], bool(body.get("next"))

        return results + self._windows(results[-1]["id"] + 1, highest[0]["id"],
                                       count - len(results), len(results), read)

    def graph_scan(self, endpoint: str, list_name: str, fields: str, filters: str = "",
                   expected: int | None = None) -> list[dict[str, Any]] | None:
        """Every object of `endpoint` through GraphQL (`list_name`, e.g. 'interface_list',
        selecting `fields`, narrowed by GraphQL `filters` such as 'name: {exact: "eno1"}'),
        in id windows like `scan`; ids come back as ints, as in REST. `expected` is about how
        many objects the filters keep (default: all of them), which sizes the windows. None
        where GraphQL or its cursor pages are not there (NetBox < 4.6, or GRAPHQL_ENABLED
        off): then read the REST API.

        Why: REST renders each nested object with its URL and display text; GraphQL returns
        only the fields asked for. For 110,000 interfaces with their device and MAC, NetBox
        spends about half the time.
        """
        if not self.has_cursor_pages():
            return None
        what = f"reading {endpoint} through GraphQL"
        path = f"/api/{endpoint}/"
        lowest = self._get(path, {"ordering": "id", "limit": 1, "fields": "id"}, what)
        if not lowest["results"]:
            return []
        highest = self._get(path, {"ordering": "-id", "limit": 1, "fields": "id"}, what)
        probe = self._graphql(f"{{ {list_name}(pagination: {{limit: 1}}) {{ id }} }}", what)
        if probe is None:
            return None

        def read(start: int, stop: int) -> tuple[list[dict[str, Any]], bool]:
            query = (f"{{ {list_name}(pagination: {{start: {start}, limit: {PAGE_SIZE}}}, "
                     f"filters: {{id: {{lt: {stop}}} {filters}}}) {{ {fields} }} }}")
            data = self._graphql(query, what)
            rows = [_int_ids(row) for row in (data or {}).get(list_name, [])]
            # GraphQL says nothing of a next page, and the server may cap the page size:
            # go on until an empty page or the end of the window.
            return rows, True

        return self._windows(lowest["results"][0]["id"], highest["results"][0]["id"],
                             int(lowest["count"]) if expected is None else expected, PAGE_SIZE,
                             read)

    def _graphql(self, query: str, what: str) -> dict[str, Any] | None:
        """The `data` of a GraphQL query; None when NetBox serves no GraphQL API."""
        with _errors(self.url, what):
            response = self.api.http_session.post(f"{self.url}/graphql/", json={"query": query},
                                                  timeout=self.timeout)
        if response.status_code == 404:
            return None
        if not response.ok:
            raise _http_error(self.url, what, response)
        body = response.json()
        if body.get("errors"):
            message = "; ".join(str(e.get("message")) for e in body["errors"])[:500]
            raise NetBoxError(f"NetBox at {self.url} refused a GraphQL query while {what}: "
                              f"{message}")
        return dict(body.get("data") or {})

    def count(self, endpoint: str, params: Mapping[str, Any] | None = None) -> int:
        """How many objects of `endpoint` match `params` (one request for one object)."""
        body = self._get(f"/api/{endpoint}/", {**(params or {}), "limit": 1, "brief": 1},
                         f"counting {endpoint}")
        return int(body["count"])

    def get_for_ids(self, endpoint: str, key: str, ids: Iterable[int],
                    params: Mapping[str, Any] | None = None,
                    fields: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Objects whose `key` filter matches any of `ids`, asked for as many ids at a time as
        fit a short URL; a rack is one request, a 10,000-host site a few dozen."""
        results: list[dict[str, Any]] = []
        for group in id_groups(key, ids):
            results.extend(self.get_all(endpoint, {**(params or {}), key: group}, fields))
        return results

    # -- writes -------------------------------------------------------------------------------

    def _endpoint(self, endpoint: str) -> Any:
        app, name = endpoint.split("/")
        return getattr(getattr(self.api, app), name.replace("-", "_"))

    def create(self, endpoint: str, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Bulk-create `objects`, WRITE_CHUNK per request (each request is one transaction)."""
        created: list[dict[str, Any]] = []
        for group in _chunks(objects, WRITE_CHUNK):
            with _errors(self.url, f"creating {len(group)} {endpoint}", group):
                created.extend(dict(r) for r in self._endpoint(endpoint).create(group))
        return created

    def update(self, endpoint: str, objects: list[dict[str, Any]]) -> None:
        """Bulk-update `objects` (each has an 'id'), WRITE_CHUNK per request."""
        for group in _chunks(objects, WRITE_CHUNK):
            with _errors(self.url, f"updating {len(group)} {endpoint}", group):
                self._endpoint(endpoint).update(group)

    def delete(self, endpoint: str, ids: list[int]) -> None:
        for group in _chunks(ids, WRITE_CHUNK):
            with _errors(self.url, f"deleting {len(group)} {endpoint}"):
                self._endpoint(endpoint).delete(group)

    def get_or_create(self, endpoint: str, lookup: Mapping[str, Any],
                      defaults: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], bool]:
        """The object matching `lookup`, created with `defaults` when absent; an existing
        object is returned unchanged, so operators' edits are never overwritten."""
        found = self.get_all(endpoint, lookup)
        if len(found) > 1:
            raise NetBoxError(f"{endpoint}: {len(found)} objects match {dict(lookup)}; "
                              "expected one: remove the duplicates")
        if found:
            return found[0], False
        return self.create(endpoint, [{**lookup, **(defaults or {})}])[0], True
