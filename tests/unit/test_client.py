import pytest

from racklift.errors import NetBoxError
from racklift.netbox.client import NetBoxSettings, auth_header, check_version, parse_version


@pytest.mark.parametrize(("text", "expected"), [
    ("4.7.3", (4, 7, 3)),
    ("4.2.0-Docker-3.2.0", (4, 2, 0)),
    ("v4.1", (4, 1)),
    ("4.3.0-beta1", (4, 3, 0)),
])
def test_parse_version(text, expected):
    assert parse_version(text) == expected


def test_parse_version_rejects_garbage():
    with pytest.raises(NetBoxError, match="cannot read a NetBox version"):
        parse_version("unknown")


@pytest.mark.parametrize("version", ["3.7.8", "4.0.11", "4.1.11"])
def test_netbox_before_4_2_is_refused(version):
    with pytest.raises(NetBoxError, match=rf"is {version}; racklift needs NetBox >= 4.2"):
        check_version(version, "http://nb")


@pytest.mark.parametrize("version", ["4.2.0", "4.7.3", "5.0.0"])
def test_supported_versions_pass(version):
    check_version(version, "http://nb")


def test_settings_from_env(monkeypatch):
    monkeypatch.setenv("NETBOX_URL", "https://netbox.example/")
    monkeypatch.setenv("NETBOX_TOKEN", "s3cret-token-value")
    settings = NetBoxSettings.from_env()
    assert settings.url == "https://netbox.example"
    assert "s3cret" not in repr(settings)


def test_settings_missing_token_names_the_variable(monkeypatch):
    monkeypatch.setenv("NETBOX_URL", "https://netbox.example")
    monkeypatch.delenv("NETBOX_TOKEN", raising=False)
    default = NetBoxSettings("http://lab", "t")
    # A half-set environment is an operator mistake: never fall back to the lab silently.
    with pytest.raises(NetBoxError, match="NETBOX_TOKEN not set"):
        NetBoxSettings.from_env(default=default)


def test_settings_fall_back_to_default_only_when_nothing_is_set(monkeypatch):
    monkeypatch.delenv("NETBOX_URL", raising=False)
    monkeypatch.delenv("NETBOX_API", raising=False)
    monkeypatch.delenv("NETBOX_TOKEN", raising=False)
    default = NetBoxSettings("http://lab", "t")
    assert NetBoxSettings.from_env(default=default) is default
    with pytest.raises(NetBoxError, match="NETBOX_URL and NETBOX_TOKEN not set"):
        NetBoxSettings.from_env()


def test_auth_header_tells_v1_from_v2_tokens():
    assert auth_header("0123456789abcdef0123456789abcdef01234567") == (
        "Token 0123456789abcdef0123456789abcdef01234567")
    assert auth_header("nbt_AbCd1234.s3cr3tPlainText") == "Bearer nbt_AbCd1234.s3cr3tPlainText"


def test_id_groups_keep_urls_short_whatever_the_id_width():
    from racklift.netbox.client import ID_QUERY_BUDGET, id_groups

    for ids in (range(1, 10_001), range(10_000_000, 10_005_000), [5, 3, 3, 1]):
        groups = list(id_groups("device_id", ids))
        assert [i for g in groups for i in g] == sorted(set(ids))
        for group in groups:
            assert sum(len(f"device_id={i}&") for i in group) <= ID_QUERY_BUDGET + 1
    assert len(list(id_groups("device_id", range(1, 9)))) == 1  # a rack: one request
