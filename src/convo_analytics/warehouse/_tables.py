"""The warehouse's tables, described as data.

Each typed table lists its columns with the SQL type and the JSON path in the
service's record it comes from; the DDL and the typed-load SQL are generated
from these lists, and docs/warehouse.md describes the same columns (a test
keeps the two in step). Raw tables keep every fetched payload whole, so that
nothing a response carries is lost even when the typed columns miss it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from convo_analytics.contract._summary import SummaryMetrics

#: 2: conversation details' escalations and guardrail events got their own tables.
#: 3: the raw payloads, their hashes and the message text are stored with zstd (the
#: tables of an older file are rebuilt when opened, see ``upgrade_tables``).
#: 4: quarantine rows keep their line and how they were resolved; ingest_files remembers
#: how far each archive file was read; an event's content hash is that of its canonical
#: form (the keys of events stored before are added, see ``backfill_canonical_keys``).
#: 5: several workspaces: ``workspace_id`` in every table and key (decision D-WORKSPACE-ID).
#: 6: the per-kind webhook event tables are keyed by (workspace_id, subject id); the rows of
#: an event naming no workspace are keyed under ``default`` (``event_workspace``); their
#: tables are rebuilt when opened (``upgrade_tables``, ``REKEYED_IN_6``).
#: 7: an event is stored under the workspace whose endpoint received it, and its keys are
#: known per workspace (``event_keys.workspace_id``, filled from each key's event by
#: ``rekey_event_keys``); quarantine rows name the workspace they were read for.
SCHEMA_VERSION = 7

#: Large, distinct text (JSON bodies, keys, hashes): zstd stores it in about half the
#: space of DuckDB's own choice (dictionary and FSST) for less CPU while loading.
_ZSTD = "zstd"


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    source: str | None = None  # JSON path in the record ($.field), or None when computed
    doc: str = ""
    #: A compression DuckDB must use for the column (e.g. zstd), instead of its own choice.
    compression: str | None = None
    #: When an older warehouse is upgraded: the value of a column it lacks (or leaves NULL),
    #: an SQL expression over the old table's columns (see ``upgrade_tables``).
    fill: str | None = None


@dataclass(frozen=True, slots=True)
class Table:
    """A table; ``indexed=False`` keeps the key unique by construction, without an index.

    DuckDB maintains a primary-key index on every insert and rewrites it at every
    checkpoint; for the large tables (raw versions, messages, events, their keys
    and the per-kind tables whose first arrival wins) that cost dominated the
    loads, and the loaders already guarantee uniqueness by checking before
    inserting (decisions D-LOAD-KEYS and D-EVENT-IDENTITY).
    """

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    doc: str
    indexed: bool = True

    def ddl(self, *, compression: bool = True) -> str:
        """CREATE TABLE; ``compression=False`` for a database file too old for the columns'."""
        cols = ",\n  ".join(
            f"{c.name} {c.type}"
            + (f" USING COMPRESSION {c.compression}" if compression and c.compression else "")
            for c in self.columns
        )
        key = f",\n  PRIMARY KEY ({', '.join(self.key)})" if self.indexed else ""
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  {cols}{key}\n)"


#: The workspace of a row written before the warehouse held several (schema version 5): the
#: one the warehouse held, as its records or conversations name it, else ``default``.
LEGACY_WORKSPACE = (
    "COALESCE((SELECT min(workspace_id) FROM conversations WHERE workspace_id IS NOT NULL), "
    "'default')"
)


def workspace_column(fill: str = LEGACY_WORKSPACE, doc: str = "") -> Column:
    """The workspace a row belongs to: part of every key (decision D-WORKSPACE-ID)."""
    return Column(
        "workspace_id",
        "VARCHAR NOT NULL",
        doc=doc or "the workspace it belongs to (the service's id of it, D-WORKSPACE-ID)",
        fill=fill,
    )


