"""The expected hosts that `racklift netbox.expected --json` prints, read back: what
`racklift facts --from BUNDLE --expected FILE` judges a support bundle against with no NetBox.

The form is a JSON list with one object per host, `ExpectedHost.to_dict()`: every field of
ExpectedHost under its own name (`interfaces`, `gpus`, `device_type`, `problems` and each
interface's `peer` as objects of their dataclasses' fields; tuples as lists), plus what is
derived from them for people to read and ignored here: `desired` (the desired state, parsed
again from `config` by this racklift, as a NetBox read would be), `address` and
`provisioning_mac`. Reading it back gives an ExpectedHost equal to the one printed.

The file is a customer's export, perhaps edited by hand, so it is held to what NetBox would
have given: every field of its type, the name a host name, MAC addresses, IP addresses with
their prefix length and WWNs in NetBox's forms, no field racklift does not know (an export of
a newer racklift, judged by an older one, must not lose what the gate looks at). A record that
is not is refused with every field that is wrong; the others are read. Messages name the field,
never its value: a file may hold anything. Pure.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields, is_dataclass
from functools import cache
from types import NoneType, UnionType
from typing import Any, get_args, get_origin, get_type_hints

from racklift import names
from racklift.errors import RackliftError
from racklift.netbox.expected import ExpectedHost, ExpectedInterface, LinkPeer, Problem
from racklift.netbox.identity import AMBIGUOUS

# What to_dict adds for people to read: derived from the fields, so not read back.
DERIVED = frozenset({"desired", "address", "provisioning_mac"})


class NotAnExport(RackliftError):
    """The file is not a list of expected hosts at all: nothing in it can be judged against."""


@dataclass(frozen=True)
class Rule:
    """What a text field must be beyond text, and how to say so."""

    accepts: Callable[[str], bool]
    wanted: str


def _is_ip_interface(text: str) -> bool:
    try:
        ipaddress.ip_interface(text)
    except ValueError:
        return False
    return "/" in text  # NetBox keeps the prefix length with the address


def _octets(what: str, count: int) -> Rule:
    pattern = re.compile(rf"[0-9A-Fa-f]{{2}}(:[0-9A-Fa-f]{{2}}){{{count - 1}}}")
    return Rule(lambda text: pattern.fullmatch(text) is not None,
                f"{what} ({count} hex octets separated by colons, as NetBox gives it)")


IP = Rule(_is_ip_interface, "an IP address with its prefix length, e.g. 10.16.0.11/16")
MAC = _octets("a MAC address", 6)
WWN = _octets("a WWN", 8)
RULES: dict[tuple[type, str], Rule] = {
    (ExpectedHost, "name"): Rule(names.is_hostname, "a host name (RFC 1123: letters, digits "
                                 "and hyphens, in dot-separated labels), as racklift needs"),
    (ExpectedHost, "primary_ip"): IP, (ExpectedHost, "oob_ip"): IP,
    (ExpectedInterface, "ips"): IP, (ExpectedInterface, "mac"): MAC,
    (ExpectedInterface, "wwn"): WWN, (LinkPeer, "wwn"): WWN,
}
# A list item's own name, where it is one a path can show as it is (else its index).
_ITEM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./:-]{0,63}")


Wrong = list[tuple[str, str]]  # (field, message): what is wrong, added to as it is found


@dataclass(frozen=True)
class ExpectedFile:
    """What a file holds: its hosts by name, the records refused by the name they give, and
    the records without a name a bundle could be matched by (named by their place)."""

    hosts: dict[str, ExpectedHost]
    refused: dict[str, tuple[Problem, ...]]
    unnamed: tuple[Problem, ...] = ()

    def get(self, name: str) -> ExpectedHost | tuple[Problem, ...]:
        """The host named so, or why the file gives none (a record without a name may have
        been its: those are said too)."""
        if name in self.hosts:
            return self.hosts[name]
        return self.refused.get(name) or (
            Problem(name, "name", "no record in the file names this host: export it with "
                    f"`racklift netbox.expected --host {name} --json`"), *self.unnamed)


def read(text: str | bytes) -> ExpectedFile:
    """The expected hosts in `netbox.expected --json`'s output. NotAnExport where it is not a
    JSON list of objects; a record that is wrong is refused alone (`refused`, `unnamed`)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:  # where, not what: the message would quote the text
        raise NotAnExport(f"not JSON (line {exc.lineno}, column {exc.colno}): give the output "
                          "of `racklift netbox.expected --json`") from None
    except UnicodeDecodeError:
        raise NotAnExport("not JSON (not UTF-8 text): give the output of `racklift "
                          "netbox.expected --json`") from None
    except RecursionError:
        raise NotAnExport("nested deeper than any export: give the output of `racklift "
                          "netbox.expected --json`") from None
    if not isinstance(document, list) or not all(isinstance(r, dict) for r in document):
        raise NotAnExport(f"is {_kind(document)}, not a list of hosts: give the output of "
                          "`racklift netbox.expected --json`")
    hosts: dict[str, ExpectedHost] = {}
    refused: dict[str, tuple[Problem, ...]] = {}
    unnamed: list[Problem] = []
    shared = _shared_names(document)
    for index, record in enumerate(document):
        name = record.get("name")
        host, wrong = _host(record)
        if not names.is_hostname(name):  # no host to tell of it but its place
            unnamed.extend(Problem(f"host [{index}]", f, m) for f, m in wrong)
        elif name.casefold() in shared:
            refused[name] = (Problem(name, AMBIGUOUS, f"{shared[name.casefold()]} records name "
                                     "this host (case aside): keep one"),)
        elif host is None:
            refused[name] = tuple(Problem(name, f, m) for f, m in wrong)
        else:
            hosts[name] = host
    return ExpectedFile(hosts, refused, tuple(unnamed))


