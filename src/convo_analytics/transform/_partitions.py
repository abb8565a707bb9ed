"""Partitions of the daily marts: what changed since the last transform, and which
(workspace, zone, day) partitions that touches.

What changed is read from the run ids the loaders stamp on every row they
write (``conversations.last_run_id``, ``leads.last_run_id``,
``events.ingest_run_id``): the marts remember, in ``mart_watermarks``, every
run id whose rows they include, so rows with any other id are new or changed
(decision D-TRANSFORM-CHANGES). A conversation's facts depend only on rows
carrying its workspace and id, so the unit of change is the conversation,
named by both (D-WORKSPACE-ID): the changed set is every conversation one of
those rows belongs to, plus the few whose webhook facts a changed detail
decides (D-FACT-SOURCES).

Whether a run may be incremental at all is decided by :func:`full_reason`:
marts built under another definition version, other zones or another
low-confidence threshold are rebuilt whole. Other fallback patterns only make
an incremental run recompute every knowledge gap (:func:`gaps_reason`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import duckdb
import polars as pl

from convo_analytics.transform._cube import local_date
from convo_analytics.transform._frames import scalar
from convo_analytics.transform._versions import DEFINITION_VERSION
from convo_analytics.warehouse._marts import MART_STATE, MART_WATERMARKS
from convo_analytics.warehouse._sql import sql_literal
from convo_analytics.warehouse._tables import event_workspace

#: A partition of the daily marts.
PARTITION = ("workspace_id", "timezone", "date")
PARTITION_SCHEMA = {"workspace_id": pl.String, "timezone": pl.String, "date": pl.Date}

#: Source tables and the column holding the run that wrote each row.
SOURCES = {
    "conversations": ("conversations", "last_run_id"),
    "leads": ("leads", "last_run_id"),
    "events": ("events", "ingest_run_id"),
}
#: Event types whose rows feed the facts (escalations and guardrail incidents).
FACT_EVENTS = ("escalation.created", "conversation.escalated", "guardrail.triggered")
#: The temporary tables a run keeps its new run ids and its changed conversations in.
NEW_RUNS = "_transform_new_runs"
CHANGED = "_transform_changed"


@dataclass(frozen=True, slots=True)
class MartState:
    """What the marts in the warehouse were built with (``mart_state``)."""

    definition_version: int
    timezones: tuple[str, ...]
    low_confidence_threshold: float
    #: The patterns ``knowledge_gaps`` was found with (None: not recorded).
    fallback_patterns: tuple[str, ...] | None = None


def read_state(con: duckdb.DuckDBPyConnection) -> MartState | None:
    rows = con.execute(
        "SELECT definition_version, timezones, low_confidence_threshold, fallback_patterns "
        f"FROM {MART_STATE.name}"
    ).fetchall()
    if len(rows) != 1 or rows[0][0] is None:
        return None
    version, zones, threshold, patterns = rows[0]
    return MartState(
        int(version),
        tuple(zones or ()),
        float(threshold),
        tuple(patterns) if patterns is not None else None,
    )


def gaps_reason(state: MartState | None, patterns: Sequence[str]) -> str | None:
    """Why an incremental run must recompute every ``knowledge_gaps`` row (the fallback
    patterns are not the ones they were found with), or None."""
    if state is None or state.fallback_patterns == tuple(patterns):
        return None
    if state.fallback_patterns is None:
        return "fallback patterns not recorded"
    return "fallback patterns changed"


def full_reason(
    state: MartState | None, timezones: Sequence[str], threshold: float, *, asked: bool
) -> str | None:
    """Why this run must rebuild every partition, or None when it may be incremental."""
    if asked:
        return "--full asked"
    if state is None:
        return "first transform (no marts, or marts made before partitions)"
    if state.definition_version != DEFINITION_VERSION:
        return f"definition version {state.definition_version} -> {DEFINITION_VERSION}"
    if state.timezones != tuple(timezones):
        return f"time zones changed ({', '.join(state.timezones)} -> {', '.join(timezones)})"
    if state.low_confidence_threshold != threshold:
        return f"low-confidence threshold changed ({state.low_confidence_threshold} -> {threshold})"
    return None


def write_state(
    con: duckdb.DuckDBPyConnection,
    timezones: Sequence[str],
    threshold: float,
    transform_run_id: str,
    *,
    full: bool,
    patterns: Sequence[str] = (),
) -> None:
    """Record what the marts now follow (``built_at`` moves only with a full rebuild) and
    the fallback patterns ``knowledge_gaps`` now follows."""
    if full:
        con.execute(f"DELETE FROM {MART_STATE.name}")
        con.execute(
            f"INSERT INTO {MART_STATE.name} (definition_version, timezones, "
            "low_confidence_threshold, transform_run_id, built_at, fallback_patterns) "
            "VALUES (?, ?, ?, ?, now(), ?::VARCHAR[])",
            [DEFINITION_VERSION, list(timezones), threshold, transform_run_id, list(patterns)],
        )
    else:
        con.execute(
            f"UPDATE {MART_STATE.name} SET transform_run_id = ?, fallback_patterns = ?::VARCHAR[]",
            [transform_run_id, list(patterns)],
        )


# -- what changed ----------------------------------------------------------------------------


def find_new_runs(con: duckdb.DuckDBPyConnection, *, all_runs: bool) -> int:
    """Fill ``_transform_new_runs`` with the run ids of rows the marts do not include yet
    (every run id present, for a full rebuild); returns how many."""
    parts = []
    for source, (table, column) in SOURCES.items():
        seen = (
            ""
            if all_runs
            else f" EXCEPT SELECT run_id FROM {MART_WATERMARKS.name} WHERE source = '{source}'"
        )
        parts.append(
            f"SELECT '{source}' AS source, run_id FROM "
            f"(SELECT DISTINCT coalesce({column}, '') AS run_id FROM {table}{seen})"
        )
    con.execute(f"CREATE OR REPLACE TEMP TABLE {NEW_RUNS} AS " + " UNION ALL ".join(parts))
    return int(scalar(con, f"SELECT count(*) FROM {NEW_RUNS}"))


#: Up to this many new runs are written into the SQL as constants, which DuckDB checks
#: against each row group's minimum and maximum: rows of old runs are not even read.
_LITERAL_RUNS = 200


def written_by_new_runs(con: duckdb.DuckDBPyConnection, source: str, column: str) -> str:
    """A SQL condition: ``column`` holds one of the source's new run ids (as constants when
    they are few; '' stands for a NULL run id)."""
    runs = [
        str(r[0])
        for r in con.execute(
            f"SELECT run_id FROM {NEW_RUNS} WHERE source = ? ORDER BY run_id", [source]
        ).fetchall()
    ]
    if not runs:
        return "FALSE"
    value = f"coalesce({column}, '')" if "" in runs else column
    if len(runs) > _LITERAL_RUNS:
        return f"{value} IN (SELECT run_id FROM {NEW_RUNS} WHERE source = '{source}')"
    return f"{value} IN ({', '.join(sql_literal(run) for run in runs)})"


def find_changed_conversations(con: duckdb.DuckDBPyConnection) -> int:
    """Fill ``_transform_changed`` (columns ``workspace_id, id``: a conversation is named by
    both, D-WORKSPACE-ID; '' stands for a NULL) with every conversation whose facts may
    differ from the marts'; returns how many.

    Directly changed: a conversation row (a newer version, or a transcript, handoffs and
    guardrail events swapped with its detail: the loader rewrites the row with them), a
    lead (its conversation now, and the one whose newest lead it was), a fact event (new,
    or completing a stored escalation; its conversation is the one of that id in the
    workspace it names), and the conversations the stored row and the marts give the
    subject a new event names (an escalation merged from events of two conversations
    moves its time; the marts may have counted it for another). Then the conversations
    of webhook facts whose id a changed detail of their workspace lists or listed:
    whether such an event counts depends on that detail. And the conversations an
    erasure removed (``transform_pending``): no row names them any more.
    """
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _transform_changed_leads AS
            SELECT workspace_id, id, conversation_id FROM leads
            WHERE {written_by_new_runs(con, "leads", "last_run_id")}"""
    )
    types = ", ".join(f"'{t}'" for t in FACT_EVENTS)
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _transform_new_events AS
            SELECT event_id, {event_workspace()} AS workspace_id, conversation_id,
                   json_extract_string(data, '$.escalationId') AS escalation_id,
                   json_extract_string(data, '$.guardrailEventId') AS guardrail_event_id
            FROM events
            WHERE {written_by_new_runs(con, "events", "ingest_run_id")}
              AND event_type IN ({types})"""
    )
    key = "coalesce(workspace_id, ''), coalesce(conversation_id, '')"
    # a new event of a subject already stored (merged into its row, or arriving second) may
    # change the facts of the conversation that row, or the marts, give it
    new_escalations = (
        "(SELECT workspace_id, escalation_id FROM _transform_new_events "
        "WHERE escalation_id IS NOT NULL)"
    )
    new_guardrails = (
        "(SELECT workspace_id, guardrail_event_id FROM _transform_new_events "
        "WHERE guardrail_event_id IS NOT NULL)"
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE _transform_direct AS
        SELECT workspace_id, id FROM conversations
        WHERE {written_by_new_runs(con, "conversations", "last_run_id")}
        UNION SELECT workspace_id, conversation_id FROM transform_pending
        UNION SELECT {key} FROM _transform_changed_leads
        UNION SELECT {key} FROM mart_conversations
              WHERE (workspace_id, lead_id) IN (
                  SELECT workspace_id, id FROM _transform_changed_leads)
        UNION SELECT {key} FROM _transform_new_events
        UNION SELECT {key} FROM escalations
              WHERE (workspace_id, event_id) IN (
                  SELECT workspace_id, event_id FROM _transform_new_events)
        UNION SELECT {key} FROM guardrail_events
              WHERE (workspace_id, event_id) IN (
                  SELECT workspace_id, event_id FROM _transform_new_events)
        UNION SELECT {key} FROM escalations
              WHERE (workspace_id, escalation_key) IN {new_escalations}
        UNION SELECT {key} FROM mart_escalations
              WHERE (workspace_id, escalation_id) IN {new_escalations}
        UNION SELECT {key} FROM guardrail_events
              WHERE (workspace_id, guardrail_event_id) IN {new_guardrails}
        UNION SELECT {key} FROM mart_guardrail_incidents
              WHERE (workspace_id, incident_id) IN {new_guardrails}"""
    )
    direct = "(SELECT workspace_id, id FROM _transform_direct)"
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {CHANGED} AS
        SELECT workspace_id, id FROM _transform_direct
        UNION SELECT {key} FROM escalations
              WHERE (workspace_id, escalation_key) IN (
            SELECT workspace_id, id FROM conversation_escalations
            WHERE (workspace_id, conversation_id) IN {direct}
            UNION SELECT workspace_id, escalation_id FROM mart_escalations
                  WHERE seen_in = 'api' AND (workspace_id, conversation_id) IN {direct})
        UNION SELECT {key} FROM guardrail_events
              WHERE (workspace_id, guardrail_event_id) IN (
            SELECT workspace_id, id FROM conversation_guardrail_events
            WHERE (workspace_id, conversation_id) IN {direct}
            UNION SELECT workspace_id, incident_id FROM mart_guardrail_incidents
                  WHERE seen_in = 'api' AND (workspace_id, conversation_id) IN {direct})"""
    )
    for table in ("_transform_changed_leads", "_transform_new_events", "_transform_direct"):
        con.execute(f"DROP TABLE {table}")
    return int(scalar(con, f"SELECT count(*) FROM {CHANGED}"))


def add_topic_changes(con: duckdb.DuckDBPyConnection) -> int:
    """Add to ``_transform_changed`` every conversation whose topic in
    ``conversation_topics`` is not the one its facts carry (placed for the first time, or
    moved by a discovery, a rediscovery or a split); returns how many it then holds. Read
    from the two tables, not from what this run did, so a run killed between placing
    topics and rewriting the marts is put right by the next one."""
    con.execute(
        f"""INSERT INTO {CHANGED}
        SELECT m.workspace_id, m.conversation_id FROM mart_conversations m
        JOIN conversation_topics t
          ON t.workspace_id = m.workspace_id AND t.conversation_id = m.conversation_id
        WHERE m.topic IS DISTINCT FROM coalesce(CAST(t.topic_id AS VARCHAR), 'unknown')
          AND (m.workspace_id, m.conversation_id) NOT IN (SELECT workspace_id, id FROM {CHANGED})"""
    )
    return int(scalar(con, f"SELECT count(*) FROM {CHANGED}"))


def record_watermarks(
    con: duckdb.DuckDBPyConnection, transform_run_id: str, *, replace: bool
) -> None:
    """Remember the new runs as included (all of them, replacing the list, when full)."""
    if replace:
        con.execute(f"DELETE FROM {MART_WATERMARKS.name}")
    con.execute(
        f"INSERT INTO {MART_WATERMARKS.name} SELECT source, run_id, ? FROM {NEW_RUNS}",
        [transform_run_id],
    )


def drop_temporaries(con: duckdb.DuckDBPyConnection) -> None:
    for table in (NEW_RUNS, CHANGED):
        con.execute(f"DROP TABLE IF EXISTS {table}")


# -- partition sets -----------------------------------------------------------------------------


def no_partitions() -> pl.DataFrame:
    return pl.DataFrame(schema={**PARTITION_SCHEMA, "why": pl.String})


def days_between(
    frame: pl.DataFrame, first: str, last: str, zones: Iterable[str], why: str
) -> pl.DataFrame:
    """Every partition from each row's ``first`` to its ``last`` day (both local), per zone."""
    spans = frame.drop_nulls([first, last])
    if spans.is_empty():
        return no_partitions()
    parts = [
        spans.select(
            pl.col("workspace_id").cast(pl.String),
            pl.lit(tz).alias("timezone"),
            pl.date_ranges(local_date(first, tz), local_date(last, tz)).alias("date"),
        ).explode("date")
        for tz in zones
    ]
    return pl.concat(parts).unique().with_columns(why=pl.lit(why)).select(*PARTITION, "why")


