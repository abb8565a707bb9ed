"""What readers of the lake see: each workspace's rows as its last complete publish left them.

Iceberg has no transaction over several tables, and a publish commits its
tables one after another, so the tables' current snapshots show, during a
publish or after a worker was killed between two commits, some tables of the
new publish beside others of the previous one (issue 25: ``conversations`` at
360 rows while ``mart_conversations`` held 300). A publish's last commit
therefore records, per workspace and table, the snapshot the publish left (the
lake's record, :mod:`convo_analytics.lake._records`), and readers read each
workspace's rows of each table at that snapshot (decision D-LAKE-VISIBLE).

Reading at many snapshots costs a scan each, so a workspace is read from the
table's current snapshot when no commit since its pinned snapshot touched it:
each of our commits names its workspaces in its snapshot's summary
(``convo.workspaces``), and another workspace's commit replaces only that
workspace's partitions, so the current snapshot holds the same rows of it. A
commit that does not say (another engine's) counts as touching every
workspace, except a compaction (``replace``), which changes no row.

Workspaces without a pin: rows of a lake published before pins existed are
read as they are now (a publish of this release marks its commits with its id,
``convo.publish``). Rows a publish of this release committed for a workspace
with no complete publish yet (its first publish is in progress), or of a
table its last complete publish did not have, are left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from convo_analytics.lake._config import LakeConfig
from convo_analytics.lake._records import TableRecord, load_records

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import Table as IcebergTable
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "PUBLISH_PROPERTY",
    "WORKSPACES_PROPERTY",
    "Published",
    "TableReads",
    "Unfinished",
    "describe",
    "plan_reads",
    "unfinished",
]

#: Snapshot summary properties of every commit of a publish: its id, and its workspaces.
PUBLISH_PROPERTY = "convo.publish"
WORKSPACES_PROPERTY = "convo.workspaces"
#: Workspaces named one by one in a reader's notice; the rest are counted.
_NAMED = 3


@dataclass(slots=True)
class Published:
    """The lake's record as readers use it: each workspace's pins, and what is pending."""

    #: table -> workspace -> its rows as its last complete publish left them.
    pins: dict[str, dict[str, TableRecord]] = field(default_factory=lambda: defaultdict(dict))
    #: Workspaces with a complete publish that pinned its tables.
    pinned: set[str] = field(default_factory=set)
    #: Workspaces recorded only by a release before the pins (read as they are now).
    unpinned: set[str] = field(default_factory=set)
    #: workspace -> partitions recorded pending (a publish of it began and did not finish).
    pending: dict[str, int] = field(default_factory=dict)
    #: workspace -> when its last complete publish was recorded.
    published_at: dict[str, datetime] = field(default_factory=dict)

    @classmethod
    def read(
        cls, catalog: Catalog, config: LakeConfig, workspaces: Sequence[str] | None
    ) -> Published:
        """The record's table rows and pending partitions (of ``workspaces`` if given)."""
        from pyiceberg.expressions import And, EqualTo, In, IsNull, Or

        published = cls()
        table = load_records(catalog, config)
        if table is None:
            return published
        row_filter: BooleanExpression = Or(
            EqualTo(term="scope", value="table"), IsNull(term="fingerprint")
        )
        if workspaces:
            row_filter = And(In(term="workspace_id", literals=list(workspaces)), row_filter)
        pending: dict[str, int] = defaultdict(int)
        for row in table.scan(row_filter=row_filter).to_arrow().to_pylist():
            ws = row["workspace_id"]
            if row["scope"] != "table":
                pending[ws] += 1
            elif row.get("publish_id") is None:
                published.unpinned.add(ws)
            else:
                published.pins[row["table_name"]][ws] = TableRecord(
                    row["table_uuid"], row.get("snapshot_id"), row["publish_id"],
                    row["published_at"],
                )  # fmt: skip
                published.pinned.add(ws)
                at = row["published_at"]
                if at is not None and (ws not in published.published_at
                                       or at > published.published_at[ws]):  # fmt: skip
                    published.published_at[ws] = at
        published.unpinned -= published.pinned
        published.pending = dict(pending)
        return published


@dataclass(slots=True)
class TableReads:
    """How readers read one table: its current snapshot without the ``hidden`` workspaces,
    and some of those each at the snapshot it is pinned to."""

    #: Workspaces not read at the current snapshot (read at a pin, or not at all).
    hidden: set[str] = field(default_factory=set)
    #: snapshot -> workspaces read there.
    at: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    #: Workspaces a commit after their pin touched: a publish of theirs did not finish.
    committed: set[str] = field(default_factory=set)
    #: Workspaces read at their pin because another engine committed to the table since.
    foreign: set[str] = field(default_factory=set)
    #: Workspaces whose pinned snapshot the table no longer has (expired): read as they are.
    lost: set[str] = field(default_factory=set)
    #: Workspaces a publish of this release touched that have no complete publish yet.
    unrecorded: set[str] = field(default_factory=set)


