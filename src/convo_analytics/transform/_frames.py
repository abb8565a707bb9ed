"""Moving data between the warehouse and polars: Arrow both ways, marts swapped in one go."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb
import polars as pl

from convo_analytics.warehouse import Table, transaction


def read_frame(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None
) -> pl.DataFrame:
    """A query's whole result as a polars frame (read to the end, so the connection is free)."""
    arrow = con.sql(sql, params=list(params) if params else None).to_arrow_table()
    frame = pl.from_arrow(arrow)
    assert isinstance(frame, pl.DataFrame)
    return frame


def scalar(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None) -> Any:
    """The first column of a query's first row (None without rows); the result is read to
    its end, as DuckDB wants before the connection does anything else."""
    rows = con.execute(sql, list(params) if params else None).fetchall()
    return rows[0][0] if rows else None


def empty_frame(table: Table) -> pl.DataFrame:
    """A frame with no rows and the mart's columns (types follow on insert)."""
    return pl.DataFrame({c.name: [] for c in table.columns})


def replace_marts(
    con: duckdb.DuckDBPyConnection,
    frames: Mapping[Table, pl.DataFrame],
    extra_statements: Sequence[tuple[str, Sequence[Any]]] = (),
) -> None:
    """Replace every mart's rows with its frame, all in one transaction.

    Readers of the warehouse see either the previous marts or the new ones,
    never a mix; a failure leaves the previous ones in place.
    """
    with transaction(con):
        for table, frame in frames.items():
            name = f"_new_{table.name}"
            con.register(name, frame.to_arrow())
            try:
                con.execute(f"DELETE FROM {table.name}")
                cols = ", ".join(c.name for c in table.columns if c.name in frame.columns)
                con.execute(f"INSERT INTO {table.name} ({cols}) SELECT {cols} FROM {name}")
            finally:
                con.unregister(name)
        for sql, params in extra_statements:
            con.execute(sql, list(params))
