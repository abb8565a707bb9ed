"""Reading the marts back: the cube of the newest transform, or one built on the spot.

A cube for a time zone or low-confidence threshold the last transform did not
build is computed from the facts with the same code, so an unusual request
is slower, never different.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import duckdb
import orjson
import polars as pl

from convo_analytics.errors import UserError
from convo_analytics.transform._cube import TIER, Cube, build_cube
from convo_analytics.transform._facts import read_facts
from convo_analytics.transform._frames import read_frame, scalar
from convo_analytics.transform._metrics import LATENCY_QUANTILES, MEDIANS
from convo_analytics.transform._slices import DIMENSIONS
from convo_analytics.warehouse import Table
from convo_analytics.warehouse._marts import DAILY_MARTS, MART_DAILY_PERCENTILES, MART_SLICES
from convo_analytics.warehouse._tables import snake_case

#: Dimension filters: dimension -> accepted values (an absent key accepts all).
Filters = Mapping[str, Sequence[str]]


@dataclass(frozen=True, slots=True)
class PublishedRun:
    """The newest successful transform: what the marts hold."""

    transform_run_id: str
    finished_at: Any
    timezones: tuple[str, ...]
    low_confidence_threshold: float
    #: The marts it wrote (a warehouse made by an older release may lack some).
    marts: frozenset[str] = frozenset()


class NotTransformed(UserError):
    """The warehouse has no marts yet (or was made by a release without them)."""


def require_marts(con: duckdb.DuckDBPyConnection) -> None:
    """Raise NotTransformed, naming the fix, when the marts are missing."""
    names = {MART_SLICES.name, MART_DAILY_PERCENTILES.name, "transform_runs",
             "mart_guardrail_incidents", *(t.name for t in DAILY_MARTS.values())}  # fmt: skip
    found = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchall()
    }
    if missing := sorted(names - found):
        raise NotTransformed(
            f"the warehouse has no marts yet ({', '.join(missing[:3])} missing); "
            "run 'convo transform' (or 'convo run') first"
        )


def latest_transform(con: duckdb.DuckDBPyConnection) -> PublishedRun | None:
    rows = con.execute(
        "SELECT transform_run_id, finished_at, timezones, low_confidence_threshold, mart_rows "
        "FROM transform_runs WHERE status = 'ok' ORDER BY finished_at DESC LIMIT 1"
    ).fetchall()
    if not rows:
        return None
    row = rows[0]
    marts = frozenset(orjson.loads(row[4]) if row[4] else ())
    return PublishedRun(row[0], row[1], tuple(row[2] or ()), float(row[3]), marts)


def _dimension_sql(filters: Filters | None, frame: str) -> tuple[str, list[Any]]:
    """A WHERE clause keeping the slices (and model tiers) the filters name."""
    clauses: list[str] = []
    params: list[Any] = []
    tier_clause = ""
    for dim, values in (filters or {}).items():
        if dim not in (*DIMENSIONS, TIER):
            raise ValueError(f"unknown dimension {dim!r}; one of {', '.join((*DIMENSIONS, TIER))}")
        if not values:
            continue
        marks = ", ".join("?" * len(values))
        if dim == TIER:
            if frame in ("messages", "latency"):
                tier_clause = f" AND {TIER} IN ({marks})"
                tier_params = list(values)
        else:
            clauses.append(f"{dim} IN ({marks})")
            params.extend(values)
    sql = ""
    if clauses:
        where = " AND ".join(clauses)
        sql = f" AND slice_key IN (SELECT slice_key FROM {MART_SLICES.name} WHERE {where})"
    if tier_clause:
        sql += tier_clause
        params += tier_params
    return sql, params


def dimension_filter(filters: Filters | None) -> pl.Expr:
    expr = pl.lit(True)
    for dim, values in (filters or {}).items():
        if values:
            expr = expr & pl.col(dim).is_in(list(values))
    return expr


#: Keys of each daily mart besides date and dimensions (what a sum must keep apart).
_KEYS: dict[str, tuple[str, ...]] = {
    "conversations": (),
    "messages": ("model_tier",),
    "latency": ("latency_ms",),
    "guardrails": ("flag",),
    "escalations": ("destination",),
    "durations": ("measure", "value"),
}


def load_cube(
    con: duckdb.DuckDBPyConnection,
    tz: str = "UTC",
    low_confidence_threshold: float | None = None,
    *,
    first: date | None = None,
    last: date | None = None,
    filters: Filters | None = None,
    by_dimension: bool = True,
    workspaces: Sequence[str] | None = None,
) -> Cube:
    """The daily cube for ``tz``, restricted to ``first``..``last`` and the filters.

    Raises NotTransformed when the warehouse has no marts.

    ``workspaces`` (ids) keeps those workspaces' rows only; ``None`` keeps every
    row, the workspace-less (NULL) ones too, as a one-workspace warehouse always has.

    ``by_dimension=False`` sums the slices away (in SQL, before anything reaches
    Python) for callers that want whole-workspace figures only, such as the
    summary export: the same numbers from far fewer rows.
    """
    require_marts(con)
    run = latest_transform(con)
    threshold = (
        low_confidence_threshold
        if low_confidence_threshold is not None
        else (run.low_confidence_threshold if run else 0.5)
    )
    if run is None or tz not in run.timezones or threshold != run.low_confidence_threshold:
        cube = build_cube(read_facts(con), tz, threshold)
        lo, hi = first or date(1, 1, 1), last or date(9999, 12, 31)
        return cube.between(lo, hi).sliced(filters).of_workspaces(workspaces)
    percentiles = MART_DAILY_PERCENTILES.name in run.marts
    return read_marts_cube(
        con,
        tz,
        threshold,
        first=first,
        last=last,
        filters=filters,
        by_dimension=by_dimension or not percentiles,
        workspaces=workspaces,
    )


def read_marts_cube(
    con: duckdb.DuckDBPyConnection,
    tz: str,
    threshold: float,
    *,
    first: date | None = None,
    last: date | None = None,
    filters: Filters | None = None,
    by_dimension: bool = True,
    workspaces: Sequence[str] | None = None,
) -> Cube:
    """The cube the marts hold for ``tz`` (the caller knows they hold it), restricted to
    ``first``..``last``, the filters and ``workspaces``; the summed-away form when
    ``by_dimension`` is off and the range's days are one workspace's (per-day percentiles
    are a workspace's)."""
    lo, hi = first or date(1, 1, 1), last or date(9999, 12, 31)
    ws_sql, ws_params = _workspace_sql(workspaces)
    summary_only = not by_dimension and not filters and first is not None and last is not None
    if summary_only and _workspaces(con, tz, lo, hi, ws_sql, ws_params) <= 1:
        assert first is not None and last is not None
        return _summary_cube(con, tz, threshold, first, last, ws_sql, ws_params)
    frames = {}
    for name, table in DAILY_MARTS.items():
        dims_sql, dims_params = _dimension_sql(filters, name)
        frames[name] = read_frame(
            con,
            f"SELECT * EXCLUDE (timezone) FROM {table.name} "
            f"WHERE timezone = ? AND date BETWEEN ? AND ?{ws_sql}{dims_sql}",
            [tz, lo, hi, *ws_params, *dims_params],
        )
    slices = read_frame(con, f"SELECT * FROM {MART_SLICES.name}")
    return Cube.of(tz, threshold, frames, slices=slices)


def _workspace_sql(workspaces: Sequence[str] | None) -> tuple[str, list[Any]]:
    """A WHERE clause keeping the rows of ``workspaces`` (none for ``None``: every row)."""
    if workspaces is None:
        return "", []
    if not workspaces:
        return " AND false", []
    return f" AND workspace_id IN ({', '.join('?' * len(workspaces))})", list(workspaces)


def _workspaces(
    con: duckdb.DuckDBPyConnection,
    tz: str,
    first: date,
    last: date,
    ws_sql: str,
    ws_params: list[Any],
) -> int:
    """How many workspaces (NULL counting as one) have percentile rows in the range."""
    return int(
        scalar(
            con,
            f"SELECT count(DISTINCT coalesce(workspace_id, chr(0))) FROM "
            f"{MART_DAILY_PERCENTILES.name} WHERE timezone = ? AND date BETWEEN ? AND ?{ws_sql}",
            [tz, first, last, *ws_params],
        )
    )


def _summed(name: str, table: Table, dated: str, ws_sql: str) -> str:
    """The mart's rows with the slices (and, for histograms, the days) summed away."""
    keep = _KEYS[name]
    sums = ", ".join(
        f"sum({c.name})::BIGINT AS {c.name}"
        for c in table.columns
        if c.name not in (*keep, "workspace_id", "slice_key", "timezone", "date", "model_tier")
        and c.name != "low_confidence_threshold"
    )
    return f"SELECT {dated} AS date, {', '.join((*keep, sums))} FROM {table.name} " + (
        f"WHERE timezone = ? AND date BETWEEN ? AND ?{ws_sql} GROUP BY ALL"
    )


def _summary_cube(
    con: duckdb.DuckDBPyConnection,
    tz: str,
    threshold: float,
    first: date,
    last: date,
    ws_sql: str,
    ws_params: list[Any],
) -> Cube:
    """Whole-workspace figures only: slices summed away in SQL, percentiles per day read."""
    params = [tz, first, last, *ws_params]
    frames = {}
    for name, table in DAILY_MARTS.items():
        ranged = name in ("latency", "durations")  # only the range's totals need these
        dated = f"DATE '{first.isoformat()}'" if ranged else "date"
        frames[name] = read_frame(con, _summed(name, table, dated, ws_sql), params)
    percentiles = read_frame(
        con,
        f"SELECT * EXCLUDE (timezone, workspace_id) FROM {MART_DAILY_PERCENTILES.name} "
        f"WHERE timezone = ? AND date BETWEEN ? AND ?{ws_sql}",
        params,
    )
    camel = {snake_case(n): n for n in (*LATENCY_QUANTILES, *MEDIANS)}
    return Cube.of(
        tz,
        threshold,
        frames,
        daily_percentiles=percentiles.rename(camel),
        histogram_range=(first, last),
    )
