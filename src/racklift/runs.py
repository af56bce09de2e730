"""Run directories: where each command keeps what it did (report.json, bundles, Ansible's
artifacts), one directory per run under RACKLIFT_RUNS (default ./runs), named by its UTC start
and kind. verify, bundle and the pipeline all make theirs here."""

from __future__ import annotations

import os
import time
from pathlib import Path


def runs_dir() -> Path:
    return Path(os.environ.get("RACKLIFT_RUNS", "runs"))


def new_run_dir(kind: str) -> Path:
    path = runs_dir() / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{kind}"
    suffix = 1
    while path.exists():
        suffix += 1
        path = path.with_name(f"{path.name.split('.')[0]}.{suffix}")
    path.mkdir(parents=True)
    return path
