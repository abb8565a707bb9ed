"""Altair chart builders for the dashboard: frames in, charts out, no Streamlit here.

Every chart is sized to its content (a bar chart grows with its bars), writes
its axes and tooltips as the tables write the same figures (``dashboard._format``:
one precision per unit, durations in the table's unit, names such as funnel
steps and guardrail flags as words, days as ``Nov 15`` on every tick), uses
colour-blind-safe palettes (Okabe and Ito's eight colours for categories,
viridis for ordered bands), and carries a point selection named ``PICK`` on
the fields that say which conversations are behind a mark: a page draws it
with ``on_select="rerun"`` and turns the selection into a drill-down
(``dashboard._drill``).
"""

from __future__ import annotations

import altair as alt
import polars as pl

from convo_analytics.dashboard._format import (
    DAY_AXIS,
    DAY_TOOLTIP,
    axis_format,
    duration_unit,
    enum_label,
    is_enum,
    kind_of,
    metric_kind,
    tooltip_format,
)
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
    "monitor_chart",
    "result_chart",
    "topic_trend",
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


def _day_x(field: str = "date", *, binned: bool = False) -> alt.X:
    """A day axis: every tick ``Nov 15``, not Vega's mix of weekdays and months. (Days
    reach Vega as local midnights, so its local time shows them as the days they are.)"""
    axis = alt.Axis(format=DAY_AXIS, tickCount="day", labelOverlap=True)
    if binned:
        return alt.X(f"yearmonthdate({field}):T", title="day", axis=axis)
    return alt.X(f"{field}:T", title="day", axis=axis)


def _day_tip(field: str = "date") -> alt.Tooltip:
    """A tooltip's day, as the tables write it."""
    return alt.Tooltip(f"yearmonthdate({field}):T", title="day", format=DAY_TOOLTIP)


def _labelled(frame: pl.DataFrame, column: str) -> tuple[pl.DataFrame, str]:
    """The frame with ``<column>_label`` (the values in words, ``_format.enum_label``) when
    the column holds names, and the field to draw; the raw column stays, for a click."""
    if not is_enum(column) or column not in frame.columns:
        return frame, column
    label = f"{column}_label"
    values = frame[column].cast(pl.String)
    shown = values.map_elements(enum_label, return_dtype=pl.String) if frame.height else values
    return frame.with_columns(shown.alias(label)), label


def daily_line(daily: pl.DataFrame, metric: str) -> alt.Chart:
    """One metric per day; a click on a day's point picks that day."""
    title = SERIES.get(metric, metric)
    kind = kind_of(metric, daily.schema[metric])
    pick = _pick("date")
    chart: alt.Chart = (
        alt.Chart(daily.select("date", metric), title=title)
        .mark_line(point=alt.OverlayMarkDef(size=60, filled=True), color=OKABE_ITO[0])
        .encode(
            x=_day_x(),
            y=alt.Y(f"{metric}:Q", title=title, axis=alt.Axis(format=axis_format(kind))),
            tooltip=[
                _day_tip(),
                alt.Tooltip(f"{metric}:Q", title=title, format=tooltip_format(kind)),
            ],
        )
        .add_params(pick)
        .properties(height=240, autosize=FIT_WIDTH)
    )
    return chart


def bars(
    frame: pl.DataFrame,
    category: str,
    value: str,
    title: str | None = None,
    *,
    names: str | None = None,
) -> alt.Chart:
    """A horizontal bar per category, as tall as its bars need; a click picks the category
    (its value as the data has it, whatever label the axis shows: the column ``names``,
    when given, e.g. a topic's label for its key)."""
    pick = _pick(category)
    label = title or value.replace("_", " ")
    kind = kind_of(value, frame.schema[value])
    if names is not None:
        data, shown = frame.select(category, names, value), names
    else:
        data, shown = _labelled(frame.select(category, value), category)
    name = (names or category).replace("_", " ")
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_bar(color=OKABE_ITO[0])
        .encode(
            y=alt.Y(f"{shown}:N", sort="-x", title=name, axis=alt.Axis(labelLimit=220)),
            x=alt.X(f"{value}:Q", title=label, axis=alt.Axis(format=axis_format(kind))),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.45)),
            tooltip=[
                alt.Tooltip(f"{shown}:N", title=name),
                alt.Tooltip(f"{value}:Q", title=label, format=tooltip_format(kind)),
            ],
        )
        .add_params(pick)
        .properties(height=BAR_HEIGHT * max(frame.height, 1), autosize=FIT_WIDTH)
    )
    return chart


