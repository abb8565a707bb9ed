"""The service's own analytics summary, computed from the domain model.

Definitions are in docs/warehouse.md ("Service summary"). Conversation-level
figures belong to the day the conversation started (a cohort); message-level
figures and escalations belong to the day they happened. Days are cut in the
requested IANA time zone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from convo_analytics.sandbox._model import POSITIVE_RATING, Conversation, iso

DAY_MS = 86_400_000
HOUR_MS = 3_600_000


class DayCutter:
    """Maps epoch milliseconds to the calendar day in a time zone, fast."""

    def __init__(self, tz: str) -> None:
        self.zone = ZoneInfo(tz)
        self._offsets: dict[int, int] = {}

    def day(self, ms: int) -> int:
        """Days since 1970-01-01 of the local date."""
        hour = ms // HOUR_MS
        offset = self._offsets.get(hour)
        if offset is None:
            delta = datetime.fromtimestamp(hour * 3600, tz=UTC).astimezone(self.zone).utcoffset()
            offset = int(delta.total_seconds() * 1000) if delta else 0
            self._offsets[hour] = offset
        return (ms + offset) // DAY_MS


def quantile(sorted_values: list[int] | list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (DuckDB quantile_cont, numpy 'linear')."""
    if not sorted_values:
        return None
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo))


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


@dataclass(slots=True)
class _Acc:
    counts: Counter[str] = field(default_factory=Counter)
    flags: Counter[str] = field(default_factory=Counter)
    tiers: Counter[str] = field(default_factory=Counter)
    latencies: list[int] = field(default_factory=list)
    confidence_sum: float = 0.0
    first_response: list[int] = field(default_factory=list)
    resolution: list[float] = field(default_factory=list)

    def merge(self, other: _Acc) -> None:
        self.counts.update(other.counts)
        self.flags.update(other.flags)
        self.tiers.update(other.tiers)
        self.latencies += other.latencies
        self.confidence_sum += other.confidence_sum
        self.first_response += other.first_response
        self.resolution += other.resolution

    def metrics(self, low_threshold: float) -> dict[str, Any]:
        c = self.counts
        n = c["conversations"]
        responses = c["assistantResponses"]
        lat = sorted(self.latencies)
        return {
            "conversations": n,
            "engagedConversations": c["engagedConversations"],
            "resolved": c["resolved"],
            "abandoned": c["abandoned"],
            "open": c["open"],
            "escalatedConversations": c["escalatedConversations"],
            "containedConversations": c["containedConversations"],
            "leadsQualified": c["leadsQualified"],
            "feedbackCount": c["feedbackCount"],
            "positiveFeedback": c["positiveFeedback"],
            "ratingSum": c["ratingSum"],
            "resolutionRate": _ratio(c["resolved"], n),
            "containmentRate": _ratio(c["containedConversations"], n),
            "escalationRate": _ratio(c["escalatedConversations"], n),
            "abandonmentRate": _ratio(c["abandoned"], n),
            "leadQualificationRate": _ratio(c["leadsQualified"], n),
            "avgRating": _ratio(c["ratingSum"], c["feedbackCount"]),
            "csat": _ratio(c["positiveFeedback"], c["feedbackCount"]),
            "medianFirstResponseMs": quantile(sorted(self.first_response), 0.5),
            "medianTimeToResolutionSeconds": quantile(sorted(self.resolution), 0.5),
            "userMessages": c["userMessages"],
            "assistantResponses": responses,
            "escalations": c["escalations"],
            "guardrailTriggers": c["guardrailTriggers"],
            "guardrailTriggersPer1000Responses": (
                1000 * c["guardrailTriggers"] / responses if responses else None
            ),
            "guardrailTriggersByFlag": dict(sorted(self.flags.items())),
            "latencyMs": {f"p{q}": quantile(lat, q / 100) for q in (50, 90, 95, 99)},
            "avgConfidence": _ratio(self.confidence_sum, responses),
            "lowConfidenceResponses": c["lowConfidenceResponses"],
            "lowConfidenceShare": _ratio(c["lowConfidenceResponses"], responses),
            "modelTierMix": dict(sorted(self.tiers.items())),
        }


def _first_response_ms(conv: Conversation) -> int | None:
    first_user = None
    for m in conv.messages:
        if m.role == "user" and first_user is None:
            first_user = m.at
        elif m.role == "assistant" and first_user is not None:
            return m.at - first_user
    return None


def summarize(
    workspace_id: str,
    conversations: Iterable[Conversation],
    first: date,
    last: date,
    tz: str = "UTC",
    low_confidence: float = 0.5,
    now_ms: int | None = None,
) -> dict[str, Any]:
    """The /v1/analytics/summary body for the days ``first``..``last`` (inclusive)."""
    cut = DayCutter(tz)
    epoch = date(1970, 1, 1)
    lo, hi = (first - epoch).days, (last - epoch).days
    days: dict[int, _Acc] = {d: _Acc() for d in range(lo, hi + 1)}
    for conv in conversations:
        start_day = cut.day(conv.created_at)
        if start_day > hi:
            continue
        if start_day >= lo:
            _cohort(days[start_day], conv)
        if conv.updated_at < conv.created_at or cut.day(conv.updated_at) < lo:
            continue
        for m in conv.messages:
            d = cut.day(m.at)
            if lo <= d <= hi:
                acc = days[d]
                if m.role == "user":
                    acc.counts["userMessages"] += 1
                elif m.role == "assistant":
                    acc.counts["assistantResponses"] += 1
                    acc.latencies.append(m.latency_ms or 0)
                    acc.confidence_sum += m.confidence or 0.0
                    acc.counts["lowConfidenceResponses"] += (m.confidence or 0.0) < low_confidence
                    acc.tiers[m.model_tier or "unknown"] += 1
        for g in conv.guardrail_events:
            d = cut.day(g.at)
            if lo <= d <= hi:
                days[d].counts["guardrailTriggers"] += 1
                days[d].flags[g.flag] += 1
        for e in conv.escalations:
            d = cut.day(e.at)
            if lo <= d <= hi:
                days[d].counts["escalations"] += 1
    total = _Acc()
    daily = []
    for d in range(lo, hi + 1):
        total.merge(days[d])
        daily.append(
            {"date": (epoch + timedelta(days=d)).isoformat(), **days[d].metrics(low_confidence)}
        )
    generated = now_ms if now_ms is not None else int(datetime.now(UTC).timestamp() * 1000)
    return {
        "workspaceId": workspace_id,
        "from": first.isoformat(),
        "to": last.isoformat(),
        "timezone": tz,
        "lowConfidenceThreshold": low_confidence,
        "generatedAt": iso(generated),
        "totals": total.metrics(low_confidence),
        "daily": daily,
    }


def _cohort(acc: _Acc, conv: Conversation) -> None:
    c = acc.counts
    c["conversations"] += 1
    c[conv.status] += 1
    if any(m.role == "user" for m in conv.messages):
        c["engagedConversations"] += 1
    if conv.escalations:
        c["escalatedConversations"] += 1
    elif conv.status != "open":
        c["containedConversations"] += 1
    if conv.lead is not None and conv.lead.qualified_at is not None:
        c["leadsQualified"] += 1
    if conv.feedback is not None:
        c["feedbackCount"] += 1
        c["ratingSum"] += conv.feedback.rating
        c["positiveFeedback"] += conv.feedback.rating >= POSITIVE_RATING
    first = _first_response_ms(conv)
    if first is not None:
        acc.first_response.append(first)
    if conv.status == "resolved" and conv.ended_at is not None:
        acc.resolution.append((conv.ended_at - conv.created_at) / 1000)
