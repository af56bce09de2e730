"""PostgreSQL and Redis for the lab NetBox, from Debian's packages, started without systemd."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from racklift.errors import LabError
from racklift.paths import machine_lock

# Lab-only database role. It guards nothing but a throwaway lab database on loopback.
PG_ROLE = "racklift"
PG_PASSWORD = "racklift-lab"


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def listening_inodes(port: int, tables: str = "/proc/net") -> set[str]:
    """The socket inodes listening on `port` (TCP, IPv4 and IPv6), from the kernel's tables."""
    found = set()
    for table in ("tcp", "tcp6"):
        try:
            rows = Path(tables, table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # local address hex "ADDR:PORT", state 0A is LISTEN, inode is the 10th column
            listening = len(fields) > 9 and fields[3] == "0A"
            if listening and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(fields[9])
    return found


def owns_listener(pid: int, port: int) -> bool:
    """Whether process `pid` holds a socket listening on `port` (so it is what answers there)."""
    wanted = {f"socket:[{inode}]" for inode in listening_inodes(port)}
    try:
        return any(os.readlink(fd) in wanted for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False


def _need(command: str, package: str) -> str:
    path = shutil.which(command) or (
        f"/usr/sbin/{command}" if Path(f"/usr/sbin/{command}").exists() else None
    )
    if not path:
        raise LabError(
            f"'{command}' not found: install the Debian package '{package}' "
            "(scripts/bootstrap does it)"
        )
    return path


@dataclass(frozen=True)
class Postgres:
    """The Debian PostgreSQL cluster the lab uses, reached over TCP on loopback."""

    port: int
    bin_dir: Path

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "PGPASSWORD": PG_PASSWORD}

    def _args(self, tool: str, database: str = "postgres") -> list[str]:
        return [str(self.bin_dir / tool), "-h", "127.0.0.1", "-p", str(self.port),
                "-U", PG_ROLE, "-d", database]

    def sql(self, statement: str, database: str = "postgres") -> str:
        result = subprocess.run(
            [*self._args("psql", database), "-v", "ON_ERROR_STOP=1", "-tAXc", statement],
            env=self.env, capture_output=True, text=True,
        )
        if result.returncode != 0:
            raise LabError(f"PostgreSQL: {statement!r} failed: {result.stderr.strip()}")
        return result.stdout.strip()

    def database_exists(self, name: str) -> bool:
        return self.sql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'") == "1"

    def drop_database(self, name: str) -> None:
        # FORCE ends the sessions a running NetBox may hold (PostgreSQL >= 13).
        self.sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def clone_database(self, source: str, target: str) -> None:
        """Create `target` as a copy of `source` (a file-level copy: fast)."""
        self.sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{source}' AND pid <> pg_backend_pid()"
        )
        self.sql(f'CREATE DATABASE "{target}" TEMPLATE "{source}"')

    def load_sql(self, database: str, text: str) -> None:
        """Run a plain-SQL dump into `database`, stopping at the first error."""
        result = subprocess.run([*self._args("psql", database), "-v", "ON_ERROR_STOP=1",
                                 "-qX", "-f", "-"], input=text, env=self.env,
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise LabError(f"loading SQL into {database} failed: {result.stderr.strip()[-800:]}")

    def dump(self, database: str, path: Path) -> None:
        tmp = path.with_suffix(".partial")
        subprocess.run([*self._args("pg_dump", database), "-Fc", "-f", str(tmp)],
                       env=self.env, check=True, capture_output=True)
        tmp.rename(path)

    def restore(self, path: Path, database: str) -> None:
        self.sql(f'CREATE DATABASE "{database}"')
        result = subprocess.run(
            [*self._args("pg_restore", database), "--no-owner", "--exit-on-error", str(path)],
            env=self.env, capture_output=True, text=True,
        )
        if result.returncode != 0:
            self.drop_database(database)
            raise LabError(f"restoring {path} failed: {result.stderr.strip()}; "
                           "delete the file to rebuild it")


def _lab_cluster() -> tuple[str, str, str, str]:
    """(version, name, port, status) of the newest version's 'main' cluster, or the newest."""
    lsclusters = _need("pg_lsclusters", "postgresql")
    clusters = [line.split() for line in subprocess.run(
        [lsclusters, "-h"], capture_output=True, text=True, check=True).stdout.splitlines()]
    if not clusters:
        raise LabError("no PostgreSQL cluster found: install the Debian package 'postgresql'")
    clusters.sort(key=lambda c: (c[1] == "main", float(c[0])), reverse=True)
    version, name, port, status = clusters[0][:4]
    return version, name, port, status


def ensure_postgres() -> Postgres:
    """Start the Debian cluster if it is down and make sure the lab role exists."""
    # Two test lanes start at once on a fresh machine: unlocked, both ran pg_ctlcluster start
    # and the second failed on the first's half-written postmaster.pid (CI, 2026-12-04).
    with machine_lock("postgres"):
        version, name, port, status = _lab_cluster()
        if status != "online":
            result = subprocess.run(["pg_ctlcluster", version, name, "start"],
                                    capture_output=True, text=True)
            # Something outside racklift may have started it meanwhile: only a cluster still
            # down is an error.
            if result.returncode != 0 and _lab_cluster()[3] != "online":
                raise LabError(f"could not start PostgreSQL {version}/{name} on port {port}: "
                               f"{result.stderr.strip()}")
        _ensure_lab_role(port)
    return Postgres(port=int(port), bin_dir=Path(f"/usr/lib/postgresql/{version}/bin"))


def _ensure_lab_role(port: str) -> None:
    role_sql = (
        f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{PG_ROLE}') THEN "
        f"CREATE ROLE {PG_ROLE} LOGIN CREATEDB PASSWORD '{PG_PASSWORD}'; END IF; END $$;"
        # DROP DATABASE ... WITH (FORCE) must end an autovacuum worker that happens to be in
        # the database (it has no role: only pg_signal_backend may); without it a test's reset
        # failed now and then with "must be a member of ... pg_signal_backend".
        f"GRANT pg_signal_backend TO {PG_ROLE};"
    )
    result = subprocess.run(
        ["runuser", "-u", "postgres", "--", "psql", "-p", port, "-v", "ON_ERROR_STOP=1",
         "-qXc", role_sql], capture_output=True, text=True, cwd="/")
    if result.returncode != 0:
        raise LabError(f"could not create the PostgreSQL role '{PG_ROLE}': "
                       f"{result.stderr.strip()}")


def redis_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def redis_flush(port: int, databases: tuple[int, ...]) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for db in databases:
            sock.sendall(f"SELECT {db}\r\nFLUSHDB\r\n".encode())
            reply = b""
            while reply.count(b"\r\n") < 2:
                reply += sock.recv(64)
            if b"-ERR" in reply:
                raise LabError(f"Redis on port {port}: FLUSHDB {db} failed: {reply!r}")


def ensure_redis(port: int, workdir: Path) -> None:
    """Use a Redis already answering on `port`, or start one that keeps nothing on disk."""
    with machine_lock(f"redis-{port}"):
        _ensure_redis(port, workdir)


def _ensure_redis(port: int, workdir: Path) -> None:
    if redis_ping(port):
        return
    if port_open(port):
        raise LabError(f"port {port} is taken by something that is not Redis: "
                       "free it or set RACKLIFT_REDIS_PORT")
    server = _need("redis-server", "redis-server")
    workdir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [server, "--daemonize", "yes", "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", str(workdir),
         "--logfile", str(workdir / "redis.log")],
        check=True, capture_output=True,
    )
    for _ in range(50):
        if redis_ping(port):
            return
        time.sleep(0.1)
    raise LabError(f"Redis did not answer on port {port}; see {workdir / 'redis.log'}")
