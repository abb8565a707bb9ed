"""A throwaway PostgreSQL server for tests: Debian's binaries, a temporary folder, a free
loopback port.

The lake's SQL catalog and the Dagster instance are checked against the real thing
(issue 19), not an imitation. ``initdb`` refuses to run as root, so under root (CI) the
cluster belongs to the ``postgres`` user the Debian package creates. The server listens
on 127.0.0.1 only, trusts local connections (a test database, nothing to protect) and is
stopped (fast shutdown, then killed) when the context ends.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from process_support import free_port

INSTALL_HINT = (
    "the lake and Dagster tests need PostgreSQL's server from Debian's packages: "
    "apt-get install -y postgresql   (.ci/run installs it)"
)


def postgres_bin() -> Path | None:
    """The folder of Debian's PostgreSQL server binaries (the newest version), or None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


@dataclass(frozen=True)
class Postgres:
    """A running server: where to reach it."""

    host: str
    port: int
    user: str
    database: str

    def url(self, driver: str = "postgresql+psycopg2", database: str | None = None) -> str:
        """A SQLAlchemy URL (pyiceberg's SQL catalog and dagster-postgres take these)."""
        return f"{driver}://{self.user}@{self.host}:{self.port}/{database or self.database}"

    def create_database(self, name: str) -> str:
        """A new empty database on this server; its name."""
        _psql(self, f'CREATE DATABASE "{name}"')
        return name


def _as_owner(args: list[str]) -> list[str]:
    """Run as the postgres user when we are root (initdb and postgres refuse root)."""
    if os.geteuid() != 0:
        return args
    # runuser lives in /usr/sbin, which a bare PATH (cron, env -i) leaves out
    found = shutil.which("runuser") or next(
        (p for p in ("/usr/sbin/runuser", "/sbin/runuser") if os.path.exists(p)), None
    )
    if found is None:
        raise RuntimeError("running PostgreSQL's server as root needs runuser (util-linux)")
    return [found, "-u", "postgres", "--", *args]


def _psql(server: Postgres, sql: str) -> None:
    bin_dir = postgres_bin()
    psql = str(bin_dir / "psql") if bin_dir and (bin_dir / "psql").exists() else "psql"
    subprocess.run(
        [psql, "-h", server.host, "-p", str(server.port), "-U", server.user, "-d", "postgres",
         "-v", "ON_ERROR_STOP=1", "-q", "-c", sql],
        check=True, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@contextmanager
def running_postgres(timeout: float = 60.0) -> Iterator[Postgres]:
    """Start a PostgreSQL server in a new temporary folder; stop it and remove the folder."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise RuntimeError(INSTALL_HINT)
    folder = Path(tempfile.mkdtemp(prefix="convo-pg-"))
    data = folder / "data"
    user = "convo"
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
        folder.chmod(0o755)
    subprocess.run(
        _as_owner([str(bin_dir / "initdb"), "-D", str(data), "-U", user, "-A", "trust",
                   "-E", "UTF8", "--no-sync"]),
        check=True, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    port = free_port()
    options = f"-h 127.0.0.1 -p {port} -k {folder} -c fsync=off -c max_connections=200"
    log = folder / "server.log"
    subprocess.run(
        _as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options,
                   "-w", "-t", str(int(timeout)), "start"]),
        check=True, capture_output=True, text=True, timeout=timeout + 10,
    )  # fmt: skip
    server = Postgres("127.0.0.1", port, user, "postgres")
    try:
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout / 0.2) + 1):  # pg_ctl -w waited; a query proves TCP answers
            try:
                _psql(server, "SELECT 1")
                break
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield server
    finally:
        subprocess.run(
            _as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w",
                       "-t", "30", "stop"]),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)
