"""Publishing a warehouse's workspaces into the lake: one Iceberg commit per table.

Each table's rows of the given workspaces are read from DuckDB as Arrow and
written with one transaction that deletes those workspaces' partitions and adds
the new files (an overwrite filtered on ``workspace_id``), so the other
workspaces' partitions are untouched and a reader sees either the previous
rows of a workspace or the new ones, never both nor neither.

Many workers publish at once without a coordinator of ours: the catalog
accepts a commit only on top of the metadata it was made from (the SQL
catalog's compare-and-swap of the metadata location). A commit that lost the
race is first rebased by pyiceberg itself on the new metadata (its
``commit.retry.*`` table properties), after checking that the other commit
touched none of our workspaces' partitions; when that is exhausted, or the
other commit did touch them (``ValidationException``: two workers publishing
one workspace), or a SQLite catalog is busy, the whole overwrite is made again
on the table's fresh metadata, with a bounded, jittered backoff (decision
D-LAKE-COMMIT). Files written for a commit that did not land are never
referenced by a snapshot (pyiceberg removes the ones it knows of; the rest
are orphans for Iceberg's orphan-file maintenance).
"""

from __future__ import annotations

import logging
import random
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb

from convo_analytics.errors import UserError
from convo_analytics.lake._config import LakeConfig
from convo_analytics.lake._tables import LAKE_TABLES, LakeTable

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table as IcebergTable

__all__ = [
    "LakeCommitFailed",
    "LakePublishResult",
    "TablePublish",
    "publish_lake",
    "resolve_workspaces",
]

log = logging.getLogger(__name__)

#: Attempts at one table's commit before the publish gives up (each on fresh metadata).
MAX_ATTEMPTS = 10
_BACKOFF_FIRST, _BACKOFF_MAX = 0.05, 2.0


class LakeCommitFailed(UserError):
    """A table's commit lost to other writers every time it was tried."""


@dataclass(frozen=True, slots=True)
class TablePublish:
    """What one table's commit did."""

    table: str
    rows: int
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
) -> LakePublishResult:
    """Replace the lake's partitions of ``workspaces`` (names or workspace ids; default: every
    workspace the warehouse holds) with the warehouse's rows, table by table.

    Tables the warehouse lacks (no transform yet) are skipped. Raises LakeUnavailable
    when the catalog cannot be used, LakeCommitFailed when a commit keeps losing.
    """
    started = time.perf_counter()
    ids = resolve_workspaces(con, workspaces)
    catalog = config.open_catalog()
    present = _tables_present(con)
    done: list[TablePublish] = []
    for spec in tables:
        if spec.name not in present:
            log.info("lake: %s skipped (the warehouse has no such table)", spec.name)
            continue
        data = _read(con, spec, ids)
        report = _publish_table(catalog, config, spec, data, ids)
        done.append(report)
        if on_table is not None:
            on_table(report)
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


def _read(con: duckdb.DuckDBPyConnection, spec: LakeTable, ids: Sequence[str]) -> pa.Table:
    import pyarrow as pa

    cur = con.cursor()
    try:
        cur.execute("SET TimeZone = 'UTC'")  # times reach Arrow as UTC microseconds
        workspaces_sql = "SELECT unnest(?::VARCHAR[]) AS workspace_id"
        table = cur.sql(spec.query(workspaces_sql), params=[list(ids)]).to_arrow_table()
    finally:
        cur.close()
    return pa.table(table.columns, schema=plain_schema(table.schema))


def plain_schema(schema: pa.Schema) -> pa.Schema:
    """The schema without DuckDB's field metadata (a JSON column's extension tag)."""
    import pyarrow as pa

    return pa.schema([pa.field(f.name, f.type, f.nullable) for f in schema])


def _publish_table(
    catalog: Catalog, config: LakeConfig, spec: LakeTable, data: pa.Table, ids: Sequence[str]
) -> TablePublish:
    from pyiceberg.exceptions import CommitFailedException, ValidationException
    from pyiceberg.expressions import In
    from sqlalchemy.exc import OperationalError

    started = time.perf_counter()
    identifier = (config.namespace, spec.name)
    table = _ensure_table(catalog, identifier, spec, data.schema)
    overwrite = In(term="workspace_id", literals=list(ids))
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            with table.transaction() as txn, warnings.catch_warnings():
                # "Delete operation did not match any records": a workspace new to the table
                warnings.simplefilter("ignore", UserWarning)
                with txn.update_schema() as update:
                    update.union_by_name(data.schema)  # a column the warehouse gained
                txn.overwrite(data, overwrite_filter=overwrite,
                              snapshot_properties={"convo.workspaces": ",".join(ids)})  # fmt: skip
            break
        except (CommitFailedException, ValidationException, OperationalError) as exc:
            if attempt == MAX_ATTEMPTS:
                raise LakeCommitFailed(
                    f"the lake's {spec.name} kept changing under this publish: {MAX_ATTEMPTS} "
                    "commits lost to other writers; run the publish again"
                ) from None
            log.info("lake: %s commit %d lost (%s); retrying", spec.name, attempt,
                     type(exc).__name__)  # fmt: skip
            time.sleep(_backoff(attempt))
            table = catalog.load_table(identifier)
    snapshot = table.current_snapshot()
    files = 0
    if snapshot is not None and snapshot.summary is not None:
        files = int(snapshot.summary.get("added-data-files", "0") or 0)
    return TablePublish(
        spec.name,
        data.num_rows,
        files,
        snapshot.snapshot_id if snapshot else None,
        attempt,
        time.perf_counter() - started,
    )


def _backoff(attempt: int) -> float:
    """Exponential with full jitter, capped: racing workers spread out."""
    return random.uniform(0, min(_BACKOFF_MAX, _BACKOFF_FIRST * 2**attempt))


def _ensure_table(
    catalog: Catalog, identifier: tuple[str, str], spec: LakeTable, schema: pa.Schema
) -> IcebergTable:
    """The table, created with its partition spec when the lake does not have it yet
    (two workers creating it at once: the loser loads the winner's)."""
    from pyiceberg.catalog import Catalog as _Catalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import assign_fresh_schema_ids
    from pyiceberg.transforms import DayTransform, IdentityTransform

    iceberg_schema = assign_fresh_schema_ids(_Catalog._convert_schema_if_needed(schema))
    fields = [
        PartitionField(
            source_id=iceberg_schema.find_field("workspace_id").field_id,
            field_id=1000,
            transform=IdentityTransform(),
            name="workspace_id",
        )
    ]
    if spec.day_column is not None:
        fields.append(
            PartitionField(
                source_id=iceberg_schema.find_field(spec.day_column).field_id,
                field_id=1001,
                transform=DayTransform(),
                name=f"{spec.day_column}_day",
            )
        )
    return catalog.create_table_if_not_exists(
        identifier,
        schema=iceberg_schema,
        partition_spec=PartitionSpec(*fields),
        properties={"write.parquet.compression-codec": "zstd"},
    )
