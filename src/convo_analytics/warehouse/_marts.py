"""The marts `convo transform` writes: facts, the daily cube, their bookkeeping and run log.

The daily marts are partitioned by (workspace, time zone, day): a transform
rewrites the partitions that what changed touches (or all of them, with
``--full``), all in one transaction, so a reader sees one transform's marts
or the next one's, never a mix. The metric definitions they serve are in
docs/warehouse.md ("Metrics"); which definition version built them is in
``mart_state``.
"""

from __future__ import annotations

from convo_analytics.warehouse._tables import Column, Table

_TS = "TIMESTAMPTZ"
_DIMS = (
    Column("channel", "VARCHAR", doc="the conversation's channel ('unknown' when not given)"),
    Column("locale", "VARCHAR", doc="the conversation's locale ('unknown' when not given)"),
    Column("source", "VARCHAR", doc="the conversation's metadata source ('unknown' when absent)"),
    Column("intent", "VARCHAR", doc="the conversation's intent, else its lead's, else 'unknown'"),
    Column(
        "topic",
        "VARCHAR",
        doc="the id of its topic in its workspace as text (names and merges: mart_topics); "
        "'unknown' before its workspace has topics or without a user message",
        fill="'unknown'",
    ),
)
_WORKSPACE = Column(
    "workspace_id",
    "VARCHAR",
    doc="the conversation's workspace (a webhook-only incident's: the one its event names, "
    "`default` when none)",
)
_DAY = (
    _WORKSPACE,
    Column("timezone", "VARCHAR NOT NULL", doc="the IANA zone days are cut in"),
    Column("date", "DATE NOT NULL", doc="the calendar day in that zone"),
)


def _mart(name: str, doc: str, *columns: Column, key: tuple[str, ...] = ()) -> Table:
    """A mart: rewritten only by the transform, its key unique by construction (no index)."""
    return Table(name, columns, key, doc, indexed=False)


#: A conversation is named by its workspace and its id: ids are the service's per
#: workspace (decision D-WORKSPACE-ID), so every fact mart is keyed by the workspace too.
_CONVERSATION_KEY = ("workspace_id", "conversation_id")
_OWN_WORKSPACE = Column(
    "workspace_id",
    "VARCHAR",
    doc="the workspace it was extracted from (with conversation_id, what names it)",
)


_SLICE = Column("slice_key", "BIGINT", doc="the slice: its dimensions are in mart_slices")


def _daily(name: str, doc: str, *columns: Column) -> Table:
    return _mart(name, doc, *_DAY, _SLICE, *columns)


