"""Loading verified webhook events: validate, deduplicate, store, fan out by kind.

The ingest hands over one chunk of verified deliveries at a time (event
bodies as text, with their keys and provenance) as Arrow; everything below
runs in SQL inside the caller's transaction. A line is a duplicate when its
idempotency key or its content hash was seen before, earlier in the chunk,
in an earlier file or in an earlier run (``event_keys``). Per-kind tables
are filled from the events stored by this chunk; events are immutable, so
the first arrival of a subject wins, except escalations and conversation
lifecycles, whose rows are completed by the second event of the pair. A
subject is its workspace and its id (two workspaces numbering alike have two
subjects of one id); an event naming no workspace is keyed under ``default``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime

import duckdb
import orjson
import pyarrow as pa

from convo_analytics.warehouse._load import _access, _ident, _quoted_structure, _structure, _ts
from convo_analytics.warehouse._tables import (
    FEEDBACK,
    GUARDRAIL_EVENTS,
    LEAD_QUALIFICATIONS,
    MESSAGE_TRACES,
    Table,
    event_workspace,
)

STAGE_SCHEMA = pa.schema(
    [
        ("ord", pa.int64()),
        ("source_file", pa.string()),
        ("source_line", pa.int64()),
        ("source_offset", pa.int64()),
        ("body", pa.binary()),
        ("idempotency_key", pa.string()),
        ("content_hash", pa.string()),
        ("signature_reading", pa.string()),
        ("signature_source", pa.string()),
        ("secret_index", pa.int32()),
        ("delivery_id", pa.string()),
        ("attempt", pa.string()),
        ("received_at", pa.string()),
        ("workspace_id", pa.string()),
    ]
)
QUARANTINE_SCHEMA = pa.schema(
    [
        ("source_file", pa.string()),
        ("source_line", pa.int64()),
        ("reason", pa.string()),
        ("detail", pa.string()),
        ("excerpt", pa.string()),
        ("line_offset", pa.int64()),
        ("line", pa.binary()),
        ("workspace", pa.string()),
    ]
)

#: The workspace an event's keys are known under (its own; ``default`` when it names none).
_KEYED = event_workspace("workspace_id")


@dataclass(slots=True)
class ChunkCounts:
    loaded: int = 0
    duplicates: int = 0
    quarantined: Counter[str] = field(default_factory=Counter)
    readings: Counter[str] = field(default_factory=Counter)
    types: Counter[str] = field(default_factory=Counter)


def quarantine(
    con: duckdb.DuckDBPyConnection,
    rows: pa.Table,
    run_id: str,
    now: datetime,
    *,
    replace: bool = False,
) -> None:
    """Store quarantined lines. A line already quarantined by an earlier run stays as it
    was; with ``replace`` (a replay read it again) its row takes the new reason and stays
    open."""
    if rows.num_rows == 0:
        return
    con.register("q_rows", rows)
    conflict = (
        "DO UPDATE SET reason = excluded.reason, detail = excluded.detail, "
        "ingest_run_id = excluded.ingest_run_id"
        if replace
        else "DO NOTHING"
    )
    con.execute(
        "INSERT INTO quarantine (source_file, source_line, reason, detail, excerpt, "
        "ingest_run_id, quarantined_at, line_offset, line, workspace) "
        "SELECT source_file, source_line, reason, detail, excerpt, ?, ?, line_offset, line, "
        f"workspace FROM q_rows ON CONFLICT (source_file, source_line) {conflict}",
        [run_id, now],
    )
    con.unregister("q_rows")


def resolve_quarantined(
    con: duckdb.DuckDBPyConnection, run_id: str, now: datetime, *, stored_lines: bool
) -> None:
    """Close the open quarantine rows of this chunk's lines that now loaded (a new event) or
    were recognised (a duplicate). ``stored_lines=False`` (an ingest reading a file): only
    rows whose line was not kept (a broken-off gzip, a line DuckDB refused), which a later
    read of the file is the way to load; a replay resolves the rows it read."""
    where = "" if stored_lines else "AND q.line IS NULL"
    con.execute(
        f"""UPDATE quarantine q SET resolved_at = ?, resolved_by = ?,
               resolution = CASE WHEN e.duplicate THEN 'duplicate' ELSE 'loaded' END
            FROM (SELECT source_file, source_line,
                         ord IN (SELECT ord FROM ev_chunk_dups) AS duplicate
                  FROM ev_chunk WHERE problem IS NULL) e
            WHERE q.source_file = e.source_file AND q.source_line = e.source_line
              AND q.resolved_at IS NULL {where}""",
        [now, run_id],
    )


#: Rows per Arrow record batch handed to DuckDB: it scans one batch per thread.
_BATCH = 16_384


def load_events(
    con: duckdb.DuckDBPyConnection,
    stage: pa.Table,
    run_id: str,
    now: datetime,
    *,
    resolve: bool = False,
    stored_lines: bool = False,
) -> ChunkCounts:
    """Store a chunk's verified lines; ``resolve``: close open quarantine rows of lines that
    load now (see :func:`resolve_quarantined`)."""
    counts = ChunkCounts()
    if stage.num_rows == 0:
        return counts
    con.register("ev_bin", pa.Table.from_batches(stage.to_batches(max_chunksize=_BATCH)))
    # Each body is parsed once, into the envelope's struct (its data kept as JSON text for
    # the per-kind tables below); this is the chunk's only wide table.
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE ev_chunk AS
        SELECT * EXCLUDE (parsed),
               CASE WHEN payload IS NULL THEN 'bad_encoding'
                    WHEN NOT parsed THEN CASE WHEN json_valid(payload) THEN 'not_an_event'
                                              ELSE 'malformed_body' END
                    WHEN event_type IS NULL THEN 'not_an_event'
                    WHEN occurred_at IS NULL THEN 'bad_timestamp'
               END AS problem
        FROM (
            SELECT * EXCLUDE (e), e IS NOT NULL AS parsed, e.event AS event_type,
                   e.timestamp AS timestamp_text, {_ts("e.timestamp")} AS occurred_at,
                   e.conversationId AS conversation_id,
                   e.data AS data,
                   COALESCE(idempotency_key, 'sha256:' || content_hash) AS event_id
            FROM (SELECT *, TRY(json_transform(payload, '{_ENVELOPE}')) AS e
                  FROM (SELECT * EXCLUDE (body), TRY(decode(body)) AS payload FROM ev_bin)))"""
    )
    con.unregister("ev_bin")
    bad = con.sql(
        """SELECT source_file, source_line, problem,
                  CASE problem WHEN 'bad_timestamp' THEN 'timestamp: ' || timestamp_text
                               ELSE 'the delivery body is not a JSON event' END,
                  left(COALESCE(payload, ''), 2000), source_offset, NULL::BLOB,
                  NULL::VARCHAR
           FROM ev_chunk WHERE problem IS NOT NULL"""
    ).to_arrow_table()
    if bad.num_rows:
        quarantine(con, bad.rename_columns(QUARANTINE_SCHEMA.names), run_id, now)
        counts.quarantined.update(str(r) for r in bad.column(2).to_pylist())
    # A line is a duplicate when one of its keys is known in its workspace, or came earlier
    # in the chunk in its workspace (a line whose idempotency key is its content hash has
    # that key once). Keys are per workspace: another workspace's sender cannot make this
    # one's events duplicates by sending their keys first (D-WEBHOOK-WORKSPACE).
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE ev_chunk_keys AS
        SELECT ord, {_KEYED} AS workspace_id, content_hash AS key, event_id FROM ev_chunk
        WHERE problem IS NULL
        UNION ALL SELECT ord, {_KEYED}, idempotency_key, event_id FROM ev_chunk
                  WHERE problem IS NULL AND idempotency_key IS NOT NULL
                    AND idempotency_key <> content_hash"""
    )
    # event_keys is scanned once a chunk (it has no index, see Table.indexed): the keys
    # of this chunk it holds; and the chunk's later lines with a key an earlier one had
    # (a hash aggregate keeps only the few repeated keys).
    con.execute(
        """CREATE OR REPLACE TEMP TABLE ev_chunk_known AS
        SELECT DISTINCT workspace_id, key FROM ev_chunk_keys
        SEMI JOIN event_keys USING (workspace_id, key)"""
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE ev_chunk_later AS
        SELECT k.ord, k.workspace_id, k.key FROM ev_chunk_keys k JOIN (
            SELECT workspace_id, key, min(ord) AS first FROM ev_chunk_keys
            GROUP BY workspace_id, key HAVING count(*) > 1
        ) r ON k.workspace_id = r.workspace_id AND k.key = r.key AND k.ord > r.first"""
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE ev_chunk_dups AS
        SELECT DISTINCT ord FROM (
            SELECT ord FROM ev_chunk_keys SEMI JOIN ev_chunk_known USING (workspace_id, key)
            UNION ALL SELECT ord FROM ev_chunk_later)"""
    )
    # Only events whose keys were unseen are stored, and only unseen keys are added
    # (each with its first event).
    con.execute(
        f"""INSERT INTO events
           SELECT event_id, event_type, occurred_at, workspace_id, conversation_id, data,
                  payload, idempotency_key, content_hash, signature_reading,
                  signature_source, secret_index, delivery_id, TRY_CAST(attempt AS INTEGER),
                  TRY_CAST(received_at AS TIMESTAMPTZ), source_file, source_line, ?
           FROM ({_NEW})""",
        [run_id],
    )
    con.execute(
        """INSERT INTO event_keys
           SELECT workspace_id, key, event_id FROM ev_chunk_keys
           ANTI JOIN ev_chunk_known USING (workspace_id, key)
           ANTI JOIN ev_chunk_later USING (ord, workspace_id, key)"""
    )
    for reading, kind, duplicate, n in con.execute(
        """SELECT signature_reading, event_type, ord IN (SELECT ord FROM ev_chunk_dups),
                  count(*)
           FROM ev_chunk WHERE problem IS NULL GROUP BY ALL"""
    ).fetchall():
        if duplicate:
            counts.duplicates += int(n)
        else:
            counts.loaded += int(n)
            counts.readings[str(reading)] += int(n)
            counts.types[str(kind)] += int(n)
    if resolve and _has_open(con, stored_lines):
        resolve_quarantined(con, run_id, now, stored_lines=stored_lines)
    fan_out(con)
    return counts


def _has_open(con: duckdb.DuckDBPyConnection, stored_lines: bool) -> bool:
    """Whether any open quarantine row could be this chunk's (its file's, of the kind a
    read resolves), so that the update is skipped in the usual case."""
    extra = "" if stored_lines else "AND line IS NULL"
    row = con.execute(
        f"""SELECT count(*) FROM quarantine WHERE resolved_at IS NULL {extra}
            AND source_file IN (SELECT DISTINCT source_file FROM ev_chunk)"""
    ).fetchall()
    return bool(row[0][0])


# -- per-kind tables -------------------------------------------------------------------------

#: The events this chunk stored (the fan-out never rescans the growing events table).
_NEW = "SELECT * FROM ev_chunk ANTI JOIN ev_chunk_dups USING (ord) WHERE problem IS NULL"
_ENVELOPE = orjson.dumps(
    {
        "event": "VARCHAR",
        "timestamp": "VARCHAR",
        "conversationId": "VARCHAR",
        "data": "JSON",
    }
).decode()
#: Envelope fields the per-kind tables take, and the chunk's column holding each.
_ENVELOPE_COLUMNS = {
    "$.timestamp": "occurred_at",
    "$.conversationId": "conversation_id",
    "$.workspaceId": _KEYED,
}


def _data_fields(table: Table, extra: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The json_transform of ``data`` (``_d``) a per-kind table needs, and how each of its
    sourced columns reads from it or from the envelope's columns.

    ``data`` is parsed once, only for the rows of that kind, into the fields the table
    sources from it (plus ``extra``: field name to JSON type).
    """
    inner = [
        replace(c, source="$." + c.source.removeprefix("$.data."))
        for c in table.columns
        if c.source is not None and c.source.startswith("$.data.")
    ]
    structure = _structure(inner)
    for name, kind in extra.items():
        structure.setdefault(name, kind)
    picked = {c.name: _access(c, "_d", structure) for c in inner}
    for c in table.columns:
        if c.source in _ENVELOPE_COLUMNS:
            picked[c.name] = _ENVELOPE_COLUMNS[c.source]
    return f"json_transform(data, '{_quoted_structure(structure)}') AS _d", picked


