"""Judging one window: its bounds, whether it breaches them, and the episode it is part of.

Pure functions over numbers, so each rule is tested on its own:

- :func:`windows_to_judge` / :func:`baseline_windows`: which windows a run judges,
  and which earlier windows a window is compared with (the same weekday over the
  last N weeks, or the trailing N windows);
- :func:`bounds`: the normal range. For a threshold, the thresholds. For a baseline,
  ``b ± k·√(phi·(v + s²/N))``: ``b`` the mean of the N baseline windows' values and
  ``s²`` their variance; ``v`` the variance chance alone gives a window of the judged
  one's size were ``b`` the truth (binomial for a proportion, Poisson for counts and
  rates, at least one unit; for a percentile, from its histogram's order-statistic
  interval; 0 for a mean); ``phi`` the series' dispersion (:func:`dispersion`: how much
  more than chance its recent windows strayed from their own baselines, at least 1).
  A young series without enough history for ``phi`` uses ``v + max(s² - v̄, 0) +
  s²/N``. A window is judged only when its sample (the conversations it holds) is at
  least ``min_sample`` and at least two baseline windows (or all asked for, when
  fewer) reach that sample too;
- :func:`advance`: the episode state machine. ``ok`` → a breach opens an episode
  (``alerting``; one alert) → breaches keep it open → the first judged window within
  bounds closes it (``resolved``; one resolve notice) → ``ok``. A window that is not
  judged changes nothing (decision D-MONITORS).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal

from convo_analytics.config import MonitorSpec
from convo_analytics.monitors._catalogue import MetricSpec

__all__ = [
    "Bounds",
    "Figures",
    "Step",
    "Transition",
    "advance",
    "baseline_windows",
    "bounds",
    "last_complete_window",
    "window_of",
    "windows_to_judge",
]

State = Literal["ok", "alerting", "resolved"]
Transition = Literal["alert", "resolve"]


def window_of(day: date, window: str) -> tuple[date, date]:
    """The window holding ``day``: the day itself, or its ISO week (Monday to Sunday)."""
    if window == "day":
        return day, day
    start = day - timedelta(days=day.weekday())
    return start, start + timedelta(days=6)


def last_complete_window(today: date, window: str) -> tuple[date, date]:
    """The latest window that ended before ``today`` (a local date)."""
    start, _ = window_of(today, window)
    return window_of(start - timedelta(days=1), window)


def _step(window: str) -> timedelta:
    return timedelta(days=1 if window == "day" else 7)


def windows_to_judge(
    first_day: date, after: date | None, today: date, window: str, lookback_days: int
) -> list[tuple[date, date]]:
    """The complete windows a run judges, oldest first: those after ``after`` (the series'
    last judged window start), not before ``today - lookback_days`` nor before the
    series' first day with data."""
    last_start, _ = last_complete_window(today, window)
    start, _ = window_of(max(first_day, today - timedelta(days=lookback_days)), window)
    if after is not None:
        start = max(start, after + _step(window))
    out = []
    while start <= last_start:
        out.append(window_of(start, window))
        start += _step(window)
    return out


#: Windows before a judged one whose residuals calibrate the series' dispersion.
CALIBRATION = {"day": 28, "week": 12}


def previous_windows(start: date, window: str, count: int) -> list[tuple[date, date]]:
    """The ``count`` windows before the one starting at ``start``, newest first."""
    step = _step(window)
    return [window_of(start - step * i, window) for i in range(1, count + 1)]


def baseline_windows(start: date, spec: MonitorSpec) -> list[tuple[date, date]]:
    """The earlier windows the window starting at ``start`` is compared with, newest first."""
    step = _step(spec.window)
    if spec.baseline == "same_weekday":  # a day: the same weekday; a week: the weeks before
        every = timedelta(days=7)
        return [window_of(start - every * i, spec.window) for i in range(1, spec.weeks + 1)]
    return [window_of(start - step * i, spec.window) for i in range(1, spec.windows + 1)]


