"""Which field of a service's records fills each typed column: configured, sandbox, or found.

A service may name a message's time ``sentAt`` or keep the feedback rating
at ``csat.score``. For every typed column this module looks at sampled
records: the configured path wins; else the sandbox's name when the records
carry it; else the first of the column's usual names whose values fit the
column's type. What it finds is reported (``--check``, the run log), and a
column found nowhere is named with the setting that fills it and the keys
seen in the records that could.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from convo_analytics.extract._shapes import parse_timestamp
from convo_analytics.warehouse._shape import FIELD_TABLES, field_key, source_path
from convo_analytics.warehouse._tables import Column

__all__ = ["SYNONYMS", "FieldFinding", "find_fields", "fits", "paths_of", "presence"]

# Usual names of each typed column's field, besides the sandbox's own (tried first).
# fmt: off
SYNONYMS: dict[str, tuple[str, ...]] = {
    "conversations.external_user_id": ("external_user_id", "userId", "user_id", "userRef",
                                       "user_ref", "user", "customerId", "customer_id",
                                       "visitorId", "visitor_id", "endUserId", "contactId"),
    "conversations.channel": ("channelType", "channel_type", "medium", "platform"),
    "conversations.locale": ("language", "lang", "languageCode", "language_code"),
    "conversations.intent": ("topic", "intentName", "intent_name", "category"),
    "conversations.status": ("state", "outcome", "resolution"),
    "conversations.ended_at": ("ended_at", "closedAt", "closed_at", "completedAt",
                               "completed_at", "resolvedAt", "resolved_at", "endTime",
                               "end_time", "ended", "closed"),
    "conversations.message_count": ("message_count", "messagesCount", "messages_count",
                                    "numMessages", "num_messages", "turnCount", "turn_count"),
    "conversations.escalated": ("isEscalated", "is_escalated", "escalated_flag",
                                "escalatedFlag", "wasEscalated", "was_escalated", "handedOff",
                                "handed_off", "handoff", "humanHandoff", "human_handoff",
                                "transferred", "isTransferred", "is_transferred"),
    "conversations.escalation_count": ("escalation_count", "escalationsCount",
                                       "escalations_count", "handoffCount", "handoff_count"),
    "conversations.guardrail_trigger_count": ("guardrail_trigger_count", "guardrailCount",
                                              "guardrail_count", "flagCount", "flag_count"),
    "conversations.lead_id": ("lead_id", "lead.id", "leadRef", "lead_ref", "leadIdentifier",
                              "lead_identifier", "lead"),
    "conversations.feedback_rating": ("feedback_rating", "feedback.rating", "rating", "csat",
                                      "csat.score", "score_csat", "csatScore", "csat_score",
                                      "feedback.stars", "feedback.score", "satisfaction",
                                      "satisfaction.score", "stars", "rating.value"),
    "conversations.feedback_comment": ("feedbackComment", "feedback_comment", "csat.comment",
                                       "rating.comment"),
    "conversations.feedback_at": ("feedback.created_at", "feedbackAt", "feedback_at",
                                  "csat.createdAt", "csat.created_at"),
    "conversations.source": ("source", "utm_source", "entryPoint", "entry_point"),
    "conversations.metadata": ("meta", "attributes", "customFields", "custom_fields"),
    "messages.id": ("messageId", "message_id", "_id", "uuid"),
    "messages.role": ("sender", "from", "author", "speaker", "senderType", "sender_type"),
    "messages.text": ("content", "body", "message", "utterance"),
    "messages.created_at": ("created_at", "sentAt", "sent_at", "postedAt", "posted_at",
                            "timestamp", "time", "ts", "at", "date", "sent", "created"),
    "messages.locale": ("language", "lang"),
    "messages.latency_ms": ("latency_ms", "latency", "responseTimeMs", "response_time_ms",
                            "trace.latencyMs", "trace.latency_ms", "trace.latency"),
    "messages.model_tier": ("model_tier", "model", "tier", "trace.modelTier", "trace.model_tier"),
    "messages.confidence": ("confidenceScore", "confidence_score", "trace.confidence"),
    "messages.policy_flags": ("policy_flags", "flags", "trace.policyFlags", "trace.policy_flags"),
    "messages.knowledge_source": ("knowledge_source", "source"),
    "leads.conversation_id": ("conversation_id", "conversation", "conversation.id",
                              "conversationRef", "conversation_ref"),
    "leads.status": ("state", "stage"),
    "leads.score": ("leadScore", "lead_score", "qualificationScore", "qualification_score"),
    "leads.intent": ("topic", "interest"),
    "leads.qualified_at": ("qualified_at", "qualifiedOn"),
    "leads.email": ("contactEmail", "contact_email", "contact.email"),
    "leads.phone": ("contactPhone", "contact_phone", "contact.phone"),
    "leads.conversation_url": ("conversation_url", "transcriptUrl", "transcript_url", "url"),
    # The summary's daily rows (after the sandbox's camelCase names and each column's own).
    "service_summaries.date": ("day", "date", "period", "periodStart", "period_start", "bucket",
                               "dt", "dayStart", "day_start", "startDate", "start_date", "start",
                               "timestamp", "time"),
    "service_summaries.conversations": ("total_conversations", "totalConversations",
                                        "conversation_count", "conversationCount",
                                        "conversations_started", "conversationsStarted",
                                        "sessions", "session_count", "chats", "started"),
    "service_summaries.engaged_conversations": ("engaged", "engaged_count", "engagedCount"),
    "service_summaries.resolved": ("resolved_count", "resolvedCount", "resolved_conversations",
                                   "resolvedConversations"),
    "service_summaries.abandoned": ("abandoned_count", "abandonedCount",
                                    "abandoned_conversations", "abandonedConversations"),
    "service_summaries.open": ("open_count", "openCount", "open_conversations",
                               "openConversations"),
    "service_summaries.escalated_conversations": ("escalated_count", "escalatedCount",
                                                  "escalated", "handed_off", "handedOff"),
    "service_summaries.contained_conversations": ("contained", "contained_count"),
    "service_summaries.leads_qualified": ("qualified_leads", "qualifiedLeads", "leads",
                                          "leads_count", "qualified"),
    "service_summaries.feedback_count": ("ratings", "rating_count", "ratingCount", "feedback"),
    "service_summaries.avg_rating": ("average_rating", "averageRating", "mean_rating", "rating"),
    "service_summaries.user_messages": ("user_message_count", "userMessageCount",
                                        "inbound_messages", "messages_in", "user_turns"),
    "service_summaries.assistant_responses": ("responses", "assistant_message_count",
                                              "assistantMessageCount", "bot_responses",
                                              "outbound_messages", "messages_out", "replies"),
    "service_summaries.escalations": ("escalation_count", "escalationCount", "handoffs",
                                      "handoff_count"),
    "service_summaries.guardrail_triggers": ("guardrail_count", "guardrailCount", "flags",
                                             "flagged"),
}
# fmt: on


_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
#: Name parts too common to tie a key to a column.
_GENERIC = frozenset({"id", "at", "is", "was", "the", "of", "count", "ms", "s"})


def _tokens(name: str) -> set[str]:
    """Lower-case words of a key or column name (camelCase, snake_case, dotted)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return {w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w} - _GENERIC