MART_CONVERSATIONS = _mart(
    "mart_conversations",
    "One row per conversation with everything its metrics need (the fact table).",
    Column("conversation_id", "VARCHAR"),
    _OWN_WORKSPACE,
    Column("external_user_id", "VARCHAR"),
    *_DIMS,
    Column("status", "VARCHAR", doc="open, resolved or abandoned"),
    Column("started_at", _TS),
    Column("ended_at", _TS),
    Column("user_messages", "BIGINT"),
    Column("assistant_responses", "BIGINT"),
    Column("avg_confidence", "DOUBLE", doc="mean confidence of its responses (missing counts 0)"),
    Column("engaged", "BOOLEAN", doc="at least one user message"),
    Column("engaged_at", _TS, doc="the first user message"),
    Column("first_response_at", _TS, doc="the first assistant message after it"),
    Column("first_response_ms", "DOUBLE", doc="first_response_at - engaged_at"),
    Column("resolution_seconds", "DOUBLE", doc="ended_at - started_at, resolved ones only"),
    Column("escalated", "BOOLEAN", doc="handed to a human at least once"),
    Column("escalations", "BIGINT", doc="escalation facts of the conversation"),
    Column("first_escalated_at", _TS),
    Column("contained", "BOOLEAN", doc="ended (not open) without escalation"),
    Column("lead_id", "VARCHAR"),
    Column("lead_score", "DOUBLE", doc="0-100"),
    Column("scored_at", _TS, doc="the lead's creation (first scored)"),
    Column("qualified_at", _TS),
    Column("contact_captured", "BOOLEAN", doc="an email or phone number was given"),
    Column("contact_captured_at", _TS, doc="see 'Lead funnel' for how it is dated"),
    Column("handed_off_at", _TS, doc="first escalation to sales or a CRM"),
    Column("feedback_rating", "INTEGER"),
    Column("feedback_at", _TS),
    Column("positive_feedback", "BOOLEAN", doc="rating >= 4"),
    Column("guardrail_triggers", "BIGINT"),
    key=_CONVERSATION_KEY,
)
MART_ESCALATIONS = _mart(
    "mart_escalations",
    "One row per escalation, from details and webhook events (counted once).",
    Column("escalation_id", "VARCHAR"),
    Column("conversation_id", "VARCHAR"),
    Column(
        "workspace_id",
        "VARCHAR",
        doc="its conversation's workspace (a webhook event is matched to the conversation of "
        "its id in the workspace it names)",
    ),
    Column("escalated_at", _TS),
    Column("reason_code", "VARCHAR"),
    Column("destination", "VARCHAR"),
    Column("owner", "VARCHAR"),
    Column("priority", "VARCHAR"),
    Column("origin", "VARCHAR", doc="automatic or manual"),
    Column("seen_in", "VARCHAR", doc="api (a conversation detail) or webhook"),
    key=("workspace_id", "escalation_id"),
)
MART_GUARDRAIL_INCIDENTS = _mart(
    "mart_guardrail_incidents",
    "One row per guardrail incident, for the incident report and compliance exports.",
    Column("incident_id", "VARCHAR"),
    Column("triggered_at", _TS),
    Column("conversation_id", "VARCHAR"),
    Column(
        "workspace_id",
        "VARCHAR",
        doc="its conversation's workspace (a webhook event's: the workspace it names, whether "
        "or not its conversation is loaded yet; `default` when it names none)",
    ),
    Column("external_user_id", "VARCHAR", doc="the end user (for repeated incidents)"),
    Column("message_id", "VARCHAR"),
    Column("flag", "VARCHAR", doc="the policy flag, e.g. pii.email"),
    Column("rule", "VARCHAR"),
    Column("category", "VARCHAR"),
    Column("severity", "VARCHAR"),
    Column("action", "VARCHAR", doc="redacted, blocked, warned, escalated or logged"),
    Column("escalated", "BOOLEAN", doc="action escalated, or the conversation escalated after"),
    Column("escalated_at", _TS, doc="the first escalation at or after the incident"),
    Column("excerpt", "VARCHAR", doc="as received (personal data included)"),
    Column("excerpt_redacted", "VARCHAR", doc="emails, card and phone numbers replaced"),
    *_DIMS,
    Column("seen_in", "VARCHAR", doc="api or webhook"),
    key=("workspace_id", "incident_id"),
)
MART_SLICES = _mart(
    "mart_slices",
    "The slices the daily marts are cut by: one row per combination of dimension values seen.",
    Column(
        "slice_key",
        "BIGINT",
        doc="the key the daily marts carry: a hash of the five values (the same in every run)",
    ),
    *_DIMS,
)
MART_DAILY_CONVERSATIONS = _daily(
    "mart_daily_conversations",
    "Conversation counts per start day and slice (the cohort side of the metrics).",
    Column("conversations", "BIGINT"),
    Column("engaged_conversations", "BIGINT"),
    Column("resolved", "BIGINT"),
    Column("abandoned", "BIGINT"),
    Column("open", "BIGINT"),
    Column("escalated_conversations", "BIGINT"),
    Column("contained_conversations", "BIGINT"),
    Column("leads_qualified", "BIGINT"),
    Column("feedback_count", "BIGINT"),
    Column("positive_feedback", "BIGINT"),
    Column("rating_sum", "BIGINT"),
)
MART_DAILY_MESSAGES = _daily(
    "mart_daily_messages",
    "User messages and assistant responses per day, slice and model tier.",
    Column("model_tier", "VARCHAR", doc="NULL on the rows counting user messages"),
    Column("user_messages", "BIGINT"),
    Column("assistant_responses", "BIGINT"),
    Column(
        "confidence_nanos",
        "BIGINT",
        doc="sum of confidence x 10^9, each rounded (exact sums); a missing confidence counts 0",
    ),
    Column("low_confidence_responses", "BIGINT", doc="confidence below the threshold"),
    Column("low_confidence_threshold", "DOUBLE"),
)
MART_DAILY_LATENCY = _daily(
    "mart_daily_latency",
    "How many assistant responses took each whole number of milliseconds (for exact "
    "percentiles over any range).",
    Column("model_tier", "VARCHAR"),
    Column("latency_ms", "BIGINT", doc="a missing latency counts 0"),
    Column("responses", "BIGINT"),
)
MART_DAILY_GUARDRAILS = _daily(
    "mart_daily_guardrails",
    "Guardrail triggers per day, slice and flag.",
    Column("flag", "VARCHAR"),
    Column("triggers", "BIGINT"),
)
MART_DAILY_ESCALATIONS = _daily(
    "mart_daily_escalations",
    "Escalations per day they were made, slice and destination.",
    Column("destination", "VARCHAR"),
    Column("escalations", "BIGINT"),
)
MART_DAILY_DURATIONS = _daily(
    "mart_daily_durations",
    "How many conversations (by start day) had each first-response time or time to resolution.",
    Column("measure", "VARCHAR", doc="first_response_ms or resolution_seconds"),
    Column("value", "DOUBLE"),
    Column("conversations", "BIGINT"),
)
MART_DAILY_PERCENTILES = _mart(
    "mart_daily_percentiles",
    "Each day's percentiles over the whole workspace (no slices), kept so that a summary "
    "export reads them instead of recomputing them from the histograms; a row per workspace, "
    "zone and day that has conversations or messages.",
    *_DAY,
    Column("latency_p50_ms", "DOUBLE"),
    Column("latency_p90_ms", "DOUBLE"),
    Column("latency_p95_ms", "DOUBLE"),
    Column("latency_p99_ms", "DOUBLE"),
    Column("median_first_response_ms", "DOUBLE"),
    Column("median_time_to_resolution_seconds", "DOUBLE"),
)
TRANSFORM_RUNS = Table(
    "transform_runs",
    (
        Column("transform_run_id", "VARCHAR NOT NULL"),
        Column("started_at", _TS),
        Column("finished_at", _TS),
        Column("status", "VARCHAR", doc="ok or failed"),
        Column("timezones", "VARCHAR[]", doc="the zones the daily marts were cut in"),
        Column("low_confidence_threshold", "DOUBLE"),
        Column("conversations", "BIGINT", doc="rows of mart_conversations"),
        Column("messages", "BIGINT", doc="messages read"),
        Column("incidents", "BIGINT", doc="rows of mart_guardrail_incidents"),
        Column("mart_rows", "JSON", doc="rows in each mart after the run"),
        Column("reconciliation", "JSON", doc="differences from the service's own summary"),
        Column("duration_seconds", "DOUBLE"),
        Column("error", "VARCHAR"),
        Column("mode", "VARCHAR", doc="full or incremental"),
        Column(
            "full_reason",
            "VARCHAR",
            doc="why every partition was rebuilt: first transform, --full asked, definition "
            "version, zones or threshold changed (NULL when incremental)",
        ),
        Column("definition_version", "INTEGER", doc="the definition version the marts follow"),
        Column(
            "changed_conversations",
            "BIGINT",
            doc="conversations whose facts were recomputed (all of them when full)",
        ),
        Column(
            "partitions",
            "JSON",
            doc="the partitions rewritten and why: count, and per workspace and zone the days "
            "(ranges) with their reasons",
        ),
    ),
    ("transform_run_id",),
    "One row per `convo transform` run; the newest ok row says what the marts hold.",
)

