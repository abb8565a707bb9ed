"""Opening the warehouse: one DuckDB file, its schema ensured, a clear error when busy."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import duckdb

from convo_analytics.errors import UserError
from convo_analytics.warehouse._tables import ALL_TABLES, SCHEMA_VERSION


class WarehouseBusy(UserError):
    """Another process holds the warehouse for writing."""


def open_warehouse(path: Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Connect, creating the file and the schema when needed (not when read-only)."""
    if read_only and not path.exists():
        raise UserError(f"warehouse {path} does not exist yet; run 'convo extract' first")
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        con = duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise WarehouseBusy(
                f"warehouse {path} is open for writing by another process; wait for it to "
                "finish (or stop it) and run again"
            ) from None
        raise UserError(f"cannot open warehouse {path}: {exc}") from None
    con.execute("SET TimeZone = 'UTC'")
    if not read_only:
        ensure_schema(con)
    return con


#: WAL size at which a loading connection checkpoints. DuckDB's default (16 MiB) made a
#: run checkpoint every batch or two, rewriting the tables' indexes each time; a run
#: checkpoints once instead, at its end (a killed run's log is replayed on the next open).
LOAD_CHECKPOINT_THRESHOLD = "1GB"


def defer_checkpoints(con: duckdb.DuckDBPyConnection) -> None:
    """Let the write-ahead log grow during a bulk load; call ``CHECKPOINT`` when done."""
    con.execute(f"SET checkpoint_threshold = '{LOAD_CHECKPOINT_THRESHOLD}'")


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, "
        "applied_at TIMESTAMPTZ)"
    )
    for table in ALL_TABLES:
        con.execute(table.ddl())
    con.execute(
        "INSERT INTO schema_version VALUES (?, now()) ON CONFLICT DO NOTHING", [SCHEMA_VERSION]
    )


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def read_bookmark(con: duckdb.DuckDBPyConnection, stream: str) -> datetime | None:
    row = con.execute("SELECT high_water_mark FROM bookmarks WHERE stream = ?", [stream]).fetchone()
    return row[0] if row else None


def write_bookmark(
    con: duckdb.DuckDBPyConnection, stream: str, mark: datetime, run_id: str
) -> None:
    """Advance (never move back) a stream's bookmark; call inside the data's transaction."""
    con.execute(
        """INSERT INTO bookmarks VALUES (?, ?, ?, now())
           ON CONFLICT (stream) DO UPDATE SET high_water_mark = excluded.high_water_mark,
               run_id = excluded.run_id, committed_at = excluded.committed_at
           WHERE bookmarks.high_water_mark IS NULL
              OR excluded.high_water_mark > bookmarks.high_water_mark""",
        [stream, mark, run_id],
    )
