"""The Knowledge gaps page's data and chart: the transform's report, filtered as every page is.

Pages hold UI only; these read the one knowledge-gap report the export writes too
(``transform.gap_report``, decision D-KNOWLEDGE-GAPS) for the sidebar's range, zone,
channels and workspace (the filters' dimensions: whatever slices the sidebar offers),
with questions and answers redacted, and the conversations behind one topic.
"""

from __future__ import annotations

import altair as alt
import duckdb
import polars as pl

from convo_analytics.dashboard._charts import BAR_HEIGHT, FIT_WIDTH, OKABE_ITO, PICK
from convo_analytics.dashboard._queries import Filters, TablePage
from convo_analytics.transform import (
    CONTENT_DOES_NOT_ANSWER,
    MISSING_CONTENT,
    gap_conversations,
    gap_report,
    require_gaps,
)
from convo_analytics.transform._published import NotTransformed

__all__ = [
    "TABLE_COLUMNS",
    "gap_conversation_page",
    "gap_topics",
    "has_gaps",
    "impact_chart",
    "topic_key",
]

#: The ranked table's columns (the lists are shown for the chosen topic).
TABLE_COLUMNS = (
    "workspace_id", "topic_label", "verdict", "impact", "conversations", "failing_answers",
    "mean_severity", "escalated", "low_rated", "abandoned", "responses",
    "responses_with_source", "topic",
)  # fmt: skip
#: How many topics the chart shows (the table holds them all).
CHART_TOPICS = 15


def has_gaps(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the snapshot carries knowledge gaps (one published before them does not)."""
    try:
        require_gaps(con)
    except NotTransformed:
        return False
    return True


def topic_key(workspace_id: str, topic: str) -> str:
    """One topic of one workspace, as the page's picker and the chart's click name it."""
    return f"{workspace_id}\x1f{topic}"


def gap_topics(con: duckdb.DuckDBPyConnection, f: Filters) -> pl.DataFrame:
    """The report of the filters' range, zone, slices and workspace, ranked by impact, with
    ``key`` naming each (workspace, topic)."""
    report = gap_report(
        con,
        f.first,
        f.last,
        f.tz,
        workspaces=None if f.workspace is None else [f.workspace],
        filters=f.dimensions(),
    )
    return report.with_columns(
        pl.concat_str(pl.col("workspace_id"), pl.lit("\x1f"), pl.col("topic")).alias("key")
    )


def gap_conversation_page(
    con: duckdb.DuckDBPyConnection,
    f: Filters,
    workspace_id: str,
    topic: str,
    offset: int = 0,
    limit: int | None = None,
) -> TablePage:
    """The conversations behind one topic's gaps (rows ``offset`` on; ``limit`` of them,
    None: all), most severe first."""
    rows = gap_conversations(
        con, f.first, f.last, f.tz, workspace_id, topic, filters=f.dimensions()
    ).drop("topic")
    return TablePage(rows.slice(offset, limit), rows.height, offset)


def impact_chart(report: pl.DataFrame) -> alt.Chart:
    """The topics of highest impact as bars coloured by verdict; a click picks a topic
    (its ``key``)."""
    several = report["workspace_id"].n_unique() > 1
    short = (
        pl.when(pl.col("topic_label").str.len_chars() > 50)
        .then(pl.col("topic_label").str.slice(0, 49) + "…")
        .otherwise(pl.col("topic_label"))
    )
    # a bar's name: its label and id (labels may repeat; ids are a workspace's own)
    name = pl.concat_str(
        *([pl.col("workspace_id"), pl.lit(" · ")] if several else []),
        short,
        pl.lit(" #"),
        pl.col("topic"),
    )
    top = report.head(CHART_TOPICS).select(
        "key",
        name.alias("name"),
        "verdict",
        pl.col("impact").round(2),
        "conversations",
        pl.col("mean_severity").round(2),
    )
    pick = alt.selection_point(name=PICK, fields=["key"], on="click", clear="dblclick")
    verdicts = [MISSING_CONTENT, CONTENT_DOES_NOT_ANSWER]
    chart: alt.Chart = (
        alt.Chart(top)
        .mark_bar()
        .encode(
            y=alt.Y("name:N", sort=None, title="topic", axis=alt.Axis(labelLimit=320)),
            x=alt.X("impact:Q", title="impact (conversations x mean severity)"),
            color=alt.Color("verdict:N", scale=alt.Scale(domain=verdicts,
                                                         range=[OKABE_ITO[5], OKABE_ITO[0]]),
                            legend=alt.Legend(orient="bottom", title=None, labelLimit=320)),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.45)),
            tooltip=[
                alt.Tooltip("name:N", title="topic"),
                alt.Tooltip("verdict:N"),
                alt.Tooltip("impact:Q", format=",.2f"),
                alt.Tooltip("conversations:Q", format=",d"),
                alt.Tooltip("mean_severity:Q", title="mean severity", format=".2f"),
            ],
        )
        .add_params(pick)
        .properties(height=BAR_HEIGHT * max(top.height, 1), autosize=FIT_WIDTH)
    )  # fmt: skip
    return chart
