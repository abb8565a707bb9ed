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
import polars as pl

from convo_analytics.transform._cube import Cube, build_cube
from convo_analytics.transform._facts import DIMENSIONS, read_facts
from convo_analytics.transform._frames import read_frame
from convo_analytics.warehouse._marts import DAILY_MARTS

#: Dimension filters: dimension -> accepted values (an absent key accepts all).
Filters = Mapping[str, Sequence[str]]


@dataclass(frozen=True, slots=True)
class PublishedRun:
    """The newest successful transform: what the marts hold."""

    transform_run_id: str
    finished_at: Any
    timezones: tuple[str, ...]
    low_confidence_threshold: float


def latest_transform(con: duckdb.DuckDBPyConnection) -> PublishedRun | None:
    rows = con.execute(
        "SELECT transform_run_id, finished_at, timezones, low_confidence_threshold "
        "FROM transform_runs WHERE status = 'ok' ORDER BY finished_at DESC LIMIT 1"
    ).fetchall()
    if not rows:
        return None
    row = rows[0]
    return PublishedRun(row[0], row[1], tuple(row[2] or ()), float(row[3]))


def _dimension_sql(filters: Filters | None) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for dim, values in (filters or {}).items():
        if dim not in DIMENSIONS:
            raise ValueError(f"unknown dimension {dim!r}; one of {', '.join(DIMENSIONS)}")
        if values:
            clauses.append(f"{dim} IN ({', '.join('?' * len(values))})")
            params.extend(values)
    return "".join(f" AND {c}" for c in clauses), params


def dimension_filter(filters: Filters | None) -> pl.Expr:
    expr = pl.lit(True)
    for dim, values in (filters or {}).items():
        if values:
            expr = expr & pl.col(dim).is_in(list(values))
    return expr


def load_cube(
    con: duckdb.DuckDBPyConnection,
    tz: str = "UTC",
    low_confidence_threshold: float | None = None,
    *,
    first: date | None = None,
    last: date | None = None,
    filters: Filters | None = None,
) -> Cube:
    """The daily cube for ``tz``, restricted to ``first``..``last`` and the filters."""
    run = latest_transform(con)
    threshold = (
        low_confidence_threshold
        if low_confidence_threshold is not None
        else (run.low_confidence_threshold if run else 0.5)
    )
    lo, hi = first or date(1, 1, 1), last or date(9999, 12, 31)
    if run is None or tz not in run.timezones or threshold != run.low_confidence_threshold:
        cube = build_cube(read_facts(con), tz, threshold)
        return cube.where(pl.col("date").is_between(lo, hi) & dimension_filter(filters))
    dims_sql, dims_params = _dimension_sql(filters)
    frames = {
        name: read_frame(
            con,
            f"SELECT * EXCLUDE (timezone) FROM {table.name} "
            f"WHERE timezone = ? AND date BETWEEN ? AND ?{dims_sql}",
            [tz, lo, hi, *dims_params],
        )
        for name, table in DAILY_MARTS.items()
    }
    return Cube(
        timezone=tz,
        low_confidence_threshold=threshold,
        conversations=frames["conversations"],
        messages=frames["messages"],
        latency=frames["latency"],
        guardrails=frames["guardrails"],
        escalations=frames["escalations"],
        durations=frames["durations"],
    )
