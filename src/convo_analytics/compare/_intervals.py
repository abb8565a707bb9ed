"""Intervals for proportions and Poisson counts, and for the difference of two of them.

A rate on the dashboard is one of two kinds: a **proportion** (k of n conversations
resolved, k of n rated responses positive) or a **count per exposure** (guardrail
triggers per 1,000 assistant responses, where one response can trigger several
flags). Each gets the interval whose coverage stays near its level at the sample
sizes a workspace has, and a difference of two is built from the two sides'
intervals (Newcombe's hybrid score, the MOVER for rates), so the difference and
the two figures shown beside it never disagree. docs/warehouse.md, "Statistics of
comparisons", gives each formula; decision D-COMPARE-INTERVALS says why these.

Nothing here raises on an empty side: 0 of 0, or a count over no exposure, gives
an :class:`Interval` whose estimate and bounds are ``None`` (undefined), never an
error. Impossible inputs (a negative count, more successes than trials, a level
outside (0, 1)) are a caller's bug and raise :class:`ValueError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

__all__ = [
    "GARWOOD",
    "MIN_SAMPLE",
    "MOVER_GARWOOD",
    "NEWCOMBE",
    "RATIO_CONDITIONAL",
    "WILSON",
    "Interval",
    "check_level",
    "newcombe",
    "poisson_count",
    "poisson_rate",
    "poisson_rate_difference",
    "poisson_rate_ratio",
    "undefined",
    "wilson",
    "z_value",
]

#: Below this many trials, exposures or observations (conversations, responses, rated
#: conversations, events of a bare count), an interval is flagged ``small_sample``:
#: its width is then of the order of the figure itself (a Wilson interval over 30
#: trials at 50 % is 0.33 to 0.67), and a dashboard shows a warning with it.
MIN_SAMPLE = 30

WILSON = "Wilson score"
NEWCOMBE = "Newcombe hybrid score (method 10)"
GARWOOD = "exact Poisson (Garwood)"
MOVER_GARWOOD = "MOVER with Garwood limits"
RATIO_CONDITIONAL = "conditional binomial (Wilson)"


@dataclass(frozen=True, slots=True)
class Interval:
    """A figure with its interval at ``level``.

    ``estimate``, ``low`` and ``high`` are ``None`` when the figure is undefined (no
    trials, no exposure, an empty histogram). A bound may be infinite when the data
    cannot bound that side (a ratio over a zero count, a tail percentile of a few
    observations). ``n`` is the sample the figure rests on: trials, exposures or
    observations; for a difference, the smaller side's. ``small_sample`` is set when
    ``n`` is under the method's documented minimum (:data:`MIN_SAMPLE`).
    """

    estimate: float | None
    low: float | None
    high: float | None
    n: int
    method: str
    level: float = 0.95
    small_sample: bool = False

    @property
    def defined(self) -> bool:
        """Whether the figure and its interval exist (some data on every side)."""
        return self.estimate is not None and self.low is not None and self.high is not None

    def excludes(self, value: float = 0.0) -> bool | None:
        """Whether ``value`` lies outside the interval (``None`` when it is undefined).

        For a difference, ``excludes(0)`` is "the difference is real at this level".
        """
        if self.low is None or self.high is None:
            return None
        return value < self.low or value > self.high


def check_level(level: float) -> float:
    """``level`` itself, when it is a confidence level strictly between 0 and 1."""
    if not 0.0 < level < 1.0 or math.isnan(level):
        raise ValueError(f"a confidence level is between 0 and 1 (exclusive), not {level!r}")
    return level


def z_value(level: float) -> float:
    """The standard normal quantile of a two-sided ``level`` (1.959964 for 0.95)."""
    return NormalDist().inv_cdf(0.5 + check_level(level) / 2.0)


def undefined(method: str, level: float, n: int = 0) -> Interval:
    """The interval of a figure without data (0 of 0, no exposure, no observations)."""
    return Interval(None, None, None, n, method, check_level(level), small_sample=True)


def _check_count(name: str, value: int) -> int:
    if value < 0:
        raise ValueError(f"{name} cannot be negative, got {value}")
    return value


def _check_proportion(successes: int, trials: int) -> None:
    _check_count("successes", successes)
    _check_count("trials", trials)
    if successes > trials:
        raise ValueError(f"successes ({successes}) cannot exceed trials ({trials})")


def _wilson_bounds(successes: int, trials: int, z: float) -> tuple[float, float]:
    """Wilson's score bounds (trials > 0); exactly 0 at k = 0 and 1 at k = n."""
    p = successes / trials
    z2 = z * z
    denominator = 1.0 + z2 / trials
    centre = (p + z2 / (2.0 * trials)) / denominator
    half = z / denominator * math.sqrt(p * (1.0 - p) / trials + z2 / (4.0 * trials * trials))
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


