"""The sandbox's domain model: one workspace's conversations and what happened in them.

Everything the sandbox serves is derived from these objects: list pages,
conversation details, leads, the analytics summary and the webhook events.
Both the history generator and the live endpoints change a workspace only
through the methods here, so every view of a fact agrees with every other.

Times are integer milliseconds since the Unix epoch (UTC); they are formatted
as ISO 8601 only when a record is serialised.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from convo_analytics.sandbox._ids import event_key

#: A conversation is completed after this long without activity.
INACTIVITY_MS = 30 * 60 * 1000
#: Feedback ratings at or above this count as positive (CSAT).
POSITIVE_RATING = 4


def iso(ms: int) -> str:
    """Format epoch milliseconds as ISO 8601 UTC with millisecond precision."""
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_iso_ms(text: str) -> int:
    """Parse ISO 8601 (any offset, or a bare date meaning UTC midnight) to epoch ms."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    dt = datetime.fromisoformat(value)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


@dataclass(slots=True)
class Message:
    id: str
    role: str
    text: str
    at: int
    channel: str
    locale: str | None
    latency_ms: int | None = None
    model_tier: str | None = None
    confidence: float | None = None
    policy_flags: tuple[str, ...] = ()
    knowledge_source: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "role": self.role,
            "text": self.text,
            "createdAt": iso(self.at),
            "channel": self.channel,
            "locale": self.locale,
            "latencyMs": self.latency_ms,
            "modelTier": self.model_tier,
            "confidence": self.confidence,
            "policyFlags": list(self.policy_flags),
            "knowledgeSource": self.knowledge_source,
        }


@dataclass(slots=True)
class Escalation:
    id: str
    conversation_id: str
    at: int
    reason_code: str
    destination: str
    owner: str | None
    priority: str
    origin: str
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "conversationId": self.conversation_id,
            "createdAt": iso(self.at),
            "reasonCode": self.reason_code,
            "destination": self.destination,
            "owner": self.owner,
            "priority": self.priority,
            "origin": self.origin,
            "note": self.note,
        }


@dataclass(slots=True)
class GuardrailEvent:
    id: str
    conversation_id: str
    message_id: str
    at: int
    flag: str
    rule: str
    category: str | None
    severity: str | None
    action: str
    excerpt: str

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "conversationId": self.conversation_id,
            "messageId": self.message_id,
            "triggeredAt": iso(self.at),
            "flag": self.flag,
            "rule": self.rule,
            "category": self.category,
            "severity": self.severity,
            "action": self.action,
            "excerpt": self.excerpt,
        }


@dataclass(slots=True)
class Feedback:
    id: str
    conversation_id: str
    at: int
    rating: int
    comment: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "conversationId": self.conversation_id,
            "createdAt": iso(self.at),
            "rating": self.rating,
            "comment": self.comment,
        }


@dataclass(slots=True)
class Lead:
    id: str
    conversation_id: str
    workspace_id: str
    created_at: int
    updated_at: int
    score: float
    intent: str
    qualified_at: int | None = None
    email: str | None = None
    phone: str | None = None
    name: str | None = None
    company: str | None = None
    source: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: Score and contact details as they stood when the lead qualified: the
    #: lead.qualified event reports these, however the lead changes later.
    qualified_view: dict[str, Any] | None = None

    @property
    def status(self) -> str:
        return "scored" if self.qualified_at is None else "qualified"

    @property
    def contact_fields(self) -> list[str]:
        named = (("email", self.email), ("phone", self.phone), ("name", self.name))
        return [key for key, value in (*named, ("company", self.company)) if value]

    def url(self, base: str) -> str:
        return f"{base}/workspaces/{self.workspace_id}/conversations/{self.conversation_id}"

    def to_json(self, app_base: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "conversationId": self.conversation_id,
            "workspaceId": self.workspace_id,
            "createdAt": iso(self.created_at),
            "updatedAt": iso(self.updated_at),
            "status": self.status,
            "score": self.score,
            "intent": self.intent,
            "qualifiedAt": iso(self.qualified_at) if self.qualified_at is not None else None,
            "email": self.email,
            "phone": self.phone,
            "name": self.name,
            "company": self.company,
            "contactFields": self.contact_fields,
            "source": self.source,
            "metadata": self.metadata,
            "conversationUrl": self.url(app_base),
        }