def topic_trend(trend: pl.DataFrame) -> alt.Chart:
    """Conversations per day of a few topics, a line (and colour) each, named by their
    labels in the order given; a click on a point picks the topic and the day."""
    order = list(dict.fromkeys(trend["topic"].to_list()))
    pick = _pick("date", "topic_key")
    chart: alt.Chart = (
        alt.Chart(trend.select("date", "topic", "topic_key", "conversations"))
        .mark_line(point=alt.OverlayMarkDef(size=50, filled=True))
        .encode(
            x=_day_x(),
            y=alt.Y(
                "conversations:Q",
                title="conversations started",
                axis=alt.Axis(format=axis_format("count")),
            ),
            color=alt.Color(
                "topic:N",
                sort=order,
                scale=_categorical(order if 0 < len(order) <= len(OKABE_ITO) else None),
                legend=alt.Legend(orient="bottom", columns=2, labelLimit=360),
            ),
            tooltip=[
                _day_tip(),
                alt.Tooltip("topic:N"),
                alt.Tooltip("conversations:Q", format=tooltip_format("count")),
            ],
        )
        .add_params(pick)
        .properties(height=260, autosize=FIT_WIDTH)
    )
    return chart


def latency_percentiles(daily: pl.DataFrame) -> alt.Chart:
    """Assistant latency percentiles per day, one line each, in the unit the tables use for
    the same figures (ms, s, ...); a click picks the day."""
    long = daily.select("date", *PERCENTILES).unpivot(
        index="date", variable_name="percentile", value_name="ms"
    )
    unit, size, _ = duration_unit(long["ms"].cast(pl.Float64) / 1000.0)
    long = long.with_columns(
        pl.col("percentile").replace(PERCENTILES),
        (pl.col("ms").cast(pl.Float64) / (1000.0 * size)).alias("latency"),
    )
    pick = _pick("date")
    chart: alt.Chart = (
        alt.Chart(long.drop("ms"))
        .mark_line(point=alt.OverlayMarkDef(size=50, filled=True))
        .encode(
            x=_day_x(),
            y=alt.Y(
                "latency:Q", title=f"latency ({unit})", axis=alt.Axis(format=axis_format(unit))
            ),
            color=alt.Color(
                "percentile:N",
                sort=list(PERCENTILES.values()),
                scale=_categorical(list(PERCENTILES.values())),
            ),
            tooltip=[
                _day_tip(),
                "percentile:N",
                alt.Tooltip("latency:Q", title=f"latency ({unit})", format=tooltip_format(unit)),
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
            x=_day_x(binned=True),
            y=alt.Y(
                "responses:Q",
                stack="normalize",
                title="share of responses",
                axis=alt.Axis(format=axis_format("percent")),
            ),
            color=alt.Color(
                "band:O",
                title="confidence ≥",
                scale=alt.Scale(scheme="viridis"),
                legend=alt.Legend(format=".1f"),
            ),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.5)),
            tooltip=[
                _day_tip(),
                alt.Tooltip("band:O", title="confidence ≥", format=".1f"),
                alt.Tooltip("responses:Q", format=tooltip_format("count")),
            ],
        )
        .add_params(pick)
        .properties(height=240, autosize=FIT_WIDTH)
    )
    return chart


