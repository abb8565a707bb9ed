"""Altair chart builders for the dashboard: frames in, charts out, no Streamlit here."""

from __future__ import annotations

import altair as alt
import polars as pl

from convo_analytics.transform import STEPS

#: Readable names of the metrics the daily charts can plot.
SERIES = {
    "conversations": "Conversations started",
    "engagedConversations": "Engaged conversations",
    "resolutionRate": "Resolution rate",
    "containmentRate": "Containment rate",
    "escalationRate": "Escalation rate",
    "abandonmentRate": "Abandonment rate",
    "assistantResponses": "Assistant responses",
    "leadsQualified": "Leads qualified",
    "csat": "CSAT",
    "avgRating": "Average rating",
    "avgConfidence": "Average confidence",
    "lowConfidenceShare": "Low-confidence share",
    "guardrailTriggersPer1000Responses": "Guardrail triggers per 1,000 responses",
}
PERCENTILES = {
    "latencyP50Ms": "p50",
    "latencyP90Ms": "p90",
    "latencyP95Ms": "p95",
    "latencyP99Ms": "p99",
}


def daily_line(daily: pl.DataFrame, metric: str) -> alt.Chart:
    """One metric per day."""
    title = SERIES.get(metric, metric)
    chart: alt.Chart = (
        alt.Chart(daily.select("date", metric))
        .mark_line(point=True)
        .encode(
            x=alt.X("date:T", title="day"),
            y=alt.Y(f"{metric}:Q", title=title),
            tooltip=["date:T", alt.Tooltip(f"{metric}:Q", title=title, format=",.3~f")],
        )
        .properties(height=260)
    )
    return chart


def bars(frame: pl.DataFrame, category: str, value: str, title: str | None = None) -> alt.Chart:
    """A horizontal bar per category."""
    chart: alt.Chart = (
        alt.Chart(frame.select(category, value))
        .mark_bar()
        .encode(
            y=alt.Y(f"{category}:N", sort="-x", title=category.replace("_", " ")),
            x=alt.X(f"{value}:Q", title=title or value.replace("_", " ")),
            tooltip=[f"{category}:N", alt.Tooltip(f"{value}:Q", format=",.3~f")],
        )
        .properties(height=max(120, 24 * frame.height))
    )
    return chart


def latency_percentiles(daily: pl.DataFrame) -> alt.Chart:
    """Assistant latency percentiles per day, one line each."""
    long = daily.select("date", *PERCENTILES).unpivot(
        index="date", variable_name="percentile", value_name="ms"
    )
    long = long.with_columns(pl.col("percentile").replace(PERCENTILES))
    chart: alt.Chart = (
        alt.Chart(long)
        .mark_line()
        .encode(
            x=alt.X("date:T", title="day"),
            y=alt.Y("ms:Q", title="latency (ms)"),
            color=alt.Color("percentile:N", sort=list(PERCENTILES.values())),
            tooltip=["date:T", "percentile:N", alt.Tooltip("ms:Q", format=",.0f")],
        )
        .properties(height=260)
    )
    return chart


def confidence_bands(distribution: pl.DataFrame) -> alt.Chart:
    """Responses per day stacked by confidence band."""
    chart: alt.Chart = (
        alt.Chart(distribution)
        .mark_bar()
        .encode(
            x=alt.X("date:T", title="day"),
            y=alt.Y("responses:Q", stack="normalize", title="share of responses"),
            color=alt.Color(
                "band:O", title="confidence ≥", scale=alt.Scale(scheme="redyellowgreen")
            ),
            tooltip=["date:T", "band:O", "responses:Q"],
        )
        .properties(height=260)
    )
    return chart


def funnel_chart(funnel: pl.DataFrame) -> alt.Chart:
    """The lead funnel's steps as bars, in step order, labelled with step conversion."""
    order = [step for step, _ in STEPS]
    chart: alt.Chart = (
        alt.Chart(funnel)
        .mark_bar()
        .encode(
            y=alt.Y("step:N", sort=order, title=None),
            x=alt.X("conversations:Q"),
            tooltip=[
                "step:N",
                "conversations:Q",
                alt.Tooltip("step_conversion:Q", format=".1%"),
                alt.Tooltip("conversion_from_start:Q", format=".1%"),
            ],
        )
        .properties(height=220)
    )
    return chart


def incidents_by_flag(per_flag_per_day: pl.DataFrame) -> alt.Chart:
    """Guardrail incidents per day, stacked by flag."""
    chart: alt.Chart = (
        alt.Chart(per_flag_per_day)
        .mark_bar()
        .encode(
            x=alt.X("date:T", title="day"),
            y=alt.Y("incidents:Q"),
            color=alt.Color("flag:N"),
            tooltip=["date:T", "flag:N", "incidents:Q"],
        )
        .properties(height=260)
    )
    return chart
