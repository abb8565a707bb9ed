"""Percentiles of a histogram, with their intervals, and of the difference of two.

The marts keep latency and durations as histograms of exact values (value -> how
many: ``mart_daily_latency``, ``mart_daily_durations``), so a range's p95 is the
p95 of all its responses. Their intervals are read off the same histograms
without expanding them, so millions of observations cost what their distinct
values cost:

- one percentile: the distribution-free interval between two order statistics
  whose ranks come from the binomial distribution (exact, any distribution);
- the difference of two sides' percentiles: a percentile bootstrap whose resamples
  are drawn as the two order statistics the interpolated percentile needs (beta
  draws mapped through the histogram's cumulative counts), not as whole resampled
  histograms: the same resampling distribution as a multinomial draw over the
  bins, at a cost of ``resamples x log(bins)`` instead of ``resamples x bins``.

Percentiles are the summary's: linear interpolation between closest ranks
(DuckDB's ``quantile_cont``), so the estimate is the figure the dashboard shows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from convo_analytics.compare._intervals import MIN_SAMPLE, Interval, check_level, undefined

__all__ = [
    "BOOTSTRAP",
    "MAX_RESAMPLES",
    "ORDER_STATISTICS",
    "Histogram",
    "HistogramLike",
    "percentile",
    "percentile_difference",
]

ORDER_STATISTICS = "order statistics (distribution-free)"
BOOTSTRAP = "percentile bootstrap"
#: The most resamples one bootstrap may draw (each is a few floats: memory is bounded).
MAX_RESAMPLES = 100_000


@dataclass(frozen=True, eq=False)
class Histogram:
    """Distinct values in increasing order and how many observations had each (> 0)."""

    values: npt.NDArray[np.float64]
    counts: npt.NDArray[np.int64]

    @classmethod
    def from_arrays(cls, values: npt.ArrayLike, counts: npt.ArrayLike) -> Histogram:
        """A histogram of parallel arrays; equal values are merged, zero counts dropped."""
        vals = np.asarray(values, dtype=np.float64).ravel()
        cnts = np.asarray(counts).ravel()
        if vals.shape != cnts.shape:
            raise ValueError(f"{vals.size} values but {cnts.size} counts")
        if cnts.size and (np.any(cnts < 0) or np.any(cnts != np.floor(cnts))):
            raise ValueError("histogram counts are whole numbers, never negative")
        if np.any(np.isnan(vals)):
            raise ValueError("a histogram value cannot be NaN")
        keep = cnts > 0
        distinct, where = np.unique(vals[keep], return_inverse=True)
        summed = np.bincount(where, weights=cnts[keep].astype(np.float64), minlength=distinct.size)
        return cls(distinct, np.rint(summed).astype(np.int64))

    @classmethod
    def of(cls, source: HistogramLike) -> Histogram:
        """``source`` as a histogram: one already, or a mapping of value to count."""
        if isinstance(source, Histogram):
            return source
        return cls.from_arrays(list(source.keys()), list(source.values()))

    @property
    def n(self) -> int:
        """How many observations."""
        return int(self.counts.sum())

    def cumulative(self) -> npt.NDArray[np.int64]:
        """Observations at or below each value."""
        return np.cumsum(self.counts)

    def order_statistic(self, rank: int) -> float:
        """The ``rank``-th smallest observation, 1-based (1 <= rank <= n)."""
        at = int(np.searchsorted(self.cumulative(), rank, side="left"))
        return float(self.values[at])

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile by linear interpolation between closest ranks (``None`` if empty).

        For sorted observations ``x_0..x_{n-1}``: position ``p = q (n - 1)``, value
        ``x_floor(p) + (x_ceil(p) - x_floor(p)) (p - floor(p))``, as DuckDB's
        ``quantile_cont`` and the summary's percentiles.
        """
        n = self.n
        if n == 0:
            return None
        position = _check_quantile(q) * (n - 1)
        below = math.floor(position)
        low = self.order_statistic(below + 1)
        high = self.order_statistic(min(below + 1, n - 1) + 1)
        return low + (high - low) * (position - below)


HistogramLike: TypeAlias = Histogram | Mapping[float, int]


def _check_quantile(q: float) -> float:
    if not 0.0 <= q <= 1.0 or math.isnan(q):
        raise ValueError(f"a quantile is between 0 and 1, not {q!r}")
    return q