def every_day(
    workspaces: Sequence[str | None], zones: Sequence[str], first: date, last: date, why: str
) -> pl.DataFrame:
    """Every partition of those workspaces and zones from ``first`` to ``last``."""
    days = pl.date_range(first, last, eager=True)
    return pl.DataFrame(
        [
            {"workspace_id": ws, "timezone": tz, "date": day, "why": why}
            for ws in workspaces
            for tz in zones
            for day in days
        ],
        schema={**PARTITION_SCHEMA, "why": pl.String},
    )


def month_groups(partitions: pl.DataFrame) -> list[pl.DataFrame]:
    """The partitions split by calendar month of their day: what one pass reads at once."""
    if partitions.is_empty():
        return []
    keyed = partitions.with_columns(_month=pl.col("date").dt.truncate("1mo"))
    return [
        group.drop("_month")
        for _, group in sorted(keyed.group_by("_month"), key=lambda item: item[0][0])
    ]


def describe(partitions: pl.DataFrame) -> dict[str, Any]:
    """The partitions rewritten, for ``transform_runs.partitions``: how many, and per
    workspace, zone and reasons the days as ranges ("2026-03-01..2026-03-04")."""
    unique = partitions.group_by(PARTITION).agg(pl.col("why").unique().sort())
    groups = []
    for ws, tz, whys, days in sorted(
        unique.with_columns(pl.col("why").list.join(","))
        .group_by("workspace_id", "timezone", "why")
        .agg(pl.col("date").sort())
        .iter_rows(),
        key=lambda row: (row[0] or "", row[1], row[2]),
    ):
        groups.append(
            {
                "workspace_id": ws,
                "timezone": tz,
                "why": whys.split(","),
                "days": _ranges(days),
            }
        )
    return {"count": unique.height, "partitions": groups}


def _ranges(days: Sequence[date]) -> str:
    out: list[str] = []
    start = prev = None
    for day in days:
        if prev is not None and day == prev + timedelta(days=1):
            prev = day
            continue
        if start is not None:
            out.append(f"{start}..{prev}" if start != prev else str(start))
        start = prev = day
    if start is not None:
        out.append(f"{start}..{prev}" if start != prev else str(start))
    return ", ".join(out)
