"""The Topics page's data, and topic as a breakdown on the other pages (issue 27).

Pure queries and polars, no Streamlit. A workspace's topics are
``mart_topics`` with the app-state store's curations applied on top
(``topics.topic_catalog``), so a rename or a merge made on the page a moment
ago shows at once; the marts keep each conversation's own topic id (the
``topic`` dimension), and every figure here is grouped by the topic it counts
under (``effective_topic_id``) through that catalog. Queries that read the
catalog take the store's :func:`store_key` (its path, modification time and
size), so that the dashboard's cache, keyed by its arguments, answers again
when the store changes (decision D-TOPICS-PAGE).

Per topic, every figure is :func:`transform.metrics_table`'s, the code of
every other page's tiles and of ``convo export summary``: the cube of the
range is cut into one group of slices per topic of each workspace, and each
group is handed to ``metrics_table`` as a period of its own
(:func:`metrics_per_group`), so a topic's resolution rate or p95 latency is
defined, summed and interpolated exactly as the Overview's. A topic id means
nothing outside its workspace: topics are keyed by (workspace, id) everywhere
and never summed across workspaces.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from convo_analytics.compare import poisson_rate_ratio
from convo_analytics.dashboard._compare import LEVEL
from convo_analytics.dashboard._queries import (
    Filters,
    TopicChoice,
    cube_of,
    has_column,
    has_table,
    headline_by,
    previous_covered,
    started_conversations,
    topic_key,
)
from convo_analytics.dashboard._workspaces import workspace_names
from convo_analytics.topics import topic_catalog
from convo_analytics.transform import Cube, lead_funnel, metrics_table, score_bands

__all__ = [
    "FIGURES",
    "NO_TOPIC",
    "StoreKey",
    "TopicReport",
    "metrics_per_group",
    "store_key",
    "topic_breakdown",
    "topic_funnel",
    "topic_index",
    "topic_names",
    "topic_report",
]

#: The store's path, modification time (ns) and size: what a cached answer was read with.
StoreKey = tuple[str, int, int]
#: How a conversation without a topic reads (its workspace has too few conversations for
#: topics yet, or it has no user message): the marts' ``topic`` is ``unknown``.
NO_TOPIC = "no topic yet"
#: The per-topic figures: (metrics_table's column, what it is), in the table's order.
FIGURES: tuple[tuple[str, str], ...] = (
    ("resolutionRate", "Resolution rate"),
    ("containmentRate", "Containment rate"),
    ("escalationRate", "Escalation rate"),
    ("csat", "CSAT"),
    ("lowConfidenceShare", "Low-confidence share"),
    ("guardrailTriggersPer1000Responses", "Guardrail triggers / 1,000 responses"),
    ("latencyP95Ms", "p95 latency"),
    ("leadsQualified", "Leads qualified"),
)
#: Topics drawn per workspace in the trend (the palette has eight colours).
TREND_TOPICS = 6
_NAMES_SCHEMA: dict[str, Any] = {
    "workspace_id": pl.String,
    "topic_id": pl.Int64,
    "topic": pl.String,
    "label": pl.String,
    "effective_topic_id": pl.Int64,
    "effective_label": pl.String,
    "language": pl.String,
    "terms": pl.List(pl.String),
    "examples": pl.List(pl.String),
    "conversations": pl.Int64,
    "pinned": pl.Boolean,
    "retired": pl.Boolean,
    "pending": pl.Boolean,
}
#: A group's number turned into a day: metrics_table keys its rows by day.
_EPOCH = date(2000, 1, 1)
_EPOCH_DAYS = (_EPOCH - date(1970, 1, 1)).days


def store_key(path: Path | None) -> StoreKey | None:
    """What identifies the store's content for the cache (None: no store configured):
    its path, modification time and size (a store not written yet: size -1)."""
    if path is None:
        return None
    try:
        stat = path.stat()
    except FileNotFoundError:
        return (str(path), 0, -1)
    except OSError:  # unreadable: reading it says why
        return (str(path), 0, -2)
    return (str(path), stat.st_mtime_ns, stat.st_size)


def topic_names(con: duckdb.DuckDBPyConnection, store: StoreKey | None = None) -> pl.DataFrame:
    """Every topic of every workspace as analysts see it: ``mart_topics`` with the store's
    curations applied (``topics.topic_catalog``), ``pending`` where the store changed it
    since the last transform. Empty for a snapshot from before topics."""
    if not has_table(con, "mart_topics") or not has_column(con, "mart_slices", "topic"):
        return pl.DataFrame(schema=_NAMES_SCHEMA)
    path = Path(store[0]) if store is not None else None
    workspaces = con.execute("SELECT DISTINCT workspace_id FROM mart_topics ORDER BY 1").fetchall()
    rows = [
        {name: row.get(name) for name in _NAMES_SCHEMA}
        for (ws,) in workspaces
        for row in topic_catalog(con, str(ws), path)
    ]
    return pl.DataFrame(rows, schema=_NAMES_SCHEMA, orient="row")


def _shown(label: Any, topic_id: Any) -> str:
    return NO_TOPIC if topic_id is None else f"{label} (#{topic_id})"


def topic_index(names: pl.DataFrame) -> tuple[dict[str, TopicChoice], dict[str, str]]:
    """What the sidebar offers and a URL may name: each topic's key (a merged topic's
    too) -> the topic it counts under (with every topic dimension value merged into it);
    and each topic that counts under itself -> its label (``label (#id)``)."""
    members: dict[tuple[str, int], list[str]] = {}
    labels: dict[str, str] = {}
    for row in names.sort("workspace_id", "topic_id").iter_rows(named=True):
        root = (row["workspace_id"], int(row["effective_topic_id"]))
        members.setdefault(root, []).append(str(row["topic"]))
        if row["topic_id"] == row["effective_topic_id"]:
            retired = " (retired)" if row["retired"] else ""
            labels[topic_key(*root)] = _shown(row["label"], row["topic_id"]) + retired
    roots = {
        root: TopicChoice(root[0], root[1], tuple(sorted(values)))
        for root, values in members.items()
    }
    choices = {
        topic_key(row["workspace_id"], int(row["topic_id"])): roots[
            (row["workspace_id"], int(row["effective_topic_id"]))
        ]
        for row in names.iter_rows(named=True)
    }
    return choices, labels


def metrics_per_group(
    cube: Cube, first: date, last: date, cells: pl.DataFrame, groups: int
) -> pl.DataFrame:
    """``metrics_table``'s figures for ``first``..``last``, one row per group of cells.

    ``cells`` maps a cube row's ``workspace_id`` and ``slice_key`` to its ``_group``
    (0 to ``groups`` - 1; rows of no group are left out). ``metrics_table`` sums counts
    and takes percentiles per period; each group is made a period of its own (its
    rows dated ``_EPOCH`` + group days), so every figure is computed by that code, in
    one pass, exactly as for a whole workspace. Rows come back by ``_group``.

    The median durations (first response, resolution) are left out (null): no topic
    figure is one, and they would cost a pass over the durations' histogram.
    """
    ids = cells["workspace_id"].unique()
    one = ids.len() == 1 and ids[0] is not None  # one workspace: rows keyed by slice alone
    keys = ["slice_key"] if one else ["workspace_id", "slice_key"]
    mapping = cells.select(*keys, "_group")
    frames: dict[str, Any] = {}
    for name in cube.frames:
        frame: pl.DataFrame = getattr(cube, name)
        if name == "durations":
            frames[name] = frame.clear()
            continue
        if one:
            frame = frame.filter(pl.col("workspace_id") == ids[0])
        frames[name] = (
            frame.filter(pl.col("date").is_between(first, last))
            .join(mapping, on=keys, how="inner", nulls_equal=True)
            .with_columns(
                (pl.col("_group") + _EPOCH_DAYS).cast(pl.Int32).cast(pl.Date).alias("date")
            )
            .drop("_group")
        )
    grouped = replace(cube, **frames, daily_percentiles=None, histogram_range=None)
    if groups <= 0:
        return (
            metrics_table(grouped, _EPOCH, _EPOCH)
            .clear()
            .with_columns(pl.lit(None, pl.Int64).alias("_group"))
            .drop("date")
        )
    table = metrics_table(grouped, _EPOCH, _EPOCH + timedelta(days=groups - 1))
    days = pl.col("date").cast(pl.Int32) - _EPOCH_DAYS
    return table.with_columns(days.cast(pl.Int64).alias("_group")).drop("date")


def _cells(cube: Cube, names: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each cube row's topic group: (``workspace_id``, ``slice_key`` -> ``_group``), and
    the groups (``_group``, ``workspace_id``, ``topic_id``: the topic it counts under,
    None for conversations without one), in workspace and topic order. Every workspace
    with conversations in the cube with every slice (a few thousand rows): cheaper than
    the cube's own pairs, and a pair no row has costs nothing (a workspace without
    conversations has no topic to show)."""
    workspaces = cube.conversations.select(pl.col("workspace_id").unique())
    cells = workspaces.join(cube.slices.select("slice_key", "topic"), how="cross")
    mapping = names.select("workspace_id", "topic", pl.col("effective_topic_id").alias("topic_id"))
    cells = cells.join(mapping, on=["workspace_id", "topic"], how="left", nulls_equal=True)
    groups = (
        cells.select("workspace_id", "topic_id")
        .unique()
        .sort("workspace_id", "topic_id", nulls_last=True)
        .with_row_index("_group")
        .with_columns(pl.col("_group").cast(pl.Int64))
    )
    cells = cells.join(groups, on=["workspace_id", "topic_id"], nulls_equal=True)
    return cells.select("workspace_id", "slice_key", "_group"), groups


def _conversations_per_group(
    cube: Cube, cells: pl.DataFrame, first: date, last: date
) -> pl.DataFrame:
    return (
        cube.conversations.filter(pl.col("date").is_between(first, last))
        .join(cells, on=["workspace_id", "slice_key"], nulls_equal=True)
        .group_by("_group")
        .agg(pl.col("conversations").sum())
    )


@dataclass(frozen=True, slots=True)
class TopicReport:
    """The Topics page's figures: one row per topic of each workspace (and one for its
    conversations without a topic), the daily conversations of each workspace's top
    topics, and whether the previous period is covered (its change is shown)."""

    table: pl.DataFrame
    trend: pl.DataFrame
    compared: bool


def topic_report(
    con: duckdb.DuckDBPyConnection, f: Filters, store: StoreKey | None = None
) -> TopicReport:
    """Per topic (as analysts see them: curations applied) of the filters' workspace(s),
    range and channels: conversations, share (of the workspace's conversations in the
    range), the previous period's conversations and the change with its 95 % interval
    (``change_low``, ``change_high``), and ``FIGURES``; with
    topics chosen, those topics' rows (their share still of the whole workspace). Each
    topic's ``examples``, the topics merged into it and whether the store changed it
    since the last transform come along."""
    names = topic_names(con, store)
    covered = previous_covered(con, f)
    before = f.previous()
    every = replace(f, topics=(), first=before.first if covered else f.first)
    cube = cube_of(con, every)
    cells, groups = _cells(cube, names)
    figures = metrics_per_group(cube, f.first, f.last, cells, groups.height)
    earlier = _conversations_per_group(cube, cells, before.first, before.last).rename(
        {"conversations": "previous_conversations"}
    )
    roots = names.filter(pl.col("topic_id") == pl.col("effective_topic_id"))
    merged = (
        names.filter(pl.col("topic_id") != pl.col("effective_topic_id"))
        .group_by("workspace_id", pl.col("effective_topic_id").alias("topic_id"))
        .agg(
            pl.format("{} (#{})", "label", "topic_id").sort_by("topic_id").alias("merged_topics"),
            pl.col("topic_id").sort().alias("merged_topic_ids"),
            pl.col("pending").any().alias("_merged_pending"),
        )
    )
    table = (
        groups.join(figures, on="_group", how="left")
        .join(earlier, on="_group", how="left")
        .join(
            roots.select("workspace_id", "topic_id", "label", "examples", "language", "pending"),
            on=["workspace_id", "topic_id"],
            how="left",
            nulls_equal=True,
        )
        .join(merged, on=["workspace_id", "topic_id"], how="left", nulls_equal=True)
        .filter(pl.col("conversations") > 0)
    )
    table = table.with_columns(
        pl.when(pl.col("topic_id").is_null())
        .then(pl.lit(NO_TOPIC))
        .otherwise("label")
        .alias("topic"),
        (pl.col("conversations") / pl.col("conversations").sum().over("workspace_id")).alias(
            "share"
        ),
        pl.when(pl.lit(covered)).then(pl.col("previous_conversations").fill_null(0)),
        (pl.col("pending").fill_null(False) | pl.col("_merged_pending").fill_null(False)).alias(
            "pending"
        ),
        pl.when(pl.col("topic_id").is_not_null())
        .then(pl.format("{}:{}", "workspace_id", "topic_id"))
        .alias("topic_key"),
    )
    change = pl.col("conversations") / pl.col("previous_conversations") - 1
    table = table.with_columns(
        pl.when(pl.lit(covered) & (pl.col("previous_conversations") > 0))
        .then(change)
        .alias("change")
    )
    table = table.with_columns(_change_intervals(table, f.days))
    if f.topics:  # the chosen topics' rows (each in its own workspace)
        chosen = pl.DataFrame(
            [(c.workspace_id, c.topic_id) for c in f.topics],
            schema={"workspace_id": pl.String, "topic_id": pl.Int64},
            orient="row",
        )
        table = table.join(chosen, on=["workspace_id", "topic_id"], how="semi")
    table = table.sort(
        "workspace_id", pl.col("topic_id").is_null(), "conversations", "topic_id",
        descending=[False, False, True, False], nulls_last=True,
    )  # fmt: skip
    trend = _trend(cube, cells, f, table)
    columns = ["workspace_id", "topic_id", "topic", "conversations", "share",
               "previous_conversations", "change", "change_low", "change_high",
               *(c for c, _ in FIGURES), "examples",
               "merged_topics", "language", "pending", "topic_key",
               "merged_topic_ids"]  # fmt: skip
    return TopicReport(table.select(columns), trend, covered)


def _change_intervals(table: pl.DataFrame, days: int) -> list[pl.Series]:
    """The 95 % interval of each topic's change of conversations against the previous
    period (``change_low``, ``change_high``; null where no change is shown): the ratio of
    two Poisson counts over periods of the same length (``compare.poisson_rate_ratio``),
    minus one."""
    lows: list[float | None] = []
    highs: list[float | None] = []
    rows = table.select("conversations", "previous_conversations", "change").iter_rows()
    for now, before, change in rows:
        ratio = None
        if change is not None and now is not None and before:
            ratio = poisson_rate_ratio(int(now), days, int(before), days, LEVEL)
        lows.append(ratio.low - 1.0 if ratio is not None and ratio.low is not None else None)
        highs.append(ratio.high - 1.0 if ratio is not None and ratio.high is not None else None)
    return [
        pl.Series("change_low", lows, dtype=pl.Float64),
        pl.Series("change_high", highs, dtype=pl.Float64),
    ]


def _trend(cube: Cube, cells: pl.DataFrame, f: Filters, table: pl.DataFrame) -> pl.DataFrame:
    """Daily conversations of each workspace's ``TREND_TOPICS`` largest topics of the
    table (by ``_group``) in the range, days without any at zero; each topic named
    ``label (#id)``."""
    top = (
        table.filter(pl.col("topic_id").is_not_null())
        .sort("conversations", "topic_id", descending=[True, False])
        .group_by("workspace_id", maintain_order=True)
        .head(TREND_TOPICS)
        .select(
            "_group",
            "workspace_id",
            "topic_id",
            pl.format("{} (#{})", "topic", "topic_id").alias("topic"),
            "topic_key",
        )
    )
    per_day = (
        cube.conversations.filter(pl.col("date").is_between(f.first, f.last))
        .join(cells, on=["workspace_id", "slice_key"], nulls_equal=True)
        .join(top.select("_group"), on="_group", how="semi")
        .group_by("date", "_group")
        .agg(pl.col("conversations").sum())
    )
    days = pl.DataFrame({"date": pl.date_range(f.first, f.last, eager=True)})
    return (
        days.join(top, how="cross")
        .join(per_day, on=["date", "_group"], how="left")
        .with_columns(pl.col("conversations").fill_null(0))
        .sort("workspace_id", "topic_id", "date")
        .select("date", "workspace_id", "topic_id", "topic", "topic_key", "conversations")
    )


def _named_topics(
    frame: pl.DataFrame, names: pl.DataFrame, workspaces: dict[str, str] | None
) -> pl.DataFrame:
    """``frame`` (with ``workspace_id`` and the marts' ``topic``) with the topic each row
    counts under: ``topic_id``, ``topic`` (its label, ``label (#id)``, or ``NO_TOPIC``;
    after its workspace's name when ``workspaces`` names them) and ``topic_key``."""
    mapping = names.select(
        "workspace_id",
        "topic",
        pl.col("effective_topic_id").alias("topic_id"),
        pl.col("effective_label").alias("_label"),
    )
    out = frame.join(mapping, on=["workspace_id", "topic"], how="left", nulls_equal=True)
    label = (
        pl.when(pl.col("topic_id").is_null())
        .then(pl.lit(NO_TOPIC))
        .otherwise(pl.format("{} (#{})", "_label", "topic_id"))
    )
    if workspaces is not None:
        ids = pl.col("workspace_id").cast(pl.String)
        name = ids.replace_strict(workspaces, default=ids, return_dtype=pl.String)
        label = pl.format("{}: {}", name.fill_null("–"), label)
    key = pl.when(pl.col("topic_id").is_not_null()).then(
        pl.format("{}:{}", "workspace_id", "topic_id")
    )
    return out.with_columns(label.alias("topic"), key.alias("topic_key")).drop("_label")


def topic_breakdown(
    con: duckdb.DuckDBPyConnection, f: Filters, store: StoreKey | None = None
) -> pl.DataFrame:
    """The breakdowns' headline figures (``_queries.headline_by``) per topic of each
    workspace, as analysts see them (merged topics counted under the one they were merged
    into); a topic named after its workspace when several are shown."""
    cube = cube_of(con, f)
    convs = cube.with_dimensions("conversations").filter(pl.col("date").is_between(f.first, f.last))
    several = f.workspace is None and convs["workspace_id"].n_unique() > 1
    named = _named_topics(convs, topic_names(con, store), workspace_names(con) if several else None)
    return headline_by(named, ["workspace_id", "topic_id", "topic", "topic_key"])


def topic_funnel(
    con: duckdb.DuckDBPyConnection, f: Filters, store: StoreKey | None = None
) -> dict[str, pl.DataFrame]:
    """``_queries.funnel`` split by topic: each workspace's topics apart (by workspace, then
    topic as analysts see it)."""
    started = started_conversations(con, f)
    named = _named_topics(started, topic_names(con, store), None)
    return {
        "funnel": lead_funnel(named, ("workspace_id", "topic")),
        "bands": score_bands(started),
    }
