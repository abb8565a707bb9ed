"""Opening the warehouse: one DuckDB file, its schema ensured, a clear error when busy."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from datetime import datetime
from pathlib import Path

import duckdb

from convo_analytics.errors import UserError
from convo_analytics.warehouse._erasure_tables import ERASURE_TABLES
from convo_analytics.warehouse._ingest_tables import INGEST_TABLES
from convo_analytics.warehouse._marts import MART_TABLES
from convo_analytics.warehouse._monitor_tables import MONITOR_TABLES
from convo_analytics.warehouse._privacy_tables import PRIVACY_TABLES
from convo_analytics.warehouse._retention_tables import RETENTION_TABLES
from convo_analytics.warehouse._runs import PIPELINE_RUNS
from convo_analytics.warehouse._tables import ALL_TABLES as SOURCE_TABLES
from convo_analytics.warehouse._tables import REKEYED_IN_6, SCHEMA_VERSION, Column, Table
from convo_analytics.warehouse._topic_tables import TOPIC_TABLES
from convo_analytics.warehouse._transaction import transaction

#: Every table of the warehouse: what extract and ingest load, the ingest's own, the marts.
ALL_TABLES = (
    *SOURCE_TABLES, *PRIVACY_TABLES, *INGEST_TABLES, *MART_TABLES, *TOPIC_TABLES,
    *MONITOR_TABLES, *ERASURE_TABLES, *RETENTION_TABLES, PIPELINE_RUNS,
)  # fmt: skip


class WarehouseBusy(UserError):
    """Another process holds the warehouse for writing."""


def open_warehouse(
    path: Path, *, read_only: bool = False, must_exist: bool = False
) -> duckdb.DuckDBPyConnection:
    """Connect, creating the file and the schema when needed (not when read-only, nor when
    the caller only reads or rebuilds what a loader put there: ``must_exist``)."""
    if read_only or must_exist:
        require_existing(path)
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        con = duckdb.connect(str(path), read_only=read_only)
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise WarehouseBusy(
                f"warehouse {path} is in use by another process (a run writing it, or a "
                "reader holding it open); wait for it to finish (or stop it) and run again"
            ) from None
        raise UserError(f"cannot open warehouse {path}: {exc}") from None
    con.execute("SET TimeZone = 'UTC'")
    if not read_only:
        ensure_schema(con)
    return con


def require_existing(path: Path) -> None:
    """The error every command that reads a warehouse gives when there is none there."""
    if not path.exists():
        raise UserError(f"warehouse {path} does not exist yet; run 'convo extract' first")


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
    compression = compression_supported(con)
    (before,) = con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchall()[0]
    if 0 < before < 7:
        from convo_analytics.warehouse._upgrade import rekey_event_keys

        rekey_event_keys(con, compression=compression)
    # One transaction: DuckDB commits each statement on its own otherwise, and the ~50
    # commits of a new file took most of its opening time (every test's, every run's).
    with transaction(con):
        for table in ALL_TABLES:
            con.execute(table.ddl(compression=compression))
    rekeyed = REKEYED_IN_6 if 0 < before < 6 else ()
    upgrade_tables(con, ALL_TABLES, compression=compression, rebuild=rekeyed)
    if 0 < before < 2:
        from convo_analytics.warehouse._upgrade import backfill_detail_children

        backfill_detail_children(con)
    if 0 < before < 4:
        from convo_analytics.warehouse._upgrade import backfill_canonical_keys

        backfill_canonical_keys(con)
    if 0 < before < 6:
        from convo_analytics.warehouse._upgrade import refill_event_tables

        refill_event_tables(con)
    con.execute(
        "INSERT INTO schema_version VALUES (?, now()) ON CONFLICT DO NOTHING", [SCHEMA_VERSION]
    )


def compression_supported(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the database file can store the columns' chosen compression (zstd needs the
    storage format of DuckDB 1.2 or later; a file made by an older DuckDB keeps its own)."""
    tags = con.execute(
        "SELECT tags FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchall()
    found = re.match(r"v(\d+)\.(\d+)", (tags[0][0] if tags else {}).get("storage_version", ""))
    return found is None or (int(found[1]), int(found[2])) >= (1, 2)


def upgrade_tables(
    con: duckdb.DuckDBPyConnection,
    tables: Iterable[Table],
    *,
    compression: bool = True,
    rebuild: Collection[str] = (),
) -> None:
    """Bring a warehouse made by an older release up to the current tables.

    A table that lacks columns (or has them in another order), whose primary-key
    index the spec no longer wants (or now wants), or whose columns lack the
    compression the spec gives them (when the file can store it), is rebuilt:
    created as the spec says (columns in its order, since loads insert by
    position; its compression), its rows copied and new columns filled as their
    spec says (``Column.fill``, e.g. the workspace of a row from before there
    were several) or left NULL, in one transaction. The tables named in ``rebuild`` are
    rebuilt so whatever they look like (a change the catalog does not show: the key of a
    table without an index, a column's NOT NULL); a rebuild killed half-way is rolled
    back, and the next open (its schema version not yet recorded) does it again.
    """
    present: dict[str, list[str]] = {}
    for table_name, column_name in con.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
    ).fetchall():
        present.setdefault(table_name, []).append(column_name)
    keyed = {
        name: list(columns)
        for name, columns in con.execute(
            "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
            "WHERE constraint_type = 'PRIMARY KEY' "
            "AND database_name = current_database() AND schema_name = current_schema()"
        ).fetchall()
    }
    created = dict(
        con.execute(
            "SELECT table_name, sql FROM duckdb_tables() WHERE database_name = current_database() "
            "AND schema_name = current_schema()"
        ).fetchall()
    )
    for table in tables:
        have = present.get(table.name, [])
        if (
            table.name not in rebuild
            and have == [c.name for c in table.columns]
            and keyed.get(table.name) == (list(table.key) if table.indexed else None)
            and (not compression or _compressed_as_spec(table, created.get(table.name) or ""))
        ):
            continue
        old = f"{table.name}__before_upgrade"
        values = ", ".join(_upgraded(c, have) for c in table.columns)
        with transaction(con):
            con.execute(f"ALTER TABLE {table.name} RENAME TO {old}")
            con.execute(table.ddl(compression=compression))
            con.execute(f"INSERT INTO {table.name} SELECT {values} FROM {old}")
            con.execute(f"DROP TABLE {old}")


