"""The boot_server role's per-host bindings and its release (roles/boot_server): which client nginx
serves each iPXE script to, and what the image stage's end removes. nginx's config is rendered
from the role's template and read here; the release runs the real playbooks/image_release.yml
with Ansible against this machine, over planted files."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import jinja2
import pytest

from helpers import BIN, REPO, load_script

ROLE = REPO / "roles" / "boot_server"
filters = load_script(ROLE / "filter_plugins" / "boot_server.py", "boot_server_filters")
TOKEN = "planted-Deploy-Token-4711abcdef"
HOSTS = [{"name": "node-01", "mac": "52:54:00:90:00:11", "ip": "10.90.0.11"},
         {"name": "node-02", "mac": "52:54:00:90:00:12", "ip": "10.90.0.12"}]


def _nginx_site(hosts: list[dict[str, str]]) -> str:
    template = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                  loader=jinja2.FileSystemLoader(ROLE / "templates"))
    return template.get_template("nginx-site.conf.j2").render(
        boot_server_http_port=80, boot_server_http_root="/srv/racklift/boot",
        __boot_server_hosts=hosts)


def _locations(config: str) -> dict[str, list[str]]:
    """location → its directives (no nested blocks in this config)."""
    return {where.strip(): [line.strip() for line in body.strip().splitlines()]
            for where, body in re.findall(r"location ([^{]+)\{([^}]*)\}", config)}


def test_each_ipxe_script_is_served_to_its_hosts_reserved_address_only() -> None:
    locations = _locations(_nginx_site(HOSTS))
    for host in HOSTS:
        assert locations[f"= /ipxe/{host['mac']}.ipxe"] == [
            f"allow {host['ip']};", "deny all;", "default_type text/plain;",
            'add_header Cache-Control "no-store";', "try_files $uri =404;"]
    # Any other script (an unknown MAC, another case or spelling) is 404 to everyone.
    assert locations["/ipxe/"] == ["return 404;"]
    # No address is allowed anything else: not the subnet, not the server itself.
    config = _nginx_site(HOSTS)
    assert sorted(re.findall(r"allow (\S+);", config)) == ["10.90.0.11", "10.90.0.12"]
    # nginx's client is the TCP peer: no module that takes it from a header a client sends.
    assert not re.search(r"real_ip|set_real_ip_from|X-Forwarded-For|X-Real-IP", config, re.I)


def test_an_installed_hosts_files_are_served_to_its_reserved_address_only() -> None:
    """Its preseed holds this install's nonce, which the SSH check takes as proof of the disk:
    no other machine on the provisioning network reads it."""
    installing = {**HOSTS[0], "deploy": True, "method": "installer"}
    locations = _locations(_nginx_site([installing, HOSTS[1]]))
    assert locations["^~ /installer/node-01/"] == [
        "allow 10.90.0.11;", "deny all;", 'add_header Cache-Control "no-store";',
        "try_files $uri =404;"]
    # A host not being installed has no such location; the installer media are everyone's.
    assert [where for where in locations if "installer" in where] == ["^~ /installer/node-01/"]


def test_with_no_hosts_no_script_is_served() -> None:
    locations = _locations(_nginx_site([]))
    assert [where for where in locations if "ipxe/" in where] == ["/ipxe/"]


def test_stale_paths_are_hosts_files_and_never_the_installer_media() -> None:
    """The stale cleanup's choice over what the server holds: node-01 is still installed,
    node-02 only boots its disk now, node-09 is gone; installer/debian-12/ holds published
    media, which find never lists (it holds no host's files) and the filter never names."""
    root, api = "/srv/racklift/boot", "/var/lib/racklift/boot"
    hosts = [{**HOSTS[0], "deploy": True, "method": "installer",
              "installer": {"ipxe": "#!ipxe\n", "files": {"preseed.cfg": "x"}}},
             {**HOSTS[1], "deploy": False}]
    present = [f"{root}/ipxe/52:54:00:90:00:11.ipxe", f"{root}/ipxe/52:54:00:90:00:12.ipxe",
               f"{root}/ipxe/52:54:00:90:00:19.ipxe", f"{api}/hosts/node-09.json",
               f"{root}/installer/node-01/preseed.cfg", f"{root}/installer/node-01/user-data",
               f"{root}/installer/node-02/preseed.cfg", f"{root}/installer/node-09/meta-data",
               f"{root}/installer/node-09/user-data"]
    assert filters.boot_server_stale_paths(present, hosts, root, api) == [
        f"{root}/installer/node-01/user-data",  # node-01's dir stays: it is still installed
        f"{root}/installer/node-02", f"{root}/installer/node-09",
        f"{root}/ipxe/52:54:00:90:00:19.ipxe", f"{api}/hosts/node-09.json"]


def test_release_paths_are_each_hosts_script_deploy_data_and_installer_files() -> None:
    """Everything that holds a released host's token or SSH host key."""
    assert filters.boot_server_release_paths(HOSTS, "/srv/http", "/var/api") == [
        "/srv/http/installer/node-01", "/srv/http/installer/node-02",
        "/srv/http/ipxe/52:54:00:90:00:11.ipxe", "/srv/http/ipxe/52:54:00:90:00:12.ipxe",
        "/var/api/hosts/node-01.json", "/var/api/hosts/node-02.json"]
    assert filters.boot_server_release_problems(HOSTS) == []


def test_the_hosts_the_role_loops_over_in_the_open_hold_no_token_or_host_key() -> None:
    """The deploy data and installer files hold the host's SSH host key, the entry its token:
    what the templates and logged loops see has none of them."""
    hosts = [{"name": "node-01", "mac": "52:54:00:90:00:11", "ip": "10.90.0.11",
              "deploy": True, "method": "image", "token": "t0k3n",
              "deploy_data": {"ssh_host_ed25519_key": "UFJJVkFURQ=="}},
             {"name": "node-02", "mac": "52:54:00:90:00:12", "ip": "10.90.0.12",
              "deploy": True, "method": "installer",
              "installer": {"ipxe": "#!ipxe", "files": {"preseed.cfg": "PRIVATE"}}}]
    public = filters.boot_server_public_hosts(hosts)
    assert "UFJJVkFURQ" not in str(public) and "PRIVATE" not in str(public)
    assert "t0k3n" not in str(public)
    assert [h["name"] for h in public] == ["node-01", "node-02"]


@pytest.mark.parametrize("planted", [
    {"name": "../../../etc/passwd", "mac": "52:54:00:90:00:11"},
    {"name": "node-01", "mac": "52:54:00:90:00:11/../../../../etc/shadow"},
    {"name": "node-01\n", "mac": "52:54:00:90:00:11"}, {"name": "node-01"}, "node-01"])
def test_release_refuses_names_that_are_not_plain(planted) -> None:
    problems = filters.boot_server_release_problems([HOSTS[0], planted])
    assert len(problems) == 1
    assert problems[0].startswith("boot_server_release_hosts[1] must be {name, mac}")
    assert filters.boot_server_release_problems({"name": "node-01"}) == [
        "boot_server_release_hosts must be a list of hosts (got a dict)"]


def test_the_release_playbook_removes_the_runs_tokens_and_nothing_else(tmp_path: Path) -> None:
    """Planted: node-01's deploy script (its token) and deploy data (the token's hash) from a
    stage that ended with an error, another host's files, the API's used/ and reports/."""
    http, api = tmp_path / "http", tmp_path / "api"
    files = {
        http / "ipxe" / "52:54:00:90:00:11.ipxe": f"kernel x racklift.token={TOKEN}\n",
        api / "hosts" / "node-01.json": json.dumps({"token_sha256": "ab" * 32}),
        http / "ipxe" / "52:54:00:90:00:99.ipxe": "exit\n",  # another run's host
        api / "hosts" / "node-99.json": "{}",
        api / "used" / "node-01.json": "{}",
        api / "reports" / "node-01.json": "{}",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "ansible.cfg").write_text(f"[defaults]\nroles_path = {ROLE.parent}\n"
                                          "retry_files_enabled = False\n")
    extravars = {"ansible_become": False, "ansible_python_interpreter": str(BIN / "python"),
                 "boot_server_http_root": str(http), "boot_server_api_data": str(api),
                 # node-02 was given to the boot server, but its files never got there.
                 "racklift_image_release": [{"name": h["name"], "mac": h["mac"]}
                                            for h in HOSTS]}
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
         str(REPO / "playbooks" / "image_release.yml"), "-e", json.dumps(extravars)],
        capture_output=True, text=True, timeout=300,
        env={"ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"), "PATH": f"{BIN}:/usr/bin:/bin",
             "HOME": str(tmp_path), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp")})
    assert done.returncode == 0, done.stdout + done.stderr
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.*")
                  if p.is_file() and p.parent.name in ("ipxe", "hosts", "used", "reports"))
    assert left == ["api/hosts/node-99.json", "api/reports/node-01.json",
                    "api/used/node-01.json", "http/ipxe/52:54:00:90:00:99.ipxe"]
    assert TOKEN not in done.stdout + done.stderr
