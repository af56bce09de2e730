"""The container_runtime role's TOML filters: what it writes, tomllib (and containerd) reads
back as the same data, so a merged config.toml keeps every key of the site's file."""

import importlib.util
import tomllib
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

PLUGIN = (Path(__file__).resolve().parents[2]
          / "roles/container_runtime/filter_plugins/container_runtime_toml.py")
_spec = importlib.util.spec_from_file_location("container_runtime_toml", PLUGIN)
toml = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(toml)

# Debian's containerd config, a site's imports and an nvidia runtime as the role writes it.
CONTAINERD = """\
version = 2
imports = ["/etc/containerd/site.d/*.toml"]
oom_score = -999

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
        BinaryName = "/usr/bin/nvidia-container-runtime"
        SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".registry.mirrors]
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"

[[proxy_plugins.list]]
name = "a"
[[proxy_plugins.list]]
name = "b \\"quoted\\" \\u00e9"
ratio = 0.5
"""


def test_round_trip_keeps_every_key():
    data = tomllib.loads(CONTAINERD)
    written = toml.to_toml(data)
    assert tomllib.loads(written) == data
    assert toml.from_toml(written) == data
    # An empty table survives (containerd tells "set but empty" from "absent" for some keys).
    assert '[plugins."io.containerd.grpc.v1.cri".registry.mirrors]' in written


def test_hosts_toml_keys_are_quoted_and_in_order():
    data = {"server": "https://registry-1.docker.io",
            "host": {"https://b.example:5000": {"capabilities": ["pull", "resolve"]},
                     "http://a.example": {"skip_verify": True}}}
    written = toml.to_toml(data)
    assert written.index("b.example") < written.index("a.example")
    assert '[host."https://b.example:5000"]' in written
    assert list(tomllib.loads(written)["host"]) == ["https://b.example:5000", "http://a.example"]


def test_empty_text_is_an_empty_mapping():
    assert toml.from_toml("") == {}
    assert toml.from_toml(None) == {}


def test_bad_toml_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="not valid TOML"):
        toml.from_toml("version = \n")


def test_unwritable_value_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="cannot write"):
        toml.to_toml({"x": object()})