@dataclass(slots=True)
class Conversation:
    id: str
    workspace_id: str
    external_user_id: str
    channel: str
    locale: str | None
    metadata: dict[str, Any]
    created_at: int
    updated_at: int
    status: str = "open"
    ended_at: int | None = None
    messages: list[Message] = field(default_factory=list)
    escalations: list[Escalation] = field(default_factory=list)
    guardrail_events: list[GuardrailEvent] = field(default_factory=list)
    feedback: Feedback | None = None
    lead: Lead | None = None
    #: What the user wants, as the assistant classified it (None until classified).
    intent: str | None = None
    #: What the user really wants (a name of _intents.LATENT_INTENTS): the sandbox's
    #: ground truth for topic discovery, never serialised (D-SANDBOX-INTENTS); shown
    #: only by the admin route /_sandbox/workspaces/{id}/latent-intents. None for
    #: conversations opened through the live API.
    latent_intent: str | None = None

    def summary_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "workspaceId": self.workspace_id,
            "externalUserId": self.external_user_id,
            "channel": self.channel,
            "locale": self.locale,
            "intent": self.intent,
            "metadata": self.metadata,
            "status": self.status,
            "createdAt": iso(self.created_at),
            "updatedAt": iso(self.updated_at),
            "endedAt": iso(self.ended_at) if self.ended_at is not None else None,
            "messageCount": len(self.messages),
            "escalated": bool(self.escalations),
            "escalationCount": len(self.escalations),
            "guardrailTriggerCount": len(self.guardrail_events),
            "leadId": self.lead.id if self.lead else None,
            "feedbackRating": self.feedback.rating if self.feedback else None,
        }

    def detail_json(self, app_base: str) -> dict[str, Any]:
        body = self.summary_json()
        body["messages"] = [m.to_json() for m in self.messages]
        body["escalations"] = [e.to_json() for e in self.escalations]
        body["guardrailEvents"] = [g.to_json() for g in self.guardrail_events]
        body["lead"] = self.lead.to_json(app_base) if self.lead else None
        body["feedback"] = self.feedback.to_json() if self.feedback else None
        return body


@dataclass(slots=True, frozen=True)
class Event:
    """A domain fact as the webhook catalogue names it; enveloped and signed on delivery."""

    key: str
    type: str
    at: int
    workspace_id: str
    conversation_id: str
    data: dict[str, Any]

    def envelope(self) -> dict[str, Any]:
        """The set-B envelope without its signature field."""
        return {
            "event": self.type,
            "timestamp": iso(self.at),
            "workspaceId": self.workspace_id,
            "conversationId": self.conversation_id,
            "data": self.data,
        }


EventSink = Callable[[list[Event]], None]