def plan_reads(table: IcebergTable, name: str, published: Published) -> TableReads:
    """Which workspaces of the table ``name`` are read where (see the module's docstring)."""
    from pyiceberg.table.snapshots import ancestors_of

    reads = TableReads()
    uuid = str(table.metadata.table_uuid)
    pins = published.pins.get(name, {})
    waiting: dict[int | None, list[str]] = defaultdict(list)
    absent: set[str] = set()  # not in its last complete publish (or the table was remade)
    for ws in published.pinned:
        pin = pins.get(ws)
        if pin is None or pin.table_uuid != uuid:
            absent.add(ws)
        else:
            waiting[pin.snapshot_id].append(ws)
    reads.hidden |= absent
    seen: set[str] = set()  # touched by a commit newer than the walk's position
    everyone = False
    stamped: set[str] = set()  # touched by a publish of this release
    for snapshot in ancestors_of(table.current_snapshot(), table.metadata):
        for ws in waiting.pop(snapshot.snapshot_id, ()):
            if everyone or ws in seen:
                reads.at[snapshot.snapshot_id].append(ws)
                reads.hidden.add(ws)
                (reads.committed if ws in seen else reads.foreign).add(ws)
        touched = _touched(snapshot)
        if touched is None:
            everyone = True
            continue
        seen |= touched
        if snapshot.summary is not None and snapshot.summary.get(PUBLISH_PROPERTY):
            stamped |= touched
    for snapshot_id, listed in waiting.items():
        if snapshot_id is None:  # the table had none of their rows
            reads.hidden |= {ws for ws in listed if everyone or ws in seen}
            reads.committed |= {ws for ws in listed if ws in seen}
            reads.foreign |= {ws for ws in listed if everyone and ws not in seen}
        elif table.metadata.snapshot_by_id(snapshot_id) is not None:  # off the walked history
            reads.at[snapshot_id].extend(listed)
            reads.hidden.update(listed)
        else:
            reads.lost.update(listed)
    reads.committed |= absent & seen
    reads.unrecorded = stamped - published.pinned - published.unpinned
    reads.hidden |= reads.unrecorded
    # recorded by an earlier release only: nothing to pin, so read as they are (and said)
    reads.committed |= stamped & published.unpinned
    return reads


def _touched(snapshot: Snapshot) -> frozenset[str] | None:
    """The workspaces a commit changed rows of; None when it does not say (every one)."""
    from pyiceberg.table.snapshots import Operation

    summary = snapshot.summary
    if summary is None:
        return None
    if summary.operation == Operation.REPLACE:  # compaction: the same rows in other files
        return frozenset()
    listed = summary.get(WORKSPACES_PROPERTY)
    return None if listed is None else frozenset(w for w in listed.split(",") if w)


@dataclass(frozen=True, slots=True)
class Unfinished:
    """A workspace readers do not see as the lake's tables hold it now: its newest publish
    did not finish (in progress, or stopped), or another engine changed its rows since."""

    workspace_id: str
    #: When its last complete publish was recorded (None: it has none with pins).
    published_at: datetime | None
    #: Whether it has no complete publish at all (its rows are left out).
    first: bool
    #: Partitions recorded pending by the unfinished publish.
    pending: int
    #: Tables the unfinished publish committed.
    committed: tuple[str, ...]
    #: Tables whose pinned snapshot the lake no longer has: shown as they are now.
    lost: tuple[str, ...]
    #: Tables another engine committed to since: shown as its last complete publish left them.
    foreign: tuple[str, ...] = ()

    def describe(self) -> str:
        ws = self.workspace_id
        if self.first:
            return f"{ws} has no complete publish yet: its rows are left out until one completes"
        said = []
        if self.pending or self.committed:
            done = f"; {len(self.committed)} table(s) committed" if self.committed else ""
            begun = (f"a publish of {ws} is in progress or was stopped ({self.pending} "
                     f"partition(s) pending{done})")  # fmt: skip
            if self.published_at is None:
                said.append(
                    f"{begun}: {ws} was last published by an earlier release, which pinned "
                    "no snapshots, so its rows are shown as they are now"
                )
            else:
                said.append(
                    f"{begun}: {ws} is shown as its last complete publish left it "
                    f"({self.published_at:%Y-%m-%d %H:%M:%S} UTC) until a publish of it "
                    "completes"
                )
        if self.foreign:
            said.append(
                f"{ws}'s {', '.join(self.foreign)} changed by another engine's commit after "
                f"its last complete publish are shown as that publish left them, until {ws} "
                "is published again (`convo publish --lake --full` after a repair by hand)"
            )
        if self.lost:
            said.append(
                f"{ws}'s {', '.join(self.lost)} cannot be shown as its last complete publish "
                "left them (that snapshot is gone: lake.keep_snapshots_hours passed, or an "
                f"erasure removed it), so they are shown as they are now; publish {ws} again"
            )
        return "; ".join(said)


def unfinished(published: Published, reads: dict[str, TableReads]) -> list[Unfinished]:
    """The workspaces whose newest publish did not finish, from the record and how each
    table was read."""
    committed: dict[str, list[str]] = defaultdict(list)
    lost: dict[str, list[str]] = defaultdict(list)
    foreign: dict[str, list[str]] = defaultdict(list)
    first: set[str] = set()
    for name, read in reads.items():
        for ws in read.committed:
            committed[ws].append(name)
        for ws in read.lost:
            lost[ws].append(name)
        for ws in read.foreign:
            foreign[ws].append(name)
        first |= read.unrecorded
    named = first | set(committed) | set(lost) | set(foreign) | set(published.pending)
    return [
        Unfinished(
            ws,
            published.published_at.get(ws),
            ws in first,
            published.pending.get(ws, 0),
            tuple(sorted(committed[ws])),
            tuple(sorted(lost[ws])),
            tuple(sorted(foreign[ws])),
        )
        for ws in sorted(named)
    ]


def describe(found: Sequence[Unfinished]) -> str | None:
    """One line for readers about the workspaces not shown as the lake's tables hold them
    now (None: every workspace is)."""
    if not found:
        return None
    said = [u.describe() for u in found[:_NAMED]]
    if len(found) > _NAMED:
        said.append(f"and {len(found) - _NAMED} more workspace(s) likewise")
    return "; ".join(said)
