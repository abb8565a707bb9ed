"""Publishing a warehouse's workspaces into the lake: the partitions that changed, one
commit per table.

For each table, the warehouse's (workspace, month) partitions are fingerprinted in
DuckDB and compared with the lake's record of what it holds
(:mod:`convo_analytics.lake._changes`); only the partitions that differ are
read as Arrow and written, in one transaction per table that deletes exactly
those partitions and adds their new files (:mod:`convo_analytics.lake._commit`).
The other partitions, and the other workspaces', are untouched. A table with
nothing changed is not committed at all.

The publish becomes visible with its last commit: the lake's record
(:mod:`convo_analytics.lake._records`), which pins each workspace's rows of
each table to the snapshot this publish left, and which readers follow
(:mod:`convo_analytics.lake._visible`). Until then readers see the
workspace's previous complete publish, whatever tables were committed.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb

from convo_analytics.errors import UserError
from convo_analytics.lake._changes import (
    TableChanges,
    changes_of,
    files_to_replace,
    fingerprints,
    read_changed,
)
from convo_analytics.lake._commit import (
    LakeCommitFailed,
    commit_overwrite,
    ensure_table,
    table_head,
)
from convo_analytics.lake._config import LakeConfig
from convo_analytics.lake._records import (
    PARTITIONS_TABLE,
    LakeRecords,
    Record,
    move_records,
    record_rows,
)
from convo_analytics.lake._tables import LAKE_TABLES, LakeTable, lake_key
from convo_analytics.lake._visible import PUBLISH_PROPERTY, WORKSPACES_PROPERTY

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
    #: The publish's id, in its snapshots' summaries and the lake's record of it.
    publish_id: str = ""

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        return {
            "publish_id": self.publish_id,
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
    the (workspace, month) partitions whose rows changed (``full``: all of theirs).

    Tables the warehouse lacks (no transform yet) are skipped; a table with nothing
    changed is not committed. Raises LakeUnavailable when the catalog cannot be used,
    LakeCommitFailed when a commit keeps losing.
    """
    started = time.perf_counter()
    publish_id = uuid.uuid4().hex
    ids = resolve_workspaces(con, workspaces)
    catalog = config.open_catalog()
    present = _tables_present(con)
    for spec in tables:
        if spec.name not in present:
            log.info("lake: %s skipped (the warehouse has no such table)", spec.name)
    specs = [spec for spec in tables if spec.name in present]
    names = [spec.name for spec in specs]
    move_records(catalog, config)  # an earlier release's record, into its own namespace
    recorded = LakeRecords.read(catalog, config, ids, names)
    plans: list[TableChanges] = []
    for spec in specs:
        current = fingerprints(con, spec, ids)
        uuid_now, snapshot_now = table_head(catalog, config, spec.name)
        days = {} if full else recorded.days[spec.name]
        uuids = {} if full else recorded.uuids(spec.name)
        plans.append(changes_of(spec, current, days, uuids, uuid_now, ids, snapshot_now))
    properties = {PUBLISH_PROPERTY: publish_id, WORKSPACES_PROPERTY: ",".join(ids)}
    if recorded.needs_pending(plans):  # the partitions replaced are pending until recorded
        _commit_records(catalog, config, ids, names, recorded.pending(plans), properties)
    done: list[TablePublish] = []
    heads: dict[str, tuple[str | None, int | None]] = {}
    for plan in plans:
        report, heads[plan.spec.name] = _publish_table(
            con, catalog, config, plan, properties, recorded.pins(plan.spec.name)
        )
        done.append(report)
        if on_table is not None:
            on_table(report)
    uuids_now = {name: head[0] for name, head in heads.items()}
    if any(not plan.empty for plan in plans) or not recorded.complete(ids, names, uuids_now):
        # the last commit: readers see this publish from here on
        final = LakeRecords.final(plans, ids, heads, publish_id)
        _commit_records(catalog, config, ids, names, final, properties)
    return LakePublishResult(tuple(ids), config.namespace, tuple(done),
                             time.perf_counter() - started, publish_id)  # fmt: skip


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


