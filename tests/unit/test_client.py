import pytest

from racklift.errors import NetBoxError
from racklift.netbox.client import (
    NetBox,
    NetBoxSettings,
    _int_ids,
    auth_header,
    check_version,
    id_windows,
    parse_version,
)


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


# -- reading big lists in id windows ---------------------------------------------------------


def covered(windows):
    return [i for start, stop in windows for i in range(start, stop)]


def test_id_windows_cover_every_id_once_about_a_page_each():
    windows = id_windows(1001, 110_000, expected=109_000, page=1000)
    assert covered(windows) == list(range(1001, 110_001))
    assert len(windows) == 109
    assert all(stop - start <= 1000 for start, stop in windows)


def test_sparse_ids_make_wider_windows_not_more_requests():
    # 10,000 objects spread over ids 1..1,000,000 (many deleted): still ~10 windows.
    windows = id_windows(1, 1_000_000, expected=10_000, page=1000)
    assert len(windows) == 10
    assert covered(windows) == list(range(1, 1_000_001))


def test_nothing_to_read_makes_no_windows():
    assert id_windows(10, 9, expected=5) == []
    assert id_windows(1, 100, expected=0) == []


def test_windows_read_everything_when_the_server_caps_pages_and_ids_cluster():
    """Windows are sized for even spread; a window holding more than a page (clustered ids),
    or a server that returns shorter pages than asked, is read on with the cursor."""
    ids = [*range(1, 50), *range(5000, 8000)]  # most objects clustered in one window
    cap = 7
    calls = []

    def read(start, stop):
        calls.append((start, stop))
        rows = [{"id": i} for i in ids if start <= i < stop][:cap]
        return rows, len(rows) == cap

    netbox = NetBox(NetBoxSettings("http://nb", "t"))
    rows = netbox._windows(min(ids), max(ids), len(ids), 1000, read)
    assert sorted(r["id"] for r in rows) == ids
    assert all(start < stop for start, stop in calls)


def test_graphql_ids_become_ints_like_rest():
    row = {"id": "12", "name": "eno1", "device": {"id": "3"}, "primary_mac_address": None,
           "tags": [{"id": "5", "slug": "x"}]}
    assert _int_ids(row) == {"id": 12, "name": "eno1", "device": {"id": 3},
                             "primary_mac_address": None, "tags": [{"id": 5, "slug": "x"}]}
