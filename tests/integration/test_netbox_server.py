"""The lab NetBox lifecycle, on the real server the tests use."""

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests

from racklift.lab import netbox_server, services

# The NetBox tier: every test here is about the NetBox server or a connection to one.
pytestmark = pytest.mark.netbox


def test_second_up_is_a_no_op(instance):
    result = netbox_server.up(instance)
    assert result.already_running
    assert result.version.startswith("4.7")


def test_reset_restores_an_empty_migrated_database(instance, empty_netbox):
    empty_netbox.create("extras/tags", [{"name": "scratch", "slug": "scratch"}])
    assert empty_netbox.count("extras/tags", {"slug": "scratch"}) == 1
    seconds = netbox_server.reset(instance)
    print(f"\n[netbox] reset in {seconds:.2f} s")
    assert empty_netbox.count("extras/tags", {"slug": "scratch"}) == 0
    # The lab admin token survives a reset: it is part of the migrated dump.
    assert netbox_server.answers(instance)


def test_snapshot_and_reset_to_it(instance, empty_netbox):
    empty_netbox.create("extras/tags", [{"name": "kept", "slug": "kept"}])
    netbox_server.snapshot(instance, "kept")
    empty_netbox.create("extras/tags", [{"name": "dropped", "slug": "dropped"}])
    netbox_server.reset(instance, "kept")
    assert empty_netbox.count("extras/tags", {"slug": "kept"}) == 1
    assert empty_netbox.count("extras/tags", {"slug": "dropped"}) == 0


def test_down_then_up_keeps_the_data(instance, empty_netbox):
    empty_netbox.create("extras/tags", [{"name": "survivor", "slug": "survivor"}])
    assert netbox_server.down(instance)
    assert netbox_server.answers(instance, timeout=0.5) is None
    started = time.monotonic()
    result = netbox_server.up(instance)
    print(f"\n[netbox] cold start from the existing database in {time.monotonic() - started:.1f} s")
    assert not result.already_running
    assert empty_netbox.count("extras/tags", {"slug": "survivor"}) == 1


def test_taken_port_is_a_clear_error(tmp_path):
    import socket

    import pytest

    from racklift.errors import LabError

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        other = netbox_server.NetBoxInstance("porttest", port, redis_base=4)
        with pytest.raises(LabError, match=rf"port {port} is taken by another process: stop it "
                                           r"or choose another port \(RACKLIFT_PORTTEST_NETBOX"):
            netbox_server.up(other)


def test_the_lab_role_may_end_an_autovacuum_worker_when_it_drops_a_database():
    """DROP DATABASE ... WITH (FORCE) ends every session in the database, an autovacuum worker's
    too, which has no role: only a member of pg_signal_backend may (CI once failed a reset on
    it)."""
    pg = services.ensure_postgres()
    assert pg.sql(f"SELECT pg_has_role('{services.PG_ROLE}', 'pg_signal_backend', "
                  "'member')") == "t"


def test_racklift_s_plugin_runs_in_the_server_and_a_changed_one_restarts_it(instance):
    def plugins():
        status = requests.get(f"{instance.url}/api/status/", timeout=60,
                              headers={"Authorization": f"Token {instance.token}"})
        return status.json()["plugins"]

    assert plugins() == {netbox_server.PLUGIN: "0.1.0"}
    # A server started with another plugin (or configuration) than this checkout's: the next
    # up starts it again, and its data stays.
    (instance.root / "started-with").write_text("an older plugin")
    result = netbox_server.up(instance)
    assert not result.already_running and plugins() == {netbox_server.PLUGIN: "0.1.0"}
    assert netbox_server.up(instance).already_running


def test_the_plugin_is_installed_by_its_content_and_never_points_at_its_source(tmp_path):
    """A venv with none, the same, an older plugin or no stamp: ensure_plugin ends with the
    source's content installed, a plain copy that outlives the source."""
    venv, source = tmp_path / "venv", tmp_path / "netbox-racklift"
    subprocess.run([str(netbox_server._base_python()), "-m", "venv", str(venv)], check=True)
    shutil.copytree(netbox_server.PLUGIN_SOURCE, source)

    def installed() -> Path:
        found = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import importlib.util; "
             "print(importlib.util.find_spec('netbox_racklift').submodule_search_locations[0])"],
            capture_output=True, text=True, check=True)
        return Path(found.stdout.strip())

    assert netbox_server.ensure_plugin(venv, source)  # new
    assert not netbox_server.ensure_plugin(venv, source)  # the same
    assert venv in installed().parents
    (venv / ".racklift-plugin").unlink()  # a venv from before the stamp
    assert netbox_server.ensure_plugin(venv, source)
    with (source / "netbox_racklift" / "reading.py").open("a") as f:
        f.write("# changed\n")
    assert netbox_server.ensure_plugin(venv, source)  # changed: installed again
    assert (installed() / "reading.py").read_text().endswith("# changed\n")
    shutil.rmtree(source)  # the checkout gone: the installed copy stays whole
    assert (installed() / "views.py").exists() and venv in installed().parents