def _raw(name: str, what: str) -> Table:
    return Table(
        name,
        (
            workspace_column("COALESCE(payload->>'$.workspaceId', 'default')"),
            Column("id", "VARCHAR NOT NULL", doc="the record's id"),
            Column(
                "payload_hash",
                "VARCHAR NOT NULL",
                doc="md5 of the payload text",
                compression=_ZSTD,
            ),
            Column("updated_at", "TIMESTAMPTZ", doc="the record's updated-at, when it has one"),
            Column(
                "payload",
                "JSON NOT NULL",
                doc="the record exactly as the service sent it",
                compression=_ZSTD,
            ),
            Column("fetched_at", "TIMESTAMPTZ NOT NULL", doc="when this run received it"),
            Column("run_id", "VARCHAR NOT NULL", doc="the extract run that received it"),
        ),
        ("workspace_id", "id", "payload_hash"),
        f"Every distinct version of {what} ever fetched (a re-fetched identical version is "
        "recognised as a duplicate and not stored again).",
        indexed=False,
    )


RAW_CONVERSATIONS = _raw("raw_conversations", "a conversation as listed")
RAW_CONVERSATION_DETAILS = _raw("raw_conversation_details", "a conversation's detail")
RAW_LEADS = _raw("raw_leads", "a lead")
RAW_SERVICE_SUMMARIES = _raw(
    "raw_service_summaries", "the service's summary for a range (id: workspace|from|to|tz)"
)

_TS = "TIMESTAMPTZ"
#: A transcript item's or detail child's workspace in an older warehouse: its conversation's.
_PARENT_WORKSPACE = (
    "COALESCE((SELECT min(c.workspace_id) FROM conversations c WHERE c.id = conversation_id), "
    "'default')"
)
LOADED = (
    Column("first_run_id", "VARCHAR", doc="the run that first loaded the record"),
    Column("last_run_id", "VARCHAR", doc="the run that loaded the current version"),
    Column("loaded_at", _TS, doc="when the current version was loaded"),
)

CONVERSATIONS = Table(
    "conversations",
    (
        Column("id", "VARCHAR NOT NULL", "$.id"),
        workspace_column("COALESCE(workspace_id, 'default')"),
        Column(
            "external_user_id",
            "VARCHAR",
            "$.externalUserId",
            "the end user in the customer's system",
        ),
        Column("channel", "VARCHAR", "$.channel"),
        Column("locale", "VARCHAR", "$.locale"),
        Column("intent", "VARCHAR", "$.intent", "the assistant's classification of the request"),
        Column("status", "VARCHAR", "$.status", "open, resolved or abandoned"),
        Column("created_at", _TS, "$.createdAt", "when the conversation started"),
        Column("updated_at", _TS, "$.updatedAt", "its last change at the service"),
        Column("ended_at", _TS, "$.endedAt", "when it completed; NULL while open"),
        Column("message_count", "INTEGER", "$.messageCount"),
        Column("escalated", "BOOLEAN", "$.escalated"),
        Column("escalation_count", "INTEGER", "$.escalationCount"),
        Column("guardrail_trigger_count", "INTEGER", "$.guardrailTriggerCount"),
        Column("lead_id", "VARCHAR", "$.leadId"),
        Column("feedback_rating", "INTEGER", "$.feedbackRating", "1-5, NULL without feedback"),
        Column("feedback_comment", "VARCHAR", "$.feedback.comment", "from the detail"),
        Column("feedback_at", _TS, "$.feedback.createdAt", "from the detail"),
        Column("source", "VARCHAR", "$.metadata.source", "metadata source (where it began)"),
        Column("metadata", "JSON", "$.metadata", "the free-form metadata object"),
        Column(
            "detail_updated_at",
            _TS,
            None,
            "updatedAt of the detail loaded for it; NULL when only the listed version is loaded",
        ),
        *LOADED,
    ),
    ("workspace_id", "id"),
    "One row per conversation: its newest version (from its detail when one was fetched).",
)

