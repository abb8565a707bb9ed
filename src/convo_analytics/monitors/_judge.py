"""Judging one window: its bounds, whether it breaches them, and the episode it is part of.

Pure functions over numbers, so each rule is tested on its own:

- :func:`windows_to_judge` / :func:`baseline_windows`: which windows a run judges,
  and which earlier windows a window is compared with (the same weekday over the
  last N weeks, or the trailing N windows);
- :func:`bounds`: the normal range. For a threshold, the thresholds. For a baseline,
  ``b ± k·√(v + max(s² - v̄, 0) + s²/N)``, a prediction interval for one more window:
  ``b`` the mean of the N baseline windows' values and ``s`` their standard deviation
  (0 with one window); ``v`` the variance chance alone gives a window of the judged
  one's size were ``b`` the truth (binomial for a proportion, Poisson for counts and
  rates; at least one unit, so a baseline of zeros does not make every single event a
  breach) and ``v̄`` the same for the baseline windows on average, so ``s² - v̄`` is
  what really varies from window to window and ``s²/N`` the uncertainty of ``b``
  itself (for a percentile, ``v`` and ``v̄`` come from each window's histogram: the
  square of half its order-statistic interval at one standard error; for a mean they
  are 0, and the spread is all ``s``). A window
  is judged only when its sample (the conversations it holds) is at least
  ``min_sample`` and at least two baseline windows (or all asked for, when fewer)
  reach that sample too;
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


def bounds(
    spec: MonitorSpec, metric: MetricSpec, now: Figures, history: Sequence[Figures]
) -> Bounds:
    """The window ``now``'s bounds from its baseline windows ``history`` (threshold
    monitors: the thresholds)."""
    if spec.condition == "threshold":
        return Bounds(None, spec.below, spec.above)
    usable = [
        f for f in history
        if f.value is not None and math.isfinite(f.value) and f.sample >= spec.min_sample
    ]  # fmt: skip
    asked = spec.weeks if spec.baseline == "same_weekday" else spec.windows
    if len(usable) < min(2, asked):
        return Bounds(
            None, None, None, len(usable),
            f"baseline: {len(usable)} of {asked} windows with {spec.min_sample}+ conversations",
        )  # fmt: skip
    values = [f.value for f in usable if f.value is not None]
    centre = statistics.fmean(values)
    spread2 = statistics.variance(values) if len(values) > 1 else 0.0
    # what chance alone gives the baseline windows on average, and the judged window
    chance_before = statistics.fmean(_chance(metric, centre, f) for f in usable)
    den = now.denominator
    unit = 1.0 if metric.kind == "count" else metric.per / den if den > 0 else 0.0
    floor = unit * unit if metric.kind != "percentile" else 0.0
    chance_now = max(_chance(metric, centre, now), floor)
    between = max(spread2 - chance_before, 0.0)  # what varies from window to window
    variance = chance_now + between + spread2 / len(values)
    width = spec.k * math.sqrt(variance)
    lower = centre - width if spec.direction in ("down", "both") else None
    upper = centre + width if spec.direction in ("up", "both") else None
    return Bounds(centre, lower, upper, len(values))


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
