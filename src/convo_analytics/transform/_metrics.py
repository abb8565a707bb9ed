"""Date-range metrics from the daily cube: one code path for every view of a number.

The dashboard's tiles, its daily charts, `convo export summary` and
`convo serve` all call :func:`metrics_table` (and :func:`breakdown` for the
per-flag and per-tier maps), so two views of the same figure cannot disagree.
Names follow the service's summary (``SummaryMetrics``); docs/warehouse.md
("Metrics") defines each one.
"""

from __future__ import annotations

import math
from datetime import date
from typing import Any

import numpy as np
import polars as pl

from convo_analytics.contract._summary import SummaryMetrics
from convo_analytics.transform._cube import CONFIDENCE_SCALE, Cube

#: Summed cube columns, by the metric name they become.
COUNTS: dict[str, tuple[str, str]] = {
    "conversations": ("conversations", "conversations"),
    "engagedConversations": ("conversations", "engaged_conversations"),
    "resolved": ("conversations", "resolved"),
    "abandoned": ("conversations", "abandoned"),
    "open": ("conversations", "open"),
    "escalatedConversations": ("conversations", "escalated_conversations"),
    "containedConversations": ("conversations", "contained_conversations"),
    "leadsQualified": ("conversations", "leads_qualified"),
    "feedbackCount": ("conversations", "feedback_count"),
    "positiveFeedback": ("conversations", "positive_feedback"),
    "ratingSum": ("conversations", "rating_sum"),
    "userMessages": ("messages", "user_messages"),
    "assistantResponses": ("messages", "assistant_responses"),
    "lowConfidenceResponses": ("messages", "low_confidence_responses"),
    "escalations": ("escalations", "escalations"),
    "guardrailTriggers": ("guardrails", "triggers"),
}
SUMS: dict[str, tuple[str, str]] = {"confidenceNanos": ("messages", "confidence_nanos")}
#: Rates: metric -> (numerator, denominator, scale).
RATES: dict[str, tuple[str, str, float]] = {
    "resolutionRate": ("resolved", "conversations", 1.0),
    "containmentRate": ("containedConversations", "conversations", 1.0),
    "escalationRate": ("escalatedConversations", "conversations", 1.0),
    "abandonmentRate": ("abandoned", "conversations", 1.0),
    "leadQualificationRate": ("leadsQualified", "conversations", 1.0),
    "avgRating": ("ratingSum", "feedbackCount", 1.0),
    "csat": ("positiveFeedback", "feedbackCount", 1.0),
    "guardrailTriggersPer1000Responses": ("guardrailTriggers", "assistantResponses", 1000.0),
    "avgConfidence": ("confidenceNanos", "assistantResponses", 1.0 / CONFIDENCE_SCALE),
    "lowConfidenceShare": ("lowConfidenceResponses", "assistantResponses", 1.0),
}
LATENCY_QUANTILES = {
    "latencyP50Ms": 0.5,
    "latencyP90Ms": 0.9,
    "latencyP95Ms": 0.95,
    "latencyP99Ms": 0.99,
}
MEDIANS = {
    "medianFirstResponseMs": "first_response_ms",
    "medianTimeToResolutionSeconds": "resolution_seconds",
}
PERIOD = "date"


def _periods(first: date, last: date, by_day: bool) -> pl.LazyFrame:
    if by_day:
        return pl.LazyFrame({PERIOD: pl.date_range(first, last, eager=True)})
    return pl.LazyFrame({PERIOD: [first]})


def _period(frame: pl.DataFrame, first: date, last: date, by_day: bool) -> pl.LazyFrame:
    """The frame's rows of the range, keyed by day or all under one period."""
    rows = frame.lazy().filter(pl.col(PERIOD).is_between(first, last))
    return rows if by_day else rows.with_columns(pl.lit(first).alias(PERIOD))