def _upgraded(column: Column, have: list[str]) -> str:
    """A column's value when its table is rebuilt: kept, filled where missing, or NULL."""
    if column.fill is None:
        return column.name if column.name in have else "NULL"
    if column.name in have:
        return f"COALESCE({column.name}, {column.fill})"
    return column.fill


def _compressed_as_spec(table: Table, sql: str) -> bool:
    """Whether the table's CREATE statement (as DuckDB keeps it) gives every column the
    compression the spec asks for (a table made before a column got one has DuckDB's)."""
    for c in table.columns:
        if c.compression is None:
            continue
        declared = rf"USING COMPRESSION {re.escape(c.compression)}\b"
        if not re.search(rf'[(,]\s*"?{re.escape(c.name)}"?\s[^,]*?{declared}', sql, re.I):
            return False
    return True


def read_bookmark(
    con: duckdb.DuckDBPyConnection, stream: str, workspace: str = "default"
) -> datetime | None:
    rows = con.execute(
        "SELECT high_water_mark FROM bookmarks WHERE workspace_id = ? AND stream = ?",
        [workspace, stream],
    ).fetchall()
    return rows[0][0] if rows else None


def write_bookmark(
    con: duckdb.DuckDBPyConnection,
    stream: str,
    mark: datetime,
    run_id: str,
    workspace: str = "default",
) -> None:
    """Advance (never move back) a workspace's stream bookmark; call inside the data's
    transaction."""
    con.execute(
        """INSERT INTO bookmarks VALUES (?, ?, ?, ?, now())
           ON CONFLICT (workspace_id, stream) DO UPDATE SET
               high_water_mark = excluded.high_water_mark,
               run_id = excluded.run_id, committed_at = excluded.committed_at
           WHERE bookmarks.high_water_mark IS NULL
              OR excluded.high_water_mark > bookmarks.high_water_mark""",
        [workspace, stream, mark, run_id],
    )


def hold_bookmark(
    con: duckdb.DuckDBPyConnection,
    stream: str,
    before: datetime | None,
    run_id: str,
    workspace: str = "default",
) -> None:
    """Put a stream's bookmark back where it stood before ``run_id`` advanced it (None: no
    bookmark), when that run found records missing: the next run reads them again."""
    con.execute(
        "DELETE FROM bookmarks WHERE workspace_id = ? AND stream = ? AND run_id = ?",
        [workspace, stream, run_id],
    )
    if before is not None:
        con.execute(
            "INSERT INTO bookmarks VALUES (?, ?, ?, NULL, now()) ON CONFLICT DO NOTHING",
            [workspace, stream, before],
        )
