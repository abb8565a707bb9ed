"""Synthetic workspace history: reproducible, realistic and awkward.

A history is a function of (seed, workspace, conversations, days, until): the
same inputs give byte-identical conversations. Each conversation is played
forward through :class:`Activity`, the same operations the live endpoints use,
and cut off at ``until`` so that recent conversations are still open.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from convo_analytics.sandbox import _corpus as corpus
from convo_analytics.sandbox import _intents as intents
from convo_analytics.sandbox._activity import DEFAULT_LEAD_THRESHOLD, Activity
from convo_analytics.sandbox._intents import LatentIntent
from convo_analytics.sandbox._model import Conversation, EventFactory

DAY_MS = 86_400_000
MINUTE_MS = 60_000

T = TypeVar("T")

CHANNELS = (("web", 55), ("whatsapp", 18), ("messenger", 10), ("sms", 9), ("email", 8))
#: How long a channel waits for the user before completing a conversation.
INACTIVITY_BY_CHANNEL = {
    "web": 30 * MINUTE_MS,
    "messenger": 60 * MINUTE_MS,
    "whatsapp": DAY_MS,
    "sms": DAY_MS,
    "email": 3 * DAY_MS,
}
LOCALES = (
    ("en-US", 38),
    ("en-GB", 12),
    ("de-DE", 12),
    ("fr-FR", 8),
    ("es-ES", 7),
    ("pt-BR", 6),
    ("ja-JP", 5),
    ("nl-NL", 4),
    ("ar-SA", 2),
    ("en-IN", 4),
    (None, 2),
)
#: The coarse intents the service classifies conversations into, with their shares; each
#: conversation draws a latent intent of _intents.py, whose weights keep these shares.
INTENTS = (
    ("product_question", 22),
    ("support", 20),
    ("pricing", 14),
    ("billing", 9),
    ("demo_request", 7),
    ("purchase", 5),
    ("cancellation", 5),
    ("complaint", 7),
    ("partnership", 2),
    ("other", 9),
)
SOURCES = (
    ("help-center", 25),
    ("pricing-page", 15),
    ("homepage", 20),
    ("checkout", 6),
    ("mobile-app", 14),
    ("campaign-email", 8),
    ("partner-widget", 4),
    ("whatsapp-business", 8),
)
LEAD_BASE = {"purchase": 58, "demo_request": 48, "pricing": 34, "partnership": 44}
TIERS = {  # name: (weight, median latency ms, sigma)
    "fast": (55, 420.0, 0.45),
    "standard": (35, 1150.0, 0.5),
    "premium": (10, 2600.0, 0.55),
}
#: Confidence of answers to a covered latent intent, by its coarse intent (a gap's is
#: _intents.GAP_CONFIDENCE_BETA). A little surer than when every answer cited a random
#: source, so that the gaps do not move the workspace's overall resolution much.
CONFIDENCE_BETA = {
    "product_question": (8.0, 2.0),
    "support": (6.0, 2.2),
    "pricing": (7.0, 2.0),
    "billing": (6.0, 2.0),
    "complaint": (3.5, 3.0),
    "other": (3.5, 2.5),
}
HOUR_WEIGHT = (
    2,
    1,
    1,
    1,
    1,
    2,
    4,
    7,
    10,
    12,
    13,
    13,
    12,
    13,
    13,
    12,
    11,
    9,
    8,
    7,
    6,
    5,
    4,
    3,
)
WEEKDAY_WEIGHT = (10, 10, 10, 10, 9, 5, 4)  # Monday first
ESCALATION_ROUTES = {
    "user_requested": ("helpdesk", "support-tier1", "normal"),
    "low_confidence": ("live-chat", "support-tier1", "normal"),
    "policy_violation": ("helpdesk", "trust-and-safety", "high"),
    "sales_opportunity": ("crm", "sales-emea", "high"),
    "complaint": ("helpdesk", "support-tier2", "urgent"),
    "billing_dispute": ("email-queue", "billing", "normal"),
}


@dataclass(frozen=True, slots=True)
class Incident:
    """A fault injected into a history: on one UTC day, conversations of one channel and
    one coarse intent are escalated (each with probability ``share``), as when a broken
    integration sends every such customer to a human. What a monitor must find."""

    day_ms: int
    channel: str
    intent: str
    share: float = 1.0
    #: The workspace name it happens in (None: every workspace).
    workspace: str | None = None

    @classmethod
    def parse(cls, text: str) -> Incident:
        """``DAY,CHANNEL,INTENT[,SHARE[,WORKSPACE]]`` (DAY: YYYY-MM-DD, UTC); ValueError
        saying what is wrong."""
        from datetime import UTC, datetime

        parts = [p.strip() for p in text.split(",")]
        if not 3 <= len(parts) <= 5 or not all(parts[:3]):
            raise ValueError("expected DAY,CHANNEL,INTENT[,SHARE[,WORKSPACE]]")
        try:
            day = datetime.strptime(parts[0], "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError:
            raise ValueError(f"{parts[0]!r} is not a day (YYYY-MM-DD)") from None
        share = 1.0
        if len(parts) >= 4 and parts[3]:
            try:
                share = float(parts[3])
            except ValueError:
                share = -1.0
            if not 0.0 < share <= 1.0:
                raise ValueError(f"the share {parts[3]!r} is not a number in (0, 1]")
        workspace = parts[4] if len(parts) == 5 and parts[4] else None
        return cls(int(day.timestamp()) * 1000, parts[1], parts[2], share, workspace)

    def hits(self, start: int, channel: str, intent: str) -> bool:
        return (
            self.day_ms <= start < self.day_ms + DAY_MS
            and channel == self.channel
            and intent == self.intent
        )


@dataclass(frozen=True, slots=True)
class HistorySpec:
    workspace_id: str
    seed: int = 42
    conversations: int = 2000
    days: int = 30
    until_ms: int = 0
    lead_threshold: float = DEFAULT_LEAD_THRESHOLD
    incidents: tuple[Incident, ...] = ()


def _weighted(rng: random.Random, table: Sequence[tuple[T, int]]) -> T:
    total = sum(w for _, w in table)
    pick = rng.random() * total
    for value, weight in table:
        pick -= weight
        if pick < 0:
            return value
    return table[-1][0]


class _Course:
    """Plays one conversation forward; stops as soon as the next fact lies after ``until``."""

    def __init__(
        self,
        activity: Activity,
        rng: random.Random,
        until: int,
        incidents: tuple[Incident, ...] = (),
    ) -> None:
        self.act = activity
        self.rng = rng
        self.until = until
        self.incidents = incidents
        self.hit = False

    def play(self, workspace_id: str, start: int, user: str) -> Conversation:
        rng = self.rng
        channel = _weighted(rng, CHANNELS)
        locale = _weighted(rng, LOCALES)
        latent = _weighted(rng, intents.WEIGHTED)
        intent = latent.intent
        conv, _ = self.act.open(
            workspace_id=workspace_id,
            external_user_id=user,
            channel=channel,
            locale=locale,
            metadata=self._metadata(channel),
            at=start,
        )
        conv.intent = intent
        conv.latent_intent = latent.name
        self.conv = conv
        self.hit = any(
            i.hits(start, channel, intent)
            and random.Random(f"incident:{conv.id}").random() < i.share
            for i in self.incidents
        )
        self.t = start
        turns = 0 if rng.random() < 0.07 else min(12, 1 + int(rng.expovariate(0.45)))
        lang = (locale or "en")[:2]
        score = (
            float(LEAD_BASE.get(intent, 3)) if intent in LEAD_BASE or rng.random() < 0.05 else -1
        )
        low_streak = 0
        person = self._person()
        for turn in range(turns):
            if not self._advance(self._think_ms(channel, first=turn == 0)):
                return conv
            text, contact = self._user_text(lang, latent, turn, person, score >= 0)
            self.act.user_message(conv, text, self.t)
            flags = self.act.pending_flags(conv)
            tier = self._tier(intent)
            latency = self._latency(tier)
            if not self._advance(latency):
                return conv
            blocked = "prompt_injection" in flags
            conf = self._confidence(latent, blocked)
            low_streak = low_streak + 1 if conf < 0.45 else 0
            answer, source = self._answer(latent, conf, blocked)
            self.act.assistant_reply(
                conv,
                answer,
                self.t,
                latency_ms=latency,
                model_tier=tier,
                confidence=conf,
                knowledge_source=source,
                policy_flags=flags,
            )
            if score >= 0:
                score += rng.uniform(2, 14) + 14 * bool(contact.get("email"))
                score += 8 * bool(contact.get("phone"))
                self.act.score_lead(
                    conv,
                    self.t,
                    intent=intent,
                    score=score,
                    contact=contact,
                    source=conv.metadata.get("source"),
                )
            reason = self._escalation_reason(text, intent, low_streak, flags, score)
            if reason and len(conv.escalations) < 2:
                self._escalate(reason)
                if conv.escalations and rng.random() < 0.35:
                    break
            if rng.random() < 0.06:  # the user just leaves
                break
        self._finish(latent, turns)
        return conv

    def _advance(self, ms: int) -> bool:
        self.t += max(1, ms)
        return self.t <= self.until

    def _metadata(self, channel: str) -> dict[str, Any]:
        rng = self.rng
        meta: dict[str, Any] = {"source": _weighted(self.rng, SOURCES)}
        if rng.random() < 0.3:
            meta["utm_campaign"] = rng.choice(("black-friday", "q4-webinar", "retargeting", ""))
        if rng.random() < 0.25:
            meta["plan"] = rng.choice(("free", "starter", "pro", "enterprise"))
        if channel == "web" and rng.random() < 0.4:
            meta["page"] = {
                "path": rng.choice(("/pricing", "/docs/api", "/", "/checkout")),
                "referrer": rng.choice((None, "google", "newsletter")),
            }
        if rng.random() < 0.1:
            meta["appVersion"] = rng.choice(("3.2.1", "3.3.0-beta", 4))  # a retyped field
        return meta

    def _person(self) -> dict[str, str]:
        rng = self.rng
        first, last = rng.choice(corpus.FIRST_NAMES), rng.choice(corpus.LAST_NAMES)
        company, domain = rng.choice(corpus.COMPANIES)
        local = f"{first}.{last}".lower().replace("'", "").replace(" ", "")
        country, area = rng.choice((1, 44, 49, 33, 81)), rng.randint(200, 999)
        phone = f"+{country} {area} {rng.randint(1000000, 9999999)}"
        return {
            "name": f"{first} {last}",
            "company": company,
            "email": f"{local}@{domain}",
            "phone": phone,
        }

    def _think_ms(self, channel: str, first: bool) -> int:
        if channel in ("email", "whatsapp", "sms"):
            median = 25 * MINUTE_MS if channel != "email" else 4 * 60 * MINUTE_MS
        else:
            median = 12_000 if first else 35_000
        return int(median * math.exp(self.rng.gauss(0, 0.9)))

    def _user_text(
        self, lang: str, latent: LatentIntent, turn: int, person: dict[str, str], is_lead: bool
    ) -> tuple[str, dict[str, str | None]]:
        rng = self.rng
        intent = latent.intent
        contact: dict[str, str | None] = {}
        if turn == 0:  # a phrasing of what the user wants, now and then roughed up
            text = intents.first_message(latent, lang, rng)
        else:
            text = rng.choice(corpus.FOLLOW_UPS)
        roll = rng.random()
        if is_lead and turn >= 1 and roll < 0.45:
            contact = {"email": person["email"], "name": person["name"]}
            text = f"Sure, I'm {person['name']} from {person['company']}, email {person['email']}"
            if rng.random() < 0.4:
                contact["phone"] = person["phone"]
                contact["company"] = person["company"]
                text += f" or call me on {person['phone']}"
        elif roll < 0.012:
            text = rng.choice(corpus.INJECTIONS)
        elif roll < 0.022:
            text = rng.choice(corpus.RUDE)
        elif roll < 0.03 and intent == "billing":
            text = f"my card is {rng.choice(corpus.TEST_CARDS)}, why was it declined?"
        elif roll < 0.05 and turn >= 1:
            text = rng.choice(corpus.HUMAN_REQUESTS)
        return text, contact

    def _tier(self, intent: str) -> str:
        table = [(name, w) for name, (w, _, _) in TIERS.items()]
        if intent in ("complaint", "purchase", "partnership"):
            table = [("standard", 50), ("premium", 35), ("fast", 15)]
        return _weighted(self.rng, table)

    def _latency(self, tier: str) -> int:
        _, median, sigma = TIERS[tier]
        value = median * math.exp(self.rng.gauss(0, sigma))
        if self.rng.random() < 0.01:  # a cold start or a slow upstream
            value *= self.rng.uniform(4, 12)
        return max(40, int(value))

    def _confidence(self, latent: LatentIntent, blocked: bool) -> float:
        if blocked:
            return 0.99
        beta = CONFIDENCE_BETA.get(latent.intent, (6.0, 2.2))
        return intents.confidence(latent, self.rng, beta)

    def _answer(
        self, latent: LatentIntent, confidence: float, blocked: bool
    ) -> tuple[str, str | None]:
        """The reply and the knowledge source it cites; a refusal cites none."""
        if blocked:
            return corpus.BLOCKED_REPLY, None
        return intents.reply(latent, confidence, self.rng)

    def _escalation_reason(
        self, text: str, intent: str, low_streak: int, flags: tuple[str, ...], score: float
    ) -> str | None:
        rng = self.rng
        if self.hit and not self.conv.escalations:  # the injected fault
            return "complaint" if intent == "complaint" else "user_requested"
        if text in corpus.HUMAN_REQUESTS:
            return "sales_opportunity" if "sales" in text else "user_requested"
        if low_streak >= 2 and rng.random() < 0.7:
            return "low_confidence"
        if "prompt_injection" in flags and rng.random() < 0.3:
            return "policy_violation"
        if intent == "complaint" and rng.random() < 0.25:
            return "complaint"
        if intent == "billing" and rng.random() < 0.08:
            return "billing_dispute"
        if score >= 85 and rng.random() < 0.3 and not self.conv.escalations:
            return "sales_opportunity"
        return None

    def _escalate(self, reason: str) -> None:
        rng = self.rng
        destination, owner, priority = ESCALATION_ROUTES[reason]
        if self.conv.escalations:  # a second handoff goes up a tier
            owner, priority = "support-tier2", "high"
        if not self._advance(rng.randint(200, 4000)):
            return
        self.act.escalate(
            self.conv,
            self.t,
            reason_code=reason,
            destination=destination,
            owner=owner if rng.random() > 0.08 else None,
            priority=priority,
            origin="automatic" if reason in ("low_confidence", "policy_violation") else "manual",
        )
        if rng.random() < 0.4 and self._advance(int(rng.uniform(1, 20) * MINUTE_MS)):
            self.act.agent_message(self.conv, "Hi, this is a human agent, happy to help.", self.t)

    def _finish(self, latent: LatentIntent, turns: int) -> None:
        rng, conv = self.rng, self.conv
        last_activity = self.t
        end = last_activity + INACTIVITY_BY_CHANNEL[conv.channel]
        if rng.random() < 0.012:  # some conversations linger open for days
            return
        if end > self.until:
            return
        last_conf = next(
            (m.confidence for m in reversed(conv.messages) if m.confidence is not None), None
        )
        abandoned = (
            turns == 0 or (last_conf is not None and last_conf < 0.45) or rng.random() < 0.12
        )
        if turns and rng.random() < (0.3 if not abandoned else 0.12):
            at = last_activity + int(rng.uniform(0.2, 5) * MINUTE_MS)
            if at <= self.until:
                rating = self._rating(abandoned, bool(conv.escalations), latent)
                mood = "good" if rating >= 4 else "bad"
                comment = (
                    rng.choice(corpus.FEEDBACK_COMMENTS[mood]) if rng.random() < 0.35 else None
                )
                self.act.feedback(conv, at, rating, comment)
        self.act.complete(conv, end, "abandoned" if abandoned else "resolved")

    def _rating(self, abandoned: bool, escalated: bool, latent: LatentIntent) -> int:
        weights = [5, 6, 12, 30, 47]
        if abandoned or latent.intent == "complaint":
            weights = [35, 25, 20, 12, 8]
        elif latent.source is None:  # answered, but not with what the user needed
            weights = [24, 22, 24, 16, 14]
        elif escalated:
            weights = [15, 15, 20, 25, 25]
        return _weighted(self.rng, list(zip((1, 2, 3, 4, 5), weights, strict=True)))


def _start_times(rng: random.Random, spec: HistorySpec) -> list[int]:
    """Conversation starts with a daily rhythm, quieter weekends and steady growth."""
    begin = spec.until_ms - spec.days * DAY_MS
    span = spec.days * DAY_MS
    starts: list[int] = []
    peak = 13 * 10 * 1.25
    while len(starts) < spec.conversations:
        t = begin + int(rng.random() * span)
        hour = (t // 3_600_000) % 24
        weekday = ((t // DAY_MS) + 3) % 7  # 1970-01-01 was a Thursday
        growth = 0.75 + 0.5 * (t - begin) / span
        weight = HOUR_WEIGHT[hour] * WEEKDAY_WEIGHT[weekday] * growth
        if rng.random() * peak < weight:
            starts.append(t)
    starts.sort()
    return starts


def generate_history(spec: HistorySpec, events: EventFactory) -> list[Conversation]:
    """The workspace's conversations, oldest first."""
    rng = random.Random(f"{spec.seed}:{spec.workspace_id}")
    activity = Activity(events=events, rng=rng, lead_threshold=spec.lead_threshold)
    course = _Course(activity, rng, spec.until_ms, spec.incidents)
    users = max(1, int(spec.conversations * 0.6))
    out = []
    for start in _start_times(rng, spec):
        # Most users come once; a few come back often (and trip guardrails repeatedly).
        n = rng.randrange(users) if rng.random() < 0.8 else int(rng.paretovariate(1.0) * 3) % users
        style = n % 3
        user = f"u-{n}" if style == 0 else (f"crm:{n:06d}" if style == 1 else f"usr_{n * 7919:x}")
        out.append(course.play(spec.workspace_id, start, user))
    return out