def plain_schema(schema: pa.Schema, required: Sequence[str] = ()) -> pa.Schema:
    """The schema without DuckDB's field metadata (a JSON column's extension tag), the
    ``required`` columns (``workspace_id`` and the table's key, D-LAKE-KEYS) not nullable."""
    import pyarrow as pa

    return pa.schema(
        [pa.field(f.name, f.type, f.nullable and f.name not in required) for f in schema]
    )


def _publish_table(
    con: duckdb.DuckDBPyConnection,
    catalog: Catalog,
    config: LakeConfig,
    plan: TableChanges,
    properties: dict[str, str],
    pins: set[int],
) -> tuple[TablePublish, tuple[str | None, int | None]]:
    """Replace the plan's partitions of one table in one commit (none when nothing
    changed); the report, and the table's uuid and snapshot afterwards. ``pins``: the
    snapshots readers read the workspaces at until this publish completes (never expired
    by this commit)."""
    started = time.perf_counter()
    name = plan.spec.name
    if plan.empty and plan.table_uuid is not None:  # nothing to write, the table is there
        return TablePublish(name, 0, 0, 0, None, 0, 0.0), (plan.table_uuid, plan.snapshot_id)
    arrow = read_changed(con, plan)
    key = lake_key(con, plan.spec)
    data = arrow.cast(plain_schema(arrow.schema, ("workspace_id", *key)))
    if plan.empty:  # the table is made all the same: every engine finds every lake table
        made = ensure_table(catalog, (config.namespace, name), plan.spec.day_column, data.schema,
                            key)  # fmt: skip
        head = made.current_snapshot()
        made_head = (str(made.metadata.table_uuid), head.snapshot_id if head else None)
        return TablePublish(name, 0, 0, 0, None, 0, 0.0), made_head
    replaced = files_to_replace(plan, _column_type(plan.spec, data))
    table, attempts = commit_overwrite(
        catalog, config, name, data, replaced,
        day_column=plan.spec.day_column,
        key=key,
        properties=properties | {
            # the workspaces whose partitions this commit replaces: readers read the others
            # from the table as it is now (lake._visible)
            WORKSPACES_PROPERTY: ",".join(sorted({*plan.whole, *plan.days})),
            "convo.partitions": str(plan.partitions),
        },
        keep=pins,
    )  # fmt: skip
    snapshot = table.current_snapshot()
    files = 0
    if snapshot is not None and snapshot.summary is not None:
        files = int(snapshot.summary.get("added-data-files", "0") or 0)
    snapshot_id = snapshot.snapshot_id if snapshot else None
    report = TablePublish(name, data.num_rows, plan.partitions, files, snapshot_id, attempts,
                          time.perf_counter() - started)  # fmt: skip
    return report, (str(table.metadata.table_uuid), snapshot_id)


def _commit_records(
    catalog: Catalog,
    config: LakeConfig,
    ids: Sequence[str],
    names: Sequence[str],
    rows: list[Record],
    properties: dict[str, str],
) -> None:
    """Replace the lake's records of the workspaces' rows of the tables ``names``."""
    from pyiceberg.expressions import And, In

    row_filter = And(
        In(term="workspace_id", literals=list(ids)), In(term="table_name", literals=list(names))
    )
    commit_overwrite(catalog, config, PARTITIONS_TABLE, record_rows(rows), row_filter,
                     day_column=None, properties=properties)  # fmt: skip


def _column_type(spec: LakeTable, data: pa.Table) -> str:
    """How the day column's bounds are written: 'date', 'timestamptz' or 'timestamp'."""
    import pyarrow as pa

    if spec.day_column is None:
        return "date"
    kind = data.schema.field(spec.day_column).type
    if pa.types.is_date(kind):
        return "date"
    return "timestamptz" if getattr(kind, "tz", None) else "timestamp"
