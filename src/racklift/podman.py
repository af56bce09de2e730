"""podman as racklift runs it: its own containers.conf (nothing under /etc changes), and images
built locally without a registry (debootstrap → podman import → podman build), tagged with a
hash of their recipe so they are rebuilt only when it changes. The disk image's root filesystem
starts here; the lab's host images (racklift.lab.images) build on the same base.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from racklift.child_env import without_secrets
from racklift.errors import RackliftError
from racklift.paths import cache_dir, cache_lock

HERE = Path(__file__).resolve().parent
CONTAINERS_CONF = HERE / "containers.conf"

DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = os.environ.get("RACKLIFT_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BASE_REPO = "localhost/racklift-debian12-base"


class PodmanError(RackliftError):
    """podman or debootstrap is missing or failed; the message says which and why."""


def env() -> dict[str, str]:
    """The environment every podman (and Molecule) call of racklift runs with: racklift's less
    its secrets."""
    return {**without_secrets(), "CONTAINERS_CONF": str(CONTAINERS_CONF)}


def podman(*args: str, check: bool = True, stdin: bytes | None = None,
           timeout: float | None = 300) -> str:
    if not shutil.which("podman"):
        raise PodmanError("podman not found: install the Debian packages podman, runc, netavark "
                       "(scripts/bootstrap does it)")
    result = subprocess.run(["podman", *args], env=env(), input=stdin, capture_output=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise PodmanError(f"podman {' '.join(args[:3])}: "
                       f"{result.stderr.decode(errors='replace').strip()[-800:]}")
    return result.stdout.decode(errors="replace")


def succeeds(*args: str) -> bool:
    """Whether a podman query (`image exists`, `network exists`, ...) answers yes."""
    return subprocess.run(["podman", *args], env=env(), capture_output=True).returncode == 0


def image_exists(ref: str) -> bool:
    return succeeds("image", "exists", ref)


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def _say(message: str) -> None:
    print(f"[image] {message}", file=sys.stderr, flush=True)


def base_image() -> str:
    """Debian 12 minbase from debootstrap, imported into podman (~40 s, once per recipe)."""
    ref = f"{BASE_REPO}:{_key(DEBIAN_SUITE, 'minbase', DEBIAN_MIRROR)}"
    if image_exists(ref):
        return ref
    with cache_lock(f"image-{ref.rsplit(':', 1)[1]}"):
        if image_exists(ref):  # another process built it while this one waited
            return ref
        return _debootstrap(ref)


def _debootstrap(ref: str) -> str:
    if not shutil.which("debootstrap"):
        raise PodmanError("debootstrap not found: install the Debian package debootstrap")
    started = time.monotonic()
    work = cache_dir() / "images"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        rootfs = Path(tmp) / "rootfs"
        result = subprocess.run(
            ["debootstrap", "--variant=minbase", DEBIAN_SUITE, str(rootfs), DEBIAN_MIRROR],
            capture_output=True, text=True, env=without_secrets())
        if result.returncode != 0:
            raise PodmanError(f"debootstrap {DEBIAN_SUITE} from {DEBIAN_MIRROR} failed: "
                           f"{result.stdout[-600:]}{result.stderr[-600:]}")
        tar = subprocess.run(["tar", "-C", str(rootfs), "-c", "."], capture_output=True,
                             check=True, env=without_secrets())
        podman("import", "-", ref, stdin=tar.stdout)
    _say(f"built {ref} in {time.monotonic() - started:.0f} s")
    return ref


def recipe(text: str) -> Path:
    """A generated Containerfile, kept in the cache under its hash: derived_image's recipe."""
    work = cache_dir() / "images" / "recipes"
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"Containerfile.{_key(text)}"
    if not path.exists():
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(text)
        partial.replace(path)  # whole or absent, whoever else writes it at the same time
    return path


def derived_image(repo: str, base: str, containerfile: Path) -> str:
    """An image built FROM `base` with `containerfile` (BASE build arg), tagged with a hash of
    both, so it is rebuilt only when either changes."""
    ref = f"{repo}:{_key(base, containerfile.read_text())}"
    if image_exists(ref):
        return ref
    with cache_lock(f"image-{ref.rsplit(':', 1)[1]}"):
        if image_exists(ref):
            return ref
        return _build(ref, base, containerfile)


def _build(ref: str, base: str, containerfile: Path) -> str:
    started = time.monotonic()
    podman("build", "--build-arg", f"BASE={base}", "-t", ref, "-f", str(containerfile),
           str(containerfile.parent), timeout=900)
    _say(f"built {ref} in {time.monotonic() - started:.0f} s")
    return ref