MESSAGES = Table(
    "messages",
    (
        Column("id", "VARCHAR NOT NULL", "$.id"),
        workspace_column(_PARENT_WORKSPACE),
        Column("conversation_id", "VARCHAR NOT NULL", None, "the conversation it belongs to"),
        Column("position", "INTEGER", None, "0-based place in the transcript"),
        Column("role", "VARCHAR", "$.role", "user, assistant, agent or system"),
        Column("text", "VARCHAR", "$.text", compression=_ZSTD),
        Column("created_at", _TS, "$.createdAt"),
        Column("channel", "VARCHAR", "$.channel"),
        Column("locale", "VARCHAR", "$.locale"),
        Column("latency_ms", "INTEGER", "$.latencyMs", "assistant messages: time to respond"),
        Column("model_tier", "VARCHAR", "$.modelTier", "assistant messages"),
        Column("confidence", "DOUBLE", "$.confidence", "assistant messages, 0-1"),
        Column("policy_flags", "VARCHAR[]", "$.policyFlags", "guardrail flags on the response"),
        Column("knowledge_source", "VARCHAR", "$.knowledgeSource", "passage source used"),
        Column("run_id", "VARCHAR", None, "the run that loaded the transcript"),
    ),
    ("workspace_id", "id"),
    "Transcript messages from conversation details; replaced as a whole when a newer "
    "detail of the conversation is loaded.",
    indexed=False,
)


def _detail_child(name: str, doc: str, columns: tuple[Column, ...]) -> Table:
    """A collection nested in conversation details, replaced with the transcript."""
    return Table(
        name,
        (
            Column("id", "VARCHAR NOT NULL", "$.id"),
            workspace_column(_PARENT_WORKSPACE),
            Column("conversation_id", "VARCHAR NOT NULL", None, "the conversation it belongs to"),
            Column("position", "INTEGER", None, "0-based place in the detail's list"),
            *columns,
            Column("run_id", "VARCHAR", None, "the run that loaded the detail"),
        ),
        ("workspace_id", "id"),
        doc,
    )


CONVERSATION_ESCALATIONS = _detail_child(
    "conversation_escalations",
    "Handoffs listed in conversation details (`escalations`), the API's view of the "
    "escalations the webhook events also announce.",
    (
        Column("created_at", _TS, "$.createdAt", "when the handoff was made"),
        Column("reason_code", "VARCHAR", "$.reasonCode"),
        Column("destination", "VARCHAR", "$.destination", "e.g. helpdesk, crm, live-chat"),
        Column("owner", "VARCHAR", "$.owner"),
        Column("priority", "VARCHAR", "$.priority"),
        Column("origin", "VARCHAR", "$.origin", "automatic or manual"),
        Column("note", "VARCHAR", "$.note"),
    ),
)
CONVERSATION_GUARDRAIL_EVENTS = _detail_child(
    "conversation_guardrail_events",
    "Guardrail activations listed in conversation details (`guardrailEvents`); the excerpt "
    "is stored as received and redacted by the reports and exports.",
    (
        Column("message_id", "VARCHAR", "$.messageId", "the message that tripped it"),
        Column("triggered_at", _TS, "$.triggeredAt"),
        Column("flag", "VARCHAR", "$.flag"),
        Column("rule", "VARCHAR", "$.rule"),
        Column("category", "VARCHAR", "$.category"),
        Column("severity", "VARCHAR", "$.severity"),
        Column("action", "VARCHAR", "$.action"),
        Column("excerpt", "VARCHAR", "$.excerpt"),
    ),
)


LEADS = Table(
    "leads",
    (
        Column("id", "VARCHAR NOT NULL", "$.id"),
        Column("conversation_id", "VARCHAR", "$.conversationId"),
        workspace_column("COALESCE(workspace_id, 'default')"),
        Column("status", "VARCHAR", "$.status", "scored or qualified"),
        Column("score", "DOUBLE", "$.score", "0-100"),
        Column("intent", "VARCHAR", "$.intent"),
        Column("created_at", _TS, "$.createdAt", "first scored"),
        Column("updated_at", _TS, "$.updatedAt"),
        Column("qualified_at", _TS, "$.qualifiedAt", "NULL until qualified"),
        Column("email", "VARCHAR", "$.email"),
        Column("phone", "VARCHAR", "$.phone"),
        Column("name", "VARCHAR", "$.name"),
        Column("company", "VARCHAR", "$.company"),
        Column("contact_fields", "VARCHAR[]", "$.contactFields", "which contact details exist"),
        Column("source", "VARCHAR", "$.source"),
        Column("metadata", "JSON", "$.metadata"),
        Column("conversation_url", "VARCHAR", "$.conversationUrl"),
        *LOADED,
    ),
    ("workspace_id", "id"),
    "One row per lead, newest version.",
)


def snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower().replace("1000", "_1000")


def _summary_columns() -> tuple[Column, ...]:
    cols: list[Column] = []
    for name, info in SummaryMetrics.model_fields.items():
        desc = info.description or ""
        if name == "latencyMs":
            cols += [
                Column(f"latency_{q}_ms", "DOUBLE", f"$.latencyMs.{q}", f"latency {q}")
                for q in ("p50", "p90", "p95", "p99")
            ]
        elif info.annotation is int:
            cols.append(Column(snake_case(name), "BIGINT", f"$.{name}", desc))
        elif info.annotation == dict[str, int]:
            cols.append(Column(snake_case(name), "JSON", f"$.{name}", desc))
        else:
            cols.append(Column(snake_case(name), "DOUBLE", f"$.{name}", desc))
    return tuple(cols)


SERVICE_SUMMARIES = Table(
    "service_summaries",
    (
        Column("workspace_id", "VARCHAR NOT NULL", None, "from the summary's workspaceId"),
        Column("timezone", "VARCHAR NOT NULL", None, "the zone days were cut in"),
        Column("date", "DATE NOT NULL", "$.date", "the day"),
        *_summary_columns(),
        Column("low_confidence_threshold", "DOUBLE", None, "threshold the summary used"),
        Column("fetched_at", _TS, None, "when this version was fetched"),
        Column("run_id", "VARCHAR", None, "the run that fetched it"),
    ),
    ("workspace_id", "timezone", "date"),
    "The service's own daily metrics (GET /v1/analytics/summary), newest fetch per day; "
    "for reconciling our metrics with the service's.",
)

BOOKMARKS = Table(
    "bookmarks",
    (
        workspace_column(),
        Column("stream", "VARCHAR NOT NULL", doc="conversations or leads"),
        Column("high_water_mark", _TS, doc="the newest updated-at loaded and committed"),
        Column("run_id", "VARCHAR", doc="the run that advanced it"),
        Column("committed_at", _TS, doc="when it was advanced"),
    ),
    ("workspace_id", "stream"),
    "Where each workspace's incremental streams resume; advanced in the same transaction as "
    "the data.",
)

EXTRACT_RUNS = Table(
    "extract_runs",
    (
        Column("run_id", "VARCHAR NOT NULL"),
        workspace_column(),
        Column("stream", "VARCHAR NOT NULL"),
        Column("started_at", _TS),
        Column("finished_at", _TS),
        Column(
            "status",
            "VARCHAR",
            doc="running, ok, partial (records may be missing), failed, unavailable, interrupted",
        ),
        Column("mode", "VARCHAR", doc="incremental, full-refresh or backfill"),
        Column("pagination", "VARCHAR", doc="the paging style used"),
        Column("requests", "BIGINT", doc="HTTP requests sent, retries included"),
        Column("pages", "BIGINT", doc="list pages read"),
        Column("records", "BIGINT", doc="records received (list items)"),
        Column("new_records", "BIGINT", doc="records not in the warehouse before"),
        Column("changed_records", "BIGINT", doc="records whose newer version replaced ours"),
        Column("unchanged_records", "BIGINT", doc="records received again as they were"),
        Column("details", "BIGINT", doc="conversation details fetched"),
        Column("rate_limited", "BIGINT", doc="answers 429"),
        Column("retries", "BIGINT", doc="requests repeated after an error"),
        Column("server_errors", "BIGINT", doc="answers 5xx"),
        Column("transport_errors", "BIGINT", doc="connection errors and timeouts"),
        Column("duration_seconds", "DOUBLE"),
        Column("bookmark_before", _TS),
        Column("bookmark_after", _TS),
        Column("drift", "JSON", doc="new, missing and retyped fields seen"),
        Column(
            "error", "VARCHAR", doc="why it failed (or, when partial, why records may be missing)"
        ),
        Column(
            "warnings",
            "JSON",
            doc="what may be wrong with the load, each naming the setting that fixes it",
        ),
        Column(
            "shape",
            "JSON",
            doc="how the stream was read: paging, envelope, key and typed fields, detail, "
            "each with its origin (configured, default, detected)",
        ),
    ),
    ("run_id", "workspace_id", "stream"),
    "One row per workspace and stream per extract run.",
)

