"""A difference of rates adjusted for topic mix, beside the raw one.

Two model tiers, channels or weeks rarely get the same questions: if the premium
tier is routed the hard refund disputes, its escalation rate is higher even when
it handles every topic as well as the standard tier. Direct standardisation asks
what each side's rate would be on the same mix of topics: each side's per-topic
rates weighted by the **two sides' pooled topic mix**, so a difference that comes
only from who got which topics disappears, and one that holds topic by topic
remains. The raw difference is returned beside it; the gap between the two is what
the mix explains.

The interval is a normal approximation around the weighted sum. With the pooled
weights held fixed, the adjusted difference is a linear combination of independent
per-topic rates, so its variance is exactly the weighted sum of their variances
(``p (1 - p) / n`` for a proportion, ``k / e^2`` for a Poisson rate) and only the
plugged-in rates and the normal shape are approximations. A proportion's ``p`` is
plugged in shrunk towards 1/2 (Agresti and Coull's ``(k + z²/2) / (n + z²)``), since
a topic of a few units often shows 0 or n successes, whose plain variance is 0;
decision D-COMPARE-INTERVALS says why this rather than a stratified bootstrap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from convo_analytics.compare._intervals import (
    MIN_SAMPLE,
    Interval,
    newcombe,
    poisson_rate,
    poisson_rate_difference,
    undefined,
    wilson,
    z_value,
)

__all__ = ["STANDARDISED", "Kind", "Standardised", "standardised_difference"]

STANDARDISED = "direct standardisation to the pooled topic mix (normal approximation)"

#: ``proportion``: (successes, trials) per topic; ``rate``: (events, exposure) per topic.
Kind = Literal["proportion", "rate"]


@dataclass(frozen=True, slots=True)
class Standardised:
    """Side 1 against side 2, raw and adjusted for topic mix.

    ``adjusted`` is ``rate1 - rate2`` with both sides standardised to the pooled topic
    mix of the topics both sides have (``n``: the smaller side's units in them);
    ``raw`` the plain difference over every unit, with the interval the dashboard
    shows for it (Newcombe, or the MOVER for rates); ``rate1`` and ``rate2`` each
    side's standardised rate. ``excluded1`` and ``excluded2`` count the units of
    topics only one side has: a rate cannot be compared where one side has none, so
    they are left out of the adjustment (and stay in the raw difference).
    """

    adjusted: Interval
    raw: Interval
    rate1: float | None
    rate2: float | None
    topics: int
    excluded1: int
    excluded2: int


def _rate_and_variance(
    kind: Kind, count: int, units: int, per: float, z: float
) -> tuple[float, float]:
    """A topic's rate and the variance it adds. A proportion's variance is taken at
    Agresti and Coull's shrunken rate ``(k + z²/2) / (n + z²)`` over ``n``: topics are
    small (a channel's share of a topic is often a handful of conversations), where the
    plain ``p (1 - p) / n`` is 0 at 0 or n successes and the interval covered 0.77
    instead of 0.95; at a topic's hundreds of units the two agree."""
    rate = count / units
    if kind == "proportion":
        shrunk = (count + z * z / 2.0) / (units + z * z)
        return rate, shrunk * (1.0 - shrunk) / units
    return rate * per, count * (per / units) ** 2


def _check(kind: Kind, side: Mapping[str, tuple[int, int]]) -> None:
    """The per-topic counts are valid (the interval functions raise as for totals)."""
    for count, units in side.values():
        if kind == "proportion":
            wilson(count, units)
        else:
            poisson_rate(count, units)


def standardised_difference(
    side1: Mapping[str, tuple[int, int]],
    side2: Mapping[str, tuple[int, int]],
    kind: Kind = "proportion",
    level: float = 0.95,
    per: float = 1000.0,
) -> Standardised:
    """Side 1's rate minus side 2's, raw and standardised to the pooled topic mix.

    Each side maps a topic to ``(count, units)``: ``(escalated, conversations)`` for a
    proportion, ``(triggers, responses)`` for a rate shown per ``per`` units (``per``
    is ignored for proportions). Topics with units on both sides get the weight
    ``w_t = (n1_t + n2_t) / sum over them``; each side's standardised rate is
    ``sum w_t r_t`` and the adjusted difference ``sum w_t (r1_t - r2_t)`` with the
    interval ``d +/- z sqrt(sum w_t^2 (v1_t + v2_t))``. Undefined (never an error)
    when no topic has units on both sides.
    """
    _check(kind, side1)
    _check(kind, side2)
    count1 = sum(count for count, _ in side1.values())
    units1 = sum(units for _, units in side1.values())
    count2 = sum(count for count, _ in side2.values())
    units2 = sum(units for _, units in side2.values())
    if kind == "proportion":
        raw = newcombe(count1, units1, count2, units2, level)
    else:
        raw = poisson_rate_difference(count1, units1, count2, units2, level, per)
    shared = sorted(t for t in side1.keys() & side2.keys() if side1[t][1] and side2[t][1])
    shared1 = sum(side1[t][1] for t in shared)
    shared2 = sum(side2[t][1] for t in shared)
    excluded1, excluded2 = units1 - shared1, units2 - shared2
    smaller = min(shared1, shared2)
    if not shared:
        return Standardised(
            undefined(STANDARDISED, level, smaller), raw, None, None, 0, excluded1, excluded2
        )
    pooled = shared1 + shared2
    rate1 = rate2 = variance = 0.0
    z = z_value(level)
    for topic in shared:
        weight = (side1[topic][1] + side2[topic][1]) / pooled
        r1, v1 = _rate_and_variance(kind, *side1[topic], per, z)
        r2, v2 = _rate_and_variance(kind, *side2[topic], per, z)
        rate1 += weight * r1
        rate2 += weight * r2
        variance += weight * weight * (v1 + v2)
    difference = rate1 - rate2
    half = z * math.sqrt(variance)
    low, high = difference - half, difference + half
    if kind == "proportion":
        low, high = max(-1.0, low), min(1.0, high)
    adjusted = Interval(
        difference,
        low,
        high,
        smaller,
        STANDARDISED,
        level,
        small_sample=smaller < MIN_SAMPLE,
    )
    return Standardised(adjusted, raw, rate1, rate2, len(shared), excluded1, excluded2)
