"""Two sides' KPIs side by side: each value, its interval, the difference and whether it is real.

A side is two periods' or two slices' counts as the marts hold them (sums of
``mart_daily_conversations``, ``mart_daily_messages``, ``mart_daily_guardrails``
and the ``mart_daily_latency`` histogram over the side's days and slices),
optionally split by topic for the adjustment. :func:`compare` turns two sides into
one :class:`KpiComparison` per KPI of :data:`KPIS`: B against A, so a positive
difference means B's figure is higher.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from convo_analytics.compare._histograms import percentile, percentile_difference
from convo_analytics.compare._intervals import (
    MIN_SAMPLE,
    Interval,
    check_level,
    newcombe,
    poisson_rate,
    poisson_rate_difference,
    wilson,
)
from convo_analytics.compare._standardise import standardised_difference

__all__ = [
    "KPIS",
    "MIN_CONVERSATIONS",
    "Comparison",
    "Kpi",
    "KpiComparison",
    "SideCounts",
    "compare",
]

#: Below this many conversations a side is flagged: its rates move by several points
#: from one conversation to the next, and a difference would rarely be real.
MIN_CONVERSATIONS = MIN_SAMPLE


@dataclass(frozen=True)
class SideCounts:
    """One side's counts as the marts hold them (every count over the side's range).

    ``latency`` is the histogram of assistant responses' latency (milliseconds ->
    responses). ``by_topic`` splits the same counts by the conversations' topic
    (``unknown`` included); when given, each rate KPI also gets its difference
    adjusted for topic mix. Its ``latency`` and ``by_topic`` are not read.
    """

    conversations: int = 0
    resolved: int = 0
    escalated_conversations: int = 0
    contained_conversations: int = 0
    feedback_count: int = 0
    positive_feedback: int = 0
    assistant_responses: int = 0
    low_confidence_responses: int = 0
    guardrail_triggers: int = 0
    latency: Mapping[float, int] = field(default_factory=dict)
    by_topic: Mapping[str, SideCounts] = field(default_factory=dict)


KpiKind = Literal["proportion", "rate", "percentile"]


@dataclass(frozen=True, slots=True)
class Kpi:
    """A KPI as data: its kind and the counts it is made of.

    ``proportion``: ``numerator / denominator``; ``rate``: ``per * numerator /
    denominator`` (a Poisson count over an exposure); ``percentile``: the
    ``quantile`` of the latency histogram.
    """

    name: str
    kind: KpiKind
    numerator: str = ""
    denominator: str = ""
    per: float = 1.0
    quantile: float = 0.0


KPIS: tuple[Kpi, ...] = (
    Kpi("resolution_rate", "proportion", "resolved", "conversations"),
    Kpi("escalation_rate", "proportion", "escalated_conversations", "conversations"),
    Kpi("containment_rate", "proportion", "contained_conversations", "conversations"),
    Kpi("csat", "proportion", "positive_feedback", "feedback_count"),
    Kpi("low_confidence_share", "proportion", "low_confidence_responses", "assistant_responses"),
    Kpi(
        "guardrail_triggers_per_1000_responses",
        "rate",
        "guardrail_triggers",
        "assistant_responses",
        per=1000.0,
    ),
    Kpi("latency_p50_ms", "percentile", quantile=0.50),
    Kpi("latency_p90_ms", "percentile", quantile=0.90),
    Kpi("latency_p95_ms", "percentile", quantile=0.95),
)


@dataclass(frozen=True, slots=True)
class KpiComparison:
    """One KPI on both sides: ``a`` and ``b`` with their intervals, ``difference`` = b - a.

    ``adjusted`` is the difference standardised to the two sides' pooled topic mix
    (``None`` for percentiles, or when no side was split by topic). ``small_sample``
    is set when either side has fewer than the minimum conversations, or either
    figure rests on fewer than :data:`MIN_SAMPLE` units.
    """

    kpi: Kpi
    a: Interval
    b: Interval
    difference: Interval
    adjusted: Interval | None
    small_sample: bool

    @property
    def excludes_zero(self) -> bool | None:
        """Whether the difference's interval excludes 0 (``None`` when undefined)."""
        return self.difference.excludes(0.0)

    @property
    def adjusted_excludes_zero(self) -> bool | None:
        """Whether the topic-adjusted difference's interval excludes 0."""
        return None if self.adjusted is None else self.adjusted.excludes(0.0)


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every KPI of :data:`KPIS` for two sides, and which side is under the minimum."""

    kpis: tuple[KpiComparison, ...]
    a_small: bool
    b_small: bool
    level: float
    min_conversations: int

    def __getitem__(self, name: str) -> KpiComparison:
        for row in self.kpis:
            if row.kpi.name == name:
                return row
        raise KeyError(name)


def _count(side: SideCounts, name: str) -> int:
    """A count of the side as a Python int (numpy and polars integers included)."""
    return operator.index(getattr(side, name))


def _by_topic(side: SideCounts, kpi: Kpi) -> dict[str, tuple[int, int]]:
    return {
        topic: (_count(counts, kpi.numerator), _count(counts, kpi.denominator))
        for topic, counts in side.by_topic.items()
    }


def _compare_kpi(
    kpi: Kpi, a: SideCounts, b: SideCounts, level: float, resamples: int, seed: int
) -> tuple[Interval, Interval, Interval, Interval | None]:
    if kpi.kind == "percentile":
        return (
            percentile(a.latency, kpi.quantile, level),
            percentile(b.latency, kpi.quantile, level),
            percentile_difference(b.latency, a.latency, kpi.quantile, level, resamples, seed),
            None,
        )
    ka, na = _count(a, kpi.numerator), _count(a, kpi.denominator)
    kb, nb = _count(b, kpi.numerator), _count(b, kpi.denominator)
    if kpi.kind == "proportion":
        side_a, side_b = wilson(ka, na, level), wilson(kb, nb, level)
        difference = newcombe(kb, nb, ka, na, level)
    else:
        side_a = poisson_rate(ka, na, level, kpi.per)
        side_b = poisson_rate(kb, nb, level, kpi.per)
        difference = poisson_rate_difference(kb, nb, ka, na, level, kpi.per)
    adjusted = None
    if a.by_topic and b.by_topic:
        adjusted = standardised_difference(
            _by_topic(b, kpi),
            _by_topic(a, kpi),
            "proportion" if kpi.kind == "proportion" else "rate",
            level,
            kpi.per,
        ).adjusted
    return side_a, side_b, difference, adjusted


def compare(
    a: SideCounts,
    b: SideCounts,
    level: float = 0.95,
    min_conversations: int = MIN_CONVERSATIONS,
    resamples: int = 2000,
    seed: int = 0,
) -> Comparison:
    """Every KPI of :data:`KPIS` for side A and side B, and B's difference from A.

    Rates get Wilson's interval and Newcombe's for the difference; rates per 1,000
    responses Garwood's and the MOVER; latency percentiles the order-statistic
    interval and a bootstrap of the difference (``resamples`` draws, seeded with
    ``seed``, so one comparison always shows the same interval). A side with fewer
    than ``min_conversations`` conversations is flagged, and so is every KPI of it.
    Empty sides give undefined figures, never an error.
    """
    check_level(level)
    a_small, b_small = a.conversations < min_conversations, b.conversations < min_conversations
    rows = []
    for kpi in KPIS:
        side_a, side_b, difference, adjusted = _compare_kpi(kpi, a, b, level, resamples, seed)
        small = a_small or b_small or side_a.small_sample or side_b.small_sample
        rows.append(KpiComparison(kpi, side_a, side_b, difference, adjusted, small))
    return Comparison(tuple(rows), a_small, b_small, level, min_conversations)
