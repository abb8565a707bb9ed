"""Altair chart builders for the dashboard: frames in, charts out, no Streamlit here.

Every chart is sized to its content (a bar chart grows with its bars), uses
colour-blind-safe palettes (Okabe and Ito's eight colours for categories,
viridis for ordered bands), and carries a point selection named ``PICK`` on
the fields that say which conversations are behind a mark: a page draws it
with ``on_select="rerun"`` and turns the selection into a drill-down
(``dashboard._drill``).
"""

from __future__ import annotations

import altair as alt
import polars as pl

from convo_analytics.transform import STEPS

__all__ = [
    "OKABE_ITO",
    "PERCENTILES",
    "PICK",
    "SERIES",
    "bars",
    "confidence_bands",
    "daily_line",
    "funnel_chart",
    "incidents_by_flag",
    "latency_percentiles",
    "result_chart",
    "workspace_bars",
]

#: The selection every chart carries (st.altair_chart's event names it).
PICK = "pick"
#: Okabe & Ito's palette: eight colours told apart with every common colour-vision deficiency.
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
             "#000000"]  # fmt: skip
BAR_HEIGHT = 28
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
#: Series shown as percentages on their axis and in tooltips.
PERCENT_SERIES = {"resolutionRate", "containmentRate", "escalationRate", "abandonmentRate",
                  "csat", "lowConfidenceShare"}  # fmt: skip
PERCENTILES = {
    "latencyP50Ms": "p50",
    "latencyP90Ms": "p90",
    "latencyP95Ms": "p95",
    "latencyP99Ms": "p99",
}


def _pick(*fields: str) -> alt.Parameter:
    return alt.selection_point(name=PICK, fields=list(fields), on="click", clear="dblclick")


#: Fit the container's width only: a chart's height is its plot's height, so that axes,
#: titles and legends add to it instead of squashing the marks (Streamlit's default "fit"
#: counts them in, which flattened a five-bar chart to about 40 px).
FIT_WIDTH = alt.AutoSizeParams(type="fit-x", contains="padding")


def _categorical(domain: list[str] | None = None) -> alt.Scale:
    if domain is None:
        return alt.Scale(range=OKABE_ITO)
    return alt.Scale(domain=domain, range=OKABE_ITO)


def daily_line(daily: pl.DataFrame, metric: str) -> alt.Chart:
    """One metric per day; a click on a day's point picks that day."""
    title = SERIES.get(metric, metric)
    fmt = ".1%" if metric in PERCENT_SERIES else ",.3~f"
    pick = _pick("date")
    chart: alt.Chart = (
        alt.Chart(daily.select("date", metric), title=title)
        .mark_line(point=alt.OverlayMarkDef(size=60, filled=True), color=OKABE_ITO[0])
        .encode(
            x=alt.X(
                "date:T",
                title="day",
                axis=alt.Axis(format="%b %d", tickCount="day", labelOverlap=True),
            ),
            y=alt.Y(f"{metric}:Q", title=title, axis=alt.Axis(format=fmt)),
            tooltip=[
                alt.Tooltip("date:T", title="day"),
                alt.Tooltip(f"{metric}:Q", title=title, format=fmt),
            ],
        )
        .add_params(pick)
        .properties(height=240, autosize=FIT_WIDTH)
    )
    return chart


def bars(frame: pl.DataFrame, category: str, value: str, title: str | None = None) -> alt.Chart:
    """A horizontal bar per category, as tall as its bars need; a click picks the category."""
    pick = _pick(category)
    label = title or value.replace("_", " ")
    chart: alt.Chart = (
        alt.Chart(frame.select(category, value))
        .mark_bar(color=OKABE_ITO[0])
        .encode(
            y=alt.Y(
                f"{category}:N",
                sort="-x",
                title=category.replace("_", " "),
                axis=alt.Axis(labelLimit=220),
            ),
            x=alt.X(f"{value}:Q", title=label),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.45)),
            tooltip=[
                alt.Tooltip(f"{category}:N", title=category.replace("_", " ")),
                alt.Tooltip(f"{value}:Q", title=label, format=",.3~f"),
            ],
        )
        .add_params(pick)
        .properties(height=BAR_HEIGHT * max(frame.height, 1), autosize=FIT_WIDTH)
    )
    return chart