def wilson(successes: int, trials: int, level: float = 0.95) -> Interval:
    """``successes / trials`` with Wilson's score interval (Wilson 1927).

    The interval is the set of proportions p whose score test does not reject the
    data: ``(p_hat - p)^2 <= z^2 p (1 - p) / n``. Unlike the Wald interval it never
    leaves [0, 1], is not empty at 0 or n successes, and keeps its coverage near the
    level down to a few dozen trials (Newcombe 1998a, method 3).
    """
    _check_proportion(successes, trials)
    if trials == 0:
        return undefined(WILSON, level)
    low, high = _wilson_bounds(successes, trials, z_value(level))
    return Interval(
        successes / trials, low, high, trials, WILSON, level, small_sample=trials < MIN_SAMPLE
    )


def newcombe(
    successes1: int, trials1: int, successes2: int, trials2: int, level: float = 0.95
) -> Interval:
    """``p1 - p2`` of two independent proportions, with Newcombe's hybrid score interval.

    Method 10 of Newcombe (1998b): with each side's Wilson bounds ``(l_i, u_i)``,
    ``low = d - sqrt((p1 - l1)^2 + (u2 - p2)^2)`` and
    ``high = d + sqrt((u1 - p1)^2 + (p2 - l2)^2)``. It stays within [-1, 1], is
    defined at 0 and n successes, and its coverage is close to the level where the
    Wald interval's is not. Undefined when either side has no trials.
    """
    _check_proportion(successes1, trials1)
    _check_proportion(successes2, trials2)
    smaller = min(trials1, trials2)
    if smaller == 0:
        return undefined(NEWCOMBE, level, smaller)
    z = z_value(level)
    p1, p2 = successes1 / trials1, successes2 / trials2
    l1, u1 = _wilson_bounds(successes1, trials1, z)
    l2, u2 = _wilson_bounds(successes2, trials2, z)
    d = p1 - p2
    low = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return Interval(
        d,
        max(-1.0, low),
        min(1.0, high),
        smaller,
        NEWCOMBE,
        level,
        small_sample=smaller < MIN_SAMPLE,
    )


def _garwood_bounds(count: int, level: float) -> tuple[float, float]:
    """Garwood's exact bounds for a Poisson mean from one observed count.

    ``low = G^-1(alpha/2; k)`` and ``high = G^-1(1 - alpha/2; k + 1)``, G the gamma
    distribution with unit scale (``chi2(2k)/2``), ``low = 0`` at k = 0.
    """
    from scipy.special import gammaincinv  # here, like scipy.stats in _histograms: slow to import

    alpha = 1.0 - check_level(level)
    low = 0.0 if count == 0 else float(gammaincinv(count, alpha / 2.0))
    high = float(gammaincinv(count + 1, 1.0 - alpha / 2.0))
    return low, high


def poisson_count(count: int, level: float = 0.95) -> Interval:
    """A Poisson count with Garwood's exact interval (Garwood 1936).

    Guaranteed coverage of at least the level for every mean (conservative for
    small ones: 0 events give 0 to 3.689 at 95 %). ``n`` is the count itself.
    """
    _check_count("count", count)
    low, high = _garwood_bounds(count, level)
    return Interval(float(count), low, high, count, GARWOOD, level, small_sample=count < MIN_SAMPLE)