def _order_ranks(n: int, q: float, level: float) -> tuple[int, int]:
    """The ranks ``(l, u)`` (1-based) of the distribution-free interval for the ``q`` quantile.

    The number Y of observations below the true quantile is binomial(n, q), and
    ``x_(l) <= xi_q <= x_(u)`` holds whenever ``l <= Y <= u - 1``; so ``l`` is the
    largest rank with ``P(Y <= l - 1) <= alpha / 2`` and ``u`` the smallest with
    ``P(Y >= u) <= alpha / 2``: coverage at least ``level`` for any distribution.
    ``l = 0`` or ``u = n + 1`` means the data cannot bound that side.
    """
    # Imported here: scipy.stats takes ~1 s to import, and every command that imports the
    # monitors (the nightly run's step, with no monitor to judge) paid it.
    from scipy.stats import binom

    alpha = 1.0 - level
    low_rank = int(binom.ppf(alpha / 2.0, n, q))
    if low_rank >= 1 and binom.cdf(low_rank - 1, n, q) > alpha / 2.0:
        low_rank -= 1  # guards ppf's rounding; the rule above is what holds
    high_rank = int(binom.ppf(1.0 - alpha / 2.0, n, q)) + 1
    if high_rank <= n and binom.sf(high_rank - 1, n, q) > alpha / 2.0:
        high_rank += 1
    return low_rank, high_rank


def percentile(histogram: HistogramLike, q: float, level: float = 0.95) -> Interval:
    """The ``q`` quantile of a histogram with its distribution-free interval.

    The interval runs between two order statistics of the observations (ranks from
    the binomial distribution, :func:`_order_ranks`): exact for every continuous
    distribution, conservative with ties. A bound is infinite when too few
    observations lie beyond the quantile to bound it (a p99 of fewer than 368
    observations has no upper bound at 95 %). The interval always holds the
    estimate. Undefined for an empty histogram.
    """
    hist = Histogram.of(histogram)
    _check_quantile(q)
    check_level(level)
    n = hist.n
    estimate = hist.quantile(q)
    if estimate is None:
        return undefined(ORDER_STATISTICS, level)
    low_rank, high_rank = _order_ranks(n, q, level)
    low = hist.order_statistic(low_rank) if low_rank >= 1 else -math.inf
    high = hist.order_statistic(high_rank) if high_rank <= n else math.inf
    # an interpolated estimate can fall past a bound (a few observations at a low
    # level); the interval is widened to hold it, which keeps its coverage
    low, high = min(low, estimate), max(high, estimate)
    return Interval(estimate, low, high, n, ORDER_STATISTICS, level, small_sample=n < MIN_SAMPLE)


def _resampled_quantiles(
    hist: Histogram, q: float, resamples: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """The ``q`` quantile of ``resamples`` bootstrap resamples of ``hist`` (n draws each).

    A resample's interpolated quantile needs only its order statistics ``r`` and
    ``r + 1`` (1-based, ``r = floor(q (n - 1)) + 1``). Drawing n observations from the
    histogram is drawing n uniforms and mapping each through its cumulative counts,
    and the r-th uniform order statistic is beta(r, n - r + 1); given it, the next is
    it plus ``(1 - it) beta(1, n - r)``. Mapping both through the cumulative counts
    gives the resample's two order statistics exactly in distribution.
    """
    n = hist.n
    position = q * (n - 1)
    rank = math.floor(position) + 1
    weight = position - (rank - 1)
    u_low = rng.beta(rank, n - rank + 1, size=resamples)
    u_high = u_low
    if rank < n:
        u_high = u_low + (1.0 - u_low) * rng.beta(1, n - rank, size=resamples)
    cumulative = hist.cumulative().astype(np.float64)
    last = hist.values.size - 1
    at_low = np.minimum(np.searchsorted(cumulative, u_low * n, side="left"), last)
    at_high = np.minimum(np.searchsorted(cumulative, u_high * n, side="left"), last)
    low = hist.values[at_low]
    return low + (hist.values[at_high] - low) * weight


def percentile_difference(
    histogram1: HistogramLike,
    histogram2: HistogramLike,
    q: float,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """``quantile1 - quantile2`` of two histograms, with a percentile-bootstrap interval.

    Each side is resampled on its own (the sides are independent), ``resamples``
    times from a generator seeded with ``seed`` (the same inputs give the same
    interval); the interval is the ``alpha/2`` and ``1 - alpha/2`` quantiles of the
    resampled differences. Undefined when either side is empty.
    """
    one, two = Histogram.of(histogram1), Histogram.of(histogram2)
    _check_quantile(q)
    check_level(level)
    if not 1 <= resamples <= MAX_RESAMPLES:
        raise ValueError(f"resamples is between 1 and {MAX_RESAMPLES}, not {resamples}")
    method = f"{BOOTSTRAP} ({resamples} resamples)"
    smaller = min(one.n, two.n)
    q1, q2 = one.quantile(q), two.quantile(q)
    if q1 is None or q2 is None:
        return undefined(method, level, smaller)
    rng = np.random.default_rng(seed)
    differences = _resampled_quantiles(one, q, resamples, rng) - _resampled_quantiles(
        two, q, resamples, rng
    )
    alpha = 1.0 - level
    low, high = np.quantile(differences, [alpha / 2.0, 1.0 - alpha / 2.0])
    return Interval(
        q1 - q2,
        float(low),
        float(high),
        smaller,
        method,
        level,
        small_sample=smaller < MIN_SAMPLE,
    )