def latency_percentiles(daily: pl.DataFrame) -> alt.Chart:
    """Assistant latency percentiles per day, one line each; a click picks the day."""
    long = daily.select("date", *PERCENTILES).unpivot(
        index="date", variable_name="percentile", value_name="ms"
    )
    long = long.with_columns(pl.col("percentile").replace(PERCENTILES))
    pick = _pick("date")
    chart: alt.Chart = (
        alt.Chart(long)
        .mark_line(point=alt.OverlayMarkDef(size=50, filled=True))
        .encode(
            x=alt.X(
                "date:T",
                title="day",
                axis=alt.Axis(format="%b %d", tickCount="day", labelOverlap=True),
            ),
            y=alt.Y("ms:Q", title="latency (ms)"),
            color=alt.Color(
                "percentile:N",
                sort=list(PERCENTILES.values()),
                scale=_categorical(list(PERCENTILES.values())),
            ),
            tooltip=[
                alt.Tooltip("date:T", title="day"),
                "percentile:N",
                alt.Tooltip("ms:Q", format=",.0f"),
            ],
        )
        .add_params(pick)
        .properties(height=240, autosize=FIT_WIDTH)
    )
    return chart


def confidence_bands(distribution: pl.DataFrame) -> alt.Chart:
    """Responses per day stacked by confidence band (viridis: ordered and colour-blind safe);
    a click picks the day and the band."""
    pick = _pick("date", "band")
    chart: alt.Chart = (
        alt.Chart(distribution)
        .mark_bar(width=alt.RelativeBandSize(0.8))
        .encode(
            x=alt.X(
                "yearmonthdate(date):T",
                title="day",
                axis=alt.Axis(format="%b %d", tickCount="day", labelOverlap=True),
            ),
            y=alt.Y(
                "responses:Q",
                stack="normalize",
                title="share of responses",
                axis=alt.Axis(format="%"),
            ),
            color=alt.Color("band:O", title="confidence ≥", scale=alt.Scale(scheme="viridis")),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.5)),
            tooltip=[
                alt.Tooltip("date:T", title="day"),
                alt.Tooltip("band:O", title="band ≥"),
                "responses:Q",
            ],
        )
        .add_params(pick)
        .properties(height=240, autosize=FIT_WIDTH)
    )
    return chart


def funnel_chart(funnel: pl.DataFrame) -> alt.Chart:
    """The lead funnel's steps as bars, in step order; a click picks the step."""
    order = [step for step, _ in STEPS]
    pick = _pick("step")
    chart: alt.Chart = (
        alt.Chart(funnel)
        .mark_bar(color=OKABE_ITO[2])
        .encode(
            y=alt.Y("step:N", sort=order, title=None),
            x=alt.X("conversations:Q"),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.45)),
            tooltip=[
                "step:N",
                alt.Tooltip("conversations:Q", format=","),
                alt.Tooltip("step_conversion:Q", format=".1%", title="step conversion"),
                alt.Tooltip("conversion_from_start:Q", format=".1%", title="from start"),
            ],
        )
        .add_params(pick)
        .properties(height=BAR_HEIGHT * max(funnel.height, 1), autosize=FIT_WIDTH)
    )
    return chart


