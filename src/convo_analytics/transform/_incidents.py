"""The guardrail incident report: the incidents, per flag per day, and repeat offenders."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from typing import Literal

import duckdb
import polars as pl

from convo_analytics.transform._cube import local_date
from convo_analytics.transform._frames import read_frame
from convo_analytics.transform._published import Filters, dimension_filter, require_marts
from convo_analytics.warehouse._marts import MART_GUARDRAIL_INCIDENTS

#: Columns of the incident log, in the order reviewers and exports see them (the excerpt
#: redacted or not, as asked; ``incidents(with_workspace=True)`` puts the workspace first).
INCIDENT_COLUMNS = tuple(
    c.name
    for c in MART_GUARDRAIL_INCIDENTS.columns
    if c.name not in ("excerpt_redacted", "seen_in", "workspace_id")
)
INCIDENT_QUERY = (
    "SELECT * FROM mart_guardrail_incidents "
    "WHERE triggered_at >= ?::TIMESTAMPTZ AND triggered_at < ?::TIMESTAMPTZ "
    "ORDER BY triggered_at, incident_id"
)


def incidents(
    con: duckdb.DuckDBPyConnection,
    first: date,
    last: date,
    tz: str = "UTC",
    *,
    redact: bool = True,
    filters: Filters | None = None,
    workspaces: Sequence[str] | None = None,
    with_workspace: bool = False,
) -> pl.DataFrame:
    """One row per incident that happened on ``first``..``last`` (days cut in ``tz``).

    With ``redact`` (the default) the excerpt has emails, card and phone
    numbers replaced; without it the excerpt is as the service sent it.
    ``workspaces`` (ids) keeps theirs only (``None``: every incident);
    ``with_workspace`` puts ``workspace_id`` first among the columns.
    """
    require_marts(con)
    columns = ("workspace_id", *INCIDENT_COLUMNS) if with_workspace else INCIDENT_COLUMNS
    lo, hi = day_bounds(first, last)
    frame = read_frame(con, INCIDENT_QUERY, [lo, hi])
    if frame.is_empty():
        return frame.select(columns)
    keep = local_date("triggered_at", tz).is_between(first, last) & dimension_filter(filters)
    if workspaces is not None:
        keep = keep & pl.col("workspace_id").is_in(list(workspaces))
    frame = frame.filter(keep)
    excerpt = "excerpt_redacted" if redact else "excerpt"
    return frame.with_columns(pl.col(excerpt).alias("excerpt")).select(columns)


def day_bounds(first: date, last: date) -> tuple[str, str]:
    """UTC bounds that contain those days in any zone (UTC-12 to UTC+14); cut exactly later."""
    return (f"{first - timedelta(days=1)} 00:00:00+00", f"{last + timedelta(days=2)} 00:00:00+00")


def per_flag_per_day(frame: pl.DataFrame, tz: str = "UTC") -> pl.DataFrame:
    """Incidents per flag per day."""
    return (
        frame.group_by(local_date("triggered_at", tz).alias("date"), "flag")
        .agg(pl.len().cast(pl.Int64).alias("incidents"))
        .sort("date", "flag")
    )


def repeated(
    frame: pl.DataFrame,
    by: Literal["conversation_id", "external_user_id"],
    minimum: int = 2,
) -> pl.DataFrame:
    """Conversations (or end users) with at least ``minimum`` incidents, most first.

    When the log has ``workspace_id`` (``incidents(..., with_workspace=True)``), a
    conversation or an end user is one of a workspace: the same id in two workspaces
    is two of them, and the workspace is a column of the result."""
    keys = ["workspace_id", by] if "workspace_id" in frame.columns else [by]
    conversation = ["workspace_id", "conversation_id"] if len(keys) > 1 else ["conversation_id"]
    return (
        frame.filter(pl.col(by).is_not_null())
        .group_by(keys)
        .agg(
            pl.len().cast(pl.Int64).alias("incidents"),
            pl.col("flag").unique().sort().alias("flags"),
            pl.col("triggered_at").min().alias("first_at"),
            pl.col("triggered_at").max().alias("last_at"),
            pl.struct(conversation).n_unique().cast(pl.Int64).alias("conversations"),
        )
        .filter(pl.col("incidents") >= minimum)
        .sort("incidents", *keys, descending=[True, *(False for _ in keys)], nulls_last=True)
        .select(by, *(k for k in keys if k != by), pl.exclude(keys))
    )