def funnel_chart(funnel: pl.DataFrame) -> alt.Chart:
    """The lead funnel's steps as bars, in step order, named in words; a click picks the
    step."""
    order = [enum_label(step) for step, _ in STEPS]
    pick = _pick("step")
    data, shown = _labelled(funnel, "step")
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_bar(color=OKABE_ITO[2])
        .encode(
            y=alt.Y(f"{shown}:N", sort=order, title=None),
            x=alt.X("conversations:Q", axis=alt.Axis(format=axis_format("count"))),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.45)),
            tooltip=[
                alt.Tooltip(f"{shown}:N", title="step"),
                alt.Tooltip("conversations:Q", format=tooltip_format("count")),
                alt.Tooltip(
                    "step_conversion:Q", format=tooltip_format("percent"), title="step conversion"
                ),
                alt.Tooltip(
                    "conversion_from_start:Q", format=tooltip_format("percent"), title="from start"
                ),
            ],
        )
        .add_params(pick)
        .properties(height=BAR_HEIGHT * max(funnel.height, 1), autosize=FIT_WIDTH)
    )
    return chart


def incidents_by_flag(per_flag_per_day: pl.DataFrame) -> alt.Chart:
    """Guardrail incidents per day, stacked by flag (distinct colours, flags in words); a
    click picks the day and the flag."""
    data, shown = _labelled(per_flag_per_day, "flag")
    flags = sorted(set(data[shown].to_list())) if data.height else None
    pick = _pick("date", "flag")
    chart: alt.Chart = (
        alt.Chart(data)
        .mark_bar(width=alt.RelativeBandSize(0.8))
        .encode(
            x=_day_x(binned=True),
            y=alt.Y("incidents:Q", axis=alt.Axis(format=axis_format("count"))),
            color=alt.Color(f"{shown}:N", title="flag", scale=_categorical(flags)),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.5)),
            tooltip=[
                _day_tip(),
                alt.Tooltip(f"{shown}:N", title="flag"),
                alt.Tooltip("incidents:Q", format=tooltip_format("count")),
            ],
        )
        .add_params(pick)
        .properties(height=260, autosize=FIT_WIDTH)
    )
    return chart


