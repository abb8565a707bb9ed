"""The lake's record of what each publish left in it (``lake_partitions``): fingerprints,
pending partitions, and the snapshot of each table that readers read.

Two kinds of rows, per workspace and table (docs/warehouse.md, "The lake"):

* scope ``day``: one (workspace, day) partition and the fingerprint of its rows as
  published (D-LAKE-INCREMENTAL); NULL while a publish replacing it is under way;
* scope ``table``: the workspace's rows of the table were published against the
  table of that Iceberg uuid, by which publish, and the table's snapshot that holds
  the workspace's rows as that publish left them: readers read the workspace's rows
  there, so a publish becomes visible with its last commit (D-LAKE-VISIBLE).

A publish writes the record twice: before its data commits, every partition it is
about to replace is marked pending (the pins kept as they are); after them, in its
last commit, the new fingerprints and pins. A worker killed in between leaves
pending partitions, which the next publish replaces whatever the warehouse holds
then, and the previous pins, which readers keep reading.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NamedTuple

from convo_analytics.lake._changes import Day, Fingerprint, TableChanges
from convo_analytics.lake._config import LakeConfig

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import Table as IcebergTable

__all__ = [
    "PARTITIONS_TABLE",
    "LakeRecords",
    "Record",
    "TableRecord",
    "load_records",
    "move_records",
    "record_rows",
    "records_filter",
]

#: The lake's bookkeeping table: one row per (workspace, table, day) published, and one per
#: (workspace, table).
PARTITIONS_TABLE = "lake_partitions"


class Record(NamedTuple):
    """A ``lake_partitions`` row (see the module's docstring)."""

    workspace_id: str
    table_name: str
    scope: str  # 'table' or 'day'
    day: Day
    fingerprint: Fingerprint
    table_uuid: str | None
    snapshot_id: int | None = None
    publish_id: str | None = None
    #: When the row's pin or fingerprint was recorded (None: now).
    published_at: datetime | None = None


class TableRecord(NamedTuple):
    """A workspace's rows of one table as its last complete publish left them."""

    table_uuid: str | None
    #: The snapshot holding them (None: the table had no snapshot, so none of its rows).
    snapshot_id: int | None
    #: The publish that recorded them; None for a record of a release before the pins.
    publish_id: str | None
    published_at: datetime | None


def record_rows(rows: Iterable[Record]) -> pa.Table:
    """``lake_partitions`` rows, those without a time stamped with the time of writing."""
    import pyarrow as pa

    listed = list(rows)
    now = datetime.now(UTC)
    column = {name: [getattr(r, name) for r in listed] for name in Record._fields}
    table = pa.table(
        {
            "workspace_id": pa.array(column["workspace_id"], pa.string()),
            "table_name": pa.array(column["table_name"], pa.string()),
            "scope": pa.array(column["scope"], pa.string()),
            "day": pa.array(column["day"], pa.date32()),
            "fingerprint": pa.array(column["fingerprint"], pa.string()),
            "table_uuid": pa.array(column["table_uuid"], pa.string()),
            "published_at": pa.array(
                [at or now for at in column["published_at"]], pa.timestamp("us", tz="UTC")
            ),
            "snapshot_id": pa.array(column["snapshot_id"], pa.int64()),
            "publish_id": pa.array(column["publish_id"], pa.string()),
        }
    )
    # workspace_id is required in every lake table (D-LAKE-KEYS)
    schema = table.schema
    at = schema.get_field_index("workspace_id")
    return table.cast(schema.set(at, schema.field(at).with_nullable(False)))


def load_records(catalog: Catalog, config: LakeConfig) -> IcebergTable | None:
    """The lake's record: ``lake_partitions`` in the records namespace, or where a lake of
    an earlier release keeps it (the data namespace) until its next publish moves it; None
    when the lake has none yet."""
    from pyiceberg.exceptions import NoSuchTableError

    for namespace in (config.records_namespace, config.namespace):
        try:
            return catalog.load_table((namespace, PARTITIONS_TABLE))
        except NoSuchTableError:
            continue
    return None


def move_records(catalog: Catalog, config: LakeConfig) -> None:
    """An earlier release's record (in the data namespace) copied into the records
    namespace, then dropped from the data namespace (D-LAKE-RECORDS). The worker that
    creates the new table copies; another finding it made goes on (it may see no record
    for a moment, and then republishes its workspaces whole: correct, only slower)."""
    from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

    try:
        catalog.load_table((config.records_namespace, PARTITIONS_TABLE))
        return
    except NoSuchTableError:
        pass
    try:
        old = catalog.load_table((config.namespace, PARTITIONS_TABLE))
    except NoSuchTableError:
        return
    rows = old.scan().to_arrow()
    try:
        new = catalog.create_table(
            (config.records_namespace, PARTITIONS_TABLE),
            old.schema(),
            partition_spec=old.spec(),
            properties=old.properties,
        )
    except TableAlreadyExistsError:
        return
    if rows.num_rows:
        new.append(rows)
    catalog.drop_table((config.namespace, PARTITIONS_TABLE))


def records_filter(ids: Sequence[str], names: Sequence[str]) -> BooleanExpression:
    """The ``lake_partitions`` rows of the workspaces ``ids`` and the tables ``names``."""
    from pyiceberg.expressions import And, In

    return And(
        In(term="workspace_id", literals=list(ids)), In(term="table_name", literals=list(names))
    )


class LakeRecords:
    """The lake's record (``lake_partitions``) of some workspaces' rows of some tables."""

    def __init__(self) -> None:
        #: table -> workspace -> what its last complete publish left
        self.tables: dict[str, dict[str, TableRecord]] = defaultdict(dict)
        #: table -> (workspace, day) -> fingerprint (None: pending)
        self.days: dict[str, dict[tuple[str, Day], Fingerprint]] = defaultdict(dict)

    @classmethod
    def read(
        cls, catalog: Catalog, config: LakeConfig, ids: Sequence[str], names: Sequence[str]
    ) -> LakeRecords:
        """The records of the workspaces ``ids`` and the tables ``names`` (none when the
        lake has no ``lake_partitions`` yet)."""
        records = cls()
        if not ids or not names:
            return records
        table = load_records(catalog, config)
        if table is None:
            return records
        scanned = table.scan(row_filter=records_filter(ids, names)).to_arrow().to_pylist()
        for row in scanned:
            name, ws = row["table_name"], row["workspace_id"]
            if row["scope"] == "table":
                records.tables[name][ws] = TableRecord(
                    row["table_uuid"], row.get("snapshot_id"), row.get("publish_id"),
                    row.get("published_at"),
                )  # fmt: skip
            else:
                records.days[name][(ws, row["day"])] = row["fingerprint"]
        return records

    def uuids(self, name: str) -> dict[str, str | None]:
        """Each workspace's table uuid its rows of ``name`` were last published against."""
        return {ws: rec.table_uuid for ws, rec in self.tables.get(name, {}).items()}

    def pins(self, name: str) -> set[int]:
        """The snapshots of ``name`` that readers read these workspaces' rows at."""
        return {
            rec.snapshot_id
            for rec in self.tables.get(name, {}).values()
            if rec.snapshot_id is not None and rec.publish_id is not None
        }

    def needs_pending(self, plans: Sequence[TableChanges]) -> bool:
        """Whether the plans replace a partition the record does not yet say is pending: a
        day it holds a fingerprint of, a day new to it, or a recorded day of a workspace
        replaced whole. A day that is pending already needs no second commit."""
        for plan in plans:
            recorded = self.days.get(plan.spec.name, {})
            for ws, days in plan.days.items():
                if any((ws, d) not in recorded or recorded[(ws, d)] is not None for d in days):
                    return True
            whole = set(plan.whole)
            if any(fp is not None for (ws, _), fp in recorded.items() if ws in whole):
                return True
        return False

    def pending(self, plans: Sequence[TableChanges]) -> list[Record]:
        """The records as they are (the pins untouched), with every partition about to be
        replaced marked pending."""
        rows: list[Record] = []
        for plan in plans:
            name = plan.spec.name
            recorded = self.days.get(name, {})
            for ws, rec in self.tables.get(name, {}).items():
                rows.append(Record(ws, name, "table", None, None, *rec))
            for (ws, day), fp in recorded.items():
                replaced = ws in plan.whole or day in plan.days.get(ws, ())
                rows.append(Record(ws, name, "day", day, None if replaced else fp, None))
            for ws, days in plan.days.items():
                rows.extend(Record(ws, name, "day", day, None, None)
                            for day in days if (ws, day) not in recorded)  # fmt: skip
        return rows

    def complete(
        self, ids: Sequence[str], names: Sequence[str], uuids: Mapping[str, str | None]
    ) -> bool:
        """Whether every workspace's rows of every table are recorded, pinned, against the
        table's uuid now, and nothing is pending (so a publish with nothing to replace need
        not write the records)."""
        for name in names:
            tables = self.tables.get(name, {})
            for ws in ids:
                rec = tables.get(ws)
                if rec is None or rec.table_uuid != uuids[name] or rec.publish_id is None:
                    return False
            if any(fp is None for fp in self.days.get(name, {}).values()):
                return False
        return True

    @staticmethod
    def final(
        plans: Sequence[TableChanges],
        ids: Sequence[str],
        heads: Mapping[str, tuple[str | None, int | None]],
        publish_id: str,
    ) -> list[Record]:
        """The records after a publish: every table's current partitions, and each
        workspace's rows pinned to the table's snapshot the publish left (``heads``: each
        table's uuid and that snapshot)."""
        rows: list[Record] = []
        for plan in plans:
            name = plan.spec.name
            uuid, snapshot = heads[name]
            rows.extend(Record(ws, name, "table", None, None, uuid, snapshot, publish_id)
                        for ws in ids)  # fmt: skip
            rows.extend(Record(ws, name, "day", day, fp, None)
                        for (ws, day), fp in plan.current.items())  # fmt: skip
        return rows
