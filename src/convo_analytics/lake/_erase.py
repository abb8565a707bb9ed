"""The lake's part of an erasure (issue 30, D-ERASURE): one person of one workspace out of
every lake table, and out of every file of the lake.

An Iceberg table is files: a row deleted from the current snapshot stays in the data
files older snapshots reference, in the files of snapshots a publish already expired
(expiry removes metadata only, D-LAKE-EXPIRY), in files a killed commit left, and, as
column statistics (lower and upper bounds), in the manifests of all of these and in the
``DELETED`` entries of the snapshot that removed it. So the erasure is three steps, run
after the warehouse lost the person (and the marts were rebuilt without them):

1. **The rows.** The workspace is published from the erased warehouse
   (:func:`publish_lake`): the partitions whose rows changed (every partition that held
   the person: their facts, the daily marts that counted them, the topics that quoted
   them) are replaced, copy-on-write, and the lake's record pins the workspace to the
   result, as any publish does. Then the person's rows are counted in every table; a
   lake whose record disagreed with its files is published again in full.
2. **The snapshots.** Every snapshot that references a file of the workspace which the
   current snapshot no longer holds is expired at once, whatever
   ``lake.keep_snapshots_hours`` says (the documented exception). A current snapshot
   whose manifests still list removed files (``DELETED`` entries keep their statistics)
   is first followed by an empty append, which drops them. Readers pinned to a snapshot
   about to go (D-LAKE-VISIBLE) are moved first to the current one when no commit since
   their pin touched their workspace (so it holds the same rows of it); a workspace
   whose own publish is under way loses its pin, and readers say so until it completes.
3. **The files.** Every file of the table's folder that no remaining snapshot
   references is removed when it is one of the expired snapshots' files, a data file in
   the workspace's partitions, or a manifest listing a file of the workspace that is no
   longer live (a killed commit's, or an older expiry's). Other unreferenced files (a
   commit of another workspace under way) are left alone, as are the metadata files.

Every step is found again from the lake as it is, so a run killed anywhere is completed
by running it again.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote_plus

import duckdb

from convo_analytics.errors import UserError
from convo_analytics.lake._commit import MAX_ATTEMPTS, _backoff, table_identifier
from convo_analytics.lake._config import LakeConfig
from convo_analytics.lake._publish import publish_lake
from convo_analytics.lake._records import (
    PARTITIONS_TABLE,
    Record,
    TableRecord,
    load_records,
    record_rows,
)
from convo_analytics.lake._tables import LAKE_TABLES
from convo_analytics.lake._visible import WORKSPACES_PROPERTY, Published, plan_reads

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import ManifestEntry, ManifestFile
    from pyiceberg.table import Table as IcebergTable

__all__ = [
    "LakeErasure",
    "LakeErasureIncomplete",
    "LakePerson",
    "TableErasure",
    "erase_from_lake",
    "lake_present",
    "person_rows",
]

log = logging.getLogger(__name__)

#: Snapshot summary property of the erasure's own commits (the empty appends).
ERASURE_PROPERTY = "convo.erasure"
_T = TypeVar("_T")


class LakeErasureIncomplete(UserError):
    """The lake still holds the person after every step (said with what to do)."""


@dataclass(frozen=True)
class LakePerson:
    """What marks a lake row as the person's: their ids, their identifier in every stored
    form, and the texts they typed (which the topics quote)."""

    conversations: frozenset[str] = frozenset()
    leads: frozenset[str] = frozenset()
    events: frozenset[str] = frozenset()
    forms: frozenset[str] = field(default=frozenset(), repr=False)
    texts: frozenset[str] = field(default=frozenset(), repr=False)

    def filter_for(self, table: str, columns: Collection[str]) -> BooleanExpression | None:
        """The row filter of the person's rows of a table with these columns (None: the
        table has no column naming a person)."""
        from pyiceberg.expressions import In

        wanted = {
            "conversation_id": self.conversations,
            "lead_id": self.leads,
            "event_id": self.events,
            "external_user_id": self.forms,
            "email": self.forms | {f.lower() for f in self.forms},
        }
        if table == "conversations":
            wanted["id"] = self.conversations
        elif table == "leads":
            wanted["id"] = self.leads
        parts: list[BooleanExpression] = [
            In(term=c, literals=sorted(v)) for c, v in wanted.items() if c in columns and v
        ]
        return _any_of(parts) if parts else None


@dataclass
class TableErasure:
    """What the erasure removed from one lake table."""

    #: The person's rows its current snapshot held.
    rows: int = 0
    #: Snapshots expired (they referenced files of the workspace no longer live).
    snapshots: int = 0
    #: Files removed from the lake's storage (data files, manifests, manifest lists).
    files: int = 0


@dataclass
class LakeErasure:
    """The lake's part of an erasure certificate."""

    tables: dict[str, TableErasure] = field(default_factory=dict)
    #: The publish that replaced the workspace's partitions (None: no table changed).
    publish_id: str | None = None
    partitions: int = 0
    #: Readers' pins moved from an expired snapshot to the current one.
    pins_moved: int = 0
    #: Workspaces (ids) whose publish under way lost its pins (readers say so until it ends).
    pins_lost: tuple[str, ...] = ()
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "tables": {
                name: {"rows": t.rows, "snapshotsExpired": t.snapshots, "filesRemoved": t.files}
                for name, t in sorted(self.tables.items())
                if t.rows or t.snapshots or t.files
            },
            "publishId": self.publish_id,
            "partitionsReplaced": self.partitions,
            "pinsMoved": self.pins_moved,
            "pinsLost": list(self.pins_lost),
            "seconds": round(self.seconds, 3),
        }