def _columns(table: Table, picked: dict[str, str]) -> str:
    return ", ".join(f"{picked.get(c.name, 'NULL')} AS {c.name}" for c in table.columns)


def _simple(
    table: Table,
    event_type: str,
    key_field: str,
    computed: dict[str, str] | None = None,
    fields: tuple[str, ...] = (),
) -> str:
    """Fill a per-kind table from this chunk's events of one type, first arrival winning.

    The table has no key index (Table.indexed): a subject (its workspace and its id)
    already stored is left out by an anti-join, and of a subject's events in this chunk
    the first read is kept.
    """
    workspace, key = table.key
    keys = f"{workspace}, {key}"
    parse, picked = _data_fields(table, dict.fromkeys((key_field, *fields), "VARCHAR"))
    picked.update(
        {key: f"COALESCE(_d.{_ident(key_field)}, event_id)", "event_id": "event_id"},
        **(computed or {}),
    )
    return (
        f"INSERT INTO {table.name} SELECT * EXCLUDE (_ord) FROM ("
        f"SELECT {_columns(table, picked)}, ord AS _ord "
        f"FROM (SELECT *, {parse} FROM ({_NEW}) WHERE event_type = '{event_type}')) "
        f"ANTI JOIN {table.name} USING ({keys}) "
        f"QUALIFY row_number() OVER (PARTITION BY {keys} ORDER BY _ord) = 1"
    )


