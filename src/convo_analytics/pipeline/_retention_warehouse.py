"""Warehouse retention of one workspace: raw payloads past their days deleted, and the
text of conversations inactive past their days removed with its copies, the marts as
they were (D-RETENTION).

Runs inside the caller's transaction (one per workspace): a kill leaves the workspace
as it was or done, and a second run finds nothing more (every statement only touches
what still has something to remove).

* **Raw payloads.** Rows of the ``raw_*`` tables fetched before the cutoff are deleted.
* **Transcripts.** A conversation's last activity is the latest of its ``updated_at``,
  ``ended_at`` and ``created_at`` and of its webhook events' times. Past the cutoff,
  its messages' ``text`` is set to NULL (the rows, their positions, times, latencies and
  every other column stay, so every metric does) and so are the copies of that text:
  ``conversation_topics.text``, ``knowledge_gaps.question`` and ``answer``, the topics'
  examples that are its first message, the raw details (the transcript whole), and the
  members of its message events' ``data`` that no warehouse column reads (a service
  may put the text there). ``removed_texts`` keeps what the transform still needs: the
  answers that were fallbacks by their words, so that a later transform computes the
  same knowledge gaps, and the placement stays (``topics._place``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from convo_analytics.pipeline._retention_config import Days
from convo_analytics.warehouse._retention_tables import REMOVED_TEXTS
from convo_analytics.warehouse._tables import MESSAGE_TRACES, event_workspace

__all__ = [
    "RAW_TABLES",
    "WorkspaceRemoval",
    "message_event_members",
    "remove_in_workspace",
    "warehouse_workspaces",
]

#: Every fetched version of a record, whole.
RAW_TABLES = ("raw_conversations", "raw_conversation_details", "raw_leads", "raw_service_summaries")
_PAST = "_retention_past"
_TEXTS = "_retention_texts"
_EVENTS = "_retention_events"


def message_event_members() -> tuple[str, ...]:
    """The members of a message event's ``data`` the warehouse reads (``message_traces``):
    the others are removed with the transcript."""
    read = [c.source.removeprefix("$.data.") for c in MESSAGE_TRACES.columns
            if c.source is not None and c.source.startswith("$.data.")]  # fmt: skip
    return tuple(dict.fromkeys(["messageId", *read]))


@dataclass(slots=True)
class WorkspaceRemoval:
    """What the retention removed from one workspace's rows."""

    workspace_id: str
    days: Days
    raw_cutoff: datetime | None = None
    transcript_cutoff: datetime | None = None
    #: Rows deleted per raw table (past ``raw_payload`` days).
    raw: dict[str, int] = field(default_factory=dict)
    #: Transcript removal: conversations, messages, and each copy's rows.
    transcript: dict[str, int] = field(default_factory=dict)
    #: The lake partitions whose rows changed (what the next ``convo publish --lake``
    #: republishes, found by their fingerprints): days per table, or "all" for a table
    #: without days.
    lake: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.raw.values()) + sum(self.transcript.values())

    def as_json(self) -> dict[str, Any]:
        return {
            "workspace_id": self.workspace_id,
            "days": self.days.as_json(),
            "cutoffs": {
                "raw_payload": _iso(self.raw_cutoff),
                "transcript": _iso(self.transcript_cutoff),
            },
            "raw_payload": self.raw,
            "transcript": self.transcript,
            "lake_partitions": self.lake,
        }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def warehouse_workspaces(con: duckdb.DuckDBPyConnection) -> dict[str, str | None]:
    """Every workspace id with rows retention may remove, with the name the warehouse's
    ``workspaces`` table knows it by (None: none)."""
    sources = " UNION ".join(
        [f"SELECT DISTINCT workspace_id FROM {t}" for t in ("conversations", *RAW_TABLES)]
        + [f"SELECT DISTINCT {event_workspace('workspace_id')} FROM events"]
    )
    ids = sorted(str(r[0]) for r in con.execute(sources).fetchall() if r[0] is not None)
    names = dict(
        con.execute("SELECT workspace_id, min(name) FROM workspaces GROUP BY ALL").fetchall()
    )
    return {ws: (str(names[ws]) if ws in names else None) for ws in ids}