@dataclass(frozen=True, slots=True)
class Bounds:
    """The normal range of a window (``None``: unbounded on that side), what it rests on,
    and why a window was not judged (``reason``)."""

    baseline: float | None
    lower: float | None
    upper: float | None
    used: int = 0
    reason: str = ""

    @property
    def judgeable(self) -> bool:
        return not self.reason


@dataclass(frozen=True, slots=True)
class Figures:
    """A window's figures: its value, sample (conversations), the count the metric is a
    share or rate of, and (percentiles) the variance of the value from its histogram."""

    value: float | None
    sample: int
    denominator: float
    variance: float | None = None


def _chance(metric: MetricSpec, centre: float, window: Figures) -> float:
    """The variance chance alone gives ``window``'s value were ``centre`` the truth."""
    if metric.kind == "percentile":
        return window.variance or 0.0
    return metric.sampling_variance(centre, window.denominator)


#: The median of a chi-square with one degree of freedom: a squared standard normal's.
_CHI2_1_MEDIAN = 0.454936
#: Residuals needed before a series' own dispersion is trusted.
MIN_CALIBRATION = 7


@dataclass(frozen=True, slots=True)
class _Baseline:
    centre: float
    #: The variance of ``centre`` as an estimate of the judged window's normal value.
    centre_variance: float
    spread2: float
    chance_before: float
    n: int


def _usable(spec: MonitorSpec, f: Figures) -> bool:
    return f.value is not None and math.isfinite(f.value) and f.sample >= spec.min_sample


def _pooled(
    spec: MonitorSpec, values: Sequence[float], trailing: Sequence[tuple[int, Figures]]
) -> tuple[float, float] | None:
    """The same weekday's centre shrunk towards the trailing days' level by how much
    weekdays really differ (partial pooling), and its variance; None with too few days.

    ``trailing``: (weekday, figures) of the ``7 * weeks`` days before the judged one.
    With ``W`` the days' variance within a weekday, ``B`` the variance of the weekday
    means (each of about ``m`` days), ``tau² = max(B - W/m, 0)`` is what weekdays truly
    differ by, and ``lam = tau² / (tau² + W/N)`` how much of the same weekday's own
    mean (of ``N`` days) to trust: 1 for a metric with a strong weekly rhythm (the
    number of conversations), near 0 for one without (a rate), which then rests on all
    the trailing days instead of four."""
    groups: dict[int, list[float]] = {}
    for weekday, f in trailing:
        if _usable(spec, f) and f.value is not None:
            groups.setdefault(weekday, []).append(f.value)
    several = [g for g in groups.values() if len(g) >= 2]
    every = [v for g in groups.values() for v in g]
    if len(several) < 3 or len(every) < 10 or not values:
        return None
    within = statistics.fmean(statistics.variance(g) for g in several)
    per_group = statistics.fmean(len(g) for g in several)
    between = statistics.variance([statistics.fmean(g) for g in several])
    tau2 = max(between - within / per_group, 0.0)
    level, own = statistics.fmean(every), statistics.fmean(values)
    n = len(values)
    lam = tau2 / (tau2 + within / n) if tau2 + within > 0 else 1.0
    centre = level + lam * (own - level)
    variance = lam * lam * within / n + (1 - lam) ** 2 * within / len(every)
    return centre, variance


def _baseline(
    spec: MonitorSpec,
    metric: MetricSpec,
    history: Sequence[Figures],
    trailing: Sequence[tuple[int, Figures]] = (),
) -> _Baseline | int:
    """The baseline windows' centre and its variance, their variance and mean chance
    variance; or how many were usable when too few were."""
    usable = [f for f in history if _usable(spec, f)]
    asked = spec.weeks if spec.baseline == "same_weekday" else spec.windows
    if len(usable) < min(2, asked):
        return len(usable)
    values = [f.value for f in usable if f.value is not None]
    centre = statistics.fmean(values)
    spread2 = statistics.variance(values) if len(values) > 1 else 0.0
    centre_variance = spread2 / len(values)
    if trailing and (pooled := _pooled(spec, values, trailing)) is not None:
        centre, centre_variance = pooled
    chance_before = statistics.fmean(_chance(metric, centre, f) for f in usable)
    return _Baseline(centre, centre_variance, spread2, chance_before, len(values))


