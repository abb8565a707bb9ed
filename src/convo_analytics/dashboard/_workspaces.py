"""Workspaces on the dashboard: their names, the workspace column of every table, and the
comparison of workspaces side by side (decision D-DASH-WORKSPACES).

Pure queries and polars, no Streamlit. A workspace is shown by its configured
name (the ``workspaces`` table; several names of one id joined, the id when
none names it). The comparison's figures come from the same cube and
``metrics_table`` as every other page, narrowed to each workspace in turn, so
a workspace's row equals what every page shows with that workspace chosen;
its "All workspaces" row is the cube unnarrowed (counts summed, rates of the
summed counts, percentiles over all the responses).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import duckdb
import polars as pl

from convo_analytics.dashboard._queries import (
    Filters,
    cube_of,
    has_column,
    in_workspace,
    topic_rows,
)
from convo_analytics.transform import Cube, in_range, metrics_table
from convo_analytics.transform._frames import read_frame
from convo_analytics.transform._incidents import day_bounds

__all__ = [
    "ALL_WORKSPACES",
    "COMPARED",
    "compare_workspaces",
    "mean_latency_ms",
    "with_workspace",
    "workspace_label",
    "workspace_names",
]

ALL_WORKSPACES = "All workspaces"
#: A row that is no one workspace's (an event of a conversation not loaded yet, a run of
#: the whole warehouse): its workspace column reads this.
NO_WORKSPACE = "–"
#: The comparison's KPIs: (column, label, format), in the order the page shows them.
COMPARED: tuple[tuple[str, str, str], ...] = (
    ("conversations", "Conversations", "count"),
    ("resolutionRate", "Resolution rate", "percent"),
    ("escalationRate", "Escalation rate", "percent"),
    ("avgLatencyMs", "Avg response latency", "ms"),
    ("latencyP90Ms", "p90 response latency", "ms"),
    ("leads", "Leads", "count"),
    ("leadsQualified", "Leads qualified", "count"),
    ("guardrailTriggers", "Guardrail incidents", "count"),
    ("csat", "CSAT", "percent"),
)


def workspace_names(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """``workspace_id`` -> its name, for every workspace the snapshot holds conversations of
    or names, ordered by name (a snapshot from before workspaces: none)."""
    if not has_column(con, "mart_conversations", "workspace_id"):
        return {}
    named = has_column(con, "workspaces", "workspace_id")
    names = (
        "SELECT workspace_id, string_agg(DISTINCT name, ', ' ORDER BY name) AS name "
        "FROM workspaces GROUP BY 1"
        if named
        else "SELECT NULL::VARCHAR AS workspace_id, NULL::VARCHAR AS name WHERE false"
    )
    rows = con.execute(
        f"""WITH ids AS (SELECT DISTINCT workspace_id FROM mart_conversations
                         WHERE workspace_id IS NOT NULL
                         {"UNION SELECT workspace_id FROM workspaces" if named else ""}),
                names AS ({names})
            SELECT ids.workspace_id, coalesce(names.name, ids.workspace_id) AS name
            FROM ids LEFT JOIN names USING (workspace_id) ORDER BY 2, 1"""
    ).fetchall()
    return {str(ws): str(name) for ws, name in rows}


def workspace_label(names: Mapping[str, str], workspace: str | None) -> str:
    """How a choice reads: a workspace's name, or all of them (the one workspace's name
    when the snapshot holds one)."""
    if workspace is None:
        return next(iter(names.values())) if len(names) == 1 else ALL_WORKSPACES
    return names.get(workspace, workspace)


def with_workspace(
    frame: pl.DataFrame, names: Mapping[str, str], workspace: str | None
) -> pl.DataFrame:
    """The frame with a ``workspace`` column first: each row's workspace name when it has
    ``workspace_id``, else the chosen workspace's (its rows are that workspace's figures,
    or every workspace's summed)."""
    if "workspace" in frame.columns:
        return frame
    if "workspace_id" in frame.columns:
        ids = pl.col("workspace_id").cast(pl.String)
        name = ids.replace_strict(dict(names), default=ids, return_dtype=pl.String)
        column = name.fill_null(NO_WORKSPACE)
    else:
        column = pl.lit(workspace_label(names, workspace), pl.String)
    return frame.select(column.alias("workspace"), pl.all())


def mean_latency_ms(cube: Cube) -> float | None:
    """The mean latency of the cube's assistant responses (from its latency histogram)."""
    responses = cube.latency["responses"].sum() if cube.latency.height else 0
    if not responses:
        return None
    total = (cube.latency["latency_ms"].cast(pl.Float64) * cube.latency["responses"]).sum()
    return float(total) / float(responses)


def _leads(con: duckdb.DuckDBPyConnection, f: Filters) -> dict[str | None, int]:
    """Conversations started in the range with a lead, per workspace (None: all), of the
    chosen channels and topics."""
    topic = "topic" if f.topics else "NULL::VARCHAR AS topic"  # a snapshot from before topics
    facts = read_frame(
        con,
        f"SELECT workspace_id, channel, {topic}, started_at, lead_id FROM mart_conversations "
        "WHERE started_at >= ?::TIMESTAMPTZ AND started_at < ?::TIMESTAMPTZ",
        list(day_bounds(f.first, f.last)),
    )
    if f.channels:
        facts = facts.filter(pl.col("channel").is_in(list(f.channels)))
    facts = facts.filter(topic_rows(f.topics))
    started = in_range(facts, f.first, f.last, f.tz).filter(pl.col("lead_id").is_not_null())
    counts: dict[str | None, int] = {
        ws: int(n) for ws, n in started.group_by("workspace_id").len().iter_rows()
    }
    counts[None] = started.height
    return counts


def compare_workspaces(
    con: duckdb.DuckDBPyConnection, f: Filters, only: tuple[str, ...] | None = None
) -> pl.DataFrame:
    """The main KPIs of every workspace for the filters' range, channels and topics, one
    row each (ordered by name), and a last row of all of them together (``workspace_id``
    NULL).

    Every workspace is compared whatever workspace the filters choose; with ``only`` (a
    dashboard started for some workspaces), those alone, and the last row is theirs.
    Chosen topics keep their own workspace's rows (a workspace none of them is of shows
    nothing).
    """
    everything = Filters(f.first, f.last, f.tz, f.channels, topics=f.topics)
    cube = cube_of(con, everything)
    leads = _leads(con, everything)
    names = workspace_names(con)
    if only is not None:
        names = {ws: name for ws, name in names.items() if ws in only}
        frames = {
            name: getattr(cube, name).filter(pl.col("workspace_id").is_in(list(only)))
            for name in cube.frames
        }
        cube = replace(cube, **frames, daily_percentiles=None)
        leads[None] = sum(n for ws, n in leads.items() if ws in only)
    rows = []
    for workspace in (*names, None):
        mine = in_workspace(cube, workspace)
        (metrics,) = metrics_table(mine, f.first, f.last, by_day=False).to_dicts()
        metrics["avgLatencyMs"] = mean_latency_ms(mine)
        metrics["leads"] = leads.get(workspace, 0)
        rows.append(
            {
                "workspace": names[workspace] if workspace is not None else ALL_WORKSPACES,
                "workspace_id": workspace,
                **{column: metrics[column] for column, _, _ in COMPARED},
            }
        )
    schema: dict[str, pl.DataType] = {"workspace": pl.String(), "workspace_id": pl.String()}
    for column, _, fmt in COMPARED:
        schema[column] = pl.Int64() if fmt == "count" else pl.Float64()
    return pl.DataFrame(rows, schema=schema)
