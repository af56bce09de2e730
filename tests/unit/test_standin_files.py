"""Stand-in packages that install a file: the container toolkit's lab nvidia-container-runtime."""

import os
import subprocess
from pathlib import Path

import pytest

from helpers import REPO
from racklift.errors import LabError
from racklift.lab import standin_repo

TOOLKIT = REPO / "roles/container_runtime/molecule/default/standin-packages.yml"
RUNTIME = "/usr/bin/nvidia-container-runtime"


def runtime_file() -> standin_repo.File:
    base = [p for p in standin_repo.load(TOOLKIT) if p.name == "nvidia-container-toolkit-base"]
    assert [p.version for p in base] == ["1.17.3-1", "1.17.4-1"]
    assert base[0].files == base[1].files
    return base[0].files[RUNTIME]


def test_the_deb_installs_the_file_with_its_mode(tmp_path):
    package = standin_repo.Package("nvidia-container-toolkit-base", "1.17.3-1",
                                   files={RUNTIME: runtime_file()})
    deb = standin_repo._build_deb(package, tmp_path / "src", tmp_path)
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                             check=True).stdout
    line = next(line for line in listing.splitlines() if line.endswith("." + RUNTIME))
    assert line.startswith("-rwxr-xr-x root/root")


def test_the_lab_runtime_says_what_it_is_and_hands_runcs_command_line_to_runc(tmp_path):
    script = tmp_path / "nvidia-container-runtime"
    script.write_text(runtime_file().text)
    runc = tmp_path / "runc"  # records how it was called
    runc.write_text('#!/bin/sh\nfor a in "$@"; do printf "[%s]" "$a"; done\n')
    runc.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}

    def call(*args: str) -> str:
        return subprocess.run(["sh", str(script), *args], capture_output=True, text=True,
                              env=env, check=True).stdout

    assert call("--version") == ("nvidia-container-runtime: racklift lab stand-in, not "
                                 "NVIDIA's runtime (execs runc)\n[--version]")
    assert call("--root", "/run/r", "create", "--bundle", "/b c", "id") == \
        "[--root][/run/r][create][--bundle][/b c][id]"


@pytest.mark.parametrize(("files", "error"), [
    ({"usr/bin/x": {"text": "racklift lab stand-in"}}, "must be absolute"),
    ({"/usr/bin/../x": {"text": "racklift lab stand-in"}}, "must be absolute"),
    ({"/usr/bin/x": {"text": "#!/bin/sh\nexec runc"}}, "must say 'racklift lab stand-in'"),
    ({"/usr/bin/x": {"text": "racklift lab stand-in", "mode": "rwx"}}, "an octal mode"),
    ({"/usr/bin/x": {"mode": "0755"}}, "a file text"),
])
def test_a_file_must_be_absolute_say_it_is_a_stand_in_and_have_an_octal_mode(files, error):
    with pytest.raises(LabError, match=error):
        standin_repo.Package.from_dict({"name": "p", "version": "1", "files": files},
                                       Path("spec.yml"))