def _related(key: str, path: str) -> bool:
    """Whether a record's key looks like it could be the column's field (a candidate)."""
    column = key.split(".", 1)[1]
    names = [column, *SYNONYMS.get(key, ())]
    words = set().union(*(_tokens(n) for n in names))
    if _tokens(path) & words:
        return True
    last = path.rsplit(".", 1)[-1].lower()
    return any(difflib.SequenceMatcher(None, last, n.lower()).ratio() >= 0.75 for n in names)


def _type_fits(col: Column, value: Any) -> bool:
    kind = col.type.split()[0]
    if kind == "TIMESTAMPTZ":
        return parse_timestamp(value) is not None
    if kind == "DATE":
        return isinstance(value, str) and _DAY.match(value) is not None
    if kind == "BOOLEAN":
        return isinstance(value, bool)
    if kind in ("INTEGER", "BIGINT"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "DOUBLE":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "VARCHAR[]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "JSON":
        return isinstance(value, dict | list)
    return isinstance(value, str | int) and not isinstance(value, bool)


def fits(col: Column, value: Any) -> bool:
    """Whether a record's value can fill the column (None never does)."""
    return value is not None and _type_fits(col, value)


_ABSENT = object()


def _at(record: Any, path: str) -> Any:
    """The value at a dotted path; ``None`` when a step on the way is null; absent: _ABSENT."""
    value = record
    for step in path.split("."):
        if value is None:
            return None
        if not isinstance(value, Mapping) or step not in value:
            return _ABSENT
        value = value[step]
    return value


def presence(records: Iterable[Any], path: str) -> tuple[int, int]:
    """In how many records the path is written (null included), and has a non-null value."""
    written = filled = 0
    for record in records:
        value = _at(record, path)
        if value is not _ABSENT:
            written += 1
            filled += value is not None
    return written, filled


def paths_of(records: Iterable[Any], depth: int = 2) -> dict[str, Any]:
    """Every dotted path (objects opened ``depth`` levels deep) and one non-null value of it."""
    found: dict[str, Any] = {}

    def walk(value: Any, prefix: str, level: int) -> None:
        for key, item in value.items():
            path = f"{prefix}{key}"
            if item is not None or path not in found:
                found[path] = item if found.get(path) is None else found[path]
            if isinstance(item, Mapping) and level < depth:
                walk(item, f"{path}.", level + 1)

    for record in records:
        if isinstance(record, Mapping):
            walk(record, "", 1)
    return found


@dataclass(frozen=True)
class FieldFinding:
    """Where a typed column's values come from, and how many sampled records had one."""

    key: str  # table.column
    path: str | None  # None: found nowhere; "": configured as absent
    origin: str  # configured, default, detected, missing
    sampled: int
    filled: int
    #: Keys of the sampled records no column reads whose values could fill this one.
    candidates: tuple[str, ...] = ()

    @property
    def share(self) -> float:
        return self.filled / self.sampled if self.sampled else 0.0


def find_fields(
    table: str,
    records: list[Any],
    configured: Mapping[str, str],
    *,
    keys: Iterable[str] = (),
) -> dict[str, FieldFinding]:
    """Each sourced column of ``table``: its path in ``records`` and its fill share.

    ``keys`` are paths the stream already uses otherwise (its id and timestamps),
    so they are not offered again. A column no record writes and no usual name
    fits is ``missing`` with its candidates.
    """
    columns = [c for c in FIELD_TABLES[table].columns if c.source is not None]
    seen = paths_of(records, depth=3)
    aliases = _aliases(records)
    taken = set(keys)
    for col in columns:  # the sandbox's names and configured paths are spoken for first
        key = field_key(table, col.name)
        taken.add(configured.get(key) or source_path(col.source) or "")
    out: dict[str, FieldFinding] = {}
    for col in columns:
        key = field_key(table, col.name)
        default = source_path(col.source) or ""
        if key in configured:
            path = configured[key]
            written, filled = presence(records, path) if path else (0, 0)
            out[key] = FieldFinding(key, path, "configured", len(records), filled)
            continue
        written, filled = presence(records, default)
        if written:
            out[key] = FieldFinding(key, default, "default", len(records), filled)
            continue
        names = (default, *SYNONYMS.get(key, ()), col.name)
        wrapped = [a for n in names for a in (n, *aliases.get(n, ())) if a != default]
        chosen = _first_fitting(col, records, wrapped, taken)
        if chosen is not None:
            taken.add(chosen)
            _, filled = presence(records, chosen)
            out[key] = FieldFinding(key, chosen, "detected", len(records), filled)
            continue
        candidates = tuple(
            p
            for p, v in seen.items()
            if p not in taken and v is not None and _type_fits(col, v) and _related(key, p)
        )
        out[key] = FieldFinding(key, None, "missing", len(records), 0, candidates[:8])
    return out


#: Objects that only hold a record's fields (JSON:API's ``attributes`` and ``relationships``
#: with their ``data``, ``fields``, ``properties``): a field under them is found by its name.
_WRAPPERS = frozenset(
    {"attributes", "relationships", "data", "fields", "properties", "values", "_source", "node"}
)


def _aliases(records: Iterable[Any]) -> dict[str, tuple[str, ...]]:
    """Paths under wrapper objects, by the name they have without them:
    ``attributes.created`` as ``created``, ``relationships.lead.data.id`` as ``lead.id``."""
    out: dict[str, list[str]] = {}
    for path in paths_of(records, depth=4):
        short = ".".join(p for p in path.split(".") if p not in _WRAPPERS)
        if short and short != path:
            out.setdefault(short, []).append(path)
    return {k: tuple(v) for k, v in out.items()}


def _first_fitting(
    col: Column, records: list[Any], names: Iterable[str], taken: set[str]
) -> str | None:
    """The first usual name that most of the records writing it fill with a fitting value."""
    for name in names:
        if name in taken:
            continue
        values = [v for r in records if (v := _at(r, name)) is not _ABSENT and v is not None]
        if values and 2 * sum(_type_fits(col, v) for v in values) > len(values):
            return name
    return None