#: The data fields lead_qualifications reconciles (set A and set B names).
_LEAD_FIELDS = ("leadScore", "qualificationScore", "email", "conversationUrl", "transcriptUrl")


def fan_out(con: duckdb.DuckDBPyConnection) -> None:
    """Fill the per-kind tables from the new events of ``ev_chunk`` (not in ``ev_chunk_dups``)."""
    con.execute(_simple(MESSAGE_TRACES, "message.responded", "messageId"))
    con.execute(_simple(GUARDRAIL_EVENTS, "guardrail.triggered", "guardrailEventId"))
    con.execute(_simple(FEEDBACK, "conversation.feedback", "feedbackId"))
    # the reconciled fields come from the one parse of data (_d), not a parse each (->>)
    con.execute(_simple(LEAD_QUALIFICATIONS, "lead.qualified", "leadId", {
        "score": "COALESCE(TRY_CAST(_d.leadScore AS DOUBLE), "
                 "TRY_CAST(_d.qualificationScore AS DOUBLE))",
        "email": "COALESCE(_d.email, _d.contactFields->>'$.email')",
        "conversation_url": "COALESCE(_d.conversationUrl, _d.transcriptUrl)",
    }, _LEAD_FIELDS))  # fmt: skip
    _escalations(con)
    _lifecycle(con)


