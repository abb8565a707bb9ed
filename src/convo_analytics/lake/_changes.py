"""Which of a workspace's lake partitions a publish must replace: those whose rows changed.

A publish writes only the (workspace, month) partitions whose rows differ from
what the lake holds (a month: the file count of a workspace-year follows its 12
months, not its 365 days, D-LAKE-MONTHS), so its Iceberg writes and commits follow what the
extract, the webhook ingest and the transform changed, not the size of the
history (decision D-LAKE-INCREMENTAL). What the lake holds is known from the
lake itself, not from the worker: its bookkeeping table ``lake_partitions``
(:mod:`convo_analytics.lake._records`) records, for each table, workspace and
month, a fingerprint of the rows published (their count and the sum of DuckDB's
hash of each whole row). Any worker with the workspace's warehouse can
therefore publish incrementally; a stateless worker (a fresh Kubernetes pod)
included. A (table, workspace) the lake has no record of (a first publish, a
lake from an earlier release, a table dropped and made again: another uuid, a
table still cut by days) is replaced whole.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING

import duckdb

from convo_analytics.lake._tables import LakeTable

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table as IcebergTable

__all__ = [
    "Day",
    "Fingerprint",
    "TableChanges",
    "changes_of",
    "files_to_replace",
    "fingerprints",
    "overwrite_filter",
    "read_changed",
]

#: A partition's month, as its first day (None: the rows without a time, or a table not
#: cut by time). The name ``Day`` and the records' ``day`` column predate months
#: (D-LAKE-MONTHS): a record holds the first day of the month it fingerprints.
Day = date | None
#: The partition field a table's time column is cut by (Iceberg's ``month`` transform).
MONTH_SUFFIX = "_month"
#: A (workspace, day) partition's fingerprint; None while a publish of it is pending.
Fingerprint = str | None


@dataclass(slots=True)
class TableChanges:
    """What one table's publish replaces: whole workspaces, and days of the others."""

    spec: LakeTable
    #: The warehouse's partitions now, with their fingerprints.
    current: dict[tuple[str, Day], str]
    #: Workspaces the lake has no usable record of: every partition of theirs is replaced.
    whole: list[str] = field(default_factory=list)
    #: Days whose rows differ (added, changed or gone), per workspace not replaced whole.
    days: dict[str, set[Day]] = field(default_factory=dict)
    #: The lake table's uuid when compared (None: the lake had no such table).
    table_uuid: str | None = None
    #: The lake table's current snapshot when compared (None: no table, or no snapshot).
    snapshot_id: int | None = None

    @property
    def partitions(self) -> int:
        """How many (workspace, day) partitions the commit replaces (or removes)."""
        whole = sum(1 for ws, _ in self.current if ws in self.whole)
        return whole + sum(len(days) for days in self.days.values())

    @property
    def empty(self) -> bool:
        return not self.whole and not self.days

    def keys(self) -> list[tuple[str, Day]]:
        """The warehouse partitions to read and write (a gone day has none)."""
        return [
            (ws, day)
            for ws, day in self.current
            if ws in self.whole or day in self.days.get(ws, ())
        ]


def day_sql(spec: LakeTable, alias: str) -> str:
    """The first day of the month a row's partition is cut by, as Iceberg's ``month()``
    cuts it (UTC, with the connection's TimeZone set to UTC)."""
    if spec.day_column is None:
        return "CAST(NULL AS DATE)"
    return f"CAST(date_trunc('month', CAST({alias}.\"{spec.day_column}\" AS DATE)) AS DATE)"


def month_ordinal(first: date) -> int:
    """Iceberg's ``month`` partition value of a month: months since January 1970."""
    return (first.year - 1970) * 12 + first.month - 1


