"""Rebuilding the marts: all of them in bounded memory, or what changed.

**Full** (:func:`stage_all`): staging copies of the marts are created (with
the release's columns and types) and filled: the facts one hash chunk of
conversations at a time, the daily marts a month at a time, committed as it
goes; what is held in memory is one chunk or one month, however long the
history. The caller swaps them in (``_mart_set.swap_in_staging``).

**Incremental** (:func:`rebuild_changed`): the changed conversations (again
in chunks) have their previous facts read from the fact marts, their facts
derived anew and swapped in; the cohort, escalation and guardrail marts move
by the difference; the message marts move by the difference for
conversations whose messages did not change but whose slice did, and are
recomputed for the days whose messages changed (a conversation whose message
digest differs: its old and its new span). The caller holds
the transaction, so either every partition is rewritten or none is.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from datetime import date, timedelta

import duckdb
import polars as pl

from convo_analytics.transform._cube import Cube, build_cube
from convo_analytics.transform._daily import (
    FAMILIES,
    difference,
    insert_rows,
    merge_difference,
    recompute_partitions,
    refresh_percentiles,
)
from convo_analytics.transform._facts import (
    ALL,
    CONVERSATION_KEY,
    Facts,
    footprints,
    hash_chunk,
    listed_in,
    read_facts,
)
from convo_analytics.transform._frames import read_frame, scalar
from convo_analytics.transform._mart_set import LIVE, STAGING, MartSet, create_staging
from convo_analytics.transform._partitions import (
    CHANGED,
    PARTITION,
    days_between,
    every_day,
    no_partitions,
    written_by_new_runs,
)
from convo_analytics.transform._slices import DIMENSIONS, slices_of, with_slice_keys
from convo_analytics.warehouse._marts import (
    MART_CONVERSATION_FOOTPRINTS,
    MART_CONVERSATIONS,
    MART_ESCALATIONS,
    MART_GUARDRAIL_INCIDENTS,
)

log = logging.getLogger(__name__)

#: Conversations whose facts are derived at once (with ten messages each, about 2.5 GiB
#: at the peak), whatever the size of the warehouse.
CHUNK_CONVERSATIONS = 1_000_000
_CHUNK = "_transform_chunk"


@dataclass(slots=True)
class RebuildStats:
    """What a rebuild did: facts recomputed, messages read, partitions rewritten and why."""

    conversations: int = 0
    messages: int = 0
    partitions: pl.DataFrame = field(default_factory=no_partitions)

    def touch(self, parts: pl.DataFrame) -> None:
        if not parts.is_empty():
            self.partitions = pl.concat([self.partitions, parts], how="vertical_relaxed")


def _since(clock: float) -> float:
    return time.perf_counter() - clock


def _chunks(count: int) -> int:
    return max(1, math.ceil(count / CHUNK_CONVERSATIONS))


def _write_facts(con: duckdb.DuckDBPyConnection, facts: Facts, marts: MartSet = LIVE) -> None:
    insert_rows(con, marts.conversations, facts.conversations)
    insert_rows(con, marts.footprints, footprints(facts))
    insert_rows(con, marts.escalations, facts.escalations)
    insert_rows(con, marts.incidents, facts.incidents)


def refresh_slices(con: duckdb.DuckDBPyConnection, marts: MartSet = LIVE) -> None:
    """``mart_slices``: every combination of dimension values a fact has now."""
    dims = ", ".join(DIMENSIONS)
    seen = read_frame(
        con,
        f"SELECT DISTINCT {dims} FROM {marts.conversations.name} "
        f"UNION SELECT DISTINCT {dims} FROM {marts.incidents.name}",
    )
    slices = slices_of(seen)
    if slices["slice_key"].n_unique() != slices.height:
        raise RuntimeError(
            "two slices hash to one slice_key; this has a chance of about 1 in 10^15 and "
            "needs a wider key: please report it"
        )
    con.execute(f"DELETE FROM {marts.slices.name}")
    insert_rows(con, marts.slices, slices)


# -- full ------------------------------------------------------------------------------------


def _history(
    con: duckdb.DuckDBPyConnection, marts: MartSet
) -> tuple[list[str | None], date, date] | None:
    """The workspaces of the facts and the UTC days their times span (None: no facts)."""
    rows = con.execute(
        f"""SELECT min(lo)::DATE, max(hi)::DATE FROM (
            SELECT min(started_at) AS lo, max(started_at) AS hi FROM {marts.conversations.name}
            UNION ALL SELECT min(first_message_at), max(last_message_at)
                      FROM {marts.footprints.name}
            UNION ALL SELECT min(escalated_at), max(escalated_at) FROM {marts.escalations.name}
            UNION ALL SELECT min(triggered_at), max(triggered_at) FROM {marts.incidents.name})"""
    ).fetchall()
    if not rows or rows[0][0] is None:
        return None
    workspaces = [
        r[0]
        for r in con.execute(
            f"SELECT DISTINCT workspace_id FROM {marts.footprints.name} "
            f"UNION SELECT DISTINCT workspace_id FROM {marts.incidents.name}"
        ).fetchall()
    ]
    return workspaces, rows[0][0], rows[0][1]


def stage_all(
    con: duckdb.DuckDBPyConnection, zones: tuple[str, ...], threshold: float
) -> RebuildStats:
    """Every mart from scratch into the staging marts (the caller swaps them in): facts a
    chunk of conversations at a time, daily marts and percentiles a month at a time, each
    committed, so that DuckDB never holds more than one of them in memory."""
    stats = RebuildStats()
    create_staging(con)
    count = int(scalar(con, "SELECT count(*) FROM conversations") or 0)
    chunks = _chunks(count)
    clock = time.perf_counter()
    con.execute("BEGIN TRANSACTION")
    try:
        for index in range(chunks):
            facts = read_facts(con, hash_chunk(index, chunks) if chunks > 1 else ALL)
            _write_facts(con, facts, STAGING)
            stats.conversations += facts.conversations.height
            stats.messages += facts.messages.height
            del facts
            con.execute("COMMIT")
            con.execute("BEGIN TRANSACTION")
            log.debug("facts: chunk %d of %d done at %.1f s", index + 1, chunks, _since(clock))
        refresh_slices(con, STAGING)
        history = _history(con, STAGING)
        if history is not None:
            workspaces, first, last = history
            every = every_day(
                workspaces, zones, first - timedelta(days=1), last + timedelta(days=1), "full"
            )
            recompute_partitions(con, dict.fromkeys(FAMILIES, every), zones, threshold, staged=True)
            log.debug("daily marts: %d partitions done at %.1f s", every.height, _since(clock))
            stats.touch(every)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return stats


# -- incremental -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Dirty:
    """Partitions whose percentile inputs changed, gathered over the chunks."""

    latency: list[pl.DataFrame] = field(default_factory=list)
    durations: list[pl.DataFrame] = field(default_factory=list)
    presence: list[pl.DataFrame] = field(default_factory=list)
    recompute: list[pl.DataFrame] = field(default_factory=list)


#: What the previous facts of a chunk are read for: the columns the cube needs.
_COHORT = (
    "workspace_id, conversation_id, started_at, engaged, status, escalated, contained, "
    "qualified_at, feedback_rating, positive_feedback, first_response_ms, resolution_seconds"
)
_PREVIOUS = {
    MART_CONVERSATIONS.name: _COHORT,
    MART_CONVERSATION_FOOTPRINTS.name: "*",
    MART_ESCALATIONS.name: "workspace_id, conversation_id, escalated_at, destination",
    MART_GUARDRAIL_INCIDENTS.name: f"workspace_id, triggered_at, flag, {', '.join(DIMENSIONS)}",
}


@dataclass(frozen=True, slots=True)
class _Previous:
    """A chunk's facts as the marts hold them (what they added), its footprints, and where
    those rows are (so that they are deleted without another search)."""

    facts: Facts
    footprints: pl.DataFrame
    rows: dict[str, pl.Series]


def _previous(con: duckdb.DuckDBPyConnection, empty_messages: pl.DataFrame) -> _Previous:
    """Each fact mart's rows of the chunk's conversations, read once each."""
    frames = {
        table: read_frame(
            con,
            f"SELECT rowid AS _row, {columns} FROM {table} "
            f"WHERE (coalesce(workspace_id, ''), coalesce(conversation_id, '')) "
            f"IN (SELECT workspace_id, id FROM {_CHUNK})",
        )
        for table, columns in _PREVIOUS.items()
    }
    rows = {table: frame["_row"] for table, frame in frames.items()}
    feet = frames[MART_CONVERSATION_FOOTPRINTS.name].drop("_row")
    keys = feet.select(*CONVERSATION_KEY, "slice_key")
    facts = Facts(
        conversations=frames[MART_CONVERSATIONS.name].drop("_row").join(keys, on=CONVERSATION_KEY),
        messages=empty_messages,  # gone when their transcript changed; digests say what did
        escalations=frames[MART_ESCALATIONS.name].drop("_row").join(keys, on=CONVERSATION_KEY),
        incidents=with_slice_keys(frames[MART_GUARDRAIL_INCIDENTS.name].drop("_row")),
        slices=pl.DataFrame(),
    )
    return _Previous(facts, feet, rows)


def _delete_rows(con: duckdb.DuckDBPyConnection, rows: dict[str, pl.Series]) -> None:
    """Delete rows found before by their row ids (no search of the tables again)."""
    for table, found in rows.items():
        if found.is_empty():
            continue
        con.register("_rows", found.to_frame("rid").to_arrow())
        try:
            con.execute(f"DELETE FROM {table} WHERE rowid IN (SELECT rid FROM _rows)")
        finally:
            con.unregister("_rows")


def _only(facts: Facts, *keep: str) -> Facts:
    """The facts with every frame but ``keep`` emptied (so a cube of them adds only those)."""
    frames = {
        name: getattr(facts, name) if name in keep else getattr(facts, name).clear()
        for name in ("conversations", "messages", "escalations", "incidents")
    }
    return Facts(**frames, slices=facts.slices)


def _move(
    con: duckdb.DuckDBPyConnection,
    new: Cube,
    old: Cube,
    names: tuple[str, ...],
    why: str,
    stats: RebuildStats,
) -> dict[str, pl.DataFrame]:
    """Add the difference to each mart; the partitions each one moved."""
    moved = {}
    for name in names:
        delta = difference(new, old, name)
        merge_difference(con, name, delta)
        parts = delta.select(PARTITION).unique().with_columns(why=pl.lit(why))
        stats.touch(parts)
        moved[name] = parts
    return moved


def _message_changes(
    new: Facts, new_feet: pl.DataFrame, old_feet: pl.DataFrame, zones: tuple[str, ...]
) -> tuple[pl.DataFrame, Facts, Facts]:
    """The partitions to recompute (conversations whose messages changed: both spans), and
    the messages of conversations that only moved to another slice, with their new and
    their old slice (a conversation never changes workspace: the workspace is part of what
    names it)."""
    both = new_feet.join(old_feet, on=CONVERSATION_KEY, how="full", suffix="_old", coalesce=True)
    digest_same = pl.col("messages_digest").eq_missing(pl.col("messages_digest_old"))
    changed = both.filter(~digest_same)
    recompute = pl.concat(
        [
            days_between(changed, "first_message_at", "last_message_at", zones, "transcripts"),
            days_between(
                changed.select(
                    "workspace_id",
                    pl.col("first_message_at_old").alias("first_message_at"),
                    pl.col("last_message_at_old").alias("last_message_at"),
                ),
                "first_message_at",
                "last_message_at",
                zones,
                "transcripts",
            ),
        ],
        how="vertical_relaxed",
    ).unique()
    moved = both.filter(
        digest_same
        & pl.col("messages_digest").is_not_null()
        & pl.col("slice_key").ne_missing(pl.col("slice_key_old"))
    )
    keys = new.conversations.join(moved, on=CONVERSATION_KEY, how="semi").select(
        "conv_key", *CONVERSATION_KEY
    )
    messages = new.messages.join(keys, on="conv_key", how="semi")
    previous_keys = keys.join(
        moved.select(*CONVERSATION_KEY, "slice_key_old"), on=CONVERSATION_KEY
    ).select("conv_key", "slice_key_old")
    old_messages = (
        messages.drop("slice_key")
        .join(previous_keys, on="conv_key")
        .rename({"slice_key_old": "slice_key"})
    )
    now = _only(new, "messages")
    return (
        recompute,
        Facts(now.conversations, messages, now.escalations, now.incidents, now.slices),
        Facts(now.conversations, old_messages, now.escalations, now.incidents, now.slices),
    )


def _changed_chunk(
    con: duckdb.DuckDBPyConnection,
    zones: tuple[str, ...],
    threshold: float,
    stats: RebuildStats,
    dirty: _Dirty,
    messages: str,
) -> None:
    """One chunk of changed conversations: facts swapped, differences added."""
    new = read_facts(con, listed_in(_CHUNK, messages))
    new_feet = footprints(new)
    previous = _previous(con, new.messages.clear())
    old, old_feet = previous.facts, previous.footprints
    _delete_rows(con, previous.rows)
    _write_facts(con, new)
    stats.conversations += new.conversations.height
    stats.messages += new.messages.height
    recompute, now, before = _message_changes(new, new_feet, old_feet, zones)
    dirty.recompute.append(recompute)
    stats.touch(recompute)
    plain = _only(new, "conversations", "escalations", "incidents")
    for tz in zones:
        new_cube = build_cube(plain, tz, threshold)
        old_cube = build_cube(old, tz, threshold)
        moved = _move(con, new_cube, old_cube, FAMILIES["conversations"], "conversations", stats)
        dirty.durations.append(moved["durations"])
        dirty.presence.append(moved["conversations"])
        _move(con, new_cube, old_cube, ("escalations",), "escalations", stats)
        _move(con, new_cube, old_cube, ("guardrails",), "guardrails", stats)
        if not now.messages.is_empty():
            moved = _move(
                con,
                build_cube(now, tz, threshold),
                build_cube(before, tz, threshold),
                FAMILIES["messages"],
                "moved",
                stats,
            )
            dirty.latency.append(moved["latency"])
            dirty.presence.append(moved["messages"])


_REWRITTEN = "_transform_rewritten"
_KEPT = "_transform_kept"


def _transcript_groups(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int, str]]:
    """The changed conversations split by where their messages are: those whose transcript
    a new run rewrote (all their messages carry its id, so the messages of old runs are
    skipped unread) and the rest (their messages are found by a scan of all of them).
    Each: (table of keys, how many, condition on the messages)."""
    rewritten = written_by_new_runs(con, "conversations", "m.run_id")
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {_REWRITTEN} AS
            SELECT DISTINCT workspace_id, conversation_id AS id FROM messages m
            WHERE {rewritten}
              AND (workspace_id, conversation_id) IN (SELECT workspace_id, id FROM {CHANGED})"""
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {_KEPT} AS
            SELECT workspace_id, id FROM {CHANGED}
            EXCEPT SELECT workspace_id, id FROM {_REWRITTEN}"""
    )
    groups = []
    for table, messages in ((_REWRITTEN, rewritten), (_KEPT, "TRUE")):
        count = int(scalar(con, f"SELECT count(*) FROM {table}"))
        if count:
            groups.append((table, count, messages))
    return groups


def rebuild_changed(
    con: duckdb.DuckDBPyConnection, zones: tuple[str, ...], threshold: float
) -> RebuildStats:
    """Rewrite what the changed conversations (``_transform_changed``) touch."""
    stats = RebuildStats()
    dirty = _Dirty()
    for group, count, messages in _transcript_groups(con):
        chunks = _chunks(count)
        for index in range(chunks):
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE {_CHUNK} AS SELECT workspace_id, id FROM {group} "
                f"WHERE hash(workspace_id, id) % {chunks} = {index}"
            )
            _changed_chunk(con, zones, threshold, stats, dirty, messages)
    for table in (_CHUNK, _REWRITTEN, _KEPT):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    recompute = _union(dirty.recompute)
    recompute_partitions(con, {"messages": recompute}, zones, threshold)
    refresh_percentiles(
        con,
        _union([*dirty.latency, recompute]),
        _union(dirty.durations),
        _union([*dirty.presence, recompute]),
    )
    refresh_slices(con)
    return stats


def _union(frames: list[pl.DataFrame]) -> pl.DataFrame:
    parts = [f.select(PARTITION) for f in frames if not f.is_empty()]
    if not parts:
        return no_partitions().select(PARTITION)
    return pl.concat(parts, how="vertical_relaxed").unique()