def lake_present(config: LakeConfig) -> bool:
    """Whether the lake the settings name may hold anything: an SQLite catalog only once
    its file exists (the default names one nobody may have made); any other catalog is
    named on purpose, so it must be reachable."""
    from sqlalchemy.engine import make_url

    url = make_url(config.catalog_uri)
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        return database not in ("", ":memory:") and Path(database).exists()
    return True


def person_rows(
    config: LakeConfig, workspace_id: str, person: LakePerson, catalog: Catalog | None = None
) -> dict[str, int]:
    """The person's rows in each lake table's current snapshot (tables holding none left
    out)."""
    catalog = catalog or config.open_catalog()
    return {k: v for k, v in _count(catalog, config, workspace_id, person).items() if v}


def erase_from_lake(
    con: duckdb.DuckDBPyConnection,
    config: LakeConfig,
    workspace_id: str,
    person: LakePerson,
    *,
    held: Mapping[str, int] | None = None,
) -> LakeErasure:
    """Remove the person from the lake (see the module): ``con`` is the erased warehouse
    (read); ``held``, the person's rows per table as :func:`person_rows` counted them
    before the warehouse lost them (counted now if not given).

    Raises LakeUnavailable when the catalog cannot be used, LakeCommitFailed or
    LakeErasureIncomplete when a step cannot complete (running it again resumes).
    """
    started = time.perf_counter()
    catalog = config.open_catalog()
    result = LakeErasure()
    if held is None:
        held = _count(catalog, config, workspace_id, person)
    for name, rows in held.items():
        result.tables[name] = TableErasure(rows=rows)
    if not any(held.values()) and not _recorded(catalog, config, workspace_id):
        # a lake that never had the workspace (or no table at all) gets none of it now
        _clean(catalog, config, workspace_id, result)
        result.seconds = time.perf_counter() - started
        return result
    published = publish_lake(con, config, [workspace_id])
    holding = {k for k, v in held.items() if v}
    left = {k: v for k, v in _count(catalog, config, workspace_id, person, holding).items() if v}
    if left:  # the lake's record did not say what its files hold: every partition again
        log.warning("lake: %s still held after the publish; publishing it in full", left)
        published = publish_lake(con, config, [workspace_id], full=True)
        left = {k: v for k, v in _count(catalog, config, workspace_id, person, holding).items()
                if v}  # fmt: skip
    if left:
        raise LakeErasureIncomplete(
            f"the lake still holds the person's rows in {', '.join(sorted(left))} after "
            f"publishing workspace {workspace_id} from the erased warehouse: the lake's table "
            "has rows the warehouse does not publish; remove them with another engine "
            "and run `convo erase` again"
        )
    result.publish_id = published.publish_id if any(t.attempts for t in published.tables) else None
    result.partitions = sum(t.partitions for t in published.tables)
    _clean(catalog, config, workspace_id, result)
    result.seconds = time.perf_counter() - started
    return result


# -- counting ------------------------------------------------------------------------------


def _recorded(catalog: Catalog, config: LakeConfig, workspace_id: str) -> bool:
    """Whether the lake's record has the workspace (a publish of it began, at least)."""
    from pyiceberg.expressions import EqualTo

    table = load_records(catalog, config)
    if table is None:
        return False
    scan = table.scan(row_filter=EqualTo(term="workspace_id", value=workspace_id),
                      selected_fields=("workspace_id",), limit=1)  # fmt: skip
    return bool(scan.to_arrow().num_rows > 0)


