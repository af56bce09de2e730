# racklift's NetBox inventory: thin on purpose, the logic lives in the racklift package.
from __future__ import annotations

DOCUMENTATION = r"""
name: racklift_netbox
plugin_type: inventory
short_description: GPU hosts and their expected state, from NetBox
description:
  - Reads devices from NetBox in a bounded number of bulk requests
    (racklift.netbox.inventory_hosts) and groups them by site, rack, role, status, platform
    and tag.
  - Every host carries C(ansible_host) (its primary IP), C(netbox_id), C(netbox_status),
    C(racklift_expected) (serial, rack, tags, OOB IP, provisioning interface and MAC, and the
    primary MAC and IP addresses of every interface holding one), what the node roles read of
    its desired state, parsed from the racklift config context with racklift's defaults, in
    C(racklift_desired) (absent where the context does not parse), and incomplete records in
    C(racklift_problems) (such hosts are also in the group C(racklift_incomplete)). The whole
    expected model (interface types, GPUs) is what C(racklift verify) reads, not host vars.
  - A failure (NetBox unreachable, bad token, unknown rack or site) fails the inventory;
    set C(unparsed_is_failed) so Ansible does not carry on with an empty one.
  - With C(cache) on, the last read is kept in C(cache_connection) and each run brings it up
    to date from NetBox's change log (racklift.netbox.warm_inventory), reading only the hosts
    the changes touch; it reads in full after C(cache_timeout) seconds (0, never), with
    C(--flush-cache), and whenever it cannot be sure (C(-v) says why). C(cache_plugin) is not
    used.
extends_documentation_fragment:
  - inventory_cache
options:
  plugin:
    description: Marks this file as a source for this plugin.
    required: true
    choices: [racklift_netbox]
  url:
    description: NetBox root URL.
    required: true
    env: [{name: NETBOX_URL}]
  token:
    description: NetBox API token. Keep it in the environment, not in this file.
    env: [{name: NETBOX_TOKEN}]
  token_file:
    description: >-
      A file holding the NetBox API token, when `token` is not set (racklift's runs use this,
      so the token is never in Ansible's environment or the runner's artifacts).
    env: [{name: NETBOX_TOKEN_FILE}]
  sites:
    description: Site slugs to select.
    type: list
    elements: str
    default: []
    env: [{name: RACKLIFT_SITES}]
  racks:
    description: Rack names to select.
    type: list
    elements: str
    default: []
    env: [{name: RACKLIFT_RACKS}]
  roles:
    description: Device role slugs to select.
    type: list
    elements: str
    default: []
    env: [{name: RACKLIFT_ROLES}]
  statuses:
    description: Device statuses to select (planned, staged, active, failed, offline, ...).
    type: list
    elements: str
    default: []
    env: [{name: RACKLIFT_STATUSES}]
  names:
    description: Device names to select.
    type: list
    elements: str
    default: []
  names_json:
    description:
      - Device names to select, as a JSON list (how racklift passes a run's hosts, so that
        no name can be split into several); added to C(names).
    type: str
    default: "[]"
    env: [{name: RACKLIFT_NAMES}]
"""

EXAMPLES = r"""
# inventory/netbox.racklift.yml
plugin: racklift_netbox
racks: [R12]
statuses: [planned, failed]
cache: true
cache_connection: ~/.cache/racklift/inventory
cache_timeout: 3600
"""

import json  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

from ansible.errors import AnsibleParserError  # noqa: E402
from ansible.plugins.inventory import BaseInventoryPlugin  # noqa: E402

try:
    from racklift.ansible_inventory import load, load_warm
    from racklift.errors import RackliftError
    from racklift.netbox.client import NetBoxSettings
    from racklift.netbox.selection import Selection
    from racklift.netbox.warm_inventory import state_path
    from racklift.paths import cache_dir
except ImportError as exc:  # pragma: no cover - depends on the interpreter running Ansible
    RACKLIFT_IMPORT_ERROR: ImportError | None = exc
else:
    RACKLIFT_IMPORT_ERROR = None


class InventoryModule(BaseInventoryPlugin):
    NAME = "racklift_netbox"

    def verify_file(self, path: str) -> bool:
        return super().verify_file(path) and path.endswith(("racklift.yml", "racklift.yaml"))

    def _selection(self) -> Selection:
        # A list from the environment arrives as one comma-separated string.
        selection = Selection.of(**{key: self.get_option(key) for key in
                                    ("sites", "racks", "roles", "statuses", "names")})
        try:
            names = json.loads(self.get_option("names_json"))
        except ValueError:
            names = None
        if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise AnsibleParserError("racklift_netbox: names_json (RACKLIFT_NAMES) is not a "
                                     "JSON list of device names")
        return replace(selection, names=(*selection.names, *names))

    def _token(self) -> str:
        if self.get_option("token"):
            return str(self.get_option("token"))
        if token_file := self.get_option("token_file"):
            try:
                return Path(token_file).read_text().strip()
            except OSError as exc:
                raise AnsibleParserError(f"racklift_netbox: cannot read token_file "
                                         f"{token_file}: {exc.strerror}") from None
        raise AnsibleParserError("racklift_netbox: no NetBox token: set NETBOX_TOKEN "
                                 "(or NETBOX_TOKEN_FILE, a file holding it)")

    def parse(self, inventory, loader, path, cache=True):  # type: ignore[no-untyped-def]
        super().parse(inventory, loader, path, cache)
        if RACKLIFT_IMPORT_ERROR is not None:
            raise AnsibleParserError(
                f"racklift_netbox: the racklift package is not importable by this Ansible "
                f"({RACKLIFT_IMPORT_ERROR}); run Ansible from racklift's virtualenv")
        self._read_config_data(path)
        selection = self._selection()
        settings = NetBoxSettings(url=str(self.get_option("url")).rstrip("/"),
                                  token=self._token())
        try:
            if self.get_option("cache"):
                data = self._warm(settings, selection, refresh=not cache)
            else:
                data = load(settings, selection)
        except RackliftError as exc:
            raise AnsibleParserError(f"racklift_netbox: {exc}") from None
        self._populate(data)

    def _warm(self, settings: NetBoxSettings, selection: Selection, *,
              refresh: bool) -> dict:
        directory = Path(self.get_option("cache_connection")
                         or cache_dir() / "inventory").expanduser()
        kept = state_path(directory, settings.url, settings.token, selection)
        if refresh:  # --flush-cache: a full read
            kept.unlink(missing_ok=True)
        # Ansible's cache_timeout 0 means "never expires".
        max_age = float(self.get_option("cache_timeout")) or float("inf")
        data, how = load_warm(settings, selection, kept, max_age=max_age)
        self.display.v(f"racklift_netbox: {how}")
        return data

    def _populate(self, data: dict) -> None:
        for device in data["_meta"].get("racklift_refused", ()):
            self.display.warning(f"racklift_netbox: device {device['netbox_id']} "
                                 f"({device['name']!r} at site {device['site']}) is no host: "
                                 + "; ".join(device["problems"]))
        for name, variables in data["_meta"]["hostvars"].items():
            self.inventory.add_host(name)
            for key, value in variables.items():
                self.inventory.set_variable(name, key, value)
        for group, body in data.items():
            if group in ("_meta", "all", "ungrouped"):
                continue
            self.inventory.add_group(group)
            for host in body["hosts"]:
                self.inventory.add_child(group, host)