def stage_stored_events(con: duckdb.DuckDBPyConnection) -> None:
    """Every stored event as a chunk of new ones (``ev_chunk``, ``ev_chunk_dups`` empty), in
    their order of arrival, for :func:`fan_out` to fill the per-kind tables again."""
    con.execute(
        """CREATE OR REPLACE TEMP TABLE ev_chunk AS
        SELECT row_number() OVER (ORDER BY ingest_run_id, source_file, source_line, event_id)
                   AS ord,
               event_id, event_type, occurred_at, payload->>'$.timestamp' AS timestamp_text,
               workspace_id, conversation_id, data, NULL::VARCHAR AS problem
        FROM events"""
    )
    con.execute("CREATE OR REPLACE TEMP TABLE ev_chunk_dups (ord BIGINT)")


def _kind_rows(fields: tuple[str, ...], *types: str) -> str:
    """This chunk's new events of the given types, with ``fields`` of data parsed as ``d``."""
    structure = _quoted_structure(dict.fromkeys(fields, "VARCHAR"))
    listed = ", ".join(f"'{t}'" for t in types)
    return (
        f"(SELECT *, json_transform(data, '{structure}') AS d FROM ({_NEW}) "
        f"WHERE event_type IN ({listed}))"
    )


def _escalations(con: duckdb.DuckDBPyConnection) -> None:
    """escalation.created and conversation.escalated of one workspace complete one row
    between them."""
    rows = _kind_rows(
        ("escalationId", "reasonCode", "reason", "destination", "owner", "priority", "origin"),
        "escalation.created",
        "conversation.escalated",
    )
    key = (
        "COALESCE(e.d.escalationId, e.conversation_id || '|' || "
        "strftime(e.occurred_at, '%Y-%m-%dT%H:%M:%S.%f'))"
    )
    created = "e.event_type = 'escalation.created'"
    con.execute(
        f"""INSERT INTO escalations
        SELECT {key}, any_value(e.event_id ORDER BY e.event_type), any_value(e.conversation_id),
               {event_workspace("e.workspace_id")}, min(e.occurred_at),
               COALESCE(any_value(e.d.reasonCode) FILTER ({created}), any_value(e.d.reason)),
               any_value(e.d.destination),
               any_value(e.d.owner) FILTER ({created}),
               any_value(e.d.priority) FILTER ({created}),
               any_value(e.d.origin) FILTER ({created}),
               bool_or({created}),
               bool_or(e.event_type = 'conversation.escalated')
        FROM {rows} e
        GROUP BY 1, 4
        ON CONFLICT (workspace_id, escalation_key) DO UPDATE SET
            escalated_at = least(escalations.escalated_at, excluded.escalated_at),
            reason_code = CASE WHEN excluded.seen_created THEN excluded.reason_code
                               ELSE COALESCE(escalations.reason_code, excluded.reason_code) END,
            destination = COALESCE(escalations.destination, excluded.destination),
            owner = COALESCE(escalations.owner, excluded.owner),
            priority = COALESCE(escalations.priority, excluded.priority),
            origin = COALESCE(escalations.origin, excluded.origin),
            seen_created = escalations.seen_created OR excluded.seen_created,
            seen_escalated = escalations.seen_escalated OR excluded.seen_escalated"""
    )