STREAM_SCHEMAS = Table(
    "stream_schemas",
    (
        workspace_column(),
        Column("stream", "VARCHAR NOT NULL"),
        Column("field", "VARCHAR NOT NULL", doc="a top-level field of the stream's records"),
        Column("json_type", "VARCHAR", doc="its JSON type as last seen"),
        Column("first_run_id", "VARCHAR"),
        Column("last_run_id", "VARCHAR"),
    ),
    ("workspace_id", "stream", "field"),
    "The record shape each workspace's streams had, for reporting drift.",
)

WORKSPACES = Table(
    "workspaces",
    (
        Column("name", "VARCHAR NOT NULL", doc="the configured name ([[workspaces]] name)"),
        Column("workspace_id", "VARCHAR NOT NULL", doc="the id every row of it is keyed by"),
        Column(
            "id_origin",
            "VARCHAR",
            doc="configured, learned (from its records), webhook (from its own endpoint's "
            "first event naming one), warehouse (the one workspace a flat configuration's "
            "warehouse held) or name; bound once, never reassigned",
        ),
        Column("base_url", "VARCHAR", doc="the service it was read from"),
        Column("first_run_id", "VARCHAR"),
        Column("last_run_id", "VARCHAR"),
        Column("updated_at", _TS),
    ),
    ("name",),
    "The workspaces read into this warehouse: each configured name and the workspace id its "
    "rows are keyed by (decision D-WORKSPACE-ID).",
)

# -- webhook events (convo webhooks ingest) ------------------------------------------------

EVENTS = Table(
    "events",
    (
        Column(
            "event_id",
            "VARCHAR NOT NULL",
            doc="the idempotency key, else sha256: of the signed content",
            compression=_ZSTD,
        ),
        Column("event_type", "VARCHAR", "$.event", "e.g. message.responded; unknown types kept"),
        Column("occurred_at", _TS, "$.timestamp", "the event's timestamp, normalised to UTC"),
        Column(
            "workspace_id",
            "VARCHAR",
            "$.workspaceId",
            "the workspace whose endpoint received it (its archive folder's; from schema 7, "
            "never the body's word alone: D-WEBHOOK-WORKSPACE); on the flat endpoint, the "
            "workspaceId (or tenantId) it names, NULL when none",
        ),
        Column("conversation_id", "VARCHAR", "$.conversationId"),
        Column("data", "JSON", "$.data", "the event-specific data", compression=_ZSTD),
        Column(
            "payload", "JSON NOT NULL", doc="the whole event body as delivered", compression=_ZSTD
        ),
        Column(
            "idempotency_key",
            "VARCHAR",
            doc="the delivery's Idempotency-Key header",
            compression=_ZSTD,
        ),
        Column(
            "content_hash",
            "VARCHAR",
            doc="sha256 of the event's canonical form: its body without `signature`, keys "
            "sorted, compact (before schema 4: of the signed bytes)",
            compression=_ZSTD,
        ),
        Column(
            "signature_reading",
            "VARCHAR",
            doc="which bytes verified: raw, stripped or canonical (decision D-SIGNED-BYTES)",
        ),
        Column(
            "signature_source",
            "VARCHAR",
            doc="where the signature came from: a header name or field",
        ),
        Column("secret_index", "INTEGER", doc="which configured secret verified (0 = first)"),
        Column(
            "delivery_id", "VARCHAR", doc="the X-Convo-Delivery header, if any", compression=_ZSTD
        ),
        Column("attempt", "INTEGER", doc="the X-Convo-Attempt header, if any"),
        Column("received_at", _TS, doc="when the receiver got it (archived deliveries)"),
        Column("source_file", "VARCHAR", doc="the archive file it was read from"),
        Column("source_line", "BIGINT", doc="its 1-based line number there"),
        Column("ingest_run_id", "VARCHAR"),
    ),
    ("workspace_id", "event_id"),
    "Every distinct webhook event, verified; retries and replays are recognised and stored once "
    "(unique by construction, without an index).",
    indexed=False,
)

