"""The Streamlit side shared by every page: the snapshot, cached queries, filters, downloads.

Queries are cached per published snapshot: the cache key includes the
snapshot's id, so when a run publishes a new snapshot the next rerun of any
page reads the new one and the old entries age out; a reader never blocks a
run because it only ever opens published copies, read-only. The snapshot is
found and checked by the one reader every reader uses
(``publish.current_snapshot``); when it cannot be used, every page shows the
same message instead of its content.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import polars as pl
import streamlit as st

from convo_analytics.dashboard import _queries as queries
from convo_analytics.dashboard._queries import Filters
from convo_analytics.publish import (
    UNREADABLE,
    Snapshot,
    SnapshotUnreadable,
    connect_snapshot,
    current_snapshot,
)

T = TypeVar("T")
#: Where published snapshots are looked for: this variable, else data/published.
PUBLISHED_DIR_ENV = "CONVO_PUBLISHED_DIR"
ZONES = ("UTC", "Europe/London", "Europe/Berlin", "America/New_York", "America/Los_Angeles",
         "Asia/Kolkata", "Asia/Tokyo", "Australia/Sydney")  # fmt: skip


def published_dir() -> Path:
    return Path(os.environ.get(PUBLISHED_DIR_ENV) or "data/published")


@st.cache_resource(max_entries=4, show_spinner=False)
def _database(path: str) -> duckdb.DuckDBPyConnection:
    return connect_snapshot(Path(path))


def _read() -> tuple[Snapshot | None, str | None]:
    """The snapshot to show (None: nothing published), or why none can be shown."""
    try:
        snap = current_snapshot(published_dir())
        if snap is not None:
            _database(str(snap.path))  # DuckDB opens it (once, cached), or says why not
    except SnapshotUnreadable as exc:
        return None, exc.reason
    return snap, None


def snapshot() -> Snapshot | None:
    """The snapshot to show, or None when there is none that can be shown (pages say why)."""
    return _read()[0]


def connection(snap: Snapshot) -> duckdb.DuckDBPyConnection:
    """A cursor of the snapshot's shared read-only database (one per script run)."""
    cursor = _database(str(snap.path)).cursor()
    cursor.execute("SET TimeZone = 'UTC'")
    return cursor


@st.cache_data(max_entries=256, show_spinner=False)
def _cached(snapshot_path: str, snapshot_id: str, name: str, args: tuple[Any, ...],
            kwargs: tuple[tuple[str, Any], ...]) -> Any:  # fmt: skip
    del snapshot_id  # part of the key: a new snapshot means new answers
    fn: Callable[..., Any] = getattr(queries, name)
    cursor = _database(snapshot_path).cursor()
    cursor.execute("SET TimeZone = 'UTC'")
    try:
        return fn(cursor, *args, **dict(kwargs))
    finally:
        cursor.close()


def query(snap: Snapshot, name: str, *args: Any, **kwargs: Any) -> Any:
    """``queries.<name>(connection, *args, **kwargs)``, cached for this snapshot."""
    return _cached(str(snap.path), snap.snapshot_id, name, args, tuple(sorted(kwargs.items())))


def published_snapshot() -> Snapshot:
    """The current snapshot; when there is none, explain what to run and stop the page.

    A snapshot that cannot be read is one error on the page (the reason as
    plain text below it, never rendered as markdown); the previous good
    snapshot, used when the newest is damaged, comes with a warning.
    """
    snap, problem = _read()
    if problem is not None:
        st.error(UNREADABLE[0].upper() + UNREADABLE[1:] + ".")
        st.text(f"Why: {problem}")
        st.stop()
    if snap is None:
        st.info(
            "Nothing has been published yet. Run `make demo`, or `convo extract`, "
            "`convo webhooks ingest`, `convo transform` and `convo publish`, then reload."
        )
        st.stop()
    assert snap is not None
    if snap.passed_over:
        st.warning(
            f"The newest published snapshot is damaged, so this page shows the previous one "
            f"(published {snap.published_at}). Run `convo publish` to publish a good one."
        )
        st.text(f"Why: {snap.passed_over}")
    return snap


def require_snapshot() -> Snapshot:
    """The current snapshot with conversations in it; otherwise explain, and stop the page."""
    snap = published_snapshot()
    if query(snap, "is_empty"):
        st.info(
            "The published warehouse has no conversations yet. Run `convo extract` against "
            "the service (or `make demo` for the sandbox), then `convo transform` and "
            "`convo publish`."
        )
        st.stop()
    return snap


def sidebar_filters(snap: Snapshot | None) -> Filters | None:
    """The global filters (date range, time zone, channels), kept across pages."""
    if snap is None or query(snap, "is_empty"):
        return None
    span = query(snap, "data_range")
    assert span is not None
    first_day, last_day = span
    default_first = max(first_day, last_day - timedelta(days=29))
    with st.sidebar:
        older = " (the previous one: the newest is damaged)" if snap.passed_over else ""
        st.caption(f"Snapshot published {snap.published_at}{older}")
        picked = st.date_input(
            "Date range",
            value=(default_first, last_day),
            min_value=first_day - timedelta(days=366),
            max_value=last_day + timedelta(days=1),
            key="filter_range",
        )
        tz = st.selectbox("Time zone", ZONES, key="filter_tz")
        chosen = st.multiselect(
            "Channels", query(snap, "channels"), key="filter_channels", placeholder="all"
        )
    days: list[Any] = list(picked) if isinstance(picked, tuple) else [picked]
    days = [d for d in days if isinstance(d, date)] or [default_first, last_day]
    first, last = days[0], days[-1]  # one day while the user is mid-way through picking
    return Filters(first, last, str(tz), tuple(chosen))


def filters() -> Filters:
    """The filters the entry script put in the session (pages call this)."""
    value = st.session_state.get("filters")
    if not isinstance(value, Filters):
        st.stop()
    return value


def download(frame: pl.DataFrame, name: str, label: str = "Download as CSV") -> None:
    """A download button for the data behind a chart or table."""
    flat = frame.with_columns(
        pl.col(c).list.join(", ") for c, t in frame.schema.items() if isinstance(t, pl.List)
    )
    st.download_button(
        label,
        flat.write_csv().encode("utf-8"),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"download_{name}",
    )


def show_table(frame: pl.DataFrame, name: str) -> None:
    """A table with its download button."""
    st.dataframe(frame, hide_index=True, width="stretch")
    download(frame, name)
