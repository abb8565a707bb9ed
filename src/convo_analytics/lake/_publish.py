"""Publishing a warehouse's workspaces into the lake: the partitions that changed, one
commit per table.

For each table, the warehouse's (workspace, day) partitions are fingerprinted in
DuckDB and compared with the lake's record of what it holds
(:mod:`convo_analytics.lake._changes`); only the partitions that differ are
read as Arrow and written, in one transaction per table that deletes exactly
those partitions and adds their new files (:mod:`convo_analytics.lake._commit`).
The other partitions, and the other workspaces', are untouched, and a reader
sees either a partition's previous rows or its new ones, never both nor
neither. A table with nothing changed is not committed at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb

from convo_analytics.errors import UserError
from convo_analytics.lake._changes import (
    PARTITIONS_TABLE,
    LakeRecords,
    Record,
    TableChanges,
    changes_of,
    files_to_replace,
    fingerprints,
    read_changed,
    record_rows,
)
from convo_analytics.lake._commit import (
    LakeCommitFailed,
    commit_overwrite,
    ensure_table,
    table_uuid,
)
from convo_analytics.lake._config import LakeConfig
from convo_analytics.lake._tables import LAKE_TABLES, LakeTable

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog

__all__ = [
    "LakeCommitFailed",
    "LakePublishResult",
    "TablePublish",
    "publish_lake",
    "resolve_workspaces",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TablePublish:
    """What one table's commit did (rows, partitions and files 0, no snapshot, no attempt:
    nothing changed, no commit)."""

    table: str
    rows: int
    partitions: int
    files: int
    snapshot_id: int | None
    attempts: int
    seconds: float


@dataclass(frozen=True, slots=True)
class LakePublishResult:
    """A publish: the workspaces replaced, and each table's commit."""

    workspaces: tuple[str, ...]
    namespace: str
    tables: tuple[TablePublish, ...] = field(default=())
    seconds: float = 0.0

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        return {
            "workspaces": list(self.workspaces),
            "namespace": self.namespace,
            "rows": self.rows,
            "seconds": round(self.seconds, 3),
            "tables": [asdict(t) | {"seconds": round(t.seconds, 3)} for t in self.tables],
        }


def publish_lake(
    con: duckdb.DuckDBPyConnection,
    config: LakeConfig,
    workspaces: Sequence[str] | None = None,
    *,
    tables: Sequence[LakeTable] = LAKE_TABLES,
    on_table: Callable[[TablePublish], None] | None = None,
    full: bool = False,
) -> LakePublishResult:
    """Bring the lake's partitions of ``workspaces`` (names or workspace ids; default: every
    workspace the warehouse holds) to the warehouse's rows, table by table, replacing only
    the (workspace, day) partitions whose rows changed (``full``: all of theirs).

    Tables the warehouse lacks (no transform yet) are skipped; a table with nothing
    changed is not committed. Raises LakeUnavailable when the catalog cannot be used,
    LakeCommitFailed when a commit keeps losing.
    """
    started = time.perf_counter()
    ids = resolve_workspaces(con, workspaces)
    catalog = config.open_catalog()
    present = _tables_present(con)
    for spec in tables:
        if spec.name not in present:
            log.info("lake: %s skipped (the warehouse has no such table)", spec.name)
    specs = [spec for spec in tables if spec.name in present]
    names = [spec.name for spec in specs]
    recorded = LakeRecords.read(catalog, config.namespace, ids, names)
    plans: list[TableChanges] = []
    for spec in specs:
        if full:
            recorded.forget(spec.name)
        current = fingerprints(con, spec, ids)
        plans.append(changes_of(spec, current, recorded.days[spec.name],
                                recorded.uuids[spec.name],
                                table_uuid(catalog, config, spec.name), ids))  # fmt: skip
    if recorded.overwritten(plans):  # the days replaced are pending until they land
        _commit_records(catalog, config, ids, names, recorded.pending(plans))
    done: list[TablePublish] = []
    uuids: dict[str, str | None] = {}
    for plan in plans:
        report, uuids[plan.spec.name] = _publish_table(con, catalog, config, plan, ids)
        done.append(report)
        if on_table is not None:
            on_table(report)
    if any(not plan.empty for plan in plans) or not recorded.complete(ids, names, uuids):
        _commit_records(catalog, config, ids, names, LakeRecords.final(plans, ids, uuids))
    return LakePublishResult(tuple(ids), config.namespace, tuple(done),
                             time.perf_counter() - started)  # fmt: skip