def _held_tables(catalog: Catalog, config: LakeConfig) -> list[str]:
    held = {identifier[-1] for identifier in catalog.list_tables(config.namespace)}
    return [t.name for t in LAKE_TABLES if t.name in held]


def _count(
    catalog: Catalog,
    config: LakeConfig,
    workspace_id: str,
    person: LakePerson,
    only: Collection[str] | None = None,
) -> dict[str, int]:
    """The person's rows in each lake table's current snapshot (of the tables ``only``)."""
    from pyiceberg.expressions import And, EqualTo

    counts: dict[str, int] = {}
    for name in _held_tables(catalog, config):
        if only is not None and name not in only:
            continue
        table = catalog.load_table((config.namespace, name))
        if table.current_snapshot() is None:
            continue
        columns = {f.name for f in table.schema().fields}
        in_workspace = EqualTo(term="workspace_id", value=workspace_id)
        if name == "mart_topics" and "examples" in columns and person.texts:
            scan = table.scan(row_filter=in_workspace, selected_fields=("examples",))
            counts[name] = sum(
                1
                for row in scan.to_arrow().column("examples").to_pylist()
                if row and not person.texts.isdisjoint(row)
            )
            continue
        row_filter = person.filter_for(name, columns)
        if row_filter is None:
            continue
        scan = table.scan(
            row_filter=And(in_workspace, row_filter), selected_fields=("workspace_id",)
        )
        counts[name] = scan.to_arrow().num_rows
    return counts


# -- which snapshots and files hold the workspace's old rows -------------------------------


@dataclass
class _State:
    """One table's snapshots as the erasure sees them."""

    current: int | None = None
    #: Files (normalised paths) of the workspace the current snapshot holds.
    live: set[str] = field(default_factory=set)
    #: Snapshots referencing a file of the workspace that is not live (or its statistics).
    stale: set[int] = field(default_factory=set)
    #: Every file each snapshot references: its manifest list, manifests, data files.
    files: dict[int, set[str]] = field(default_factory=dict)

    @property
    def current_stale(self) -> bool:
        return self.current is not None and self.current in self.stale

    def referenced(self) -> set[str]:
        return set().union(*self.files.values()) if self.files else set()


class _Reader:
    """Manifest entries by manifest path, read once: a manifest is never rewritten in
    place, and snapshots share most of theirs."""

    def __init__(self, io: FileIO) -> None:
        self.io = io
        self._entries: dict[str, list[ManifestEntry]] = {}
        self._paths: dict[str, str] = {}

    def entries(self, manifest: ManifestFile) -> list[ManifestEntry]:
        found = self._entries.get(manifest.manifest_path)
        if found is None:
            found = manifest.fetch_manifest_entry(self.io, discard_deleted=False)
            self._entries[manifest.manifest_path] = found
        return found

    def path(self, location: str) -> str:
        """A location as the storage names it (file:///a/b and /a/b are one file)."""
        found = self._paths.get(location)
        if found is None:
            found = str(self.io.parse_location(location)[2])  # type: ignore[attr-defined]
            self._paths[location] = found
        return found


def _state(table: IcebergTable, workspace_id: str, reader: _Reader) -> _State:
    from pyiceberg.manifest import ManifestEntryStatus

    current = table.current_snapshot()
    state = _State(current=current.snapshot_id if current else None)
    if current is None:
        return state
    specs = table.specs()

    def ours(manifest: ManifestFile) -> Iterable[ManifestEntry]:
        names = [f.name for f in specs[manifest.partition_spec_id].fields]
        at = names.index("workspace_id") if "workspace_id" in names else None
        for entry in reader.entries(manifest):
            # a spec without the workspace (another engine's): every file may be the workspace's
            if at is None or entry.data_file.partition[at] == workspace_id:
                yield entry

    for manifest in current.manifests(table.io):
        state.live |= {reader.path(e.data_file.file_path) for e in ours(manifest)
                       if e.status != ManifestEntryStatus.DELETED}  # fmt: skip
    for snapshot in table.metadata.snapshots:
        files = {reader.path(snapshot.manifest_list)}
        for manifest in snapshot.manifests(table.io):
            files.add(reader.path(manifest.manifest_path))
            files |= {reader.path(e.data_file.file_path) for e in reader.entries(manifest)}
            if any(reader.path(e.data_file.file_path) not in state.live for e in ours(manifest)):
                state.stale.add(snapshot.snapshot_id)
        state.files[snapshot.snapshot_id] = files
    return state


# -- the commits ---------------------------------------------------------------------------


