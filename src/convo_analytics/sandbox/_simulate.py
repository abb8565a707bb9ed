"""Ongoing activity on demand: new conversations and progress in open ones.

Tests and demos use it to make records change while a client pages or syncs;
it goes through the same operations (and emits the same events) as the history.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import partial

from convo_analytics.sandbox import _corpus as corpus
from convo_analytics.sandbox import _intents as intents
from convo_analytics.sandbox._generate import MINUTE_MS, _Course
from convo_analytics.sandbox._model import Conversation, Event
from convo_analytics.sandbox._workspace import Workspace


@dataclass(frozen=True, slots=True)
class SimulationResult:
    created: list[str]
    changed: list[str]
    events: int


def simulate(
    ws: Workspace, now_ms: int, new: int, progress: int, rng: random.Random
) -> SimulationResult:
    created: list[str] = []
    changed: list[str] = []
    events = 0
    course = _Course(ws.activity, rng, now_ms)
    for _ in range(new):
        start = now_ms - int(rng.uniform(0.5, 10) * MINUTE_MS)
        conv = course.play(ws.id, start, f"u-live-{rng.randrange(10_000)}")
        history = ws.events.history(conv)
        ws.add(conv, history)
        created.append(conv.id)
        events += len(history)
    with ws.lock:
        open_ids = [c.id for c in ws.conversations.records.values() if c.status == "open"]
    for conv_id in rng.sample(open_ids, min(progress, len(open_ids))):
        current = ws.get(conv_id)
        if current is None or current.status != "open":
            continue
        at = max(now_ms, current.updated_at + 1)
        emitted = ws.change(current, partial(_advance, ws, at=at, rng=rng))
        changed.append(conv_id)
        events += len(emitted)
    return SimulationResult(created, changed, events)


def _advance(ws: Workspace, conv: Conversation, *, at: int, rng: random.Random) -> list[Event]:
    act = ws.activity
    if rng.random() < 0.3 and conv.messages:
        outcome = "resolved" if rng.random() < 0.8 else "abandoned"
        return act.complete(conv, at, outcome)
    _, events = act.user_message(conv, rng.choice(corpus.FOLLOW_UPS), at)
    latency = int(rng.lognormvariate(6.5, 0.5))
    latent = intents.BY_NAME.get(conv.latent_intent or "")
    source: str | None
    if latent is None:  # opened through the live API: no ground truth to answer from
        confidence = rng.betavariate(6, 2)
        answer, source = rng.choice(corpus.ANSWERS), rng.choice(corpus.KNOWLEDGE_SOURCES)
    else:  # the answer fits what the user wants; a gap stays a gap
        confidence = intents.confidence(latent, rng, (6, 2))
        answer, source = intents.reply(latent, confidence, rng)
    _, replied = act.assistant_reply(
        conv,
        answer,
        at + latency,
        latency_ms=latency,
        model_tier=rng.choice(("fast", "standard")),
        confidence=confidence,
        knowledge_source=source,
        policy_flags=act.pending_flags(conv),
    )
    return events + replied