def incidents_by_flag(per_flag_per_day: pl.DataFrame) -> alt.Chart:
    """Guardrail incidents per day, stacked by flag (distinct colours); a click picks the
    day and the flag."""
    flags = sorted(set(per_flag_per_day["flag"].to_list())) if per_flag_per_day.height else None
    pick = _pick("date", "flag")
    chart: alt.Chart = (
        alt.Chart(per_flag_per_day)
        .mark_bar(width=alt.RelativeBandSize(0.8))
        .encode(
            x=alt.X(
                "yearmonthdate(date):T",
                title="day",
                axis=alt.Axis(format="%b %d", tickCount="day", labelOverlap=True),
            ),
            y=alt.Y("incidents:Q"),
            color=alt.Color("flag:N", scale=_categorical(flags)),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.5)),
            tooltip=[alt.Tooltip("date:T", title="day"), "flag:N", "incidents:Q"],
        )
        .add_params(pick)
        .properties(height=260, autosize=FIT_WIDTH)
    )
    return chart


def result_chart(frame: pl.DataFrame, kind: str, x: str, y: str, color: str | None) -> alt.Chart:
    """An Explore cell's chart: ``kind`` (line, bar, area or point) of ``y`` over ``x``."""
    dtype = frame.schema[x]
    if isinstance(dtype, pl.Date | pl.Datetime):
        x_enc = alt.X(f"{x}:T", title=x)
    elif dtype.is_numeric():
        x_enc = alt.X(f"{x}:Q", title=x)
    else:
        x_enc = alt.X(f"{x}:N", title=x, sort="-y", axis=alt.Axis(labelLimit=200))
    encoding: dict[str, object] = {
        "x": x_enc,
        "y": alt.Y(f"{y}:Q", title=y),
        "tooltip": [c for c in (x, y, color) if c],
    }
    if color:
        shown = frame[color].cast(pl.String).unique().sort().to_list()[: len(OKABE_ITO)]
        encoding["color"] = alt.Color(
            f"{color}:N", scale=_categorical(shown if len(shown) < len(OKABE_ITO) else None)
        )
    mark = {"line": "mark_line", "bar": "mark_bar", "area": "mark_area"}.get(kind, "mark_point")
    base = alt.Chart(frame.head(5_000))
    chart: alt.Chart = getattr(base, mark)(
        **({"point": True} if kind == "line" else {}),
        **({} if color else {"color": OKABE_ITO[0]}),
    ).encode(**encoding)
    return chart.properties(height=260, autosize=FIT_WIDTH)


def workspace_bars(
    comparison: pl.DataFrame, metric: str, title: str, fmt: str, chosen: str | None = None
) -> alt.Chart:
    """One KPI of every workspace side by side, a bar (and colour) each, in the comparison's
    order; the chosen workspace (a name) drawn solid, the others lighter."""
    names = comparison["workspace"].to_list()
    palette = _categorical(names if 0 < len(names) <= len(OKABE_ITO) else None)
    axis_format = {"percent": ".0%", "ms": ",.0f"}.get(fmt, ",.3~f")
    tip_format = {"percent": ".1%", "ms": ",.0f"}.get(fmt, ",.3~f")
    emphasis = (
        alt.condition(alt.datum.workspace == chosen, alt.value(1.0), alt.value(0.45))
        if chosen is not None
        else alt.value(1.0)
    )
    chart: alt.Chart = (
        alt.Chart(comparison.select("workspace", metric), title=title)
        .mark_bar()
        .encode(
            y=alt.Y("workspace:N", sort=names, title=None, axis=alt.Axis(labelLimit=220)),
            x=alt.X(
                f"{metric}:Q",
                title=f"{title} (ms)" if fmt == "ms" else title,
                axis=alt.Axis(format=axis_format),
            ),
            color=alt.Color("workspace:N", scale=palette, legend=None),
            opacity=emphasis,
            tooltip=[
                alt.Tooltip("workspace:N"),
                alt.Tooltip(f"{metric}:Q", title=title, format=tip_format),
            ],
        )
        .properties(height=BAR_HEIGHT * max(comparison.height, 1), autosize=FIT_WIDTH)
    )
    return chart
