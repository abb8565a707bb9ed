"""Reading the lake back: each workspace's rows as its last complete publish left them
(:mod:`convo_analytics.lake._visible`), scanned into a DuckDB file that every reader
opens like a published snapshot.

The file is a warehouse in shape (every table created, the lake's filled, the
rest empty), so the dashboard, ``convo serve`` and the exports read it with
their usual code. Two lake tables are folded back into the warehouse's form:
``mart_slices`` (one row per slice, whichever workspaces carry it) and
``transform_runs`` (one row describing the lake's marts: the zones every
published workspace has, the threshold of the newest publish).

Beside a copy, ``<copy>.json`` says which publishes were unfinished when it was made
(:func:`copy_notice`): readers say so.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import orjson

from convo_analytics.lake._config import CATALOG_NAME, LakeConfig
from convo_analytics.lake._publish import plain_schema
from convo_analytics.lake._tables import LAKE_TABLES, LakeTable
from convo_analytics.lake._visible import (
    Published,
    TableReads,
    Unfinished,
    describe,
    plan_reads,
    unfinished,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.table import Table as IcebergTable

__all__ = ["copy_notice", "lake_state", "materialise_lake", "read_lake"]

log = logging.getLogger(__name__)


def lake_state(config: LakeConfig, catalog: SqlCatalog | None = None) -> str:
    """An id of what the lake holds now: it changes with every commit to any of its tables
    (a digest of each table's current metadata location: one query of the catalog)."""
    from sqlalchemy import text

    catalog = catalog or config.open_catalog()
    with catalog.engine.connect() as db:
        rows = db.execute(
            text(
                "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables "
                "WHERE catalog_name = :catalog AND table_namespace IN (:namespace, :records) "
                "ORDER BY table_namespace, table_name"
            ),
            {"catalog": CATALOG_NAME, "namespace": config.namespace,
             "records": config.records_namespace},
        ).fetchall()  # fmt: skip
    # (the record's namespace too: its last commit is what makes a publish visible)
    listed = "\n".join(f"{space}.{name}={location}" for space, name, location in rows)
    return hashlib.sha256(listed.encode()).hexdigest()[:16]


def read_lake(
    config: LakeConfig,
    tables: Sequence[str] | None = None,
    workspaces: Sequence[str] | None = None,
    *,
    target: duckdb.DuckDBPyConnection | None = None,
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection (in memory unless ``target``) holding the lake's tables (all, or
    ``tables``) as the warehouse has them, restricted to ``workspaces`` (ids) if given:
    each workspace's rows as its last complete publish left them. An unfinished publish
    is logged as a warning."""
    con, found = _read(config, tables, workspaces, target)
    if notice := describe(found):
        log.warning("%s", notice)
    return con


def _read(
    config: LakeConfig,
    tables: Sequence[str] | None,
    workspaces: Sequence[str] | None,
    target: duckdb.DuckDBPyConnection | None,
) -> tuple[duckdb.DuckDBPyConnection, list[Unfinished]]:
    from convo_analytics.warehouse import ensure_schema

    con = target or duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    ensure_schema(con)
    catalog = config.open_catalog()
    held = {identifier[-1] for identifier in catalog.list_tables(config.namespace)}
    wanted = [t for t in LAKE_TABLES if (tables is None or t.name in tables) and t.name in held]
    # the record first: a table committed after it was read is then read at the pins
    published = Published.read(catalog, config, workspaces)
    reads: dict[str, TableReads] = {}
    for spec in wanted:
        table = catalog.load_table((config.namespace, spec.name))
        reads[spec.name] = plan_reads(table, spec.name, published)
        _load(con, spec, _scan(table, reads[spec.name], workspaces))
    return con, unfinished(published, reads)


def materialise_lake(config: LakeConfig, path: Path) -> Path:
    """Write the lake as readers see it as a DuckDB file at ``path`` (built under a
    temporary name, then renamed over it: a reader sees the old file or the new one),
    and beside it what was unfinished (:func:`copy_notice`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    note = _notice_path(path)
    note_partial = note.with_name(f"{note.name}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    try:
        con = duckdb.connect(str(partial))
        try:
            _, found = _read(config, None, None, con)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        with open(partial, "rb") as handle:
            os.fsync(handle.fileno())
        note_partial.write_bytes(orjson.dumps({"notice": describe(found)}))
        note_partial.replace(note)  # before the copy: a copy is never without its notice
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        note_partial.unlink(missing_ok=True)
        raise
    return path


def copy_notice(path: Path) -> str | None:
    """What a copy made by :func:`materialise_lake` says about unfinished publishes (one
    line), or None (none, or a copy made before these notices)."""
    try:
        notice = orjson.loads(_notice_path(path).read_bytes()).get("notice")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None
    return notice if isinstance(notice, str) else None


def _notice_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.json")


def _scan(table: IcebergTable, reads: TableReads, workspaces: Sequence[str] | None) -> pa.Table:
    """The table's rows as readers see them: the current snapshot's, without the workspaces
    read elsewhere, and theirs at their pinned snapshots (schemas of both, by name)."""
    import pyarrow as pa
    from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, In, NotIn

    only = set(workspaces) if workspaces else None
    row_filter: BooleanExpression = (
        In(term="workspace_id", literals=sorted(only)) if only else AlwaysTrue()
    )
    if reads.hidden:
        row_filter = And(row_filter, NotIn(term="workspace_id", literals=sorted(reads.hidden)))
    pieces = [table.scan(row_filter=row_filter).to_arrow()]
    for snapshot_id, listed in sorted(reads.at.items()):
        chosen = sorted(ws for ws in listed if only is None or ws in only)
        if chosen:
            pinned = table.scan(row_filter=In(term="workspace_id", literals=chosen),
                                snapshot_id=snapshot_id)  # fmt: skip
            pieces.append(pinned.to_arrow())
    data = pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces, promote_options="permissive")
    return data.cast(plain_schema(data.schema))


def _load(con: duckdb.DuckDBPyConnection, spec: LakeTable, data: pa.Table) -> None:
    """Insert a lake table's rows into the warehouse-shaped table of the same name."""
    con.register("_lake_rows", data)
    try:
        if spec.select == "used_slices":
            con.execute(
                f"INSERT INTO {spec.name} BY NAME "
                "SELECT DISTINCT * EXCLUDE (workspace_id) FROM _lake_rows"
            )
        elif spec.select == "latest_transform":
            con.execute(_ONE_TRANSFORM_RUN)
        elif spec.unique_by is not None:
            con.execute(
                f"INSERT INTO {spec.name} BY NAME SELECT * FROM _lake_rows QUALIFY row_number() "
                f"OVER (PARTITION BY {spec.unique_by} ORDER BY updated_at DESC NULLS LAST, "
                "workspace_id) = 1"
            )
        else:
            con.execute(f"INSERT INTO {spec.name} BY NAME SELECT * FROM _lake_rows")
    finally:
        con.unregister("_lake_rows")


#: The lake's marts as one transform run: the zones every workspace's newest run cut its
#: days in (in the newest run's order), the newest run's threshold, definition and marts.
_ONE_TRANSFORM_RUN = """
INSERT INTO transform_runs BY NAME
WITH runs AS (SELECT * FROM _lake_rows),
shared AS (
    SELECT list(z) AS held FROM (
        SELECT z FROM (SELECT DISTINCT workspace_id, unnest(timezones) AS z FROM runs)
        GROUP BY z HAVING count(*) = (SELECT count(DISTINCT workspace_id) FROM runs)
    )
),
newest AS (SELECT * FROM runs ORDER BY finished_at DESC, workspace_id LIMIT 1),
zones AS (
    SELECT list_filter(newest.timezones, lambda z: list_contains(shared.held, z)) AS timezones
    FROM newest, shared
)
SELECT 'lake-' || (SELECT md5(string_agg(DISTINCT transform_run_id, ',' ORDER BY
        transform_run_id)) FROM runs)[:16] AS transform_run_id,
    (SELECT min(started_at) FROM runs) AS started_at,
    newest.finished_at, 'ok' AS status, zones.timezones,
    newest.low_confidence_threshold,
    (SELECT count(*) FROM mart_conversations) AS conversations,
    NULL AS messages,
    (SELECT count(*) FROM mart_guardrail_incidents) AS incidents,
    newest.mart_rows, NULL AS reconciliation, NULL AS duration_seconds, NULL AS error,
    'lake' AS mode, NULL AS full_reason, newest.definition_version,
    NULL AS changed_conversations, NULL AS partitions
FROM newest, zones
"""