def _chance_now(metric: MetricSpec, centre: float, now: Figures) -> float:
    """The judged window's chance variance, at least one unit of the metric squared."""
    den = now.denominator
    unit = 1.0 if metric.kind == "count" else metric.per / den if den > 0 else 0.0
    floor = unit * unit if metric.kind != "percentile" else 0.0
    return max(_chance(metric, centre, now), floor)


def residual(
    spec: MonitorSpec,
    metric: MetricSpec,
    now: Figures,
    history: Sequence[Figures],
    trailing: Sequence[tuple[int, Figures]] = (),
) -> float | None:
    """A past window's squared standardised distance from its own baseline, by the chance
    model alone (``(x - b)² / (v + var(b))``); None when it could not have been judged."""
    base = _baseline(spec, metric, history, trailing)
    if isinstance(base, int) or now.value is None or now.sample < spec.min_sample:
        return None
    scale = _chance_now(metric, base.centre, now) + base.centre_variance
    if scale <= 0 or not math.isfinite(now.value):
        return None
    return (now.value - base.centre) ** 2 / scale


def dispersion(residuals: Sequence[float]) -> float | None:
    """How much more the series varies than chance says: the median of its recent squared
    standardised residuals over a squared normal's median, at least 1 (None: too few)."""
    if len(residuals) < MIN_CALIBRATION:
        return None
    return max(1.0, statistics.median(residuals) / _CHI2_1_MEDIAN)


def bounds(
    spec: MonitorSpec,
    metric: MetricSpec,
    now: Figures,
    history: Sequence[Figures],
    phi: float | None = None,
    trailing: Sequence[tuple[int, Figures]] = (),
) -> Bounds:
    """The window ``now``'s bounds from its baseline windows ``history`` (threshold
    monitors: the thresholds); ``phi``: the series' dispersion (:func:`dispersion`);
    ``trailing``: the days before a same-weekday day window, for partial pooling."""
    if spec.condition == "threshold":
        return Bounds(None, spec.below, spec.above)
    base = _baseline(spec, metric, history, trailing)
    if isinstance(base, int):
        asked = spec.weeks if spec.baseline == "same_weekday" else spec.windows
        return Bounds(
            None, None, None, base,
            f"baseline: {base} of {asked} windows with {spec.min_sample}+ conversations",
        )  # fmt: skip
    chance_now = _chance_now(metric, base.centre, now)
    if phi is not None:  # the series' own calibration of the chance model
        variance = phi * (chance_now + base.centre_variance)
    else:  # too little history: what varies beyond chance, from the baseline windows
        between = max(base.spread2 - base.chance_before, 0.0)
        variance = chance_now + between + base.centre_variance
    width = spec.k * math.sqrt(variance)
    lower = base.centre - width if spec.direction in ("down", "both") else None
    upper = base.centre + width if spec.direction in ("up", "both") else None
    return Bounds(base.centre, lower, upper, base.n)


def breach_of(value: float, b: Bounds) -> str:
    """Which bound ``value`` crosses ('' when within them)."""
    if b.upper is not None and value > b.upper:
        return "above upper bound"
    if b.lower is not None and value < b.lower:
        return "below lower bound"
    return ""


@dataclass(frozen=True, slots=True)
class Step:
    """A series' state after a window, and what the window changed."""

    state: State
    episode_start: date | None
    transition: Transition | None = None


def advance(
    state: str | None, episode_start: date | None, judged: bool, breach: bool, start: date
) -> Step:
    """The state after a window starting at ``start`` (see the module's docstring)."""
    was_alerting = state == "alerting"
    if not judged:
        if was_alerting:
            return Step("alerting", episode_start)
        return Step("ok", None)
    if breach:
        if was_alerting:
            return Step("alerting", episode_start)
        return Step("alerting", start, "alert")
    if was_alerting:
        return Step("resolved", episode_start, "resolve")
    return Step("ok", None)
