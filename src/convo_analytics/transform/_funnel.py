"""The lead funnel: from conversation started to handed off to sales.

A conversation reaches a step when it has reached every earlier step too (a
strict funnel), so counts never grow down the funnel. Time between steps is
the median, over the conversations that reached the later step, of the later
step's time minus the earlier one's, floored at zero (contact details are
often given before the lead is scored). Steps and their dating are defined in
docs/warehouse.md ("Lead funnel").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

import polars as pl

from convo_analytics.transform._cube import local_date

#: (step, the mart_conversations column that dates it)
STEPS: tuple[tuple[str, str], ...] = (
    ("started", "started_at"),
    ("engaged", "engaged_at"),
    ("scored", "scored_at"),
    ("qualified", "qualified_at"),
    ("contact_captured", "contact_captured_at"),
    ("handed_off", "handed_off_at"),
)
#: Lead score bands: (label, lowest score, highest score exclusive).
SCORE_BANDS: tuple[tuple[str, float, float], ...] = (
    ("0-19", 0, 20),
    ("20-39", 20, 40),
    ("40-59", 40, 60),
    ("60-79", 60, 80),
    ("80-100", 80, 101),
)


def in_range(conversations: pl.DataFrame, first: date, last: date, tz: str) -> pl.DataFrame:
    """The conversations that started on ``first``..``last`` in ``tz``."""
    return conversations.filter(local_date("started_at", tz).is_between(first, last))


def lead_funnel(conversations: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """One row per slice and step: count, step conversion, drop-off, median time from previous."""
    reached = pl.lit(True)
    parts = []
    group = list(by)
    previous: str | None = None
    frame = conversations
    for position, (step, column) in enumerate(STEPS):
        reached = reached & pl.col(column).is_not_null()
        name = f"_reached_{position}"
        frame = frame.with_columns(reached.alias(name))
        gap = (
            (pl.col(column) - pl.col(previous)).dt.total_microseconds() / 1_000_000
            if previous
            else pl.lit(None, pl.Float64)
        )
        aggs = [
            pl.col(name).sum().cast(pl.Int64).alias("conversations"),
            gap.clip(lower_bound=0)
            .filter(pl.col(name))
            .median()
            .alias("median_seconds_from_previous"),
        ]
        part = frame.group_by(group).agg(aggs) if group else frame.select(aggs)
        parts.append(part.with_columns(step=pl.lit(step), position=pl.lit(position)))
        previous = column
    out = pl.concat(parts, how="diagonal_relaxed").sort(*group, "position")
    before = pl.col("conversations").shift(1)
    start = pl.col("conversations").first()
    if group:
        before, start = before.over(group), start.over(group)
    return out.select(
        *group,
        "position",
        "step",
        "conversations",
        pl.when(before > 0).then(pl.col("conversations") / before).alias("step_conversion"),
        (before - pl.col("conversations")).alias("drop_off"),
        pl.when(start > 0).then(pl.col("conversations") / start).alias("conversion_from_start"),
        "median_seconds_from_previous",
    )


def score_bands(conversations: pl.DataFrame) -> pl.DataFrame:
    """Scored leads per score band, with how many qualified."""
    leads = conversations.filter(pl.col("lead_score").is_not_null())
    band = pl.lit(None, pl.String)
    for label, lo, hi in reversed(SCORE_BANDS):
        band = (
            pl.when((pl.col("lead_score") >= lo) & (pl.col("lead_score") < hi))
            .then(pl.lit(label))
            .otherwise(band)
        )
    bands = pl.DataFrame(
        {"band": [b[0] for b in SCORE_BANDS], "position": list(range(len(SCORE_BANDS)))}
    )
    counts = leads.group_by(band.alias("band")).agg(
        pl.len().cast(pl.Int64).alias("leads"),
        pl.col("qualified_at").is_not_null().sum().cast(pl.Int64).alias("qualified"),
    )
    return (
        bands.join(counts, on="band", how="left")
        .with_columns(pl.col("leads").fill_null(0), pl.col("qualified").fill_null(0))
        .with_columns(
            pl.when(pl.col("leads") > 0)
            .then(pl.col("qualified") / pl.col("leads"))
            .alias("qualification_rate")
        )
        .sort("position")
        .drop("position")
    )
