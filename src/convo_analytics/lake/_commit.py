"""One Iceberg commit that replaces some partitions of a lake table, retried until it lands.

Many workers publish at once without a coordinator of ours: the catalog
accepts a commit only on top of the metadata it was made from (the SQL
catalog's compare-and-swap of the metadata location). A commit that lost the
race is first rebased by pyiceberg itself on the new metadata (its
``commit.retry.*`` table properties), after checking that the other commit
touched none of our partitions; when that is exhausted, or the other commit
did touch them (``ValidationException``: two workers publishing one
workspace), or a SQLite catalog is busy, the whole overwrite is made again on
the table's fresh metadata, with a bounded, jittered backoff (decision
D-LAKE-COMMIT). The commit is one snapshot: the changed months' files removed
and their successors added together (D-LAKE-ONE-SNAPSHOT). Files written for a
commit that did not land are removed at once; a killed commit's, and any other
file no snapshot references past a safety age, by the next commit to the table
(``lake._orphans``, D-LAKE-ORPHANS). After each commit ``version-hint.text``
names the table's current metadata file (D-LAKE-VERSION-HINT).

The same commit expires the table's snapshots older than
``lake.keep_snapshots_hours`` (decision D-LAKE-EXPIRY): a table committed by
thousands of workers a night would otherwise carry every snapshot in the
metadata file each commit rewrites; never the snapshots readers are pinned to
for the publishing workspaces (D-LAKE-VISIBLE). Only metadata is removed: a
reader on an older snapshot keeps its files, which the orphan pass reclaims once
no retained snapshot references them (an erasure removes a workspace's at once:
lake._erase).
"""

from __future__ import annotations

import logging
import random
import time
import uuid
import warnings
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from convo_analytics.errors import UserError
from convo_analytics.lake._changes import MONTH_SUFFIX
from convo_analytics.lake._config import LakeConfig
from convo_analytics.lake._orphans import InFlight, discard, remove_orphans
from convo_analytics.lake._records import PARTITIONS_TABLE
from convo_analytics.lake._write import write_data_files

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table as IcebergTable
    from pyiceberg.table import Transaction

__all__ = [
    "FilesOf",
    "LakeCommitFailed",
    "commit_overwrite",
    "ensure_table",
    "table_head",
    "table_identifier",
]

log = logging.getLogger(__name__)

#: The data files a commit removes, from the table as it is now; or, where it cannot tell,
#: the row filter to remove instead.
FilesOf = Callable[["IcebergTable"], "list[DataFile] | BooleanExpression"]

#: Attempts at one table's commit before the publish gives up (each on fresh metadata).
MAX_ATTEMPTS = 10
_BACKOFF_FIRST, _BACKOFF_MAX = 0.05, 2.0
#: Table properties: compressed files, manifests merged as appends pile up, and only the
#: newest metadata files kept (every commit writes one).
TABLE_PROPERTIES = {
    "write.parquet.compression-codec": "zstd",
    "commit.manifest-merge.enabled": "true",
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "20",
}


class LakeCommitFailed(UserError):
    """A table's commit lost to other writers every time it was tried."""


def commit_overwrite(
    catalog: Catalog,
    config: LakeConfig,
    name: str,
    data: pa.Table,
    replaced: BooleanExpression | FilesOf,
    *,
    day_column: str | None,
    properties: dict[str, str],
    keep: Collection[int] = (),
    key: Sequence[str] = (),
) -> tuple[IcebergTable, int]:
    """Remove what ``replaced`` names and add ``data``, in one commit of the table ``name``
    (made, partitioned by workspace and ``day_column``, when the lake lacks it); the table
    as committed and the attempts it took.

    ``replaced`` is a row filter, or a function naming the data files to remove from the
    table as it is: whole files by their partitions, which costs a set lookup per file,
    where pyiceberg evaluates a filter against every file's metrics (a filter of hundreds
    of day ranges over thousands of files took seconds a commit). Where the function
    cannot tell (a file under another partition spec), it gives the row filter instead.
    ``keep``: snapshots the commit's expiry must leave (readers are pinned to them).
    ``key``: the table's identifier fields (D-LAKE-KEYS; ``workspace_id`` is required
    whatever it is).
    """
    from pyiceberg.exceptions import CommitFailedException, ValidationException
    from sqlalchemy.exc import OperationalError

    identifier = table_identifier(config, name)
    data = _required(data, ("workspace_id", *key))
    table = ensure_table(catalog, identifier, day_column, data.schema, key)
    workspaces = _workspaces_of(data)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        commit_uuid = uuid.uuid4()
        added: list[DataFile] = []
        try:
            with InFlight(table, str(commit_uuid), workspaces):
                try:
                    with table.transaction() as txn, warnings.catch_warnings():
                        # "Delete operation did not match any records": a partition new to it
                        warnings.simplefilter("ignore", UserWarning)
                        with txn.update_schema() as update:
                            update.union_by_name(data.schema)  # a column the warehouse gained
                        missing = {k: v for k, v in TABLE_PROPERTIES.items()
                                   if k not in table.properties}  # fmt: skip
                        if missing:  # a table made by an earlier release
                            txn.set_properties(missing)
                        _by_month(txn, day_column)
                        _keyed(txn, key)
                        _replace(txn, table, data, replaced, properties, commit_uuid, added)
                        _expire(txn, config.keep_snapshots_hours, keep)
                except BaseException:
                    discard(table, added)  # written for a commit that did not land
                    raise
            write_version_hint(table)  # (the transaction left ``table`` as committed)
            if workspaces:
                remove_orphans(table, workspaces, config.orphan_min_age_minutes * 60)
            return table, attempt
        except (CommitFailedException, ValidationException, OperationalError) as exc:
            if attempt == MAX_ATTEMPTS:
                raise LakeCommitFailed(
                    f"the lake's {name} kept changing under this publish: {MAX_ATTEMPTS} "
                    "commits lost to other writers; run the publish again"
                ) from None
            log.info("lake: %s commit %d lost (%s); retrying", name, attempt,
                     type(exc).__name__)  # fmt: skip
            time.sleep(_backoff(attempt))
            table = catalog.load_table(identifier)
    raise AssertionError("unreachable")  # pragma: no cover