@dataclass(slots=True)
class EventFactory:
    """Builds the events of each domain fact, carrying both sets' field names.

    Set A names key fields (leadScore, contactFields, transcriptUrl, reasonCode)
    and set B names others for the same facts (qualificationScore, email,
    conversationUrl); ``fields`` chooses which reading the sandbox sends:
    "both" (default), "a" or "b" (decision D-EVENT-FIELDS).
    """

    app_base: str
    fields: str = "both"

    def _pick(self, common: dict[str, Any], a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        data = dict(common)
        if self.fields in ("a", "both"):
            data.update(a)
        if self.fields in ("b", "both"):
            data.update(b)
        return data

    def conversation_created(self, c: Conversation) -> Event:
        data = {
            "conversationId": c.id,
            "tenantId": c.workspace_id,
            "channel": c.channel,
            "startedAt": iso(c.created_at),
            "externalUserId": c.external_user_id,
            "locale": c.locale,
            "metadata": c.metadata,
        }
        return self._event("conversation.created", c.created_at, c, c.id, data)

    def message_responded(self, c: Conversation, m: Message) -> Event:
        data = {
            "messageId": m.id,
            "latencyMs": m.latency_ms,
            "modelTier": m.model_tier,
            "confidence": m.confidence,
            "policyFlags": list(m.policy_flags),
            "channel": m.channel,
            "locale": m.locale,
            "knowledgeSource": m.knowledge_source,
        }
        return self._event("message.responded", m.at, c, m.id, data)

    def guardrail_triggered(self, c: Conversation, g: GuardrailEvent) -> Event:
        data = {
            "guardrailEventId": g.id,
            "messageId": g.message_id,
            "flag": g.flag,
            "rule": g.rule,
            "category": g.category,
            "severity": g.severity,
            "action": g.action,
            "excerpt": g.excerpt,
        }
        return self._event("guardrail.triggered", g.at, c, g.id, data)

    def lead_qualified(self, c: Conversation, lead: Lead) -> Event:
        assert lead.qualified_at is not None and lead.qualified_view is not None
        url = lead.url(self.app_base)
        score = lead.qualified_view["score"]
        contact = lead.qualified_view["contact"]
        common = {"leadId": lead.id, "intent": lead.qualified_view["intent"]}
        a = {
            "leadScore": score,
            "contactFields": contact,
            "transcriptUrl": url + "/transcript",
        }
        b = {
            "email": contact.get("email"),
            "qualificationScore": score,
            "metadata": {**lead.metadata, "source": lead.source},
            "conversationUrl": url,
        }
        return self._event(
            "lead.qualified", lead.qualified_at, c, lead.id, self._pick(common, a, b)
        )

    def escalated(self, c: Conversation, e: Escalation) -> list[Event]:
        """An escalation is announced twice: as the handoff record and as the state change."""
        data = {
            "escalationId": e.id,
            "reasonCode": e.reason_code,
            "destination": e.destination,
            "owner": e.owner,
            "priority": e.priority,
            "origin": e.origin,
        }
        changed = {"escalationId": e.id, "reason": e.reason_code, "destination": e.destination}
        return [
            self._event("escalation.created", e.at, c, e.id, data),
            self._event("conversation.escalated", e.at, c, e.id, changed),
        ]

    def feedback_given(self, c: Conversation, f: Feedback) -> Event:
        data = {"feedbackId": f.id, "rating": f.rating, "comment": f.comment}
        return self._event("conversation.feedback", f.at, c, f.id, data)

    def completed(self, c: Conversation) -> Event:
        assert c.ended_at is not None
        data = {
            "outcome": c.status,
            "endedAt": iso(c.ended_at),
            "messageCount": len(c.messages),
            "escalated": bool(c.escalations),
        }
        return self._event("conversation.completed", c.ended_at, c, c.id, data)

    def _event(
        self, kind: str, at: int, c: Conversation, subject: str, data: dict[str, Any]
    ) -> Event:
        return Event(event_key(kind, subject), kind, at, c.workspace_id, c.id, data)

    def history(self, c: Conversation) -> list[Event]:
        """Every event a conversation has produced so far, in time order."""
        events = [self.conversation_created(c)]
        events += [self.message_responded(c, m) for m in c.messages if m.role == "assistant"]
        events += [self.guardrail_triggered(c, g) for g in c.guardrail_events]
        for e in c.escalations:
            events += self.escalated(c, e)
        if c.lead is not None and c.lead.qualified_at is not None:
            events.append(self.lead_qualified(c, c.lead))
        if c.feedback is not None:
            events.append(self.feedback_given(c, c.feedback))
        if c.ended_at is not None:
            events.append(self.completed(c))
        events.sort(key=lambda ev: ev.at)
        return events
