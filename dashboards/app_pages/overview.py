"""Overview: KPI tiles against the previous period (when the data covers it), each change
with its 95 % interval and whether it could be noise, the daily series and breakdowns; a
click on a point or a bar opens the conversations behind it."""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from convo_analytics.compare import MIN_CONVERSATIONS
from convo_analytics.dashboard import charts
from convo_analytics.dashboard._format import delta_text, download_label, value_text
from convo_analytics.dashboard._session import (
    chart_with_drill,
    download,
    filters,
    query,
    require_snapshot,
    show_table,
    topic_options,
    topic_store_key,
)

#: Tiles whose rise is bad news (their change is coloured the other way round).
INVERSE = ("escalationRate", "latencyP95Ms", "guardrailTriggersPer1000Responses")

snap = require_snapshot()
f = filters()
st.title("Overview")
tiles = query(snap, "kpis", f)
covered = query(snap, "previous_covered", f)
if covered:
    st.caption(f"{f.first} to {f.last} ({f.tz}), against the {f.days} days before")
else:
    span = query(snap, "data_range", f.workspace)
    st.caption(
        f"{f.first} to {f.last} ({f.tz}). No comparison with the {f.days} days before: the "
        f"data starts on {span[0]}, so that period is not covered (choose a later or shorter "
        "range to compare)."
    )


def _help(tile: dict[str, Any]) -> str | None:
    """What a tile's change means: whether it could be noise (its interval holds 0)."""
    if not covered or tile["noise"] is None:
        return None
    if tile["small"]:
        return (f"A period has fewer than {MIN_CONVERSATIONS} conversations: too few to tell "
                "whether this change is real.")  # fmt: skip
    if tile["noise"]:
        return ("Could be noise: the change's 95 % confidence interval includes 0 (the "
                "Compare page shows every KPI's).")  # fmt: skip
    return "A real change: its 95 % confidence interval excludes 0."


for row in (tiles[:4], tiles[4:]):
    for column, tile in zip(st.columns(len(row)), row, strict=True):
        worse_up = tile["metric"] in INVERSE
        column.metric(
            tile["label"],
            value_text(tile["value"], tile["format"]),
            delta_text(tile["value"], tile["previous"], tile["format"], tile["low"], tile["high"])
            if covered
            else None,
            delta_color="off"  # a change that could be noise is not coloured as a verdict
            if tile["noise"] or tile["small"]
            else "inverse"
            if worse_up
            else "normal",
            help=_help(tile),
        )
download(pl.DataFrame(tiles), "kpis", download_label(what="the KPIs"))

st.subheader("Daily")
daily = query(snap, "daily", f)
metric = st.selectbox(
    "Series",
    list(charts.SERIES),
    format_func=lambda m: charts.SERIES[m],
    key="overview_metric",
)
chart_with_drill(charts.daily_line(daily, metric), "overview_daily", "daily", f)
st.caption("Click a day to see its conversations.")
download(daily, "daily_metrics", download_label(what="the daily metrics"))

st.subheader("Breakdowns")
dimensions = {
    "channel": "Channel",
    "locale": "Locale",
    "intent": "Intent",
    "source": "Source",
    "model_tier": "Model tier",
}
if topic_options(snap).labels:  # each workspace's topics, as analysts name them
    dimensions["topic"] = "Topic"
dimension = st.radio(
    "Break down by",
    list(dimensions),
    format_func=lambda d: dimensions[d],
    horizontal=True,
    key="overview_breakdown",
)
if dimension == "topic":
    frame = query(snap, "topic_breakdown", f, topic_store_key())
    bars = charts.bars(frame, "topic_key", "conversations", names="topic")
    chart_with_drill(bars, "overview_bars_topic", "breakdown", f)
    frame = frame.drop("topic_key")
else:
    frame = query(snap, "breakdown_by", f, dimension)
    value = "responses" if dimension == "model_tier" else "conversations"
    bars = charts.bars(frame, dimension, value)
    chart_with_drill(bars, f"overview_bars_{dimension}", "breakdown", f)
st.caption("Click a bar to see the conversations behind it.")
show_table(frame, f"breakdown_{dimension}", f.tz)
