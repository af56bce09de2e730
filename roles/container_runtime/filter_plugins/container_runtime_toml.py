"""TOML filters for the container_runtime role, run on the controller.

containerd's config.toml must be edited, not replaced: a site keeps its own keys there
(`imports`, other runtimes, CNI paths), and `nvidia-ctk runtime configure` has dropped
`imports` before. The role reads the file, merges its own keys into the parsed data and writes
the result back only when the data differ, so an unchanged file keeps its comments and layout.

    container_runtime_from_toml   text -> dict (tomllib; an empty text is {})
    container_runtime_to_toml     dict -> text (tables in insertion order; from_toml of the
                                  result equals the input)
"""

from __future__ import annotations

import datetime
import json
import re
import tomllib

from ansible.errors import AnsibleFilterError

BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def from_toml(text: str) -> dict:
    try:
        return tomllib.loads(str(text or ""))
    except tomllib.TOMLDecodeError as exc:
        raise AnsibleFilterError(f"not valid TOML: {exc}") from exc


def _key(key: object) -> str:
    key = str(key)
    return key if BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise AnsibleFilterError(f"cannot write {type(value).__name__} {value!r} as TOML")


def _is_table_array(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _table(path: list[str], table: dict, out: list[str], header: str | None) -> None:
    scalars = [(k, v) for k, v in table.items()
               if not isinstance(v, dict) and not _is_table_array(v)]
    children = [(k, v) for k, v in table.items() if isinstance(v, dict) or _is_table_array(v)]
    # A header for every table that holds values or is empty, so empty tables survive too.
    if header is not None and (scalars or not children):
        out.append(header)
    out.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars)
    for key, value in children:
        child = [*path, _key(key)]
        if isinstance(value, dict):
            _table(child, value, out, f"\n[{'.'.join(child)}]")
        else:
            for item in value:
                out.append(f"\n[[{'.'.join(child)}]]")
                _table(child, item, out, None)


def to_toml(data: dict) -> str:
    if not isinstance(data, dict):
        raise AnsibleFilterError("container_runtime_to_toml needs a mapping")
    out: list[str] = []
    _table([], data, out, None)
    return "\n".join(out).lstrip("\n") + "\n"


class FilterModule:
    def filters(self):
        return {"container_runtime_from_toml": from_toml, "container_runtime_to_toml": to_toml}