def poisson_rate(count: int, exposure: int, level: float = 0.95, per: float = 1000.0) -> Interval:
    """``per * count / exposure`` (triggers per 1,000 responses) with Garwood's interval.

    The count's exact bounds divided by the exposure: the exposure (responses) is
    known, only the count is random. Undefined without exposure.
    """
    _check_count("count", count)
    _check_count("exposure", exposure)
    if exposure == 0:
        return undefined(GARWOOD, level)
    low, high = _garwood_bounds(count, level)
    scale = per / exposure
    return Interval(
        count * scale,
        low * scale,
        high * scale,
        exposure,
        GARWOOD,
        level,
        small_sample=exposure < MIN_SAMPLE,
    )


def poisson_rate_difference(
    count1: int,
    exposure1: int,
    count2: int,
    exposure2: int,
    level: float = 0.95,
    per: float = 1000.0,
) -> Interval:
    """``rate1 - rate2`` of two Poisson rates, by the MOVER with Garwood's limits.

    The method of variance estimates recovery (Zou and Donner 2008; for rates Li,
    Tang and Wong 2011) does for rates what Newcombe's method 10 does for
    proportions: with each rate's exact bounds ``(l_i, u_i)``,
    ``low = d - sqrt((r1 - l1)^2 + (u2 - r2)^2)`` and
    ``high = d + sqrt((u1 - r1)^2 + (r2 - l2)^2)``. It respects each rate's skew
    (a rate near 0 cannot fall much), is defined at zero counts, and the interval
    shown for the difference is built from the two intervals shown beside it.
    Undefined when either side has no exposure.
    """
    one = poisson_rate(count1, exposure1, level, per)
    two = poisson_rate(count2, exposure2, level, per)
    smaller = min(exposure1, exposure2)
    if not (one.defined and two.defined):
        return undefined(MOVER_GARWOOD, level, smaller)
    r1, l1, u1 = _bounds(one)
    r2, l2, u2 = _bounds(two)
    d = r1 - r2
    low = d - math.sqrt((r1 - l1) ** 2 + (u2 - r2) ** 2)
    high = d + math.sqrt((u1 - r1) ** 2 + (r2 - l2) ** 2)
    return Interval(d, low, high, smaller, MOVER_GARWOOD, level, small_sample=smaller < MIN_SAMPLE)


def poisson_rate_ratio(
    count1: int, exposure1: int, count2: int, exposure2: int, level: float = 0.95
) -> Interval:
    """``rate1 / rate2`` of two Poisson rates, from the conditional binomial.

    Given the total ``k1 + k2``, ``k1`` is binomial with probability
    ``pi = R e1 / (R e1 + e2)`` where R is the ratio of the rates; Wilson's bounds on
    ``pi`` become bounds on ``R = pi / (1 - pi) * e2 / e1``. Exact in its
    conditioning, free of the rates' common level. The estimate (and ``high``) is
    infinite when ``k2 = 0`` and ``k1 > 0``; undefined with no events or no exposure.
    """
    _check_count("count1", count1)
    _check_count("count2", count2)
    _check_count("exposure1", exposure1)
    _check_count("exposure2", exposure2)
    smaller = min(exposure1, exposure2)
    total = count1 + count2
    if smaller == 0 or total == 0:
        return undefined(RATIO_CONDITIONAL, level, smaller)
    low_pi, high_pi = _wilson_bounds(count1, total, z_value(level))
    factor = exposure2 / exposure1

    def ratio(pi: float) -> float:
        return math.inf if pi >= 1.0 else pi / (1.0 - pi) * factor

    estimate = math.inf if count2 == 0 else (count1 / exposure1) / (count2 / exposure2)
    return Interval(
        estimate,
        ratio(low_pi),
        ratio(high_pi),
        smaller,
        RATIO_CONDITIONAL,
        level,
        small_sample=smaller < MIN_SAMPLE,
    )


def _bounds(interval: Interval) -> tuple[float, float, float]:
    """(estimate, low, high) of a defined interval."""
    assert interval.estimate is not None and interval.low is not None
    assert interval.high is not None
    return interval.estimate, interval.low, interval.high