def next_month(first: date) -> date:
    return date(first.year + first.month // 12, first.month % 12 + 1, 1)


def fingerprints(
    con: duckdb.DuckDBPyConnection, spec: LakeTable, ids: Sequence[str]
) -> dict[tuple[str, Day], str]:
    """Each (workspace, day) partition of the table in the warehouse: row count and the sum
    of every whole row's hash (any changed value, run id included, changes it)."""
    sql = (
        f"SELECT q.workspace_id, {day_sql(spec, 'q')} AS day, "
        "CAST(count(*) AS VARCHAR) || ':' || CAST(sum(hash(q)) AS VARCHAR) "
        f"FROM ({spec.query('SELECT unnest(?::VARCHAR[]) AS workspace_id')}) q GROUP BY ALL"
    )
    cur = con.cursor()
    try:
        cur.execute("SET TimeZone = 'UTC'")
        rows = cur.execute(sql, [list(ids)]).fetchall()
    finally:
        cur.close()
    return {(ws, day): fp for ws, day, fp in rows}


def changes_of(
    spec: LakeTable,
    current: dict[tuple[str, Day], str],
    recorded: Mapping[tuple[str, Day], Fingerprint],
    recorded_uuid: Mapping[str, str | None],
    table_uuid: str | None,
    ids: Sequence[str],
    snapshot_id: int | None = None,
) -> TableChanges:
    """Compare the warehouse's partitions with the lake's record of one table.

    ``recorded`` holds the lake's fingerprints of this table's partitions of the
    workspaces, ``recorded_uuid`` the table uuid each workspace's rows were last
    published against, ``table_uuid`` the lake table's now (None: no such table).
    """
    changes = TableChanges(spec, current, table_uuid=table_uuid, snapshot_id=snapshot_id)
    recorded_days: dict[str, dict[Day, Fingerprint]] = defaultdict(dict)
    for (ws, day), fp in recorded.items():
        recorded_days[ws][day] = fp
    current_days: dict[str, dict[Day, str]] = defaultdict(dict)
    for (ws, day), fp in current.items():
        current_days[ws][day] = fp
    for ws in ids:
        before, now = recorded_days.get(ws, {}), current_days.get(ws, {})
        if table_uuid is None:  # not in the lake yet (or dropped): made with these rows
            if now:
                changes.whole.append(ws)
            continue
        if recorded_uuid.get(ws) != table_uuid:
            changes.whole.append(ws)
            continue
        differ = {d for d in before.keys() | now.keys() if before.get(d) is None or
                  before.get(d) != now.get(d)}  # fmt: skip
        if differ:
            changes.days[ws] = differ
    return changes


def read_changed(con: duckdb.DuckDBPyConnection, changes: TableChanges) -> pa.Table:
    """The warehouse rows of the partitions the publish replaces, as Arrow (UTC times),
    ordered by workspace and month."""
    keys = changes.keys()
    spec = changes.spec
    ids = sorted({ws for ws, _ in keys})
    sql = (
        f"SELECT q.* FROM ({spec.query('SELECT unnest(?::VARCHAR[]) AS workspace_id')}) q "
        "SEMI JOIN (SELECT unnest(?::VARCHAR[]) AS ws, unnest(?::DATE[]) AS day) k "
        f"ON k.ws = q.workspace_id AND k.day IS NOT DISTINCT FROM {day_sql(spec, 'q')} "
        # in partition order: each partition one run of rows for the writer (lake._write)
        f"ORDER BY q.workspace_id, {day_sql(spec, 'q')} NULLS LAST"
    )
    cur = con.cursor()
    try:
        cur.execute("SET TimeZone = 'UTC'")
        params = [ids, [ws for ws, _ in keys], [day for _, day in keys]]
        return cur.sql(sql, params=params).to_arrow_table()
    finally:
        cur.close()


def files_to_replace(
    changes: TableChanges, column_type: str
) -> Callable[[IcebergTable], list[DataFile] | BooleanExpression]:
    """The data files holding the partitions replaced, found by the partition values in the
    table's manifests (see ``commit_overwrite``), with the row filter of the same
    partitions for a table whose files it cannot place."""
    whole = set(changes.whole)
    days = {ws: {None if d is None else month_ordinal(d) for d in ds}
            for ws, ds in changes.days.items()}  # fmt: skip
    column = changes.spec.day_column
    day_field = None if column is None else f"{column}{MONTH_SUFFIX}"

    def find(table: IcebergTable) -> list[DataFile] | BooleanExpression:
        from pyiceberg.manifest import ManifestContent

        snapshot = table.current_snapshot()
        if snapshot is None:
            return []
        specs = table.specs()
        found = []
        for manifest in snapshot.manifests(table.io):
            names = [f.name for f in specs[manifest.partition_spec_id].fields]
            live = (manifest.added_files_count or 0) + (manifest.existing_files_count or 0)
            if manifest.content == ManifestContent.DATA and not live:
                continue  # only deletions (of an older partition spec's files, say)
            if (
                manifest.content != ManifestContent.DATA
                or "workspace_id" not in names
                or (day_field is not None and day_field not in names)
            ):
                # row deletes, or files of another partition spec
                return overwrite_filter(changes, column_type)
            at_ws = names.index("workspace_id")
            at_day = None if day_field is None else names.index(day_field)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                partition = entry.data_file.partition
                ws = partition[at_ws]
                if ws in whole or (
                    ws in days and (at_day is None or partition[at_day] in days[ws])
                ):
                    found.append(entry.data_file)
        return found

    return find


def overwrite_filter(changes: TableChanges, column_type: str) -> BooleanExpression:
    """The Iceberg row filter of exactly the partitions replaced: whole workspaces, and runs
    of consecutive months per workspace (``column_type``: 'date' or 'timestamptz')."""
    from pyiceberg.expressions import And, EqualTo, In, IsNull

    parts: list[BooleanExpression] = []
    if changes.whole:
        parts.append(In(term="workspace_id", literals=sorted(changes.whole)))
    column = changes.spec.day_column
    for ws, days in sorted(changes.days.items()):
        in_workspace = EqualTo(term="workspace_id", value=ws)
        if column is None:  # a table without days: its one partition per workspace
            parts.append(in_workspace)
            continue
        if None in days:
            parts.append(And(in_workspace, IsNull(term=column)))
        for first, last in _runs(d for d in days if d is not None):
            parts.append(And(in_workspace, _day_range(column, first, last, column_type)))
    return _any_of(parts)


def _runs(months: Iterable[date]) -> list[tuple[date, date]]:
    """Consecutive months (their first days) folded into (first, last) runs."""
    runs: list[tuple[date, date]] = []
    for day in sorted(months):
        if runs and next_month(runs[-1][1]) == day:
            runs[-1] = (runs[-1][0], day)
        else:
            runs.append((day, day))
    return runs


def _day_range(column: str, first: date, last: date, column_type: str) -> BooleanExpression:
    from pyiceberg.expressions import And, GreaterThanOrEqual, LessThan

    if last.year == date.max.year and last.month == 12:  # no month after it to bound by
        return GreaterThanOrEqual(term=column, value=_bound(first, column_type))
    end = next_month(last)
    return And(
        GreaterThanOrEqual(term=column, value=_bound(first, column_type)),
        LessThan(term=column, value=_bound(end, column_type)),
    )


def _bound(day: date, column_type: str) -> str:
    """The start of ``day`` as a literal of the column's type (UTC midnight for a time)."""
    if column_type == "date":
        return day.isoformat()
    offset = "+00:00" if column_type == "timestamptz" else ""
    return f"{day.isoformat()}T00:00:00{offset}"


def _any_of(parts: list[BooleanExpression]) -> BooleanExpression:
    """Or of the parts as a balanced tree (a long chain would recurse as deep as it is long)."""
    from pyiceberg.expressions import AlwaysFalse, Or

    if not parts:
        return AlwaysFalse()
    if len(parts) == 1:
        return parts[0]
    middle = len(parts) // 2
    return Or(_any_of(parts[:middle]), _any_of(parts[middle:]))
