"""Names from NetBox, checked before they select hosts or name files on the controller.

A NetBox name is text anyone with edit rights wrote: `new-01,gpu-prod-042` would become two
hosts in an Ansible `--limit`, and `../../.ssh` a path out of a run directory. Host names are
host names (RFC 1123) or the host is refused; anything else that names a file is made into one
safe path component. Pure.
"""

from __future__ import annotations

import re
from pathlib import Path

from racklift.errors import RackliftError

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
# Dot-separated labels, 253 characters at most: what resolvers, Slurm and Ansible all take, and
# nothing Ansible's host patterns treat as syntax (, : ! & * ~ [ ]).
HOSTNAME = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(?:\.{_LABEL})*")
HOSTNAME_HINT = ("not a host name (RFC 1123: letters, digits and hyphens, in dot-separated "
                 "labels): rename the device in NetBox")


def is_hostname(name: object) -> bool:
    return isinstance(name, str) and HOSTNAME.fullmatch(name) is not None


def checked_hosts(names: list[str]) -> list[str]:
    """`names`, each a host name; a selection racklift builds never holds anything else (the
    reader refuses such hosts first), so one that does is a bug to stop at."""
    bad = [n for n in names if not is_hostname(n)]
    if bad:
        raise RackliftError(f"refusing to select {', '.join(map(repr, bad))}: {HOSTNAME_HINT}")
    return names


def component(text: str) -> str:
    """`text` as one file name: what is not a letter, digit, '.', '_' or '-' becomes '_',
    and it never starts with a dot (no '..', no hidden file)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:100]
    return "_" + safe if safe.startswith(".") or not safe else safe


def inside(base: Path, *parts: str) -> Path:
    """`base/parts...`, which must resolve inside `base` (no absolute part, no '..', no link
    out); otherwise a RackliftError names the part."""
    root = base.resolve()
    path = root.joinpath(*parts).resolve()
    if not path.is_relative_to(root) or path == root:
        raise RackliftError(f"refusing to write {'/'.join(parts)!r}: it is not a file name "
                            f"inside {base}")
    return path
