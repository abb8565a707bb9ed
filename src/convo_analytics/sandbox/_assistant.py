"""The live assistant: answers user messages from the workspace's knowledge, as the service would.

Every fact goes through the same Activity operations as the generated
history (guardrails on the user's text, the reply with its trace, lead
scoring, escalations, completion, feedback), so a live conversation shows in
lists, details, the summary and the events exactly like a generated one.

How it decides (decision D-LIVE-ASSISTANT): BM25 retrieval over the
knowledge (Snowball stems, stop words left out); confidence from how much of
the question the best passage covers, its margin over the next, and the
question's words the knowledge never uses;
a request for a person, or two low-confidence answers in a row, escalates;
buying signals and contact details raise the lead score (qualifying at the
Activity's threshold); a live conversation quiet for its channel's
inactivity window completes, resolved when its last answer was confident,
abandoned otherwise.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from convo_analytics.sandbox._activity import ConversationClosed
from convo_analytics.sandbox._generate import INACTIVITY_BY_CHANNEL, MINUTE_MS
from convo_analytics.sandbox._guardrails import _EMAIL, _PHONE
from convo_analytics.sandbox._knowledge import Hit, KnowledgeBase
from convo_analytics.sandbox._model import Conversation, Event
from convo_analytics.sandbox._workspace import Workspace

LOW_CONFIDENCE = 0.35
ESCALATE_AFTER_LOW = 2
_HUMAN = re.compile(
    r"\b(human|real person|a person|agent|representative|operator|someone real|"
    r"talk to someone|speak to someone|mitarbeiter|un humain|una persona)\b",
    re.I,
)
#: Buying signals and the points each adds to the lead score.
BUYING = {"buy": 25, "purchase": 25, "quote": 20, "demo": 20, "subscribe": 20, "order": 15,
          "pricing": 15, "price": 15, "license": 15, "enterprise": 15, "plan": 10, "trial": 10,
          "contract": 10, "upgrade": 10, "cost": 10}  # fmt: skip
CONTACT_POINTS = 30
#: Intents recognised from words in the user's text, first match wins.
INTENTS = (
    ("demo_request", ("demo", "walkthrough")),
    ("purchase", ("buy", "purchase", "order", "subscribe", "quote")),
    ("pricing", ("price", "pricing", "cost", "plan", "plans")),
    ("billing", ("invoice", "billing", "charge", "refund")),
    ("cancellation", ("cancel", "unsubscribe")),
    ("complaint", ("complaint", "terrible", "angry", "worst")),
    ("support", ("error", "broken", "help", "issue", "problem", "reset")),
)
FALLBACK = "I could not find that in our knowledge base. Could you rephrase, or ask for a person?"
HANDOFF = "I am connecting you with a person from our team; they will reply here shortly."
QUALIFIED = "Thank you! Someone from our sales team will contact you shortly."


def confidence_of(hits: list[Hit]) -> float:
    """0-1 from the ranking (decision D-LIVE-ASSISTANT): how much of what the knowledge
    knows of the question the best passage covers (by term weight), how clearly it beats
    the next passage, less for question words the knowledge never uses at all.

    A clear best match earns a confident answer: a question whose every known word is in
    one passage, well ahead of the rest, scores above 0.9 even when it is phrased with
    words no document uses ("How long do refunds take?" over a refunds policy).
    """
    if not hits:
        return 0.05
    best = hits[0]
    margin = (best.score - hits[1].score) / best.score if len(hits) > 1 else 1.0
    value = 0.1 + 0.85 * best.coverage * (1 - 0.6 * best.unknown) * (0.7 + 0.3 * margin)
    return round(min(0.99, max(0.01, value)), 4)


def _intent(text: str) -> str | None:
    words = set(re.findall(r"\w+", text.casefold()))
    return next((name for name, keys in INTENTS if words & set(keys)), None)


@dataclass(slots=True)
class LiveAssistant:
    """The live side of one sandbox: knowledge per workspace, live conversations to sweep."""

    inactivity_ms: int | None = None
    knowledge: dict[str, KnowledgeBase] = field(default_factory=dict)
    live: dict[str, set[str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def kb(self, ws: Workspace) -> KnowledgeBase:
        with self._lock:
            return self.knowledge.setdefault(ws.id, KnowledgeBase())

    def open(
        self, ws: Workspace, *, external_user_id: str, channel: str, metadata: dict[str, Any],
        locale: str | None, now: int,
    ) -> Conversation:  # fmt: skip
        conv, events = ws.activity.open(
            workspace_id=ws.id, external_user_id=external_user_id, channel=channel,
            locale=locale, metadata=metadata, at=now,
        )  # fmt: skip
        ws.add(conv, events)
        with self._lock:
            self.live.setdefault(ws.id, set()).add(conv.id)
        return conv

    def message(
        self, ws: Workspace, conv: Conversation, *, text: str, channel: str, locale: str, now: int
    ) -> dict[str, Any]:
        """Record the user's message and answer it (raises ConversationClosed when it ended)."""
        started = time.perf_counter()
        hits = self.kb(ws).search(text)
        result: dict[str, Any] = {}

        def exchange(c: Conversation) -> list[Event]:
            act = ws.activity
            # replies are stamped with their latency, so keep the transcript in time order
            at = max(now, c.updated_at + 1)
            user, events = act.user_message(c, text, at, channel=channel, locale=locale)
            c.intent = _intent(text) or c.intent or "other"
            events += self._score_lead(ws, c, text, at)
            confidence = confidence_of(hits)
            tier = "fast" if len(text) < 80 and confidence >= 0.5 else "standard"
            latency = int((time.perf_counter() - started) * 1000) + (250 if tier == "fast" else 800)
            top = hits[0] if hits else None
            source = self.kb(ws).sources.get(top.passage.source_id) if top else None
            if _HUMAN.search(text):
                answer = HANDOFF
            elif any(e.type == "lead.qualified" for e in events):
                answer = QUALIFIED
            elif top and confidence >= LOW_CONFIDENCE:
                answer = (
                    f"{top.passage.text}\n\n(Source: {source.name if source else 'knowledge base'})"
                )
            else:
                answer = FALLBACK
            reply, replied = act.assistant_reply(
                c, answer, at + latency, latency_ms=latency, model_tier=tier,
                confidence=confidence, knowledge_source=source.name if source else None,
                policy_flags=act.pending_flags(c),
            )  # fmt: skip
            events += replied
            events += self._maybe_escalate(ws, c, text, at + latency)
            result.update(user=user.to_json(), reply=reply.to_json(), tier=tier,
                          latency=latency, confidence=reply.confidence,
                          source=source.name if source else None,
                          flags=list(reply.policy_flags),
                          retrieval=[{"sourceId": h.passage.source_id,
                                      "documentId": h.passage.document_id,
                                      "score": round(h.score, 4)} for h in hits])  # fmt: skip
            return events

        events = ws.change(conv, exchange)
        result["events"] = [e.type for e in events]
        return result

    def _score_lead(self, ws: Workspace, conv: Conversation, text: str, now: int) -> list[Event]:
        words = re.findall(r"\w+", text.casefold())
        points = sum(BUYING.get(w, 0) for w in set(words))
        contact: dict[str, str | None] = {}
        if m := _EMAIL.search(text):
            contact["email"] = m.group()
        if m := _PHONE.search(text):
            contact["phone"] = m.group()
        lead = conv.lead
        had_contact = bool(lead and (lead.email or lead.phone))
        if contact and not had_contact:
            points += CONTACT_POINTS
        if not points and lead is None:
            return []
        base = lead.score if lead else 0.0
        return ws.activity.score_lead(
            conv, now, intent=conv.intent or "other", score=base + points, contact=contact,
            source=conv.metadata.get("source") if isinstance(conv.metadata.get("source"), str)
            else None,
        )  # fmt: skip

    def _maybe_escalate(self, ws: Workspace, conv: Conversation, text: str, at: int) -> list[Event]:
        recent = [e for e in conv.escalations if at - e.at < 10 * MINUTE_MS]
        if recent:
            return []
        replies = [m for m in conv.messages if m.role == "assistant"][-ESCALATE_AFTER_LOW:]
        if _HUMAN.search(text):
            reason, destination = "user_requested", "helpdesk"
        elif len(replies) == ESCALATE_AFTER_LOW and all(
            (m.confidence or 0) < LOW_CONFIDENCE for m in replies
        ):
            reason, destination = "low_confidence", "live-chat"
        else:
            return []
        _, events = ws.activity.escalate(
            conv, at, reason_code=reason, destination=destination, owner="support-tier1",
            priority="normal", origin="automatic",
        )  # fmt: skip
        return events

    def sweep(self, ws: Workspace, now: int) -> list[str]:
        """Complete live conversations quiet for longer than their channel's inactivity window."""
        with self._lock:
            ids = list(self.live.get(ws.id, ()))
        done = []
        for conv_id in ids:
            conv = ws.get(conv_id)
            if conv is None or conv.status != "open":
                with self._lock:
                    self.live.get(ws.id, set()).discard(conv_id)
                continue
            window = self.inactivity_ms or INACTIVITY_BY_CHANNEL.get(conv.channel, 30 * MINUTE_MS)
            if now - conv.updated_at < window:
                continue
            last = conv.messages[-1] if conv.messages else None
            good = last is not None and (
                last.role == "agent"
                or (last.role == "assistant" and (last.confidence or 0) >= LOW_CONFIDENCE)
            )
            outcome = "resolved" if good or conv.escalations else "abandoned"
            with contextlib.suppress(ConversationClosed):  # it ended meanwhile
                ws.change(conv, partial(_complete, ws, at=now, outcome=outcome))
            done.append(conv_id)
        return done


def _complete(ws: Workspace, conv: Conversation, *, at: int, outcome: str) -> list[Event]:
    return ws.activity.complete(conv, at, outcome)


__all__ = ["LiveAssistant", "confidence_of"]
