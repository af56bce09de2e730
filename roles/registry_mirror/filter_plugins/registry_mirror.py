"""Controller-side filters of the registry_mirror role: the logic stays in the racklift
package (racklift.registry.mirror), where the unit tests call it."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError


def _mirror():
    try:
        from racklift.registry import mirror
    except ImportError as exc:  # pragma: no cover - depends on the interpreter running Ansible
        raise AnsibleFilterError(
            f"registry_mirror: the racklift package is not importable by this Ansible ({exc}); "
            "run Ansible from racklift's virtualenv") from None
    return mirror


def distribution_config(upstream: dict[str, Any], listen: str, storage_root: str,
                        tls_cert: str = "", tls_key: str = "",
                        log_level: str = "info") -> dict[str, Any]:
    return _mirror().distribution_config(upstream, listen=listen, storage_root=storage_root,
                                         tls_cert=tls_cert, tls_key=tls_key, log_level=log_level)


def foreign_listeners(ss_output: str, port: int, own_pids: list[Any],
                      own_uids: list[Any] | None = None) -> list[str]:
    return _mirror().foreign_listeners(ss_output, int(port), [int(p or 0) for p in own_pids],
                                       [int(u) for u in own_uids or []])


def client_config(mirrors: list[dict[str, Any]]) -> dict[str, Any]:
    try:
        return _mirror().client_config(mirrors)
    except (KeyError, ValueError) as exc:
        raise AnsibleFilterError(f"registry_mirror_client_config: {exc}") from None


def public_upstreams(upstreams: Any) -> Any:
    return _mirror().public_upstreams(upstreams)


def listen_ip_valid(address: Any) -> bool:
    return _mirror().listen_ip(address) is not None


def unspecified(address: Any) -> bool:
    return _mirror().unspecified(address)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "registry_mirror_distribution_config": distribution_config,
            "registry_mirror_foreign_listeners": foreign_listeners,
            "registry_mirror_client_config": client_config,
            "registry_mirror_public_upstreams": public_upstreams,
            "registry_mirror_listen_ip_valid": listen_ip_valid,
            "registry_mirror_unspecified": unspecified,
        }
