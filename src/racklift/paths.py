"""Where racklift keeps cached artifacts and runtime state.

Cached artifacts (NetBox venv, migrated database dump) are expensive to rebuild and keyed by
their recipe, so they live outside the checkout and survive a fresh clone. Runtime state (the
lab NetBox's configuration, logs, pid files) is per machine.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

# The project tree (ansible.cfg, playbooks/, roles/, inventory/): the checkout this package
# runs from, or RACKLIFT_HOME for an install elsewhere (pip install -e . keeps the checkout).
REPO_ROOT = Path(os.environ.get("RACKLIFT_HOME") or Path(__file__).resolve().parents[2])


def cache_dir() -> Path:
    return Path(os.environ.get("RACKLIFT_CACHE", Path.home() / ".cache" / "racklift"))


def state_dir() -> Path:
    return Path(os.environ.get("RACKLIFT_STATE", Path.home() / ".local" / "state" / "racklift"))


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created if missing), held for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def write_atomically(path: Path, text: str, mode: int | None = None) -> None:
    """`path` holds `text`, or what it held before, never a part of it (a reader, a scrape, a
    restarted process): a temporary file beside it, renamed over it; `mode` where it is not
    mkstemp's 0600."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def cache_lock(name: str) -> AbstractContextManager[None]:
    """Held while one process builds a cached artifact: two test lanes (or a demo beside the
    tests) that need the same artifact build it once, and neither sees it half made."""
    return file_lock(cache_dir() / "locks" / f"{name}.lock")


def machine_lock(name: str) -> AbstractContextManager[None]:
    """Held while one process starts a service the whole machine shares (the PostgreSQL
    cluster, a Redis port): whatever cache or state directory each process was given."""
    return file_lock(Path(tempfile.gettempdir()) / f"racklift-{name}.lock")
