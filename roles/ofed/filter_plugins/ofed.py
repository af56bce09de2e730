"""Controller-side filters of the ofed role: parsing stays in the racklift package."""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from ansible.errors import AnsibleFilterError


def hca_firmware(text: str) -> list[dict[str, str | None]]:
    """``ibv_devinfo`` output -> [{"ca": "mlx5_0", "firmware": "28.39.1002"}, ...], one per HCA.

    Parsed by racklift.facts.parsers (the same parser the verify gate uses).
    """
    try:
        from racklift.facts.parsers import ParseError, parse_ibv_devinfo
    except ImportError as exc:  # pragma: no cover - depends on the interpreter running Ansible
        raise AnsibleFilterError(
            f"ofed_hca_firmware: the racklift package is not importable by this Ansible ({exc}); "
            "run Ansible from racklift's virtualenv") from None
    try:
        ports = parse_ibv_devinfo(text)
    except ParseError as exc:
        raise AnsibleFilterError(f"ofed_hca_firmware: {exc}") from None
    seen: dict[str, str | None] = {}
    for port in ports:
        seen.setdefault(port.ca, port.firmware)
    return [{"ca": ca, "firmware": fw} for ca, fw in seen.items()]


def _versions(facts: dict[str, Any], name: str) -> list[str]:
    return [str(p.get("version", "")) for p in facts.get(name, [])]


def installed_matching(facts: dict[str, Any], names: list[str], regex: str,
                       match: bool = True) -> list[str]:
    """NAMES installed (package_facts) at a version that does (match) or does not search REGEX."""
    pattern = re.compile(regex)
    return [n for n in names
            if any(bool(pattern.search(v)) == match for v in _versions(facts, n))]


def not_at_version(facts: dict[str, Any], names: list[str], version: str) -> list[str]:
    """NAMES not installed, or not at VERSION (an apt version, '*' wildcards; empty: any)."""
    return [n for n in names
            if not any(version == "" or fnmatch.fnmatchcase(v, version)
                       for v in _versions(facts, n))]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"ofed_hca_firmware": hca_firmware,
                "ofed_installed_matching": installed_matching,
                "ofed_not_at_version": not_at_version}
