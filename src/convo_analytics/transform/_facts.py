"""Facts: one row per conversation, per escalation, per guardrail incident.

The warehouse has two views of escalations and guardrail activations: the
conversation details the extractor loads, and the webhook events the ingest
loads. A detail is authoritative up to its own ``updatedAt``; an event adds a
fact only when its id is not in any detail and it happened after the detail
(or the conversation has no detail yet). So a fact is counted once whichever
way it arrived (docs/decisions.md, D-FACT-SOURCES).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl

from convo_analytics.transform._frames import read_frame
from convo_analytics.transform._redact import redact_expr
from convo_analytics.transform._slices import DIMENSIONS, slices_of, with_slice_keys

UNKNOWN = "unknown"
#: What names a conversation: ids are the service's per workspace (D-WORKSPACE-ID).
CONVERSATION_KEY = ["workspace_id", "conversation_id"]
POSITIVE_RATING = 4
#: Escalations that hand a lead to sales: by destination, reason or owning team.
SALES_DESTINATIONS = ("crm", "sales")
SALES_REASONS = ("sales_opportunity",)
CONTACT_FLAGS = ("pii.email", "pii.phone")


@dataclass(frozen=True, slots=True)
class Scope:
    """Which conversations' facts to read: a SQL condition on a conversation's key, its
    workspace and its id (decision D-WORKSPACE-ID: two workspaces may hold the same id).

    Facts are per conversation (everything a conversation's facts depend on
    carries its workspace and its id), so any set of conversations can be read
    and derived on its own: all of them, one hash chunk of them (a full rebuild
    in bounded memory), or the keys listed in a registered table (the changed
    ones). A NULL conversation id (a webhook event without one) counts as ''
    (an event's workspace is never NULL in the per-kind tables: ``default``).
    """

    condition: str = "TRUE"
    #: A condition on the messages (``m``) that all messages of the scope's conversations
    #: meet, so that DuckDB skips the rest by its zone maps (e.g. the runs that wrote them).
    messages: str = "TRUE"

    def on(self, workspace: str, column: str) -> str:
        return self.condition.replace("{ws}", f"coalesce({workspace}, '')").replace(
            "{id}", f"coalesce({column}, '')"
        )


ALL = Scope()


def hash_chunk(index: int, chunks: int) -> Scope:
    """The conversations whose key hashes to ``index`` of ``chunks`` (DuckDB's hash: any
    spread will do, the facts do not depend on it)."""
    return Scope(f"hash({{ws}}, {{id}}) % {chunks} = {index}")


def listed_in(table: str, messages: str = "TRUE") -> Scope:
    """The conversations whose keys a table (or registered frame) of ``workspace_id, id``
    lists."""
    return Scope(f"({{ws}}, {{id}}) IN (SELECT workspace_id, id FROM {table})", messages)


#: The scope's conversations, read once per read into a temporary table, each with a
#: small integer key (keys are unique) so that ten million messages are joined and
#: grouped on integers rather than on strings.
_SCOPED = "_facts_conversations"
_SCOPE = f"""
CREATE OR REPLACE TEMP TABLE {_SCOPED} AS
SELECT row_number() OVER (ORDER BY workspace_id, id)::UINTEGER AS conv_key, id, workspace_id,
       external_user_id, channel, locale, source, intent, status, created_at, ended_at,
       escalated, escalation_count, feedback_rating, feedback_at, detail_updated_at
FROM conversations WHERE {{scope}}
"""

#: The newest lead of each conversation of its workspace (ties broken by the lead's id, so
#: that every read picks the same one).
_CONVERSATIONS = """
SELECT c.conv_key, c.id AS conversation_id, c.workspace_id, c.external_user_id, c.channel, c.locale,
       c.source, c.intent AS conversation_intent, c.status, c.created_at AS started_at,
       c.ended_at, c.escalated, c.escalation_count, c.feedback_rating, c.feedback_at,
       c.detail_updated_at,
       l.id AS lead_id, l.score AS lead_score, l.intent AS lead_intent,
       l.created_at AS scored_at, l.qualified_at, l.updated_at AS lead_updated_at,
       (l.email IS NOT NULL OR l.phone IS NOT NULL) AS lead_has_contact,
       CAST(t.topic_id AS VARCHAR) AS topic
FROM {scoped} c
LEFT JOIN conversation_topics t ON t.workspace_id = c.workspace_id AND t.conversation_id = c.id
LEFT JOIN (SELECT DISTINCT ON (workspace_id, conversation_id) * FROM leads WHERE {lead_scope}
           ORDER BY workspace_id, conversation_id, updated_at DESC, id) l
       ON l.workspace_id = c.workspace_id AND l.conversation_id = c.id
"""

#: Only user and assistant messages count in any metric (agents and system notes do not).
#: ``_digest`` hashes what a message adds to the daily marts (see :func:`footprints`).
_MESSAGES = """
SELECT k.conv_key, m.position, m.role = 'user' AS is_user, m.role = 'assistant' AS is_assistant,
       m.created_at, m.latency_ms, m.model_tier, m.confidence,
       hash(m.created_at, m.role, m.model_tier, m.confidence, m.latency_ms) AS _digest
FROM messages m JOIN {scoped} k ON k.workspace_id = m.workspace_id AND k.id = m.conversation_id
WHERE m.role IN ('user', 'assistant') AND {hint}
"""

#: A webhook-only fact counts when no detail of its workspace lists it and it is newer than
#: the detail (the event's conversation, when loaded, is among the scope's: it carries the
#: same workspace and id). An event is matched only within the workspace it names: the same
#: id in another workspace is another conversation.
_NEWER_THAN_DETAIL = f"""
    NOT EXISTS (SELECT 1 FROM {{api}} a WHERE a.workspace_id = e.workspace_id AND a.id = e.{{key}})
    AND NOT EXISTS (SELECT 1 FROM {_SCOPED} c
                    WHERE c.workspace_id = e.workspace_id AND c.id = e.conversation_id
                    AND c.detail_updated_at IS NOT NULL AND e.{{at}} <= c.detail_updated_at)
"""

_ESCALATIONS = f"""
SELECT id AS escalation_id, conversation_id, workspace_id, created_at AS escalated_at,
       reason_code, destination, owner, priority, origin, 'api' AS seen_in
FROM conversation_escalations WHERE {{api_scope}}
UNION ALL
SELECT escalation_key, conversation_id, workspace_id, escalated_at, reason_code, destination, owner,
       priority, origin, 'webhook'
FROM escalations e
WHERE {{event_scope}} AND {
    _NEWER_THAN_DETAIL.format(
        api="conversation_escalations", key="escalation_key", at="escalated_at"
    )
}
"""

_INCIDENTS = f"""
SELECT id AS incident_id, conversation_id, workspace_id, message_id,
       triggered_at, flag, rule, category, severity, action, excerpt, 'api' AS seen_in
FROM conversation_guardrail_events WHERE {{api_scope}}
UNION ALL
SELECT guardrail_event_id, conversation_id, workspace_id, message_id, triggered_at, flag, rule,
       category, severity, action, excerpt, 'webhook'
FROM guardrail_events e
WHERE {{event_scope}} AND {
    _NEWER_THAN_DETAIL.format(
        api="conversation_guardrail_events", key="guardrail_event_id", at="triggered_at"
    )
}
"""


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything the marts are made of, read from the warehouse once.

    Every fact carries the ``workspace_id`` and the ``slice_key`` of its
    conversation's dimensions (``slices`` maps a key to the values), so that
    the cube groups on them; ``messages`` also carry the integer ``conv_key``.
    """

    conversations: pl.DataFrame
    messages: pl.DataFrame
    escalations: pl.DataFrame
    incidents: pl.DataFrame
    slices: pl.DataFrame


def read_facts(con: duckdb.DuckDBPyConnection, scope: Scope = ALL) -> Facts:
    """Read the warehouse and derive the facts of the conversations in ``scope``.

    The facts of a conversation depend only on rows carrying its workspace and id, so
    the facts of a scope are exactly those rows of the facts of all conversations.
    """
    con.execute(_SCOPE.format(scope=scope.on("workspace_id", "id")))
    children = {
        "api_scope": scope.on("workspace_id", "conversation_id"),
        "event_scope": scope.on("e.workspace_id", "e.conversation_id"),
    }
    escalations = read_frame(con, _ESCALATIONS.format(**children))
    incidents = read_frame(con, _INCIDENTS.format(**children))
    messages = read_frame(con, _MESSAGES.format(scoped=_SCOPED, hint=scope.messages))
    listed = read_frame(
        con,
        _CONVERSATIONS.format(
            scoped=_SCOPED, lead_scope=scope.on("workspace_id", "conversation_id")
        ),
    )
    con.execute(f"DROP TABLE {_SCOPED}")
    conversations = _conversation_facts(listed, messages, escalations, incidents)
    dims = conversations.select("workspace_id", "conversation_id", "external_user_id", *DIMENSIONS)
    incidents = with_slice_keys(_incident_facts(incidents, escalations, dims))
    conversations = with_slice_keys(conversations)
    slices = pl.concat([slices_of(conversations), slices_of(incidents)]).unique().sort(DIMENSIONS)
    keyed = conversations.select("conversation_id", "conv_key", "workspace_id", "slice_key")
    return Facts(
        conversations=conversations,
        messages=messages.join(keyed.drop("conversation_id"), on="conv_key", how="inner"),
        escalations=escalations.join(keyed.drop("conv_key"), on=CONVERSATION_KEY, how="inner"),
        incidents=incidents,
        slices=slices,
    )


def footprints(facts: Facts) -> pl.DataFrame:
    """Per conversation: its workspace and slice, the span of its counted messages and a
    digest of them: the 64-bit sum (wrapping, so order-free) of DuckDB's hash of each
    message's time, role, tier, confidence and latency. Equal digests mean the same
    messages for every practical purpose (a collision is a 1 in 2^64 chance); a DuckDB
    whose hash differs only makes changed conversations look changed."""
    spans = facts.messages.group_by("conv_key").agg(
        pl.col("created_at").min().alias("first_message_at"),
        pl.col("created_at").max().alias("last_message_at"),
        pl.col("_digest").sum().reinterpret(signed=True).alias("messages_digest"),
    )
    return (
        facts.conversations.select("conv_key", "conversation_id", "workspace_id", "slice_key")
        .join(spans, on="conv_key", how="left")
        .drop("conv_key")
    )


def _first_exchange(messages: pl.DataFrame) -> pl.DataFrame:
    """Per conversation: its first user message and the first assistant reply after it."""
    first_user = (
        messages.filter(pl.col("is_user"))
        .group_by("conv_key")
        .agg(
            pl.col("position").min().alias("_fu_pos"),
            pl.col("created_at").get(pl.col("position").arg_min()).alias("engaged_at"),
            pl.len().alias("user_messages"),
        )
    )
    assistant = messages.filter(pl.col("is_assistant"))
    reply = (
        assistant.join(first_user.select("conv_key", "_fu_pos"), on="conv_key", how="inner")
        .filter(pl.col("position") > pl.col("_fu_pos"))
        .group_by("conv_key")
        .agg(pl.col("created_at").get(pl.col("position").arg_min()).alias("first_response_at"))
    )
    # summed as integers of 10^-9: the same answer whatever order the rows come in. Scaled
    # by multiplying (see _ms_between), after the aggregation.
    responses = (
        assistant.group_by("conv_key")
        .agg(
            pl.len().alias("assistant_responses"),
            (pl.col("confidence").fill_null(0.0) * 1e9)
            .round()
            .cast(pl.Int64)
            .sum()
            .alias("_confidence_nanos"),
        )
        .with_columns(
            (pl.col("_confidence_nanos") / pl.col("assistant_responses") * 1e-9).alias(
                "avg_confidence"
            )
        )
        .drop("_confidence_nanos")
    )
    return (
        first_user.drop("_fu_pos")
        .join(reply, on="conv_key", how="left")
        .join(responses, on="conv_key", how="full", coalesce=True)
    )


def _ms_between(later: str, earlier: str) -> pl.Expr:
    """Milliseconds between two times. Multiplied by 0.001 rather than divided by 1000:
    polars divides a column of one row exactly but a longer one by multiplying with the
    reciprocal, so a division would give a conversation's figure in the last bit differently
    alone (an incremental run) than among others (a full one)."""
    return (pl.col(later) - pl.col(earlier)).dt.total_microseconds() * 0.001


def _conversation_facts(
    convs: pl.DataFrame,
    messages: pl.DataFrame,
    escalations: pl.DataFrame,
    incidents: pl.DataFrame,
) -> pl.DataFrame:
    esc = escalations.group_by(CONVERSATION_KEY).agg(
        pl.len().alias("escalations"),
        pl.col("escalated_at").min().alias("first_escalated_at"),
        pl.col("escalated_at")
        .filter(
            pl.col("destination").is_in(SALES_DESTINATIONS)
            | pl.col("reason_code").is_in(SALES_REASONS)
            | pl.col("owner").str.starts_with("sales")
        )
        .min()
        .alias("handed_off_at"),
    )
    inc = incidents.group_by(CONVERSATION_KEY).agg(
        pl.len().alias("guardrail_triggers"),
        pl.col("triggered_at")
        .filter(pl.col("flag").is_in(CONTACT_FLAGS))
        .min()
        .alias("_contact_seen_at"),
    )
    facts = (
        convs.join(_first_exchange(messages), on="conv_key", how="left")
        .join(esc, on=CONVERSATION_KEY, how="left")
        .join(inc, on=CONVERSATION_KEY, how="left")
    )
    has_contact = (
        pl.col("lead_has_contact").fill_null(False) | pl.col("_contact_seen_at").is_not_null()
    )
    escalated = (
        pl.col("escalated").fill_null(False)
        | (pl.col("escalation_count").fill_null(0) > 0)
        | (pl.col("escalations").fill_null(0) > 0)
    )
    return facts.select(
        "conv_key",
        "conversation_id",
        "workspace_id",
        "external_user_id",
        *(pl.col(d).fill_null(UNKNOWN).alias(d) for d in ("channel", "locale", "source")),
        pl.coalesce("conversation_intent", "lead_intent", pl.lit(UNKNOWN)).alias("intent"),
        pl.col("topic").fill_null(UNKNOWN),
        "status",
        "started_at",
        "ended_at",
        pl.col("user_messages").fill_null(0),
        pl.col("assistant_responses").fill_null(0),
        "avg_confidence",
        (pl.col("user_messages").fill_null(0) > 0).alias("engaged"),
        "engaged_at",
        "first_response_at",
        _ms_between("first_response_at", "engaged_at").alias("first_response_ms"),
        pl.when(pl.col("status") == "resolved")
        .then(_ms_between("ended_at", "started_at") * 0.001)
        .alias("resolution_seconds"),
        escalated.alias("escalated"),
        pl.col("escalations").fill_null(0),
        "first_escalated_at",
        ((~escalated) & (pl.col("status") != "open")).alias("contained"),
        "lead_id",
        "lead_score",
        "scored_at",
        "qualified_at",
        has_contact.alias("contact_captured"),
        pl.when(has_contact)
        .then(pl.coalesce("_contact_seen_at", "qualified_at", "lead_updated_at"))
        .alias("contact_captured_at"),
        "handed_off_at",
        "feedback_rating",
        "feedback_at",
        (pl.col("feedback_rating") >= POSITIVE_RATING).alias("positive_feedback"),
        pl.col("guardrail_triggers").fill_null(0),
    )


def _incident_facts(
    incidents: pl.DataFrame, escalations: pl.DataFrame, dims: pl.DataFrame
) -> pl.DataFrame:
    """One row per guardrail incident, with whether the conversation was escalated over it.

    An incident is its workspace's (a detail's: its conversation's; a webhook event's: the
    one it names); its conversation, when loaded, is the one of that id in that workspace.
    Incident ids are unique within a workspace only."""
    key = ["workspace_id", "incident_id"]
    later = (
        incidents.select(*key, "conversation_id", "triggered_at")
        .join(
            escalations.select(*CONVERSATION_KEY, "escalated_at"),
            on=CONVERSATION_KEY,
            how="inner",
        )
        .filter(pl.col("escalated_at") >= pl.col("triggered_at"))
        .group_by(key)
        .agg(pl.col("escalated_at").min())
    )
    return (
        incidents.join(later, on=key, how="left")
        .join(dims, on=CONVERSATION_KEY, how="left")
        .select(
            "incident_id",
            "triggered_at",
            "conversation_id",
            "workspace_id",
            "external_user_id",
            "message_id",
            "flag",
            "rule",
            "category",
            "severity",
            "action",
            ((pl.col("action") == "escalated") | pl.col("escalated_at").is_not_null()).alias(
                "escalated"
            ),
            "escalated_at",
            "excerpt",
            redact_expr("excerpt").alias("excerpt_redacted"),
            *(pl.col(d).fill_null(UNKNOWN) for d in DIMENSIONS),
            "seen_in",
        )
        .sort("triggered_at", "incident_id", "workspace_id", nulls_last=True)
    )