def weighted_quantiles(
    frame: pl.LazyFrame, value: str, weight: str, quantiles: dict[str, float]
) -> pl.LazyFrame:
    """Per period, each quantile of ``value`` repeated ``weight`` times.

    Linear interpolation between closest ranks (DuckDB's quantile_cont,
    numpy's "linear"), exactly as over the expanded values: the histogram is
    summed and sorted by polars, then each wanted rank is found by binary
    search in its period's cumulative counts.
    """
    hist = (
        frame.group_by(PERIOD, value)
        .agg(pl.col(weight).sum().alias("_n"))
        .sort(PERIOD, value)
        .collect()
    )
    out: dict[str, list[Any]] = {PERIOD: [], **{name: [] for name in quantiles}}
    if hist.height:
        days = hist[PERIOD].cast(pl.Int32).to_numpy()
        values = hist[value].cast(pl.Float64).to_numpy()
        counts = hist["_n"].cast(pl.Int64).to_numpy()
        cuts = np.flatnonzero(days[1:] != days[:-1]) + 1
        for lo_row, hi_row in zip(np.r_[0, cuts], np.r_[cuts, len(days)], strict=True):
            cum = np.cumsum(counts[lo_row:hi_row])
            total = int(cum[-1])
            out[PERIOD].append(hist[PERIOD][int(lo_row)])
            for name, q in quantiles.items():
                pos = q * (total - 1)
                lo = math.floor(pos)
                hi = min(lo + 1, total - 1)
                v_lo = float(values[lo_row + np.searchsorted(cum, lo, side="right")])
                v_hi = float(values[lo_row + np.searchsorted(cum, hi, side="right")])
                out[name].append(v_lo + (v_hi - v_lo) * (pos - lo))
    schema = {PERIOD: pl.Date, **{name: pl.Float64 for name in quantiles}}
    return pl.LazyFrame(out, schema=schema)


def _metrics_plan(cube: Cube, first: date, last: date, by_day: bool) -> pl.LazyFrame:
    table = _periods(first, last, by_day)
    sums: dict[str, list[pl.Expr]] = {}
    for name, (frame, column) in {**COUNTS, **SUMS}.items():
        sums.setdefault(frame, []).append(pl.col(column).sum().alias(name))
    for frame, exprs in sums.items():
        part = _period(getattr(cube, frame), first, last, by_day).group_by(PERIOD).agg(exprs)
        table = table.join(part, on=PERIOD, how="left")
    table = table.with_columns(pl.col(name).fill_null(0) for name in (*COUNTS, *SUMS))
    table = table.with_columns(
        pl.when(pl.col(den) > 0).then(pl.col(num) * scale / pl.col(den)).alias(name)
        for name, (num, den, scale) in RATES.items()
    )
    for part in _percentile_plans(cube, first, last, by_day):
        table = table.join(part, on=PERIOD, how="left")
    return table.sort(PERIOD)


def _percentile_plans(cube: Cube, first: date, last: date, by_day: bool) -> list[pl.LazyFrame]:
    """Latency percentiles and median durations per period, from the histograms."""
    if by_day and cube.daily_percentiles is not None:
        return [cube.daily_percentiles.lazy().filter(pl.col(PERIOD).is_between(first, last))]
    if cube.histogram_range is not None and cube.histogram_range != (first, last):
        raise ValueError(f"this cube's histograms cover {cube.histogram_range}, not the range")
    plans = [
        weighted_quantiles(
            _period(cube.latency, first, last, by_day), "latency_ms", "responses", LATENCY_QUANTILES
        )
    ]
    for name, measure in MEDIANS.items():
        part = _period(cube.durations, first, last, by_day).filter(pl.col("measure") == measure)
        plans.append(weighted_quantiles(part, "value", "conversations", {name: 0.5}))
    return plans


def daily_percentiles(cube: Cube) -> pl.DataFrame:
    """Each day's percentiles over the whole cube (what ``mart_daily_percentiles`` keeps)."""
    days = cube.conversations.select(PERIOD)
    for frame in (cube.messages, cube.latency, cube.durations):
        days = pl.concat([days, frame.select(PERIOD)])
    if days.is_empty():
        return pl.DataFrame(
            schema={PERIOD: pl.Date, **dict.fromkeys([*LATENCY_QUANTILES, *MEDIANS], pl.Float64)}
        )
    first, last = days[PERIOD].min(), days[PERIOD].max()
    assert isinstance(first, date) and isinstance(last, date)
    table = _periods(first, last, True)
    for part in _percentile_plans(cube, first, last, True):
        table = table.join(part, on=PERIOD, how="left")
    return table.sort(PERIOD).collect()