def _replace(
    txn: Transaction,
    table: IcebergTable,
    data: pa.Table,
    replaced: BooleanExpression | FilesOf,
    properties: dict[str, str],
    commit_uuid: uuid.UUID,
    written: list[DataFile],
) -> None:
    """Stage the removal of what ``replaced`` names and the files of ``data`` (listed in
    ``written`` as they are written, for their removal should the commit not land)."""
    from pyiceberg.expressions import BooleanExpression

    files = replaced if isinstance(replaced, BooleanExpression) else replaced(table)
    if isinstance(files, BooleanExpression):
        # files it cannot place (another partition spec, row deletes): removed by the
        # rows' filter, a snapshot of its own before the new files' (D-LAKE-ONE-SNAPSHOT)
        txn.delete(files, snapshot_properties=properties)
        files = []
    added = _data_files(txn, table, data, commit_uuid) if data.num_rows else []
    written.extend(added)
    if not files and not added:
        return
    # one snapshot: the files replaced and their successors together (D-LAKE-ONE-SNAPSHOT);
    # an append when nothing is replaced, so engines reading appends only see one
    snapshots = txn.update_snapshot(snapshot_properties=properties)
    with snapshots.overwrite(commit_uuid) if files else snapshots.merge_append() as update:
        if not files:
            update.commit_uuid = commit_uuid
        for data_file in files:
            update.delete_data_file(data_file)
        for data_file in added:
            update.append_data_file(data_file)


def _data_files(
    txn: Transaction, table: IcebergTable, data: pa.Table, commit_uuid: uuid.UUID
) -> list[DataFile]:
    """``data`` written as Parquet files of the table's partitions (not yet committed)."""
    from pyiceberg.io.pyarrow import _check_pyarrow_schema_compatible

    metadata = txn.table_metadata
    _check_pyarrow_schema_compatible(
        metadata.schema(), provided_schema=data.schema, format_version=metadata.format_version
    )
    return write_data_files(metadata, table.io, data, commit_uuid)


def _workspaces_of(data: pa.Table) -> list[str]:
    if "workspace_id" not in data.column_names or not data.num_rows:
        return []
    return sorted({str(w) for w in data.column("workspace_id").unique().to_pylist() if w})


def write_version_hint(table: IcebergTable) -> None:
    """``metadata/version-hint.text`` beside the table's metadata files: the current
    metadata file's name without ``.metadata.json``, so an engine given only the table's
    folder (DuckDB's ``iceberg_scan``, a Hadoop-style reader) finds its metadata without
    the catalog (D-LAKE-VERSION-HINT). Written after each commit, whole; a reader that
    finds an older hint reads the snapshot before."""
    location = table.metadata_location
    folder, name = location.rsplit("/", 1)
    hint = table.io.new_output(f"{folder}/version-hint.text")
    with hint.create(overwrite=True) as out:
        out.write(name.removesuffix(".metadata.json").encode())


def _required(data: pa.Table, columns: Sequence[str]) -> pa.Table:
    """``data`` with ``columns`` (those it has) not nullable: what the table requires."""
    import pyarrow as pa

    if not any(f.nullable and f.name in columns for f in data.schema):
        return data
    return data.cast(
        pa.schema([f.with_nullable(f.nullable and f.name not in columns) for f in data.schema])
    )


def _keyed(txn: Transaction, key: Sequence[str]) -> None:
    """A table an earlier release made with every column optional: ``workspace_id`` and
    the key made required and the key declared (no row of it was ever published without
    them: the warehouse's key columns are NOT NULL, and rows without a workspace are not
    published)."""
    schema = txn.table_metadata.schema()
    wanted = ("workspace_id", *key) if "workspace_id" not in key else tuple(key)
    top = {f.name: f for f in schema.fields}
    optional = [c for c in wanted if c in top and not top[c].required]
    names = {schema.find_column_name(i) for i in schema.identifier_field_ids}
    if not optional and (not key or names == set(key)):
        return
    with txn.update_schema(allow_incompatible_changes=True) as update:
        for column in optional:
            update.update_column(column, required=True)
        if key and names != set(key):
            update.set_identifier_fields(*key)