def result_chart(frame: pl.DataFrame, kind: str, x: str, y: str, color: str | None) -> alt.Chart:
    """An Explore cell's chart: ``kind`` (line, bar, area or point) of ``y`` over ``x``; its
    axes written as its table writes the same columns (a rate as a percentage, days as
    ``Nov 15`` on every tick)."""
    dtype = frame.schema[x]
    if isinstance(dtype, pl.Date | pl.Datetime):
        days = isinstance(dtype, pl.Date) or bool(
            (frame[x].drop_nulls().dt.truncate("1d") == frame[x].drop_nulls()).all()
        )
        axis = alt.Axis(format=DAY_AXIS if days else f"{DAY_AXIS} %H:%M", labelOverlap=True)
        x_enc = alt.X(f"{x}:T", title=x, axis=axis)
    elif dtype.is_numeric():
        x_enc = alt.X(f"{x}:Q", title=x, axis=alt.Axis(format=axis_format(kind_of(x, dtype))))
    else:
        x_enc = alt.X(f"{x}:N", title=x, sort="-y", axis=alt.Axis(labelLimit=200))
    y_kind = kind_of(y, frame.schema[y])
    encoding: dict[str, object] = {
        "x": x_enc,
        "y": alt.Y(f"{y}:Q", title=y, axis=alt.Axis(format=axis_format(y_kind))),
        "tooltip": [
            alt.Tooltip(field=x, type="temporal", timeUnit="yearmonthdate", format=DAY_TOOLTIP)
            if isinstance(dtype, pl.Date)
            else x,
            alt.Tooltip(f"{y}:Q", format=tooltip_format(y_kind)),
            *([color] if color else []),
        ],
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
    order, written as the comparison's table writes it (a latency in the table's unit); the
    chosen workspace (a name) drawn solid, the others lighter."""
    names = comparison["workspace"].to_list()
    palette = _categorical(names if 0 < len(names) <= len(OKABE_ITO) else None)
    data = comparison.select("workspace", metric)
    kind, axis_title = fmt, title
    if fmt == "ms":
        kind, size, _ = duration_unit(data[metric].cast(pl.Float64) / 1000.0)
        data = data.with_columns(pl.col(metric).cast(pl.Float64) / (1000.0 * size))
        axis_title = f"{title} ({kind})"
    emphasis = (
        alt.condition(alt.datum.workspace == chosen, alt.value(1.0), alt.value(0.45))
        if chosen is not None
        else alt.value(1.0)
    )
    chart: alt.Chart = (
        alt.Chart(data, title=title)
        .mark_bar()
        .encode(
            y=alt.Y("workspace:N", sort=names, title=None, axis=alt.Axis(labelLimit=220)),
            x=alt.X(f"{metric}:Q", title=axis_title, axis=alt.Axis(format=axis_format(kind))),
            color=alt.Color("workspace:N", scale=palette, legend=None),
            opacity=emphasis,
            tooltip=[
                alt.Tooltip("workspace:N"),
                alt.Tooltip(f"{metric}:Q", title=axis_title, format=tooltip_format(kind)),
            ],
        )
        .properties(height=BAR_HEIGHT * max(comparison.height, 1), autosize=FIT_WIDTH)
    )
    return chart


def monitor_chart(history: pl.DataFrame, metric: str) -> alt.LayerChart:
    """A monitor's series window by window: its value (a line) against the band it was
    judged normal in (lower to upper bound; one side open: up to the chart's edge) and
    the baseline (dashed); windows in breach are marked, and those of an open episode
    (alerting) larger. ``history``: ``_monitors.monitor_history`` of one series."""
    kind = metric_kind(metric)
    frame = history.select(
        pl.col("window_start").alias("date"), "value", "baseline", "lower_bound",
        "upper_bound", "state", pl.col("breach").fill_null(False),
    )  # fmt: skip
    seen = pl.concat_list("value", "baseline", "lower_bound", "upper_bound").explode().drop_nulls()
    low = frame.select(seen.min()).item() if frame.height else None
    high = frame.select(seen.max()).item() if frame.height else None
    frame = frame.with_columns(
        band_low=pl.col("lower_bound").fill_null(low),
        band_high=pl.col("upper_bound").fill_null(high),
        marked=pl.when(pl.col("state") == "alerting").then(pl.lit("alerting"))
        .when(pl.col("breach")).then(pl.lit("breach")).otherwise(pl.lit(None)),
    )  # fmt: skip
    title = SERIES.get(metric, metric)
    y_axis = alt.Axis(format=axis_format(kind))
    tips = [
        _day_tip(),
        alt.Tooltip("value:Q", title=title, format=tooltip_format(kind)),
        alt.Tooltip("baseline:Q", format=tooltip_format(kind)),
        alt.Tooltip("lower_bound:Q", title="lower bound", format=tooltip_format(kind)),
        alt.Tooltip("upper_bound:Q", title="upper bound", format=tooltip_format(kind)),
        alt.Tooltip("state:N"),
    ]
    base = alt.Chart(frame)
    band = base.mark_area(opacity=0.25, color=OKABE_ITO[4]).encode(
        x=_day_x(), y=alt.Y("band_low:Q", title=title, axis=y_axis), y2="band_high:Q"
    )
    expected = base.mark_line(strokeDash=[4, 4], color=OKABE_ITO[0]).encode(
        x=_day_x(), y=alt.Y("baseline:Q")
    )
    value = base.mark_line(point=alt.OverlayMarkDef(size=40, filled=True),
                           color=OKABE_ITO[7]).encode(x=_day_x(), y="value:Q",
                                                      tooltip=tips)  # fmt: skip
    marks = (
        base.transform_filter("datum.marked != null")
        .mark_point(filled=True, shape="diamond")
        .encode(
            x=_day_x(),
            y="value:Q",
            size=alt.Size("marked:N", scale=alt.Scale(domain=["breach", "alerting"],
                                                      range=[80, 200]), title=None),
            color=alt.Color("marked:N", scale=alt.Scale(domain=["breach", "alerting"],
                                                        range=[OKABE_ITO[1], OKABE_ITO[5]]),
                            legend=alt.Legend(orient="bottom", title=None)),
            tooltip=tips,
        )
    )  # fmt: skip
    return alt.LayerChart(layer=[band, expected, value, marks]).properties(
        height=260, autosize=FIT_WIDTH
    )
