"""Overview: KPI tiles against the previous period, the daily series, breakdowns."""

from __future__ import annotations

import polars as pl
import streamlit as st

from convo_analytics.dashboard import charts
from convo_analytics.dashboard._session import (
    download,
    filters,
    query,
    require_snapshot,
    show_table,
)


def _shown(value: float | None, fmt: str) -> str:
    if value is None:
        return "–"
    if fmt == "percent":
        return f"{value:.1%}"
    if fmt == "count":
        return f"{value:,.0f}"
    return f"{value:,.1f}"


def _delta(now: float | None, before: float | None, fmt: str) -> str | None:
    if now is None or before is None:
        return None
    if fmt == "percent":
        return f"{(now - before) * 100:+.1f} pts"
    return f"{now - before:+,.1f}" if fmt == "number" else f"{now - before:+,.0f}"


snap = require_snapshot()
f = filters()
st.title("Overview")
st.caption(f"{f.first} to {f.last} ({f.tz}), against the {f.days} days before")
tiles = query(snap, "kpis", f)
for row in (tiles[:4], tiles[4:]):
    for column, tile in zip(st.columns(len(row)), row, strict=True):
        column.metric(
            tile["label"],
            _shown(tile["value"], tile["format"]),
            _delta(tile["value"], tile["previous"], tile["format"]),
            delta_color="inverse" if tile["metric"] in ("escalationRate", "latencyP95Ms",
                                                         "guardrailTriggersPer1000Responses")
            else "normal",
        )  # fmt: skip
download(pl.DataFrame(tiles), "kpis", "Download the KPIs as CSV")

daily = query(snap, "daily", f)
metric = st.selectbox(
    "Daily series",
    list(charts.SERIES),
    format_func=lambda m: charts.SERIES[m],
    key="overview_metric",
)
st.altair_chart(charts.daily_line(daily, metric), width="stretch")
download(daily, "daily_metrics", "Download the daily metrics as CSV")

st.subheader("Breakdowns")
tabs = st.tabs(["Channel", "Locale", "Intent", "Source", "Model tier"])
for tab, dimension in zip(
    tabs, ("channel", "locale", "intent", "source", "model_tier"), strict=True
):
    with tab:
        frame = query(snap, "breakdown_by", f, dimension)
        value = "responses" if dimension == "model_tier" else "conversations"
        st.altair_chart(charts.bars(frame, dimension, value), width="stretch")
        show_table(frame, f"breakdown_{dimension}")
