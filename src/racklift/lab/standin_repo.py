"""Stand-in apt repositories: vendor repositories (NVIDIA CUDA and container toolkit, DOCA,
MLNX_OFED) cannot be reached here, so tests build a local, signed, flat repository with
packages under the real names and versions and point the unchanged roles at it.

The packages are stand-ins: they carry the vendor's package relationships (metapackages,
conflicts between driver branches), systemd units that idle and small files, never a driver.
Every file they install lives under a path that says so (`/usr/share/racklift-standin/`), is
a unit whose description says so, or is a file whose text says so (checked when loaded).

A repository is described by a YAML file (`standin-packages.yml` beside a Molecule scenario):

    packages:
      - name: cuda-drivers-550
        version: 550.127.05-1
        depends: [nvidia-fabricmanager-550]       # optional: depends, conflicts, provides
        units:                                    # optional: systemd unit name -> ExecStart
          nvidia-persistenced.service: /bin/sleep infinity
        files:                                    # optional: absolute path -> text, mode
          /usr/bin/nvidia-container-runtime: {mode: "0755", text: "... racklift lab stand-in ..."}

It is built into the racklift cache keyed by the description and this builder, and signed
with a key made once per cache; apt verifies it as it verifies the vendor's repository.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path

import yaml

from racklift.errors import LabError
from racklift.paths import cache_dir, cache_lock

KEY_NAME = "racklift stand-in repositories (lab only) <standin@racklift.invalid>"
KEYRING = "racklift-standin-archive-keyring.gpg"
MARKER_DIR = "usr/share/racklift-standin"
# What a stand-in file's text must say, so that nobody takes it for the vendor's.
FILE_MARK = "racklift lab stand-in"


@dataclass(frozen=True)
class File:
    text: str
    mode: int = 0o644


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    depends: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    units: dict[str, str] = field(default_factory=dict)
    files: dict[str, File] = field(default_factory=dict)  # absolute path -> file

    @classmethod
    def from_dict(cls, raw: dict, source: Path) -> Package:
        try:
            package = cls(name=str(raw["name"]), version=str(raw["version"]),
                          depends=tuple(raw.get("depends", ())),
                          conflicts=tuple(raw.get("conflicts", ())),
                          provides=tuple(raw.get("provides", ())),
                          units=dict(raw.get("units", {})),
                          files={str(path): File(str(f["text"]), int(str(f.get("mode", "644")), 8))
                                 for path, f in raw.get("files", {}).items()})
        except (KeyError, TypeError, ValueError) as exc:
            raise LabError(f"{source}: a package needs name and version, a file text and an "
                           f"octal mode ({exc}): {raw!r}") from exc
        for path, file in package.files.items():
            if not path.startswith("/") or ".." in Path(path).parts:
                raise LabError(f"{source}: {package.name}: {path!r} must be absolute, no '..'")
            if FILE_MARK not in file.text:
                raise LabError(f"{source}: {package.name}: {path} must say {FILE_MARK!r}")
        return package

    def fields(self) -> str:
        lines = [f"Package: {self.name}", f"Version: {self.version}", "Architecture: all",
                 "Maintainer: racklift lab <standin@racklift.invalid>", "Section: misc",
                 "Priority: optional"]
        for key, values in (("Depends", self.depends), ("Conflicts", self.conflicts),
                            ("Replaces", self.conflicts), ("Provides", self.provides)):
            if values:
                lines.append(f"{key}: {', '.join(values)}")
        return "\n".join(lines) + "\n"

    def description(self) -> str:
        return (f"Description: STAND-IN for {self.name} {self.version} (racklift lab)\n"
                " Carries the vendor package's name, version and relationships; installs\n"
                " no driver. Built by racklift's tests because the vendor repository\n"
                " cannot be reached from the test machine.\n")


def unit_text(name: str, package: Package, exec_start: str) -> str:
    return (f"[Unit]\nDescription=STAND-IN {name} from {package.name} {package.version} "
            f"(racklift lab, idles)\n\n[Service]\nExecStart={exec_start}\n\n"
            "[Install]\nWantedBy=multi-user.target\n")


def load(spec: Path) -> list[Package]:
    raw = yaml.safe_load(spec.read_text()) or {}
    return [Package.from_dict(item, spec) for item in raw.get("packages", [])]


def _run(*args: str, env: dict[str, str] | None = None, stdin: bytes | None = None) -> bytes:
    result = subprocess.run(args, capture_output=True, env=env, input=stdin)
    if result.returncode != 0:
        raise LabError(f"{' '.join(args[:3])}: {result.stderr.decode(errors='replace')[-600:]}")
    return result.stdout


def _gnupg_env() -> dict[str, str]:
    """A GnuPG home with the stand-in signing key, made once per cache."""
    home = cache_dir() / "standin-gnupg"
    env = {**os.environ, "GNUPGHOME": str(home)}
    if (home / "ready").exists():
        return env
    with cache_lock("standin-gnupg"):
        if not (home / "ready").exists():
            if not shutil.which("gpg"):
                raise LabError("gpg not found: install the Debian package gnupg")
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True, mode=0o700)
            _run("gpg", "--batch", "--passphrase", "", "--quick-gen-key", KEY_NAME, "ed25519",
                 "sign", "never", env=env)
            (home / "ready").touch()
    return env


def _build_deb(package: Package, work: Path, out: Path) -> Path:
    root = work / f"{package.name}_{package.version}"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(package.fields() + package.description())
    marker = root / MARKER_DIR / package.name
    marker.parent.mkdir(parents=True)
    marker.write_text(f"{package.version}\n")
    for unit, exec_start in package.units.items():
        path = root / "lib/systemd/system" / unit
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(unit_text(unit, package, exec_start))
    for target, file in package.files.items():
        path = root / target.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(file.text)
        path.chmod(file.mode)
    deb = out / f"{package.name}_{package.version.replace(':', '%3a')}_all.deb"
    _run("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb))
    return deb


def _stanza(package: Package, deb: Path) -> str:
    data = deb.read_bytes()
    return (package.fields() + f"Filename: ./{deb.name}\nSize: {len(data)}\n"
            f"MD5sum: {hashlib.md5(data).hexdigest()}\n"
            f"SHA256: {hashlib.sha256(data).hexdigest()}\n" + package.description() + "\n")


def _release(out: Path) -> str:
    lines = ["Origin: racklift-standin", "Label: racklift stand-in (lab only)",
             f"Date: {formatdate(usegmt=True)}", "SHA256:"]
    for name in ("Packages", "Packages.gz"):
        data = (out / name).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}")
    return "\n".join(lines) + "\n"


def build(spec: Path) -> Path:
    """The flat repository for SPEC (built once per recipe); its directory."""
    packages = load(spec)
    recipe = spec.read_bytes() + Path(__file__).read_bytes()
    out = cache_dir() / "standin-repos" / hashlib.sha256(recipe).hexdigest()[:12]
    if (out / "InRelease").exists():
        return out
    with cache_lock(f"standin-{out.name}"):
        if not (out / "InRelease").exists():  # not built by another process meanwhile
            _build(packages, out)
    return out


def _build(packages: list[Package], out: Path) -> None:
    started = time.monotonic()
    env = _gnupg_env()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        staging = Path(tmp) / "repo"
        staging.mkdir()
        stanzas = [_stanza(p, _build_deb(p, Path(tmp) / "src", staging)) for p in packages]
        (staging / "Packages").write_text("".join(stanzas))
        (staging / "Packages.gz").write_bytes(gzip.compress("".join(stanzas).encode(), mtime=0))
        (staging / "Release").write_text(_release(staging))
        (staging / "InRelease").write_bytes(
            _run("gpg", "--batch", "--clearsign", "-o", "-", str(staging / "Release"), env=env))
        (staging / KEYRING).write_bytes(_run("gpg", "--export", KEY_NAME, env=env))
        (staging / f"{KEYRING.removesuffix('.gpg')}.asc").write_bytes(
            _run("gpg", "--armor", "--export", KEY_NAME, env=env))
        shutil.rmtree(out, ignore_errors=True)
        staging.rename(out)
    print(f"[standin] built {len(packages)} stand-in packages in {out} "
          f"({time.monotonic() - started:.1f} s)", flush=True)


def fingerprint() -> str:
    """The stand-in signing key's fingerprint, as gpg reports it (what a role pins)."""
    listing = _run("gpg", "--with-colons", "--list-keys", KEY_NAME, env=_gnupg_env()).decode()
    return next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))


def empty() -> Path:
    """An empty directory to mount where a scenario has no stand-in repository."""
    path = cache_dir() / "standin-repos" / "empty"
    path.mkdir(parents=True, exist_ok=True)
    return path
