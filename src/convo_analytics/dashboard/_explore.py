"""Explore: read-only SQL over the published snapshot, safe by construction.

Each query gets a DuckDB of its own: an in-memory database that attaches the
snapshot ``READ_ONLY`` and then turns file and network access off
(``enable_external_access = false``) and locks its configuration, so that
nothing a query says (``read_csv('/etc/passwd')``, ``COPY ... TO``,
``ATTACH``, ``INSTALL``, ``LOAD``, ``SET``) can reach a file, the network or
a setting. On top of that, only a single ``SELECT`` statement (which includes
``WITH``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``, ``PIVOT``) is accepted, a
query runs at most ``timeout`` seconds (then it is interrupted) and returns
at most ``row_limit`` rows. Every refusal or error is one line. See decision
D-EXPLORE-SAFETY.

With a workspace chosen, the tables a query names are views of the snapshot's
tables narrowed to that workspace's rows (a table without ``workspace_id``,
such as the run logs, is seen whole): the same SQL answers for the workspace
the sidebar shows (decision D-DASH-WORKSPACES).

No Streamlit here: the page calls :func:`run_query` and :func:`choose_chart`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb
import polars as pl

__all__ = [
    "CHART_KINDS",
    "ChartChoice",
    "QueryResult",
    "choose_chart",
    "run_query",
    "safe_connection",
]

#: The attached snapshot's name: tables are found without it (it is the default schema).
ALIAS = "snapshot"
ChartKind = Literal["auto", "line", "bar", "area", "point", "none"]
CHART_KINDS: tuple[ChartKind, ...] = ("auto", "line", "bar", "area", "point", "none")
_ALLOWED = {"SELECT"}


@dataclass(frozen=True, slots=True)
class QueryResult:
    """A query's rows (at most the row limit), or the one-line reason it gave none."""

    frame: pl.DataFrame | None
    error: str | None = None
    truncated: bool = False
    seconds: float = 0.0


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:400]


def safe_connection(snapshot: Path, workspace: str | None = None) -> duckdb.DuckDBPyConnection:
    """A connection that can read the snapshot and nothing else (no files, no network, no
    settings), whatever SQL it is given; with ``workspace``, its tables are seen narrowed
    to that workspace's rows."""
    con = duckdb.connect(
        ":memory:",
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False},
    )
    try:
        con.execute(f"ATTACH ? AS {ALIAS} (READ_ONLY)", [str(snapshot)])
        con.execute(f"USE {ALIAS}")
        if workspace is not None:
            _narrow_to(con, workspace)
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _narrow_to(con: duckdb.DuckDBPyConnection, workspace: str) -> None:
    """Views named as the snapshot's tables, each of the workspace's rows only (a table
    without ``workspace_id`` whole), in the in-memory database the queries then use."""
    tables = con.execute(
        "SELECT t.table_name, bool_or(c.column_name = 'workspace_id') FROM "
        "information_schema.tables t JOIN information_schema.columns c "
        "ON c.table_catalog = t.table_catalog AND c.table_schema = t.table_schema "
        "AND c.table_name = t.table_name "
        "WHERE t.table_catalog = ? AND t.table_schema = 'main' GROUP BY 1",
        [ALIAS],
    ).fetchall()
    literal = "'" + workspace.replace("'", "''") + "'"
    for name, keyed in tables:
        source = f"{ALIAS}.main.{_quoted(name)}"
        where = f" WHERE workspace_id = {literal}" if keyed else ""
        con.execute(f"CREATE VIEW memory.main.{_quoted(name)} AS SELECT * FROM {source}{where}")
    con.execute("USE memory")


def check_statement(con: duckdb.DuckDBPyConnection, sql: str) -> str | None:
    """Why ``sql`` is refused (one line), or None: exactly one SELECT statement."""
    if not sql.strip():
        return "write a query: one SELECT statement"
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        return _one_line(exc)
    if len(statements) != 1:
        return f"one statement per cell, found {len(statements)}"
    kind = statements[0].type.name
    if kind not in _ALLOWED:
        word = sql.split(None, 1)[0].upper()
        named = word if word.isalpha() else kind
        return f"{named} statements are refused: Explore is read-only (one SELECT per cell)"
    return None


def run_query(
    snapshot: Path,
    sql: str,
    *,
    timeout: float = 10.0,
    row_limit: int = 10_000,
    workspace: str | None = None,
) -> QueryResult:
    """Run one read-only query over the snapshot (of one workspace's rows, if given),
    stopped after ``timeout`` seconds, with at most ``row_limit`` rows kept."""
    started = time.perf_counter()
    try:
        con = safe_connection(snapshot, workspace)
    except duckdb.Error as exc:
        return QueryResult(None, f"the snapshot cannot be opened: {_one_line(exc)}")
    try:
        refused = check_statement(con, sql)
        if refused is not None:
            return QueryResult(None, refused)
        done = threading.Event()
        outcome: dict[str, object] = {}

        def work() -> None:
            try:
                table = con.sql(sql).limit(row_limit + 1).to_arrow_table()
                outcome["frame"] = pl.from_arrow(table)
            except Exception as exc:  # reported as the cell's one line
                outcome["error"] = exc
            finally:
                done.set()

        worker = threading.Thread(target=work, name="explore-query", daemon=True)
        worker.start()
        if not done.wait(timeout):
            con.interrupt()
            done.wait(5.0)
            return QueryResult(
                None,
                f"stopped after {timeout:g} s (the time limit of a query); narrow it down",
                seconds=time.perf_counter() - started,
            )
        seconds = time.perf_counter() - started
        if "error" in outcome:
            return QueryResult(None, _one_line(outcome["error"]), seconds=seconds)  # type: ignore[arg-type]
        frame = outcome["frame"]
        assert isinstance(frame, pl.DataFrame)
        truncated = frame.height > row_limit
        return QueryResult(frame.head(row_limit), None, truncated, seconds)
    finally:
        con.close()


@dataclass(frozen=True, slots=True)
class ChartChoice:
    """What to draw for a result: a mark and the columns on each axis (None: no chart)."""

    kind: ChartKind
    x: str | None = None
    y: str | None = None
    color: str | None = None


def _is_time(dtype: pl.DataType) -> bool:
    return isinstance(dtype, pl.Date | pl.Datetime)


def choose_chart(frame: pl.DataFrame, wanted: ChartKind = "auto") -> ChartChoice:
    """A chart from the result's types: a line over a date column, bars over a category,
    points for two numbers; ``wanted`` overrides the mark (``none``: no chart).

    The y axis is the first numeric column that is not the x axis; a second text
    column (with a date on x) colours the lines.
    """
    if wanted == "none" or frame.height == 0:
        return ChartChoice("none")
    schema = frame.schema
    times = [c for c, t in schema.items() if _is_time(t)]
    numbers = [c for c, t in schema.items() if t.is_numeric()]
    texts = [c for c, t in schema.items() if t in (pl.String, pl.Categorical, pl.Boolean)]
    if times and numbers:
        x, kind = times[0], "line"
        color = texts[0] if texts else None
    elif texts and numbers:
        x, kind, color = texts[0], "bar", (texts[1] if len(texts) > 1 else None)
    elif len(numbers) >= 2:
        x, kind, color = numbers[0], "point", texts[0] if texts else None
    else:
        return ChartChoice("none")
    y = next((c for c in numbers if c != x), None)
    if y is None:
        return ChartChoice("none")
    chosen: ChartKind = kind if wanted == "auto" else wanted  # type: ignore[assignment]
    return ChartChoice(chosen, x, y, color)