def resolve_workspaces(con: duckdb.DuckDBPyConnection, wanted: Sequence[str] | None) -> list[str]:
    """Workspace ids: each wanted name (as configured) or id, or every workspace held.

    Rows without a workspace id are never published (every loader gives one).
    """
    names = dict(con.execute("SELECT name, workspace_id FROM workspaces").fetchall())
    present = _tables_present(con)
    held_sql = " UNION ".join(
        f"SELECT workspace_id FROM {t} WHERE workspace_id IS NOT NULL"
        for t in ("workspaces", "conversations", "mart_conversations")
        if t in present
    )
    held = sorted({r[0] for r in con.execute(held_sql).fetchall()})
    if wanted is None:
        return held
    ids: list[str] = []
    for want in wanted:
        found = names.get(want, want if want in held else None)
        if found is None:
            listed = ", ".join(sorted({*names, *held})) or "none"
            raise UserError(
                f"workspace {want!r} is not in the warehouse (it holds: {listed}); "
                "name a workspace it holds, or run `convo extract --workspace NAME` first"
            )
        if found not in ids:
            ids.append(found)
    return ids


def _tables_present(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    }


def plain_schema(schema: pa.Schema) -> pa.Schema:
    """The schema without DuckDB's field metadata (a JSON column's extension tag)."""
    import pyarrow as pa

    return pa.schema([pa.field(f.name, f.type, f.nullable) for f in schema])


def _publish_table(
    con: duckdb.DuckDBPyConnection,
    catalog: Catalog,
    config: LakeConfig,
    plan: TableChanges,
    ids: Sequence[str],
) -> tuple[TablePublish, str | None]:
    """Replace the plan's partitions of one table in one commit (none when nothing
    changed); the report and the table's uuid afterwards."""
    started = time.perf_counter()
    name = plan.spec.name
    if plan.empty and plan.table_uuid is not None:  # nothing to write, the table is there
        return TablePublish(name, 0, 0, 0, None, 0, 0.0), plan.table_uuid
    arrow = read_changed(con, plan)
    data = arrow.cast(plain_schema(arrow.schema))
    if plan.empty:  # the table is made all the same: every engine finds every lake table
        made = ensure_table(catalog, (config.namespace, name), plan.spec.day_column, data.schema)
        return TablePublish(name, 0, 0, 0, None, 0, 0.0), str(made.metadata.table_uuid)
    replaced = files_to_replace(plan, _column_type(plan.spec, data))
    table, attempts = commit_overwrite(
        catalog, config, name, data, replaced,
        day_column=plan.spec.day_column,
        properties={"convo.workspaces": ",".join(ids), "convo.partitions": str(plan.partitions)},
    )  # fmt: skip
    snapshot = table.current_snapshot()
    files = 0
    if snapshot is not None and snapshot.summary is not None:
        files = int(snapshot.summary.get("added-data-files", "0") or 0)
    report = TablePublish(name, data.num_rows, plan.partitions, files,
                          snapshot.snapshot_id if snapshot else None, attempts,
                          time.perf_counter() - started)  # fmt: skip
    return report, str(table.metadata.table_uuid)


def _commit_records(
    catalog: Catalog,
    config: LakeConfig,
    ids: Sequence[str],
    names: Sequence[str],
    rows: list[Record],
) -> None:
    """Replace the lake's records of the workspaces' rows of the tables ``names``."""
    from pyiceberg.expressions import And, In

    row_filter = And(
        In(term="workspace_id", literals=list(ids)), In(term="table_name", literals=list(names))
    )
    commit_overwrite(catalog, config, PARTITIONS_TABLE, record_rows(rows), row_filter,
                     day_column=None, properties={"convo.workspaces": ",".join(ids)})  # fmt: skip


def _column_type(spec: LakeTable, data: pa.Table) -> str:
    """How the day column's bounds are written: 'date', 'timestamptz' or 'timestamp'."""
    import pyarrow as pa

    if spec.day_column is None:
        return "date"
    kind = data.schema.field(spec.day_column).type
    if pa.types.is_date(kind):
        return "date"
    return "timestamptz" if getattr(kind, "tz", None) else "timestamp"
