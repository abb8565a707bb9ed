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

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: str
    source: str | None = None  # JSON path in the record ($.field), or None when computed
    doc: str = ""


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    doc: str

    def ddl(self) -> str:
        cols = ",\n  ".join(f"{c.name} {c.type}" for c in self.columns)
        return (
            f"CREATE TABLE IF NOT EXISTS {self.name} (\n  {cols},\n"
            f"  PRIMARY KEY ({', '.join(self.key)})\n)"
        )


def _raw(name: str, what: str) -> Table:
    return Table(
        name,
        (
            Column("id", "VARCHAR NOT NULL", doc="the record's id"),
            Column("payload_hash", "VARCHAR NOT NULL", doc="md5 of the payload text"),
            Column("updated_at", "TIMESTAMPTZ", doc="the record's updated-at, when it has one"),
            Column("payload", "JSON NOT NULL", doc="the record exactly as the service sent it"),
            Column("fetched_at", "TIMESTAMPTZ NOT NULL", doc="when this run received it"),
            Column("run_id", "VARCHAR NOT NULL", doc="the extract run that received it"),
        ),
        ("id", "payload_hash"),
        f"Every distinct version of {what} ever fetched (a re-fetched identical version is "
        "recognised as a duplicate and not stored again).",
    )


RAW_CONVERSATIONS = _raw("raw_conversations", "a conversation as listed")
RAW_CONVERSATION_DETAILS = _raw("raw_conversation_details", "a conversation's detail")
RAW_LEADS = _raw("raw_leads", "a lead")
RAW_SERVICE_SUMMARIES = _raw(
    "raw_service_summaries", "the service's summary for a range (id: workspace|from|to|tz)"
)

_TS = "TIMESTAMPTZ"
LOADED = (
    Column("first_run_id", "VARCHAR", doc="the run that first loaded the record"),
    Column("last_run_id", "VARCHAR", doc="the run that loaded the current version"),
    Column("loaded_at", _TS, doc="when the current version was loaded"),
)

CONVERSATIONS = Table(
    "conversations",
    (
        Column("id", "VARCHAR NOT NULL", "$.id"),
        Column("workspace_id", "VARCHAR", "$.workspaceId"),
        Column(
            "external_user_id",
            "VARCHAR",
            "$.externalUserId",
            "the end user in the customer's system",
        ),
        Column("channel", "VARCHAR", "$.channel"),
        Column("locale", "VARCHAR", "$.locale"),
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
    ("id",),
    "One row per conversation: its newest version (from its detail when one was fetched).",
)

MESSAGES = Table(
    "messages",
    (
        Column("id", "VARCHAR NOT NULL", "$.id"),
        Column("conversation_id", "VARCHAR NOT NULL", None, "the conversation it belongs to"),
        Column("position", "INTEGER", None, "0-based place in the transcript"),
        Column("role", "VARCHAR", "$.role", "user, assistant, agent or system"),
        Column("text", "VARCHAR", "$.text"),
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
    ("id",),
    "Transcript messages from conversation details; replaced as a whole when a newer "
    "detail of the conversation is loaded.",
)

LEADS = Table(
    "leads",
    (
        Column("id", "VARCHAR NOT NULL", "$.id"),
        Column("conversation_id", "VARCHAR", "$.conversationId"),
        Column("workspace_id", "VARCHAR", "$.workspaceId"),
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
    ("id",),
    "One row per lead, newest version.",
)


def _snake(name: str) -> str:
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
            cols.append(Column(_snake(name), "BIGINT", f"$.{name}", desc))
        elif info.annotation == dict[str, int]:
            cols.append(Column(_snake(name), "JSON", f"$.{name}", desc))
        else:
            cols.append(Column(_snake(name), "DOUBLE", f"$.{name}", desc))
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
        Column("stream", "VARCHAR NOT NULL", doc="conversations or leads"),
        Column("high_water_mark", _TS, doc="the newest updated-at loaded and committed"),
        Column("run_id", "VARCHAR", doc="the run that advanced it"),
        Column("committed_at", _TS, doc="when it was advanced"),
    ),
    ("stream",),
    "Where each incremental stream resumes; advanced in the same transaction as the data.",
)

EXTRACT_RUNS = Table(
    "extract_runs",
    (
        Column("run_id", "VARCHAR NOT NULL"),
        Column("stream", "VARCHAR NOT NULL"),
        Column("started_at", _TS),
        Column("finished_at", _TS),
        Column("status", "VARCHAR", doc="ok or failed"),
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
        Column("error", "VARCHAR", doc="why it failed"),
    ),
    ("run_id", "stream"),
    "One row per stream per extract run.",
)

STREAM_SCHEMAS = Table(
    "stream_schemas",
    (
        Column("stream", "VARCHAR NOT NULL"),
        Column("field", "VARCHAR NOT NULL", doc="a top-level field of the stream's records"),
        Column("json_type", "VARCHAR", doc="its JSON type as last seen"),
        Column("first_run_id", "VARCHAR"),
        Column("last_run_id", "VARCHAR"),
    ),
    ("stream", "field"),
    "The record shape each stream had, for reporting drift.",
)

ALL_TABLES = (
    RAW_CONVERSATIONS, RAW_CONVERSATION_DETAILS, RAW_LEADS, RAW_SERVICE_SUMMARIES,
    CONVERSATIONS, MESSAGES, LEADS, SERVICE_SUMMARIES, BOOKMARKS, EXTRACT_RUNS, STREAM_SCHEMAS,
)  # fmt: skip
