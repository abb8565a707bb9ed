"""Date-range metrics from the daily cube: one code path for every view of a number.

The dashboard's tiles, its daily charts, `convo export summary` and
`convo serve` all call :func:`metrics_table` (and :func:`breakdown` for the
per-flag and per-tier maps), so two views of the same figure cannot disagree.
Names follow the service's summary (``SummaryMetrics``); docs/warehouse.md
("Metrics") defines each one.
"""

from __future__ import annotations

from datetime import date
from typing import Any

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


def _periods(first: date, last: date, by_day: bool) -> pl.DataFrame:
    if by_day:
        return pl.DataFrame({PERIOD: pl.date_range(first, last, eager=True)})
    return pl.DataFrame({PERIOD: [first]})


def _period(frame: pl.DataFrame, first: date, by_day: bool) -> pl.DataFrame:
    return frame if by_day else frame.with_columns(pl.lit(first).alias(PERIOD))


def weighted_quantiles(
    frame: pl.DataFrame, value: str, weight: str, quantiles: dict[str, float]
) -> pl.DataFrame:
    """Per period, each quantile of ``value`` repeated ``weight`` times.

    Linear interpolation between closest ranks (DuckDB's quantile_cont,
    numpy's "linear"), exactly as over the expanded values.
    """
    hist = (
        frame.group_by(PERIOD, value)
        .agg(pl.col(weight).sum().alias("_n"))
        .sort(PERIOD, value)
        .with_columns(
            pl.col("_n").cum_sum().over(PERIOD).alias("_cum"),
            pl.col("_n").sum().over(PERIOD).alias("_total"),
            pl.col(value).cast(pl.Float64),
        )
    )
    aggs = []
    for name, q in quantiles.items():
        pos = q * (pl.col("_total") - 1).cast(pl.Float64)
        lo = pos.floor()
        hi = pl.min_horizontal(lo + 1, pl.col("_total") - 1)
        v_lo = pl.col(value).filter(pl.col("_cum") > lo).first()
        v_hi = pl.col(value).filter(pl.col("_cum") > hi).first()
        aggs.append((v_lo + (v_hi - v_lo) * (pos - lo).first()).alias(name))
    return hist.group_by(PERIOD).agg(aggs)


def metrics_table(cube: Cube, first: date, last: date, *, by_day: bool = True) -> pl.DataFrame:
    """Every scalar metric for ``first``..``last``: a row per day, or one row for the range.

    Days without data are present, with zero counts and null rates.
    """
    cube = cube.between(first, last)
    table = _periods(first, last, by_day)
    sums: dict[str, list[pl.Expr]] = {}
    for name, (frame, column) in {**COUNTS, **SUMS}.items():
        sums.setdefault(frame, []).append(pl.col(column).sum().alias(name))
    for frame, exprs in sums.items():
        part = _period(getattr(cube, frame), first, by_day).group_by(PERIOD).agg(exprs)
        table = table.join(part, on=PERIOD, how="left")
    table = table.with_columns(pl.col(name).fill_null(0) for name in (*COUNTS, *SUMS))
    table = table.with_columns(
        pl.when(pl.col(den) > 0).then(pl.col(num) * scale / pl.col(den)).alias(name)
        for name, (num, den, scale) in RATES.items()
    )
    latency = weighted_quantiles(
        _period(cube.latency, first, by_day), "latency_ms", "responses", LATENCY_QUANTILES
    )
    table = table.join(latency, on=PERIOD, how="left")
    for name, measure in MEDIANS.items():
        part = _period(cube.durations.filter(pl.col("measure") == measure), first, by_day)
        table = table.join(
            weighted_quantiles(part, "value", "conversations", {name: 0.5}), on=PERIOD, how="left"
        )
    return table.sort(PERIOD)


def breakdown(
    cube: Cube, first: date, last: date, frame: str, key: str, value: str, *, by_day: bool = True
) -> pl.DataFrame:
    """``value`` summed per period and ``key`` (e.g. guardrail triggers by flag)."""
    part = _period(getattr(cube.between(first, last), frame), first, by_day)
    return (
        part.filter(pl.col(key).is_not_null())
        .group_by(PERIOD, key)
        .agg(pl.col(value).sum())
        .sort(PERIOD, key)
    )


def _maps(
    cube: Cube, first: date, last: date, by_day: bool
) -> dict[str, dict[date, dict[str, int]]]:
    out: dict[str, dict[date, dict[str, int]]] = {}
    for name, frame, key, value in (
        ("guardrailTriggersByFlag", "guardrails", "flag", "triggers"),
        ("modelTierMix", "messages", "model_tier", "assistant_responses"),
    ):
        per: dict[date, dict[str, int]] = {}
        for row in breakdown(cube, first, last, frame, key, value, by_day=by_day).iter_rows():
            if row[2]:
                per.setdefault(row[0], {})[row[1]] = int(row[2])
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
    daily = _metrics_dicts(metrics_table(cube, first, last), _maps(cube, first, last, True))
    (totals,) = _metrics_dicts(
        metrics_table(cube, first, last, by_day=False), _maps(cube, first, last, False)
    )
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