def _lifecycle(con: duckdb.DuckDBPyConnection) -> None:
    rows = _kind_rows(
        ("startedAt", "endedAt", "channel", "externalUserId", "outcome"),
        "conversation.created",
        "conversation.completed",
    )
    created = "e.event_type = 'conversation.created'"
    completed = "e.event_type = 'conversation.completed'"
    con.execute(
        f"""INSERT INTO conversation_lifecycle
        SELECT e.conversation_id, any_value(e.event_id), e.conversation_id,
               {event_workspace("e.workspace_id")},
               any_value({_ts("COALESCE(e.d.startedAt, e.timestamp_text)")}) FILTER ({created}),
               any_value(e.d.channel) FILTER ({created}),
               any_value(e.d.externalUserId) FILTER ({created}),
               any_value({_ts("COALESCE(e.d.endedAt, e.timestamp_text)")}) FILTER ({completed}),
               any_value(e.d.outcome) FILTER ({completed})
        FROM {rows} e
        WHERE e.conversation_id IS NOT NULL
        GROUP BY 1, 4
        ON CONFLICT (workspace_id, conversation_key) DO UPDATE SET
            started_at = COALESCE(conversation_lifecycle.started_at, excluded.started_at),
            channel = COALESCE(conversation_lifecycle.channel, excluded.channel),
            external_user_id = COALESCE(conversation_lifecycle.external_user_id,
                                        excluded.external_user_id),
            completed_at = COALESCE(conversation_lifecycle.completed_at, excluded.completed_at),
            outcome = COALESCE(conversation_lifecycle.outcome, excluded.outcome)"""
    )