def _host(record: dict[str, Any]) -> tuple[ExpectedHost | None, Wrong]:
    """A host's record read, or None and what is wrong in it."""
    wrong: Wrong = []
    return _record(ExpectedHost, record, "", wrong), wrong


def _shared_names(document: list[dict[str, Any]]) -> dict[str, int]:
    """The host names (case folded) that more than one record gives, and how many do."""
    counts = Counter(r["name"].casefold() for r in document if names.is_hostname(r.get("name")))
    return {name: n for name, n in counts.items() if n > 1}


@cache
def _fields(cls: type) -> tuple[tuple[str, Any, bool], ...]:
    """A dataclass's fields that __init__ takes: name, type hint, whether required."""
    hints = get_type_hints(cls)
    return tuple((f.name, hints[f.name], f.default is MISSING and f.default_factory is MISSING)
                 for f in fields(cls) if f.init)


def _record(cls: type, data: Any, path: str, wrong: Wrong) -> Any:
    """`data` as a `cls`, each field converted by its type hint; None where anything in it is
    wrong (added to `wrong`)."""
    if not isinstance(data, dict):
        wrong.append((path or "record", f"is {_kind(data)}: make it an object"))
        return None
    before = len(wrong)
    known = {name for name, _, _ in _fields(cls)} | (DERIVED if cls is ExpectedHost else set())
    for key in sorted(set(data) - known):
        wrong.append((_join(path, key) if _ITEM_NAME.fullmatch(key) else path or "record",
                      "is no field racklift knows: remove it, or judge with the racklift that "
                      "printed the file"))
    values = {}
    for name, hint, required in _fields(cls):
        where = _join(path, name)
        if name in data:
            values[name] = _value(hint, data[name], where, wrong, RULES.get((cls, name)))
        elif required:
            wrong.append((where, "is missing"))
    return cls(**values) if len(wrong) == before else None


def _value(hint: Any, value: Any, path: str, wrong: Wrong, rule: Rule | None) -> Any:
    """`value` as the type `hint` says: X | None, tuple[X, ...], dict[str, Any] (JSON as
    it is), a dataclass, or str, int, float, bool."""
    nullable = isinstance(hint, UnionType)
    if nullable:
        if value is None:
            return None
        (hint,) = (a for a in get_args(hint) if a is not NoneType)
    if get_origin(hint) is tuple:
        if not isinstance(value, list):
            wrong.append((path, f"is {_kind(value)}: make it a list"))
            return ()
        return tuple(_value(get_args(hint)[0], item, _item(path, index, item), wrong, rule)
                     for index, item in enumerate(value))
    if get_origin(hint) is dict:
        if not isinstance(value, dict):
            wrong.append((path, f"is {_kind(value)}: make it an object"))
        return value
    if is_dataclass(hint):
        return _record(hint, value, path, wrong)
    if not _is_a(hint, value):
        wrong.append((path, f"is {_kind(value)}: make it {_kind_of(hint)}"
                            f"{' or null' if nullable else ''}"))
    elif rule is not None and not rule.accepts(value):
        wrong.append((path, f"is not {rule.wanted}"))
    return value


def _is_a(scalar: type, value: Any) -> bool:
    if scalar is float:  # JSON has numbers: 1 and 1.0 are one
        return type(value) in (int, float)
    return type(value) is scalar


def _kind(value: Any) -> str:
    """What JSON value this is, in words (never the value: the file may hold anything)."""
    return {NoneType: "null", bool: "true or false", int: "a number", float: "a number",
            str: "text", list: "a list", dict: "an object"}.get(type(value), "a value")


def _kind_of(scalar: type) -> str:
    return {str: "text", int: "a whole number", float: "a number",
            bool: "true or false"}.get(scalar, scalar.__name__)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _item(path: str, index: int, item: Any) -> str:
    """A list item's path: by its name where it has one (interfaces.eno1, as the gate's own
    fields say), else by its place."""
    name = item.get("name") if isinstance(item, dict) else None
    if isinstance(name, str) and _ITEM_NAME.fullmatch(name):
        return f"{path}.{name}"
    return f"{path}[{index}]"