def _retrying(
    catalog: Catalog, config: LakeConfig, name: str, step: Callable[[IcebergTable], _T]
) -> _T:
    """``step`` on the table as it is now, again on fresh metadata when a commit lost the
    race to another writer (as a publish's commits are, D-LAKE-COMMIT)."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException
    from sqlalchemy.exc import OperationalError

    from convo_analytics.lake._commit import LakeCommitFailed

    for attempt in range(1, MAX_ATTEMPTS + 1):
        table = catalog.load_table(table_identifier(config, name))
        try:
            return step(table)
        except (CommitFailedException, ValidationException, OperationalError) as exc:
            if attempt == MAX_ATTEMPTS:
                raise LakeCommitFailed(
                    f"the lake's {name} kept changing under this erasure: {MAX_ATTEMPTS} "
                    "commits lost to other writers; run `convo erase` again"
                ) from None
            log.info("lake: erasure's %s commit %d lost (%s); retrying", name, attempt,
                     type(exc).__name__)  # fmt: skip
            time.sleep(_backoff(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


def _append_nothing(table: IcebergTable) -> None:
    """A snapshot of the same rows whose manifests no longer list removed files (an append
    keeps only manifests with live files); it touches no workspace's rows."""
    properties = {WORKSPACES_PROPERTY: "", ERASURE_PROPERTY: "drop removed entries"}
    with table.transaction() as txn, txn.update_snapshot(properties).fast_append():
        pass


def _expire(table: IcebergTable, workspace_id: str, reader: _Reader) -> tuple[list[int], set[str]]:
    """Expire the table's snapshots holding old files of the workspace (never the current
    one, nor a branch's or tag's head); the ids, and the files they referenced."""
    from pyiceberg.table.update.snapshot import ExpireSnapshots

    state = _state(table, workspace_id, reader)
    protected = {ref.snapshot_id for ref in table.metadata.refs.values()}
    ids = sorted(state.stale - protected - {state.current})
    if ids:
        with table.transaction() as txn:
            ExpireSnapshots(txn).by_ids(ids).commit()
    return ids, set().union(*(state.files[i] for i in ids)) if ids else set()


@dataclass(frozen=True, slots=True)
class _Move:
    """A reader's pin to move: table, workspace, the snapshot it is at and where it goes."""

    table: str
    workspace_id: str
    old: int
    new: int


def _move_pins(catalog: Catalog, config: LakeConfig, moves: list[_Move]) -> int:
    """Move readers' pins in the lake's record, each only if it is still where it was
    found (a publish that completed since pinned anew); how many moved."""
    from pyiceberg.expressions import And, EqualTo, In

    if not moves:
        return 0
    wanted = {(m.table, m.workspace_id): m for m in moves}

    def commit(table: IcebergTable) -> int:
        row_filter = And(
            EqualTo(term="scope", value="table"),
            And(In(term="workspace_id", literals=sorted({m.workspace_id for m in moves})),
                In(term="table_name", literals=sorted({m.table for m in moves}))),
        )  # fmt: skip
        rows: list[Record] = []
        for row in table.scan(row_filter=row_filter).to_arrow().to_pylist():
            move = wanted.get((row["table_name"], row["workspace_id"]))
            if move is None or row.get("snapshot_id") != move.old:
                continue
            pin = TableRecord(row["table_uuid"], move.new, row.get("publish_id"),
                              row.get("published_at"))  # fmt: skip
            rows.append(Record(row["workspace_id"], row["table_name"], "table", None, None, *pin))
        if not rows:
            return 0
        replaced = _any_of([
            And(EqualTo(term="scope", value="table"),
                And(EqualTo(term="workspace_id", value=r.workspace_id),
                    EqualTo(term="table_name", value=r.table_name)))
            for r in rows
        ])  # fmt: skip
        properties = {WORKSPACES_PROPERTY: ",".join(sorted({r.workspace_id for r in rows})),
                      ERASURE_PROPERTY: "pins moved"}  # fmt: skip
        with table.transaction() as txn:
            txn.overwrite(record_rows(rows), overwrite_filter=replaced,
                          snapshot_properties=properties)  # fmt: skip
        return len(rows)

    return _retrying(catalog, config, PARTITIONS_TABLE, commit)


# -- the files -----------------------------------------------------------------------------


def _listing(table: IcebergTable) -> list[str]:
    """Every file under the table's location (normalised paths)."""
    from pyarrow.fs import FileSelector, FileType

    io = table.io
    scheme, netloc, base = io.parse_location(table.location())  # type: ignore[attr-defined]
    fs = io.fs_by_scheme(scheme, netloc)  # type: ignore[attr-defined]
    infos = fs.get_file_info(FileSelector(base, recursive=True, allow_not_found=True))
    return [info.path for info in infos if info.type == FileType.File]


