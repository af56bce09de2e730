"""The installer path's renderings: Debian preseed, Ubuntu autoinstall, their iPXE scripts."""

import base64
import json
import re
import subprocess

import pytest
import yaml

from racklift.imaging import host_keys
from racklift.imaging import installer as installer_module
from racklift.imaging.deploy_data import DeployDataError, HostDeploy
from racklift.imaging.installer import (
    InstallerError,
    InstallerSpec,
    boot_server_installer,
    build_id,
    installer_os,
    marker_name,
    packaged_media,
    render_installer,
)

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE3racklift0test0key0only0for0tests operator@lab"
SERVER = "http://10.90.0.1"
NONCE = "0123456789abcdef0123456789abcdef"
HOST_KEY = host_keys.new_host_key()


def host(**changes) -> HostDeploy:
    values = {"host": "gpu-042", "mac": "52:54:00:AB:00:42", "address": "10.90.0.42/24",
              "gateway": "10.90.0.1", "dns": ("10.90.0.1", "10.90.0.2"),
              "authorized_keys": (KEY,), "target_disk": "/dev/nvme0n1", "host_key": HOST_KEY}
    return HostDeploy(**{**values, **changes})


def preseed_keys(text: str) -> dict[str, tuple[str, str]]:
    """'owner question type value' lines → {question: (type, value)}."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            owner, question, kind, *value = line.split(" ", 3)
            assert owner in ("d-i", "tasksel", "popularity-contest"), line
            out[question] = (kind, value[0] if value else "")
    return out


def late_script(command: str) -> str:
    blob = re.search(r"echo ([A-Za-z0-9+/=]+) \| base64 -d \| sh", command)
    assert blob, command
    return base64.b64decode(blob[1]).decode()


def test_debian_preseed_has_what_an_unattended_install_needs():
    rendered = render_installer(host(), InstallerSpec(os="debian-12"), SERVER, NONCE)
    assert set(rendered.files) == {"preseed.cfg"}
    keys = preseed_keys(rendered.files["preseed.cfg"])
    assert keys["netcfg/get_ipaddress"] == ("string", "10.90.0.42")
    assert keys["netcfg/get_netmask"] == ("string", "255.255.255.0")
    assert keys["netcfg/get_gateway"] == ("string", "10.90.0.1")
    assert keys["netcfg/get_nameservers"] == ("string", "10.90.0.1 10.90.0.2")
    assert keys["netcfg/get_hostname"] == ("string", "gpu-042")
    assert keys["mirror/http/hostname"] == ("string", "deb.debian.org")
    assert keys["mirror/http/directory"] == ("string", "/debian")
    assert keys["partman-auto/disk"] == ("string", "/dev/nvme0n1")
    assert keys["grub-installer/bootdev"] == ("string", "/dev/nvme0n1")
    assert keys["passwd/root-password-crypted"] == ("password", "!")
    assert keys["passwd/make-user"] == ("boolean", "false")
    for question in ("partman/confirm", "partman/confirm_nooverwrite",
                     "partman-partitioning/confirm_write_new_label", "netcfg/confirm_static"):
        assert keys[question] == ("boolean", "true"), question
    assert keys["finish-install/reboot_in_progress"] == ("note", "")
    # The end of the install is the host powering off (the image stage reads the BMC).
    assert keys["debian-installer/exit/poweroff"] == ("boolean", "true")
    assert "openssh-server" in keys["pkgsel/include"][1]
    assert keys["tasksel/first"] == ("multiselect", "ssh-server")
    assert keys["mirror/http/proxy"] == ("string", "")
    kind, command = keys["preseed/late_command"]
    assert kind == "string" and command.startswith("in-target sh -c ")


def test_late_command_writes_keys_and_markers_and_is_valid_shell(tmp_path):
    rendered = render_installer(host(), InstallerSpec(os="debian-12"), SERVER, NONCE)
    script = late_script(preseed_keys(rendered.files["preseed.cfg"])["preseed/late_command"][1])
    assert KEY in script.splitlines()
    assert rendered.marker["name"] == "installer-debian-12"
    assert re.fullmatch(r"[0-9a-f]{16}", rendered.marker["build_id"])
    # The script run against a scratch root (paths rewritten) leaves exactly those files.
    root = tmp_path / "target"
    scratch = script.replace(" /root/", f" {root}/root/").replace(" /etc/", f" {root}/etc/")
    subprocess.run(["sh", "-c", scratch], check=True)
    assert (root / "root/.ssh/authorized_keys").read_text() == KEY + "\n"
    assert oct((root / "root/.ssh/authorized_keys").stat().st_mode & 0o777) == "0o600"
    assert json.loads((root / "etc/racklift/image.json").read_text()) == rendered.marker
    assert json.loads((root / "etc/racklift/deploy.json").read_text()) == {
        "host": "gpu-042", "image": "installer-debian-12", "build_id": rendered.marker["build_id"]}
    assert (root / "etc/racklift/deploy-nonce").read_text() == NONCE + "\n"
    # The host key the controller pins, in place of the one the package install made.
    private = root / "etc/ssh/ssh_host_ed25519_key"
    assert private.read_text() == HOST_KEY.private
    assert oct(private.stat().st_mode & 0o777) == "0o600"
    assert (root / "etc/ssh/ssh_host_ed25519_key.pub").read_text() == HOST_KEY.public + "\n"


@pytest.mark.parametrize("os_name", ["debian-12", "ubuntu-24.04"])
def test_the_installer_files_hold_the_host_key_and_refuse_a_host_without_one(os_name):
    """Both installers' late commands carry the key (in base64, as the script is); so the
    rendered files are secret (the boot_server role serves them to the host alone)."""
    rendered = render_installer(host(), InstallerSpec(os=os_name), SERVER, NONCE)
    text = "".join(rendered.files.values())
    late = "".join(base64.b64decode(b).decode(errors="replace")
                   for b in re.findall(r"echo ([A-Za-z0-9+/=]{200,})", text))
    assert HOST_KEY.private_base64() in late and HOST_KEY.public in late
    with pytest.raises(DeployDataError, match="gpu-042: deploy data field "
                       "'ssh_host_ed25519_key' is missing"):
        render_installer(host(host_key=None), InstallerSpec(os=os_name), SERVER, NONCE)


def test_a_proxy_reaches_the_installer_and_the_installed_apt():
    proxy = "http://10.90.0.1:3142"
    debian = render_installer(host(), InstallerSpec(os="debian-12", proxy=proxy), SERVER, NONCE)
    assert preseed_keys(debian.files["preseed.cfg"])["mirror/http/proxy"] == ("string", proxy)
    ubuntu = render_installer(host(), InstallerSpec(os="ubuntu-24.04", proxy=proxy), SERVER, NONCE)
    auto = yaml.safe_load(ubuntu.files["user-data"])["autoinstall"]
    assert auto["apt"]["proxy"] == proxy
    assert auto["shutdown"] == "poweroff"
    assert "proxy" not in yaml.safe_load(render_installer(
        host(), InstallerSpec(os="ubuntu-24.04"), SERVER, NONCE).files["user-data"])[
            "autoinstall"]["apt"]


def test_os_image_names_pick_the_installer():
    assert installer_os("installer-debian-12") == "debian-12"
    assert installer_os("installer-ubuntu-24.04") == "ubuntu-24.04"
    for image in ("debian12", "installer-centos-7", "installer-", "debian-12"):
        assert installer_os(image) is None, image
    assert marker_name("debian-12") == "installer-debian-12"


def test_packaged_media_names_the_package_when_missing(monkeypatch, tmp_path):
    monkeypatch.setitem(installer_module.PACKAGED_MEDIA, "debian-12",
                        (tmp_path, ("linux", "initrd.gz"), "debian-installer-12-netboot-amd64"))
    with pytest.raises(InstallerError, match=r"linux, initrd\.gz .*debian-installer-12-netboot"):
        packaged_media("debian-12")
    for name in ("linux", "initrd.gz"):
        (tmp_path / name).write_bytes(b"x")
    assert packaged_media("debian-12") == [
        {"src": str(tmp_path / "linux"), "dest": "installer/debian-12/linux"},
        {"src": str(tmp_path / "initrd.gz"), "dest": "installer/debian-12/initrd.gz"}]
    assert packaged_media("ubuntu-24.04") == []  # the site publishes Ubuntu's ISO itself


def test_debian_ipxe_boots_the_netboot_installer_with_the_preseed_url():
    rendered = render_installer(host(), InstallerSpec(os="debian-12"), SERVER, NONCE)
    lines = rendered.ipxe.splitlines()
    assert lines[0] == "#!ipxe"
    kernel = next(line for line in lines if line.startswith("kernel "))
    args = kernel.split()
    assert args[1] == f"{SERVER}/installer/debian-12/linux"
    # lowmem/low=1: the low-memory notice comes before the preseed and would wait for a key.
    for arg in ("auto=true", "priority=critical", "lowmem/low=1",
                f"url={SERVER}/installer/gpu-042/preseed.cfg",
                "netcfg/get_ipaddress=10.90.0.42", "hostname=gpu-042", "initrd=initrd.gz"):
        assert arg in args, arg
    assert f"initrd --name initrd.gz {SERVER}/installer/debian-12/initrd.gz || goto failed" in lines
    assert "boot || goto failed" in lines


@pytest.mark.parametrize("release", ["ubuntu-22.04", "ubuntu-24.04"])
def test_ubuntu_autoinstall_parses_with_the_required_keys(release):
    rendered = render_installer(
        host(), InstallerSpec(os=release, mirror="http://mirror.site.example/ubuntu/"), SERVER,
        NONCE)
    assert set(rendered.files) == {"user-data", "meta-data"}
    assert rendered.files["user-data"].startswith("#cloud-config\n")
    auto = yaml.safe_load(rendered.files["user-data"])["autoinstall"]
    assert auto["version"] == 1
    assert auto["identity"] == {"hostname": "gpu-042", "username": "racklift", "password": "!"}
    assert auto["ssh"] == {"install-server": True, "allow-pw": False, "authorized-keys": [KEY]}
    assert auto["network"] == {"version": 2, "ethernets": {"prov0": {
        "match": {"macaddress": "52:54:00:ab:00:42"}, "set-name": "prov0", "dhcp4": False,
        "addresses": ["10.90.0.42/24"], "routes": [{"to": "default", "via": "10.90.0.1"}],
        "nameservers": {"addresses": ["10.90.0.1", "10.90.0.2"]}}}}
    assert auto["storage"] == {"layout": {"name": "direct", "match": {"path": "/dev/nvme0n1"}}}
    assert auto["apt"]["primary"] == [{"arches": ["default"],
                                       "uri": "http://mirror.site.example/ubuntu"}]
    [late] = auto["late-commands"]
    assert late.startswith("curtin in-target --target=/target -- sh -c ")
    assert f'"name": "installer-{release}"' in late_script(late)
    meta = yaml.safe_load(rendered.files["meta-data"])
    assert meta == {"instance-id": f"racklift-gpu-042-{rendered.marker['build_id']}",
                    "local-hostname": "gpu-042"}


def test_ubuntu_ipxe_uses_nocloud_from_the_boot_server():
    rendered = render_installer(host(), InstallerSpec(os="ubuntu-24.04"), SERVER, NONCE)
    kernel = next(line for line in rendered.ipxe.splitlines() if line.startswith("kernel "))
    args = kernel.split()
    assert "autoinstall" in args
    assert f"ds=nocloud-net;s={SERVER}/installer/gpu-042/" in args
    assert f"url={SERVER}/installer/ubuntu-24.04/live-server.iso" in args


def test_no_gateway_renders_no_default_route():
    rendered = render_installer(host(gateway=None), InstallerSpec(os="ubuntu-22.04"), SERVER, NONCE)
    assert "routes" not in yaml.safe_load(rendered.files["user-data"])["autoinstall"]["network"][
        "ethernets"]["prov0"]
    keys = preseed_keys(render_installer(host(gateway=None), InstallerSpec(os="debian-12"),
                                         SERVER, NONCE).files["preseed.cfg"])
    assert keys["netcfg/get_gateway"] == ("string", "none")


def test_build_id_is_the_recipe_not_the_host():
    first = render_installer(host(), InstallerSpec(os="debian-12"), SERVER, NONCE).marker
    other = render_installer(host(host="gpu-043", mac="52:54:00:ab:00:43",
                                  address="10.90.0.43/24"),
                             InstallerSpec(os="debian-12"), SERVER, NONCE).marker
    assert first == other
    assert build_id("debian-12", "http://deb.debian.org/debian") == first["build_id"]
    assert build_id("debian-12", "http://mirror.site.example/debian") != first["build_id"]


def test_boot_server_entry_carries_script_and_files():
    entry = boot_server_installer(render_installer(host(), InstallerSpec(os="debian-12"),
                                                   SERVER, NONCE))
    assert entry["method"] == "installer"
    assert entry["installer"]["ipxe"].startswith("#!ipxe\n")
    assert set(entry["installer"]["files"]) == {"preseed.cfg"}


@pytest.mark.parametrize(("changes", "spec", "words"), [
    ({"address": "10.90.0.300/24"}, {}, ["gpu-042", "network.address"]),
    ({"address": "10.90.0.42"}, {}, ["gpu-042", "network.address", "prefix"]),
    ({"mac": "52:54:00:zz:00:42"}, {}, ["gpu-042", "network.mac", "NetBox"]),
    ({"authorized_keys": ()}, {}, ["gpu-042", "authorized_keys"]),
    ({"target_disk": "vda; reboot"}, {}, ["gpu-042", "target_disk", "/dev/"]),
    ({"host": "GPU_042"}, {}, ["GPU_042", "'host'"]),
    ({}, {"os": "centos-7"}, ["gpu-042", "'os'", "debian-12"]),
    ({}, {"mirror": "ftp://mirror example"}, ["gpu-042", "'mirror'", "http"]),
    ({}, {"kernel_url": "http://x/linux\nshell"}, ["gpu-042", "'kernel_url'"]),
    ({}, {"proxy": "http://proxy example:3142"}, ["gpu-042", "'proxy'", "http"]),
])
def test_bad_input_names_the_host_and_the_field(changes, spec, words):
    with pytest.raises((InstallerError, DeployDataError)) as error:
        render_installer(host(**changes), InstallerSpec(**{"os": "debian-12", **spec}), SERVER,
                         NONCE)
    for word in words:
        assert word in str(error.value), (word, str(error.value))