def remove_in_workspace(
    con: duckdb.DuckDBPyConnection,
    workspace_id: str,
    days: Days,
    now: datetime,
    run_id: str,
    patterns: tuple[str, ...],
) -> WorkspaceRemoval:
    """Remove what the workspace's days say (in the caller's transaction)."""
    removal = WorkspaceRemoval(workspace_id, days)
    if days.raw_payload > 0:
        removal.raw_cutoff = now - timedelta(days=days.raw_payload)
        for table in RAW_TABLES:
            removal.raw[table] = _count(
                con,
                f"DELETE FROM {table} WHERE workspace_id = ? AND fetched_at < ?",
                [workspace_id, removal.raw_cutoff],
            )
    if days.transcript > 0:
        removal.transcript_cutoff = now - timedelta(days=days.transcript)
        _remove_texts(con, removal, removal.transcript_cutoff, now, run_id, patterns)
        for temp in (_PAST, _TEXTS):  # (a failure rolls them back with the rest)
            con.execute(f"DROP TABLE IF EXISTS {temp}")
    return removal


def _count(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> int:
    """Run a DELETE, UPDATE or INSERT and return how many rows it touched."""
    row = con.execute(sql, params).fetchone()
    return int(row[0]) if row else 0


def _remove_texts(
    con: duckdb.DuckDBPyConnection,
    removal: WorkspaceRemoval,
    cutoff: datetime,
    now: datetime,
    run_id: str,
    patterns: tuple[str, ...],
) -> None:
    ws = removal.workspace_id
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {_PAST} AS
            SELECT conversation_id, max(moment) AS last_activity FROM (
                SELECT id AS conversation_id, greatest(updated_at, ended_at, created_at) AS moment
                FROM conversations WHERE workspace_id = $ws
                UNION ALL
                SELECT conversation_id, max(occurred_at) FROM events
                WHERE {event_workspace("workspace_id")} = $ws AND conversation_id IS NOT NULL
                GROUP BY ALL)
            GROUP BY ALL HAVING max(moment) < $cutoff""",
        {"ws": ws, "cutoff": cutoff},
    )
    past = f"(SELECT conversation_id FROM {_PAST})"
    matcher = "|".join(f"(?:{p})" for p in patterns)
    words = "regexp_matches(m.text, $matcher, 'i')" if matcher else "FALSE"
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE {_TEXTS} AS
            SELECT m.conversation_id, any_value(m.run_id) AS messages_run_id,
                   coalesce(list(m.id ORDER BY m.position)
                            FILTER (WHERE m.role = 'assistant' AND {words}), []) AS fallback
            FROM messages m
            WHERE m.workspace_id = $ws AND m.text IS NOT NULL AND m.conversation_id IN {past}
            GROUP BY ALL""",
        {"ws": ws, **({"matcher": matcher} if matcher else {})},
    )
    counts = removal.transcript
    removal.lake = _lake_partitions(con, ws, past)
    counts["topic_examples"] = _remove_examples(con, ws, past)
    if counts["topic_examples"]:
        removal.lake["mart_topics"] = "all"
    counts["messages"] = _count(
        con,
        f"UPDATE messages SET text = NULL WHERE workspace_id = ? AND text IS NOT NULL "
        f"AND conversation_id IN {past}",
        [ws],
    )
    counts["conversation_topics"] = _count(
        con,
        f"UPDATE conversation_topics SET text = NULL WHERE workspace_id = ? "
        f"AND text IS NOT NULL AND conversation_id IN {past}",
        [ws],
    )
    counts["knowledge_gaps"] = _count(
        con,
        f"UPDATE knowledge_gaps SET question = NULL, answer = NULL WHERE workspace_id = ? "
        f"AND (question IS NOT NULL OR answer IS NOT NULL) AND conversation_id IN {past}",
        [ws],
    )
    counts["conversations"] = _count(
        con,
        f"""INSERT OR REPLACE INTO {REMOVED_TEXTS.name}
            SELECT ?, t.conversation_id, ?, ?, p.last_activity, t.messages_run_id, t.fallback
            FROM {_TEXTS} t JOIN {_PAST} p USING (conversation_id)""",
        [ws, now, run_id],
    )
    counts["raw_conversation_details"] = _count(
        con,
        f"DELETE FROM raw_conversation_details WHERE workspace_id = ? AND id IN {past}",
        [ws],
    )
    counts["message_events"] = _strip_message_events(con, ws, past)