EVENT_KEYS = Table(
    "event_keys",
    (
        Column(
            "workspace_id",
            "VARCHAR NOT NULL",
            doc="the workspace the key was seen in (the event's; default when it names none): "
            "keys are per workspace",
        ),
        Column(
            "key",
            "VARCHAR NOT NULL",
            doc="an idempotency key or a content hash",
            compression=_ZSTD,
        ),
        Column("event_id", "VARCHAR", doc="the event it belongs to", compression=_ZSTD),
    ),
    ("workspace_id", "key"),
    "Every key under which an event was seen in its workspace, so that a retry (same "
    "idempotency key) or a replay (same content) is recognised across files and runs, and "
    "another workspace's key never makes an event a duplicate (unique by construction, "
    "without an index).",
    indexed=False,
)


#: The workspace a per-kind event row is keyed under when its event names none (a flat,
#: single-workspace sender): ``default``, the workspace of a flat configuration whose records
#: name none and of rows from before several workspaces (decision D-WORKSPACE-ID).
NO_EVENT_WORKSPACE = "default"


def event_workspace(column: str = "workspace_id") -> str:
    """An event's workspace as the per-kind tables key it, over a column holding its
    ``workspaceId`` (the events table keeps the envelope's, NULL when it names none)."""
    return f"COALESCE({column}, '{NO_EVENT_WORKSPACE}')"


def _event_table(
    name: str, key: str, doc: str, columns: tuple[Column, ...], *, merged: bool = False
) -> Table:
    """A per-kind table: the first event of a subject wins (unique by construction, no
    index), except where a later event completes the row (``merged``: upserted by key).
    A subject is its workspace and its id: two workspaces' subjects of one id are two."""
    common = (
        Column(key, "VARCHAR NOT NULL", doc="the subject's id (from the event data)"),
        Column("event_id", "VARCHAR", doc="the event it came from"),
        Column("conversation_id", "VARCHAR", "$.conversationId"),
        Column(
            "workspace_id",
            "VARCHAR NOT NULL",
            "$.workspaceId",
            f"the event's workspaceId; {NO_EVENT_WORKSPACE} when it names none",
            fill=f"'{NO_EVENT_WORKSPACE}'",
        ),
    )
    return Table(name, (*common, *columns), ("workspace_id", key), doc, indexed=merged)