def _metadata_files(table: IcebergTable) -> set[str]:
    """The table's metadata files: the current one and those its log keeps."""
    return {table.metadata_location, *(e.metadata_file for e in table.metadata.metadata_log)}


def _stale_manifest(reader: _Reader, path: str, segment: str, live: set[str]) -> bool:
    """Whether an unreferenced manifest lists a file of the workspace that is not live
    (its entries' statistics may hold the person). One that cannot be read (being written)
    is not."""
    from pyiceberg.manifest import ManifestContent, ManifestFile

    manifest = ManifestFile.from_args(
        manifest_path=path, manifest_length=0, partition_spec_id=0,
        content=ManifestContent.DATA, sequence_number=0, min_sequence_number=0,
        added_snapshot_id=0,
    )  # fmt: skip
    try:
        entries = reader.entries(manifest)
    except Exception:  # a partial or foreign file: not ours to judge
        return False
    return any(
        segment in e.data_file.file_path and reader.path(e.data_file.file_path) not in live
        for e in entries
    )


def _remove_files(
    table: IcebergTable, workspace_id: str, expired: set[str], reader: _Reader
) -> int:
    """Remove the table's files no remaining snapshot references that hold (or may hold)
    the workspace's old rows (see the module); how many."""
    state = _state(table, workspace_id, reader)
    keep = state.referenced() | {reader.path(p) for p in _metadata_files(table)}
    base = reader.path(table.location()).rstrip("/")
    segment = f"/workspace_id={quote_plus(workspace_id, safe='')}/"
    scheme, netloc, _ = table.io.parse_location(table.location())  # type: ignore[attr-defined]
    fs = table.io.fs_by_scheme(scheme, netloc)  # type: ignore[attr-defined]
    removed = 0
    for path in _listing(table):
        if path in keep:
            continue
        name = path.rsplit("/", 1)[-1]
        inside = path[len(base) :]
        goes = path in expired or (
            inside.startswith("/data/") and segment in inside
        ) or (
            inside.startswith("/metadata/") and name.endswith(".avro")
            and not name.startswith("snap-")
            and _stale_manifest(reader, path, segment, state.live)
        )  # fmt: skip
        if goes:
            try:
                fs.delete_file(path)
            except FileNotFoundError:
                continue
            removed += 1
    return removed


def _clean(catalog: Catalog, config: LakeConfig, workspace_id: str, result: LakeErasure) -> None:
    """Steps 2 and 3 of the module for every lake table (the record aside: it holds
    fingerprints and pins, no rows of anyone)."""
    published = Published.read(catalog, config, None)
    moves: list[_Move] = []
    lost: set[str] = set()
    names = _held_tables(catalog, config)
    readers: dict[str, _Reader] = {}
    for name in names:
        table = catalog.load_table((config.namespace, name))
        reader = readers[name] = _Reader(table.io)
        state = _state(table, workspace_id, reader)
        if state.current_stale:
            _retrying(catalog, config, name, _append_nothing)
            table = catalog.load_table((config.namespace, name))
            state = _state(table, workspace_id, reader)
        if state.current_stale:
            raise LakeErasureIncomplete(
                f"the lake's {name} keeps, in a manifest another engine wrote, statistics of "
                f"files of workspace {workspace_id} it removed: rewrite the table's manifests "
                "with that engine (Spark's rewrite_manifests) and run `convo erase` again"
            )
        if not state.stale:  # (unreferenced files may still be there: a killed run's)
            continue
        reads = plan_reads(table, name, published)
        uuid = str(table.metadata.table_uuid)
        for ws, pin in published.pins.get(name, {}).items():
            if pin.snapshot_id not in state.stale or pin.table_uuid != uuid:
                continue
            if ws in reads.hidden:  # its publish is under way: its pinned rows are gone
                lost.add(ws)
            elif state.current is not None:
                moves.append(_Move(name, ws, pin.snapshot_id, state.current))
    result.pins_moved = _move_pins(catalog, config, moves)
    result.pins_lost = tuple(sorted(lost))
    for name in names:
        reader = readers[name]
        expire = functools.partial(_expire, workspace_id=workspace_id, reader=reader)
        ids, files = _retrying(catalog, config, name, expire)
        table = catalog.load_table((config.namespace, name))
        done = result.tables.setdefault(name, TableErasure())
        done.snapshots += len(ids)
        done.files += _remove_files(table, workspace_id, files, reader)


def _any_of(parts: list[BooleanExpression]) -> BooleanExpression:
    from convo_analytics.lake._changes import _any_of as balanced

    return balanced(parts)