def _lake_partitions(con: duckdb.DuckDBPyConnection, ws: str, past: str) -> dict[str, Any]:
    """The lake partitions (UTC months, as the lake cuts them: each named by its first
    day) whose rows are about to change."""
    days: dict[str, Any] = {}
    for table, column, what in (
        ("messages", "created_at", "text IS NOT NULL"),
        ("knowledge_gaps", "answered_at", "(question IS NOT NULL OR answer IS NOT NULL)"),
    ):
        rows = con.execute(
            "SELECT DISTINCT CAST(date_trunc('month', CAST(timezone('UTC', "
            f"{column}) AS DATE)) AS DATE) FROM {table} "
            f"WHERE workspace_id = ? AND {what} AND conversation_id IN {past} ORDER BY 1",
            [ws],
        ).fetchall()
        if rows:
            days[table] = [None if d is None else d.isoformat() for (d,) in rows]
    texts = con.execute(
        f"SELECT count(*) FROM conversation_topics WHERE workspace_id = ? AND text IS NOT NULL "
        f"AND conversation_id IN {past}",
        [ws],
    ).fetchone()
    if texts and texts[0]:
        days["conversation_topics"] = "all"
    return days


def _remove_examples(con: duckdb.DuckDBPyConnection, ws: str, past: str) -> int:
    """Take the conversations' first messages out of the topics' examples (a topic's
    examples are first messages, as ``conversation_topics.text`` holds them); returns how
    many examples went."""
    texts = [
        str(r[0])
        for r in con.execute(
            f"SELECT DISTINCT text FROM conversation_topics WHERE workspace_id = ? "
            f"AND text IS NOT NULL AND conversation_id IN {past}",
            [ws],
        ).fetchall()
    ]
    if not texts:
        return 0
    row = con.execute(
        "SELECT coalesce(sum(len(list_filter(examples, lambda x: list_contains(?, x)))), 0) "
        "FROM topics WHERE workspace_id = ?",
        [texts, ws],
    ).fetchone()
    gone = int(row[0]) if row else 0
    for table in ("topics", "mart_topics"):
        con.execute(
            f"UPDATE {table} SET examples = "
            "list_filter(examples, lambda x: NOT list_contains(?, x)) "
            "WHERE workspace_id = ? AND len(list_intersect(examples, ?)) > 0",
            [texts, ws, texts],
        )
    return gone


def _strip_message_events(con: duckdb.DuckDBPyConnection, ws: str, past: str) -> int:
    """Remove from the conversations' message events' ``data`` (and the ``payload``'s)
    the members no warehouse column reads; returns how many events changed."""
    allowed = list(message_event_members())
    rows = con.execute(
        f"""SELECT workspace_id, event_id, data, payload FROM events
            WHERE {event_workspace("workspace_id")} = ? AND event_type LIKE 'message.%'
              AND conversation_id IN {past} AND json_type(data) = 'OBJECT'
              AND len(list_filter(json_keys(data), lambda k: NOT list_contains(?, k))) > 0""",
        [ws, allowed],
    ).fetchall()
    if not rows:
        return 0
    keep = set(allowed)
    changed: dict[str, list[Any]] = {"workspace_id": [], "event_id": [], "data": [], "payload": []}
    for workspace_id, event_id, data, payload in rows:
        body = orjson.loads(payload) if payload is not None else None
        kept = {k: v for k, v in orjson.loads(data).items() if k in keep}
        if isinstance(body, dict) and isinstance(body.get("data"), dict):
            body["data"] = {k: v for k, v in body["data"].items() if k in keep}
        changed["workspace_id"].append(workspace_id)
        changed["event_id"].append(event_id)
        changed["data"].append(orjson.dumps(kept).decode())
        changed["payload"].append(None if body is None else orjson.dumps(body).decode())
    con.register(_EVENTS, pa.table(changed, schema=_EVENT_SCHEMA))
    try:
        return _count(
            con,
            f"""UPDATE events SET data = u.data::JSON, payload = u.payload::JSON
                FROM {_EVENTS} u
                WHERE events.event_id = u.event_id
                  AND events.workspace_id IS NOT DISTINCT FROM u.workspace_id""",
            [],
        )
    finally:
        con.unregister(_EVENTS)


_EVENT_SCHEMA = pa.schema(
    [(name, pa.string()) for name in ("workspace_id", "event_id", "data", "payload")]
)