def _by_month(txn: Transaction, day_column: str | None) -> None:
    """A table made by an earlier release is cut by day: from this commit on its new files
    are cut by month (Iceberg's partition evolution: the old files stay under the old spec
    until replaced, which the publish does for every workspace it republishes whole)."""
    from pyiceberg.transforms import MonthTransform

    if day_column is None:
        return
    fields = {f.name for f in txn.table_metadata.spec().fields}
    old, new = f"{day_column}_day", f"{day_column}{MONTH_SUFFIX}"
    if old in fields and new not in fields:
        with txn.update_spec() as spec:
            spec.remove_field(old)
            spec.add_field(day_column, MonthTransform(), new)


def table_identifier(config: LakeConfig, name: str) -> tuple[str, str]:
    """Where the lake keeps the table ``name``: the records namespace for its bookkeeping
    (``lake_partitions``, D-LAKE-RECORDS), the data namespace for everything else."""
    return (config.records_namespace if name == PARTITIONS_TABLE else config.namespace, name)


def table_head(catalog: Catalog, config: LakeConfig, name: str) -> tuple[str | None, int | None]:
    """The lake table's uuid (a table dropped and made again has another) and its current
    snapshot; (None, None) when the lake has no such table. A table an earlier release cut
    by day answers its uuid with ``@day`` after it: no record of it matches, so its
    workspaces are republished whole, by month (D-LAKE-MONTHS)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        table = catalog.load_table((config.namespace, name))
    except NoSuchTableError:
        return None, None
    snapshot = table.current_snapshot()
    by_day = any(f.name.endswith("_day") for f in table.metadata.spec().fields)
    table_uuid = str(table.metadata.table_uuid) + ("@day" if by_day else "")
    return table_uuid, snapshot.snapshot_id if snapshot else None


def _expire(txn: Transaction, keep_hours: int, keep: Collection[int]) -> None:
    """Stage the removal of snapshots older than ``keep_hours`` (never a branch's head, nor
    a snapshot in ``keep``)."""
    from pyiceberg.table.update.snapshot import ExpireSnapshots

    metadata = txn.table_metadata
    cutoff = (datetime.now(UTC) - timedelta(hours=keep_hours)).timestamp() * 1000
    kept = {ref.snapshot_id for ref in metadata.refs.values()} | set(keep)
    old = [s.snapshot_id for s in metadata.snapshots
           if s.timestamp_ms < cutoff and s.snapshot_id not in kept]  # fmt: skip
    if old:
        ExpireSnapshots(txn).by_ids(old).commit()


def _backoff(attempt: int) -> float:
    """Exponential with full jitter, capped: racing workers spread out."""
    return random.uniform(0, min(_BACKOFF_MAX, _BACKOFF_FIRST * 2**attempt))


def ensure_table(
    catalog: Catalog,
    identifier: tuple[str, str],
    day_column: str | None,
    schema: pa.Schema,
    key: Sequence[str] = (),
) -> IcebergTable:
    """The table, created with its partition spec (and ``key`` as its identifier fields)
    when the lake does not have it yet (two workers creating it at once: the loser loads
    the winner's)."""
    from pyiceberg.catalog import Catalog as _Catalog
    from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema, assign_fresh_schema_ids
    from pyiceberg.transforms import IdentityTransform, MonthTransform

    # loaded first: pyiceberg's create_table_if_not_exists writes a new metadata file before
    # it finds the table exists, one stray file per table and publish
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        pass
    iceberg_schema = assign_fresh_schema_ids(_Catalog._convert_schema_if_needed(schema))
    if key:
        ids = [iceberg_schema.find_field(c).field_id for c in key]
        iceberg_schema = Schema(*iceberg_schema.fields, schema_id=iceberg_schema.schema_id,
                                identifier_field_ids=ids)  # fmt: skip
    fields = [
        PartitionField(
            source_id=iceberg_schema.find_field("workspace_id").field_id,
            field_id=1000,
            transform=IdentityTransform(),
            name="workspace_id",
        )
    ]
    if day_column is not None:
        fields.append(
            PartitionField(
                source_id=iceberg_schema.find_field(day_column).field_id,
                field_id=1001,
                transform=MonthTransform(),
                name=f"{day_column}{MONTH_SUFFIX}",
            )
        )
    try:
        return catalog.create_table(
            identifier,
            schema=iceberg_schema,
            partition_spec=PartitionSpec(*fields),
            properties=TABLE_PROPERTIES,
        )
    except TableAlreadyExistsError:  # another worker made it in between
        return catalog.load_table(identifier)