def metrics_table(cube: Cube, first: date, last: date, *, by_day: bool = True) -> pl.DataFrame:
    """Every scalar metric for ``first``..``last``: a row per day, or one row for the range.

    Days without data are present, with zero counts and null rates.
    """
    return _metrics_plan(cube, first, last, by_day).collect()


def _breakdown_plan(
    cube: Cube, first: date, last: date, frame: str, key: str, value: str, by_day: bool
) -> pl.LazyFrame:
    return (
        _period(getattr(cube, frame), first, last, by_day)
        .filter(pl.col(key).is_not_null())
        .group_by(PERIOD, key)
        .agg(pl.col(value).sum())
        .sort(PERIOD, key)
    )


def breakdown(
    cube: Cube, first: date, last: date, frame: str, key: str, value: str, *, by_day: bool = True
) -> pl.DataFrame:
    """``value`` summed per period and ``key`` (e.g. guardrail triggers by flag)."""
    return _breakdown_plan(cube, first, last, frame, key, value, by_day).collect()


def flag_rates(cube: Cube, first: date, last: date) -> pl.DataFrame:
    """Guardrail triggers per flag over the range, and per 1,000 assistant responses."""
    flags = breakdown(cube, first, last, "guardrails", "flag", "triggers", by_day=False)
    (responses,) = metrics_table(cube, first, last, by_day=False)["assistantResponses"]
    return flags.drop(PERIOD).with_columns(
        (1000 * pl.col("triggers") / responses if responses else pl.lit(None, pl.Float64)).alias(
            "per_1000_responses"
        )
    )


#: The summary's maps: name -> (cube frame, key, summed value).
MAPS = {
    "guardrailTriggersByFlag": ("guardrails", "flag", "triggers"),
    "modelTierMix": ("messages", "model_tier", "assistant_responses"),
}


def _as_maps(frames: list[pl.DataFrame]) -> dict[str, dict[date, dict[str, int]]]:
    out: dict[str, dict[date, dict[str, int]]] = {}
    for name, frame in zip(MAPS, frames, strict=True):
        per: dict[date, dict[str, int]] = {}
        for period, key, value in frame.iter_rows():
            if value:
                per.setdefault(period, {})[key] = int(value)
        out[name] = per
    return out


def _metrics_dicts(
    table: pl.DataFrame, maps: dict[str, dict[date, dict[str, int]]]
) -> list[dict[str, Any]]:
    rows = []
    for row in table.iter_rows(named=True):
        period = row[PERIOD]
        body: dict[str, Any] = {}
        for name in SummaryMetrics.model_fields:
            if name == "latencyMs":
                body[name] = {
                    f"p{round(q * 100)}": row[col] for col, q in LATENCY_QUANTILES.items()
                }
            elif name in maps:
                body[name] = maps[name].get(period, {})
            elif name in COUNTS:
                body[name] = int(row[name])
            else:
                body[name] = row[name]
        rows.append({"date": period.isoformat(), **body})
    return rows


def summary_body(
    cube: Cube, first: date, last: date, *, workspace_id: str, generated_at: str
) -> dict[str, Any]:
    """The GET /v1/analytics/summary body for ``first``..``last`` (inclusive)."""
    plans = []
    for by_day in (True, False):
        plans.append(_metrics_plan(cube, first, last, by_day))
        plans += [_breakdown_plan(cube, first, last, *spec, by_day) for spec in MAPS.values()]
    frames = pl.collect_all(plans)
    daily = _metrics_dicts(frames[0], _as_maps(frames[1:3]))
    (totals,) = _metrics_dicts(frames[3], _as_maps(frames[4:6]))
    del totals["date"]
    return {
        "workspaceId": workspace_id,
        "from": first.isoformat(),
        "to": last.isoformat(),
        "timezone": cube.timezone,
        "lowConfidenceThreshold": cube.low_confidence_threshold,
        "generatedAt": generated_at,
        "totals": totals,
        "daily": daily,
    }
