"""What can happen in a conversation, as operations that record facts and return events.

The history generator drives these operations with simulated choices; the live
endpoints drive them with real requests. Either way a fact enters the model
here, together with the events it announces, so a generated conversation and
a live one are indistinguishable downstream.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from convo_analytics.sandbox._guardrails import DEFAULT_BLOCKED_TERMS, detect, excerpt
from convo_analytics.sandbox._ids import new_id
from convo_analytics.sandbox._model import (
    Conversation,
    Escalation,
    Event,
    EventFactory,
    Feedback,
    GuardrailEvent,
    Lead,
    Message,
)

DEFAULT_LEAD_THRESHOLD = 70.0


class ConversationClosed(Exception):
    """The conversation has completed; the sandbox does not reopen conversations."""


@dataclass(slots=True)
class Activity:
    """Applies facts to conversations of one workspace."""

    events: EventFactory
    rng: random.Random
    lead_threshold: float = DEFAULT_LEAD_THRESHOLD
    blocked_terms: tuple[str, ...] = DEFAULT_BLOCKED_TERMS

    def open(
        self,
        *,
        workspace_id: str,
        external_user_id: str,
        channel: str,
        locale: str | None,
        metadata: dict[str, Any],
        at: int,
    ) -> tuple[Conversation, list[Event]]:
        conv = Conversation(
            id=new_id("conv", self.rng),
            workspace_id=workspace_id,
            external_user_id=external_user_id,
            channel=channel,
            locale=locale,
            metadata=metadata,
            created_at=at,
            updated_at=at,
        )
        return conv, [self.events.conversation_created(conv)]

    def user_message(
        self,
        conv: Conversation,
        text: str,
        at: int,
        *,
        channel: str | None = None,
        locale: str | None = None,
    ) -> tuple[Message, list[Event]]:
        """Record a user message and the guardrails it trips."""
        self._require_open(conv)
        msg = Message(
            id=new_id("msg", self.rng),
            role="user",
            text=text,
            at=at,
            channel=channel or conv.channel,
            locale=locale if locale is not None else conv.locale,
        )
        conv.messages.append(msg)
        events = []
        for finding in detect(text, self.blocked_terms):
            guard = GuardrailEvent(
                id=new_id("grd", self.rng),
                conversation_id=conv.id,
                message_id=msg.id,
                at=at,
                flag=finding.flag,
                rule=finding.rule,
                category=finding.category,
                severity=finding.severity,
                action=finding.action,
                excerpt=excerpt(text, finding.span),
            )
            conv.guardrail_events.append(guard)
            events.append(self.events.guardrail_triggered(conv, guard))
        self._touch(conv, at)
        return msg, events

    def pending_flags(self, conv: Conversation) -> tuple[str, ...]:
        """Flags raised since the assistant last spoke: they go on its next response."""
        flags: list[str] = []
        last_reply = max((m.at for m in conv.messages if m.role == "assistant"), default=-1)
        for guard in conv.guardrail_events:
            if guard.at > last_reply and guard.flag not in flags:
                flags.append(guard.flag)
        return tuple(flags)

    def assistant_reply(
        self,
        conv: Conversation,
        text: str,
        at: int,
        *,
        latency_ms: int,
        model_tier: str,
        confidence: float,
        knowledge_source: str | None,
        policy_flags: tuple[str, ...] = (),
    ) -> tuple[Message, list[Event]]:
        self._require_open(conv)
        last_user = next((m for m in reversed(conv.messages) if m.role == "user"), None)
        msg = Message(
            id=new_id("msg", self.rng),
            role="assistant",
            text=text,
            at=at,
            channel=last_user.channel if last_user else conv.channel,
            locale=last_user.locale if last_user else conv.locale,
            latency_ms=latency_ms,
            model_tier=model_tier,
            confidence=round(confidence, 4),
            policy_flags=policy_flags,
            knowledge_source=knowledge_source,
        )
        conv.messages.append(msg)
        self._touch(conv, at)
        return msg, [self.events.message_responded(conv, msg)]

    def agent_message(self, conv: Conversation, text: str, at: int) -> Message:
        """A human agent writing after a handoff: part of the transcript, no event."""
        self._require_open(conv)
        msg = Message(new_id("msg", self.rng), "agent", text, at, conv.channel, conv.locale)
        conv.messages.append(msg)
        self._touch(conv, at)
        return msg

    def score_lead(
        self,
        conv: Conversation,
        at: int,
        *,
        intent: str,
        score: float,
        contact: dict[str, str | None],
        source: str | None,
    ) -> list[Event]:
        """Set the conversation's lead score; crossing the threshold qualifies it once."""
        lead = conv.lead
        if lead is None:
            lead = Lead(
                id=new_id("lead", self.rng),
                conversation_id=conv.id,
                workspace_id=conv.workspace_id,
                created_at=at,
                updated_at=at,
                score=0.0,
                intent=intent,
                source=source,
                metadata={"channel": conv.channel, "locale": conv.locale},
            )
            conv.lead = lead
        lead.score = round(min(100.0, max(0.0, score)), 1)
        lead.intent = intent
        lead.updated_at = at
        for key in ("email", "phone", "name", "company"):
            value = contact.get(key)
            if value:
                setattr(lead, key, value)
        self._touch(conv, at)
        if lead.qualified_at is None and lead.score >= self.lead_threshold:
            lead.qualified_at = at
            lead.qualified_view = {
                "score": lead.score,
                "intent": lead.intent,
                "contact": {k: getattr(lead, k) for k in lead.contact_fields},
            }
            return [self.events.lead_qualified(conv, lead)]
        return []

    def escalate(
        self,
        conv: Conversation,
        at: int,
        *,
        reason_code: str,
        destination: str,
        owner: str | None,
        priority: str,
        origin: str,
        note: str | None = None,
    ) -> tuple[Escalation, list[Event]]:
        self._require_open(conv)
        esc = Escalation(
            new_id("esc", self.rng),
            conv.id,
            at,
            reason_code,
            destination,
            owner,
            priority,
            origin,
            note,
        )
        conv.escalations.append(esc)
        self._touch(conv, at)
        return esc, self.events.escalated(conv, esc)

    def feedback(
        self, conv: Conversation, at: int, rating: int, comment: str | None
    ) -> list[Event]:
        if conv.feedback is not None:
            raise ValueError("feedback was already given for this conversation")
        conv.feedback = Feedback(new_id("fb", self.rng), conv.id, at, rating, comment)
        self._touch(conv, at)
        return [self.events.feedback_given(conv, conv.feedback)]

    def complete(self, conv: Conversation, at: int, outcome: str) -> list[Event]:
        self._require_open(conv)
        if outcome not in ("resolved", "abandoned"):
            raise ValueError(f"unknown outcome {outcome!r}")
        conv.status = outcome
        conv.ended_at = at
        self._touch(conv, at)
        return [self.events.completed(conv)]

    @staticmethod
    def _require_open(conv: Conversation) -> None:
        if conv.status != "open":
            raise ConversationClosed(conv.id)

    @staticmethod
    def _touch(conv: Conversation, at: int) -> None:
        conv.updated_at = max(conv.updated_at, at)