MESSAGE_TRACES = _event_table(
    "message_traces",
    "message_id",
    "Assistant responses' trace metadata (message.responded).",
    (
        Column("responded_at", _TS, "$.timestamp"),
        Column("latency_ms", "INTEGER", "$.data.latencyMs"),
        Column("model_tier", "VARCHAR", "$.data.modelTier"),
        Column("confidence", "DOUBLE", "$.data.confidence"),
        Column("policy_flags", "VARCHAR[]", "$.data.policyFlags"),
        Column("channel", "VARCHAR", "$.data.channel"),
        Column("locale", "VARCHAR", "$.data.locale"),
        Column("knowledge_source", "VARCHAR", "$.data.knowledgeSource"),
    ),
)
GUARDRAIL_EVENTS = _event_table(
    "guardrail_events",
    "guardrail_event_id",
    "Guardrail activations (guardrail.triggered); "
    "the excerpt is stored as received and redacted by the reports and exports.",
    (
        Column("triggered_at", _TS, "$.timestamp"),
        Column("message_id", "VARCHAR", "$.data.messageId"),
        Column("flag", "VARCHAR", "$.data.flag"),
        Column("rule", "VARCHAR", "$.data.rule"),
        Column("category", "VARCHAR", "$.data.category"),
        Column("severity", "VARCHAR", "$.data.severity"),
        Column("action", "VARCHAR", "$.data.action"),
        Column("excerpt", "VARCHAR", "$.data.excerpt"),
    ),
)
FEEDBACK = _event_table(
    "feedback",
    "feedback_id",
    "Ratings and comments (conversation.feedback).",
    (
        Column("given_at", _TS, "$.timestamp"),
        Column("rating", "INTEGER", "$.data.rating"),
        Column("comment", "VARCHAR", "$.data.comment"),
    ),
)
LEAD_QUALIFICATIONS = _event_table(
    "lead_qualifications",
    "lead_id",
    "Leads crossing the qualification threshold "
    "(lead.qualified), set A and set B field names reconciled.",
    (
        Column("qualified_at", _TS, "$.timestamp"),
        Column("score", "DOUBLE", None, "set A leadScore, else set B qualificationScore"),
        Column("intent", "VARCHAR", "$.data.intent"),
        Column("email", "VARCHAR", None, "set B email, else set A contactFields.email"),
        Column(
            "contact_fields", "JSON", "$.data.contactFields", "set A: the captured contact details"
        ),
        Column(
            "conversation_url", "VARCHAR", None, "set B conversationUrl, else set A transcriptUrl"
        ),
        Column("metadata", "JSON", "$.data.metadata"),
    ),
)
CONVERSATION_LIFECYCLE = _event_table(
    "conversation_lifecycle",
    "conversation_key",
    "Conversations' start and end "
    "(conversation.created, conversation.completed), one row per conversation.",
    (
        Column("started_at", _TS, None, "conversation.created's startedAt (or timestamp)"),
        Column("channel", "VARCHAR", None, "from conversation.created"),
        Column("external_user_id", "VARCHAR", None, "from conversation.created"),
        Column("completed_at", _TS, None, "conversation.completed's endedAt (or timestamp)"),
        Column("outcome", "VARCHAR", None, "resolved or abandoned"),
    ),
    merged=True,
)
ESCALATIONS = _event_table(
    "escalations",
    "escalation_key",
    "One row per escalation, reconciled from "
    "escalation.created and conversation.escalated (decision D-ESCALATION-EVENTS): matched on "
    "escalationId, else on conversation and timestamp.",
    (
        Column("escalated_at", _TS, "$.timestamp"),
        Column(
            "reason_code",
            "VARCHAR",
            None,
            "escalation.created reasonCode, else conversation.escalated reason",
        ),
        Column("destination", "VARCHAR", "$.data.destination"),
        Column("owner", "VARCHAR", "$.data.owner", "from escalation.created"),
        Column("priority", "VARCHAR", "$.data.priority", "from escalation.created"),
        Column("origin", "VARCHAR", "$.data.origin", "automatic or manual"),
        Column("seen_created", "BOOLEAN", None, "an escalation.created event arrived"),
        Column("seen_escalated", "BOOLEAN", None, "a conversation.escalated event arrived"),
    ),
    merged=True,
)

EVENT_TABLES = (
    MESSAGE_TRACES, GUARDRAIL_EVENTS, FEEDBACK, LEAD_QUALIFICATIONS, CONVERSATION_LIFECYCLE,
    ESCALATIONS,
)  # fmt: skip
#: Tables an upgrade from before schema 6 rebuilds although their columns are as the spec
#: says: their key (without an index, so ``upgrade_tables`` cannot tell) and their
#: workspace_id's NOT NULL changed.
REKEYED_IN_6 = tuple(t.name for t in EVENT_TABLES)

ALL_TABLES = (
    RAW_CONVERSATIONS, RAW_CONVERSATION_DETAILS, RAW_LEADS, RAW_SERVICE_SUMMARIES,
    CONVERSATIONS, MESSAGES, CONVERSATION_ESCALATIONS, CONVERSATION_GUARDRAIL_EVENTS, LEADS,
    SERVICE_SUMMARIES, BOOKMARKS, EXTRACT_RUNS, STREAM_SCHEMAS, WORKSPACES, EVENTS, EVENT_KEYS,
    *EVENT_TABLES,
)  # fmt: skip