MART_CONVERSATION_FOOTPRINTS = _mart(
    "mart_conversation_footprints",
    "Where each conversation's figures sit in the partitions, kept so that an incremental "
    "transform knows which partitions a changed conversation leaves or enters.",
    Column("conversation_id", "VARCHAR"),
    _OWN_WORKSPACE,
    Column("slice_key", "BIGINT", doc="the slice its figures are in"),
    Column("first_message_at", _TS, doc="its first user or assistant message"),
    Column("last_message_at", _TS, doc="its last user or assistant message"),
    Column(
        "messages_digest",
        "BIGINT",
        doc="a 64-bit digest of what its messages add to the daily marts (time, role, tier, "
        "confidence, latency): equal digests, unchanged message figures",
    ),
    key=_CONVERSATION_KEY,
)
MART_STATE = Table(
    "mart_state",
    (
        Column("definition_version", "INTEGER", doc="the definition version the marts follow"),
        Column("timezones", "VARCHAR[]", doc="the zones the daily marts are cut in"),
        Column("low_confidence_threshold", "DOUBLE"),
        Column("transform_run_id", "VARCHAR", doc="the transform that last wrote the marts"),
        Column("built_at", _TS, doc="when every partition was last rebuilt (a full transform)"),
        Column(
            "fallback_patterns",
            "VARCHAR[]",
            doc="the fallback answer patterns knowledge_gaps was found with (NULL: not "
            "recorded); a transform with others recomputes every knowledge_gaps row",
        ),
    ),
    (),
    "One row: what the marts were built with. A transform whose definition version, zones "
    "or threshold differ rebuilds every partition; other fallback patterns recompute the "
    "knowledge gaps.",
    indexed=False,
)
MART_WATERMARKS = Table(
    "mart_watermarks",
    (
        Column(
            "source",
            "VARCHAR",
            doc="conversations or leads (extract runs, by last_run_id), events (ingest runs)",
        ),
        Column("run_id", "VARCHAR", doc="a run whose rows the marts include ('' for none)"),
        Column("transform_run_id", "VARCHAR", doc="the transform that took them in"),
    ),
    (),
    "The load runs whose rows the marts already include, per source table: rows stamped "
    "with any other run id are what changed since (decision D-TRANSFORM-CHANGES).",
    indexed=False,
)

DAILY_MARTS = {
    "conversations": MART_DAILY_CONVERSATIONS,
    "messages": MART_DAILY_MESSAGES,
    "latency": MART_DAILY_LATENCY,
    "guardrails": MART_DAILY_GUARDRAILS,
    "escalations": MART_DAILY_ESCALATIONS,
    "durations": MART_DAILY_DURATIONS,
}
#: What a full rebuild drops and creates again (the run log and the state are kept).
REBUILT_MARTS = (
    MART_CONVERSATIONS,
    MART_CONVERSATION_FOOTPRINTS,
    MART_ESCALATIONS,
    MART_GUARDRAIL_INCIDENTS,
    MART_SLICES,
    *DAILY_MARTS.values(),
    MART_DAILY_PERCENTILES,
)
MART_TABLES = (*REBUILT_MARTS, MART_STATE, MART_WATERMARKS, TRANSFORM_RUNS)
