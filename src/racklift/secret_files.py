"""Where racklift keeps secrets on the controller while it needs them: 0600 files in a 0700
directory outside any run directory (runner artifacts are kept), preferring the user's runtime
directory (memory-backed, per user), removed at the end."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def runtime_dir() -> str | None:
    """$XDG_RUNTIME_DIR where it exists, else None (the system's temporary directory)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return runtime if runtime and os.path.isdir(runtime) else None


@contextmanager
def secrets_dir(prefix: str = "racklift-image-") -> Iterator[Path]:
    """A new 0700 directory, removed with everything in it at the end."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=runtime_dir()))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def write_secret(path: Path, data: Any) -> Path:
    """`data` as JSON in a file only its owner reads."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(data, out)
    return path
