"""The Streamlit side shared by every page: the snapshot, cached queries, filters in the
URL, formatted tables with raw downloads, and drill-down from charts.

Queries are cached per published snapshot: the cache key includes the
snapshot's id, so when a run publishes a new snapshot the next rerun of any
page reads the new one and the old entries age out; a reader never blocks a
run because it only ever opens published copies, read-only. The snapshot is
found and checked by the one reader every reader uses
(``publish.current_snapshot``); when it cannot be used, every page shows the
same message instead of its content.

The view lives in the URL's query string (``dashboard._views``): the global
filters are read from it when a session starts and written back on every
run, so a page's URL can be bookmarked or sent and opening it restores the
view.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import streamlit as st

from convo_analytics.dashboard import _compare as comparisons
from convo_analytics.dashboard import _conversations as conversations
from convo_analytics.dashboard import _gaps as gaps
from convo_analytics.dashboard import _monitors as monitors
from convo_analytics.dashboard import _notebooks as notebooks
from convo_analytics.dashboard import _queries as queries
from convo_analytics.dashboard import _topics as topics
from convo_analytics.dashboard import _workspaces as workspaces
from convo_analytics.dashboard._audit import audited_download
from convo_analytics.dashboard._format import (
    DisplayColumn,
    download_label,
    enum_label,
    for_display,
    showing,
)
from convo_analytics.dashboard._queries import Filters, TablePage, TopicChoice
from convo_analytics.dashboard._topics import StoreKey, store_key, topic_index
from convo_analytics.dashboard._views import (
    SLICE_PARAMS,
    Drill,
    Known,
    default_filters,
    drill_from_selection,
    filters_from_url,
    filters_to_params,
    slice_to_params,
)
from convo_analytics.dashboard._workspaces import with_workspace, workspace_label
from convo_analytics.errors import UserError
from convo_analytics.publish import (
    LAKE_PREFIX,
    UNREADABLE,
    Snapshot,
    SnapshotUnreadable,
    connect_snapshot,
    current_snapshot,
)

#: Where published snapshots are looked for: this variable, else data/published.
PUBLISHED_DIR_ENV = "CONVO_PUBLISHED_DIR"
#: The workspace ids a dashboard started with --workspace shows (a JSON list; unset: all).
WORKSPACES_ENV = "CONVO_DASHBOARD_WORKSPACE_IDS"
ZONES = ("UTC", "Europe/London", "Europe/Berlin", "America/New_York", "America/Los_Angeles",
         "Asia/Kolkata", "Asia/Tokyo", "Australia/Sydney")  # fmt: skip
#: Functions a page may ask for by name through :func:`query`.
_QUERIES: dict[str, Callable[..., Any]] = {
    name: fn
    for module in (queries, conversations, workspaces, gaps, topics, comparisons, monitors)
    for name, fn in vars(module).items()
    if callable(fn)
    and not name.startswith("_")
    and getattr(fn, "__module__", "") == module.__name__
}


_QUERIES["schema"] = notebooks.schema


def published_dir() -> Path:
    return Path(os.environ.get(PUBLISHED_DIR_ENV) or "data/published")


def app_settings() -> dict[str, Any]:
    """The dashboard's settings (``convo dashboard`` passes them in the environment; read
    on each run, which costs well under a millisecond)."""
    from convo_analytics.config import ConfigError, load_settings

    try:
        settings = load_settings(None, {})
    except ConfigError:
        settings = load_settings(None, {}, environ={})
    return {
        "notebooks_dir": settings.require_path("dashboard.notebooks_dir"),
        "query_timeout_seconds": settings.get_float("dashboard.query_timeout_seconds"),
        "query_row_limit": settings.get_int("dashboard.query_row_limit"),
        "query_memory_mb": settings.get_int("dashboard.query_memory_mb"),
        "query_threads": settings.get_int("dashboard.query_threads"),
        "query_workers": settings.get_int("dashboard.query_workers"),
        "query_temp_mb": settings.get_int("dashboard.query_temp_mb"),
        "delivery_log": settings.get_path("notify.delivery_log"),
        "curations_file": settings.topics.curations_file,
        "monitoring": monitors.monitor_setup(settings),
    }


def monitor_setup() -> monitors.MonitorSetup:
    """The ``[[monitors]]`` tables (read-only in the app), the store the Monitors page
    writes (``monitoring.store_file``) and the default time zone, read on each run."""
    setup: monitors.MonitorSetup = app_settings()["monitoring"]
    return setup


def curations_store() -> Path | None:
    """The app-state store of topic curations (``topics.curations_file``; None: not set),
    which the Topics page's forms append to and every topic name is read with."""
    path = app_settings()["curations_file"]
    return Path(path) if path is not None else None


def topic_store_key() -> StoreKey | None:
    """The store's :func:`_topics.store_key`: a query that names topics takes it, so that
    its cached answer is read again once the store changes (a rename shows at once)."""
    return store_key(curations_store())


@dataclass(frozen=True, slots=True)
class TopicOptions:
    """The snapshot's topics with the store's curations applied (``_topics.topic_index``),
    of the workspaces this dashboard shows: every topic's key -> the topic it counts
    under; each such topic's key -> its label; and why the store could not be read (its
    topics then named as the last transform named them)."""

    choices: dict[str, TopicChoice]
    labels: dict[str, str]
    problem: str | None = None


def topic_options(snap: Snapshot) -> TopicOptions:
    """The snapshot's topics as the sidebar offers them (read once per snapshot and state
    of the store: a rename made a moment ago is in the next run's)."""
    stamp = (snap.snapshot_id, topic_store_key(), restricted_workspaces())
    held = st.session_state.get("_topic_options")
    if isinstance(held, tuple) and held[0] == stamp:
        return held[1]  # type: ignore[no-any-return]
    problem = None
    try:
        names = query(snap, "topic_names", stamp[1])
    except UserError as exc:
        problem = str(exc)
        names = query(snap, "topic_names", None)
    choices, labels = topic_index(names)
    if stamp[2] is not None:
        choices = {k: c for k, c in choices.items() if c.workspace_id in stamp[2]}
        labels = {k: label for k, label in labels.items() if k in choices}
    options = TopicOptions(choices, labels, problem)
    st.session_state["_topic_options"] = (stamp, options)
    return options


def restricted_workspaces() -> tuple[str, ...] | None:
    """The workspace ids the dashboard was started for (``convo dashboard --workspace``),
    or None: every workspace. Set but unreadable or empty, it shows none (never all)."""
    raw = os.environ.get(WORKSPACES_ENV)
    if raw is None:
        return None
    try:
        ids = json.loads(raw)
    except ValueError:
        ids = None
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
        st.error("This dashboard was started for workspaces it cannot read; restart it.")
        st.stop()
    return tuple(dict.fromkeys(ids))


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
    fn = _QUERIES[name]
    cursor = _database(snapshot_path).cursor()
    cursor.execute("SET TimeZone = 'UTC'")
    try:
        return fn(cursor, *args, **dict(kwargs))
    finally:
        cursor.close()


def query(snap: Snapshot, name: str, *args: Any, **kwargs: Any) -> Any:
    """``<name>(connection, *args, **kwargs)`` from the dashboard's queries, cached for
    this snapshot."""
    return _cached(str(snap.path), snap.snapshot_id, name, args, tuple(sorted(kwargs.items())))


def published_snapshot() -> Snapshot:
    """The current snapshot; when there is none, explain what to run and stop the page.

    A snapshot that cannot be read is one error on the page (the reason as
    plain text below it, never rendered as markdown); the previous good
    snapshot, used when the newest is damaged, or the copy of the lake made
    before, used when the lake cannot be read, comes with a warning saying which.
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
        st.warning(_fallback_warning(snap))
        st.text(f"Why: {snap.passed_over}")
    if snap.unfinished:  # a lake publish in progress or stopped: its workspaces as before
        st.warning(
            "A lake publish is unfinished: the pages show each workspace as its last "
            "complete publish left it.",
            icon=":material/hourglass_top:",
        )
        st.text(snap.unfinished)
    return snap


def _from_lake(snap: Snapshot) -> bool:
    """Whether the snapshot is a local copy of the lake (``read.source = "lake"``), not a
    published snapshot (``warehouse-<id>.duckdb``)."""
    return snap.path.name.startswith(LAKE_PREFIX)


def _fallback_warning(snap: Snapshot) -> str:
    """What the page says when it shows an older copy: a damaged newest snapshot and an
    unreachable lake are different causes with different fixes."""
    if _from_lake(snap):
        return (
            f"The lake could not be read, so this page shows the copy of it made at "
            f"{snap.published_at}. Check that the lake's catalog (lake.catalog_uri) can be "
            "reached, then reload."
        )
    return (
        f"The newest published snapshot is damaged, so this page shows the previous one "
        f"(published {snap.published_at}). Run `convo publish` to publish a good one."
    )


def _snapshot_caption(snap: Snapshot) -> str:
    """The sidebar's line saying what the pages read and since when."""
    if _from_lake(snap):
        older = " (an older copy: the lake could not be read)" if snap.passed_over else ""
        return f"Lake copy made {snap.published_at}{older}"
    older = " (the previous one: the newest is damaged)" if snap.passed_over else ""
    return f"Snapshot published {snap.published_at}{older}"


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


def known(snap: Snapshot) -> Known:
    """What the snapshot holds that a URL's filters are checked against (its days,
    channels and workspaces) and the time zones the dashboard offers."""
    span = query(snap, "data_range")
    assert span is not None
    first_day, last_day = span
    names: dict[str, str] = query(snap, "workspace_names")
    allowed = restricted_workspaces()
    if allowed is not None:  # a dashboard started for these workspaces knows only them
        names = {ws: names.get(ws, ws) for ws in allowed}
    choices = topic_options(snap).choices
    return Known(first_day, last_day, tuple(query(snap, "channels")), names, ZONES, choices)


def _within(value: Any, low: date, high: date) -> Any:
    """A date input's value (a day or a tuple of days) clamped to what it accepts."""
    if isinstance(value, tuple | list):
        return tuple(_within(day, low, high) for day in value)
    return min(max(value, low), high) if isinstance(value, date) else value


def sidebar_filters(snap: Snapshot | None) -> Filters | None:
    """The global filters (workspace, date range, time zone, channels, topics), kept across pages
    and in the URL: a session opened from a URL starts with the filters its query string
    names, checked against the data (``_views.filters_from_url``); what was dropped or
    clamped is said above the page until the filters change."""
    if snap is None or query(snap, "is_empty"):
        return None
    data = known(snap)
    names = dict(data.workspaces or {})
    allowed = restricted_workspaces()
    # started for some workspaces: one of them, never all
    all_too = allowed is None and len(names) > 1
    choices = ["", *names] if all_too else list(names) if allowed is not None else [""]
    lowest, highest = data.first_day - timedelta(days=366), data.last_day + timedelta(days=1)
    default = default_filters(data.first_day, data.last_day)
    if "filter_range" not in st.session_state:  # a new session: the URL's view, if any
        from_url, notes = filters_from_url(_params(), data)
        st.session_state["filter_range"] = (from_url.first, from_url.last)
        st.session_state["filter_tz"] = from_url.tz
        st.session_state["filter_channels"] = list(from_url.channels)
        st.session_state["filter_workspace"] = (from_url.workspace or "") if len(names) > 1 else ""
        st.session_state["filter_topics"] = [c.key for c in from_url.topics]
        st.session_state["_url_notes"] = (notes, None)
    else:  # a new snapshot may hold other days than the widget's value
        current = st.session_state["filter_range"]
        if tuple(current) == st.session_state.get("_default_range") != (default.first,
                                                                         default.last):  # fmt: skip
            # still on the default range: it follows the data to its new last day
            st.session_state["filter_range"] = (default.first, default.last)
        elif _within(current, lowest, highest) != current:
            st.session_state["filter_range"] = _within(current, lowest, highest)
    st.session_state["_default_range"] = (default.first, default.last)
    if st.session_state.get("filter_workspace") not in ("", *names):  # a new snapshot
        st.session_state["filter_workspace"] = ""
    held = [c for c in st.session_state.get("filter_channels", []) if c in data.channels]
    if held != st.session_state.get("filter_channels", []):  # a new snapshot
        st.session_state["filter_channels"] = held
    if allowed is not None and st.session_state["filter_workspace"] not in choices:
        st.session_state["filter_workspace"] = choices[0]
    if "_pending_channels" in st.session_state:  # a chart's click picked a channel
        st.session_state["filter_channels"] = [
            c for c in st.session_state.pop("_pending_channels") if c in data.channels
        ]
    options = topic_options(snap)
    topic_choices = options.choices
    offered = _offered_topics(topic_choices, options.labels,
                              st.session_state["filter_workspace"] or None)  # fmt: skip
    if "_pending_topics" in st.session_state:  # a click picked a topic
        st.session_state["filter_topics"] = st.session_state.pop("_pending_topics")
    # a topic merged since it was chosen reads as the one it is merged into; another
    # workspace's (or one the snapshot lacks) is dropped
    held = st.session_state.get("filter_topics", [])
    kept = list(dict.fromkeys(topic_choices[k].key for k in held if k in topic_choices))
    kept = [k for k in kept if k in offered]
    if kept != held:
        st.session_state["filter_topics"] = kept
    if options.problem is not None:
        st.warning("The topic curations cannot be read, so topics are named as the last "
                   "transform named them.", icon=":material/warning:")  # fmt: skip
        st.text(f"Why: {options.problem}")
    with st.sidebar:
        st.caption(_snapshot_caption(snap))
        picked = st.date_input(
            "Date range", min_value=lowest, max_value=highest, key="filter_range"
        )
        tz = st.selectbox("Time zone", ZONES, key="filter_tz")
        chosen = st.multiselect("Channels", data.channels, key="filter_channels",
                                format_func=enum_label, placeholder="all")  # fmt: skip
        workspace = st.selectbox(
            "Workspace",
            choices,
            format_func=lambda ws: workspace_label(names, ws or None),
            key="filter_workspace",
            disabled=len(choices) <= 1,
            help="Every page's figures, tables and downloads are this workspace's; "
            "all workspaces are summed (the Workspaces page compares them).",
        )
        chosen_topics: list[str] = []
        if offered:
            several = len({topic_choices[k].workspace_id for k in offered}) > 1
            chosen_topics = st.multiselect(
                "Topics",
                offered,
                key="filter_topics",
                format_func=lambda k: _topic_label(k, topic_choices, offered, names, several),
                placeholder="all",
                help="Every page's figures are these topics' conversations (a topic "
                "counts the topics merged into it); a topic is its workspace's own.",
            )
    days: list[Any] = list(picked) if isinstance(picked, tuple) else [picked]
    days = [d for d in days if isinstance(d, date)] or [default.first, default.last]
    first, last = days[0], days[-1]  # one day while the user is mid-way through picking
    if allowed is not None and workspace not in allowed:
        workspace = allowed[0]
    picked_topics = tuple(topic_choices[k] for k in chosen_topics if k in topic_choices)
    f = Filters(first, last, str(tz), tuple(chosen), str(workspace) if workspace else None,
                picked_topics)  # fmt: skip
    _url_notes(f)
    write_params(
        filters_to_params(f),
        keep_others=True,
        owned=("from", "to", "tz", "channel", "workspace", "topic"),
    )
    return f


def _offered_topics(
    choices: dict[str, TopicChoice], labels: dict[str, str], workspace: str | None
) -> dict[str, str]:
    """The topics the sidebar offers: each topic that counts under itself, of the chosen
    workspace (None: of every workspace shown) -> its label."""
    return {
        key: label
        for key, label in labels.items()
        if key in choices and (workspace is None or choices[key].workspace_id == workspace)
    }


def _topic_label(
    key: str,
    choices: dict[str, TopicChoice],
    offered: dict[str, str],
    names: dict[str, str],
    several: bool,
) -> str:
    """How the sidebar names a topic: its label, after its workspace's name when the
    topics of several workspaces are offered."""
    label = offered.get(key, key)
    if not several or key not in choices:
        return label
    ws = choices[key].workspace_id
    return f"{names.get(ws, ws)}: {label}"


def _url_notes(f: Filters) -> None:
    """Say above the page what the URL asked for that the data does not have, as long as
    the filters are the ones the URL was read into (a change of filters ends the notes)."""
    notes, shown_for = st.session_state.get("_url_notes", ([], None))
    if not notes:
        return
    if shown_for is None:  # the run that read the URL: these filters are its reading
        shown_for = f
        st.session_state["_url_notes"] = (notes, f)
    if shown_for != f:
        st.session_state["_url_notes"] = ([], None)
        return
    st.info("This link's view was adjusted to the data:  \n" + "  \n".join(notes),
            icon=":material/link:")  # fmt: skip


def filters() -> Filters:
    """The filters the entry script put in the session (pages call this)."""
    value = st.session_state.get("filters")
    if not isinstance(value, Filters):
        st.stop()
    return value


def _params() -> dict[str, list[str]]:
    return {key: st.query_params.get_all(key) for key in st.query_params}


def params() -> dict[str, list[str]]:
    """The URL's query string, each key with all its values."""
    return _params()


def write_params(
    values: dict[str, str | list[str]], *, keep_others: bool, owned: tuple[str, ...] = ()
) -> None:
    """Put ``values`` in the URL; keys in ``owned`` that ``values`` lacks are removed (and
    every other key too unless ``keep_others``). Unchanged keys are not rewritten."""
    current = _params()
    for key in current:
        if key not in values and (key in owned or not keep_others):
            del st.query_params[key]
    for key, value in values.items():
        wanted = [value] if isinstance(value, str) else list(value)
        if current.get(key) != wanted:
            st.query_params[key] = wanted if len(wanted) != 1 else wanted[0]


def _workspace_view() -> tuple[dict[str, str], str | None]:
    """The snapshot's workspace names and the chosen workspace (None: all)."""
    snap = snapshot()
    f = st.session_state.get("filters")
    names = query(snap, "workspace_names") if snap is not None else {}
    return names, f.workspace if isinstance(f, Filters) else None


def named(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame with the workspace (name) as its first column: each row's, else the chosen
    workspace's (or all workspaces')."""
    return with_workspace(frame, *_workspace_view())


@dataclass(frozen=True, slots=True)
class Whole:
    """The query behind a table that shows part of its rows (one page): the table's
    download runs it whole, when the button is clicked (``query(snap, name, *args,
    offset=0, limit=None)``, a ``TablePage``)."""

    snap: Snapshot
    name: str
    args: tuple[Any, ...]
    total: int
    #: What a row is, for the button's label ("Download all 571 qualified leads as CSV").
    what: str = "rows"


def _csv(frame: pl.DataFrame) -> bytes:
    """A frame as CSV (lists joined), as every download writes it."""
    flat = frame.with_columns(
        pl.col(c).cast(pl.List(pl.String)).list.join(", ")
        for c, t in frame.schema.items()
        if isinstance(t, pl.List)
    )
    return flat.write_csv().encode("utf-8")


def _whole_csv(whole: Whole, workspace: bool) -> Callable[[], bytes]:
    """Make the whole table's CSV when the download is clicked (Streamlit runs it on another
    thread: it uses the snapshot's database opened now, and no Streamlit command)."""
    database = _database(str(whole.snap.path))
    fn = _QUERIES[whole.name]
    names, chosen = _workspace_view()

    def make() -> bytes:
        cursor = database.cursor()
        try:
            cursor.execute("SET TimeZone = 'UTC'")
            rows = fn(cursor, *whole.args, offset=0, limit=None).rows
        finally:
            cursor.close()
        return _csv(with_workspace(rows, names, chosen) if workspace else rows)

    return make


def download(
    frame: pl.DataFrame,
    name: str,
    label: str | None = None,
    *,
    workspace: bool = True,
    whole: Whole | None = None,
    file_name: str | None = None,
) -> None:
    """A download button for the data behind a chart or table (the raw values, with the
    workspace unless ``workspace`` is off): every row of it, also when the table shows
    one page (``whole``: its query, run when the button is clicked). ``name`` keys the
    button; the file is ``file_name`` (default: ``name``) with ``.csv``. A click is
    recorded in the audit trail before the bytes go out (``_audit``)."""
    file = f"{file_name or name}.csv"
    chosen = _workspace_view()[1]
    if whole is not None and whole.total > frame.height:
        st.download_button(
            download_label(whole.total, whole.what),
            audited_download(_whole_csv(whole, workspace), file, whole.total, chosen),
            file_name=file, mime="text/csv", key=f"download_{name}",
        )  # fmt: skip
        return
    if workspace:
        frame = named(frame)
    st.download_button(
        label or download_label(),
        audited_download(_csv(frame), file, frame.height, chosen),
        file_name=file,
        mime="text/csv",
        key=f"download_{name}",
    )


def _column_config(column: DisplayColumn) -> Any:
    if column.as_text:
        numeric = column.kind not in ("datetime", "date", "text", "bool", "enum")
        return st.column_config.TextColumn(column.label, alignment="right" if numeric else None)
    if column.kind in ("count", "number", "ratio", "score", "percent", "ms", "seconds"):
        return st.column_config.NumberColumn(column.label, format=column.format)
    if column.kind == "bool":
        return st.column_config.CheckboxColumn(column.label)
    if column.kind == "enum":  # the values stay (they sort and filter as such), shown in words
        labels = dict(column.options)
        return st.column_config.SelectboxColumn(
            column.label, options=list(labels), format_func=lambda v: labels.get(str(v), str(v))
        )
    return st.column_config.TextColumn(column.label)


def show_table(
    frame: pl.DataFrame,
    name: str,
    tz: str | None = None,
    *,
    relabel: bool = True,
    workspace: bool = True,
    whole: Whole | None = None,
    raw: pl.DataFrame | None = None,
    file_name: str | None = None,
) -> None:
    """A table with human labels and formatted values, and its download (raw values, every
    row: ``whole`` is the query of a table that shows one page of it; ``raw``, the frame
    whose values ``frame`` shows as text); the workspace (name) is the first column of
    both unless ``workspace`` is off."""
    if workspace:
        frame = named(frame)
    shown = for_display(frame.drop("workspace_id", strict=False) if workspace else frame, tz,
                        relabel=relabel)  # fmt: skip
    config = {c: _column_config(d) for c, d in shown.columns.items()}
    st.dataframe(shown.frame, hide_index=True, width="stretch", column_config=config)
    kept = named(raw) if workspace and raw is not None else frame if raw is None else raw
    download(kept, name, workspace=workspace, whole=whole, file_name=file_name)


#: Rows per page a paged table offers.
PAGE_SIZES = (25, 100, 500)


def paged_table(
    snap: Snapshot,
    name: str,
    args: tuple[Any, ...],
    file_name: str,
    tz: str | None = None,
    *,
    key: str,
    what: str = "rows",
) -> TablePage:
    """A table of the query ``name`` (``query(snap, name, *args, offset=..., limit=...)``,
    a ``TablePage``) one page at a time: when it has more rows than a page, it says
    "Showing 1-100 of 571 ..." (``_format.showing``) and offers the page and the rows per
    page; its download holds every row (decision D-TABLE-PAGES)."""
    size = int(st.session_state.get(f"{key}_size", PAGE_SIZES[1]))
    if st.session_state.get(f"_{key}_size_was", size) != size:
        st.session_state[f"{key}_page"] = 1  # another page size: from the first row again
    st.session_state[f"_{key}_size_was"] = size
    page = max(1, int(st.session_state.get(f"{key}_page", 1)))
    result: TablePage = query(snap, name, *args, offset=(page - 1) * size, limit=size)
    pages = max(1, -(-result.total // size))
    if page > pages:  # the table shrank (another range, a new snapshot): its last page
        page = pages
        result = query(snap, name, *args, offset=(page - 1) * size, limit=size)
    if result.total > PAGE_SIZES[0]:
        said, at, per = st.columns([4, 1, 1], vertical_alignment="bottom")
        said.caption(showing(result.offset + 1, result.rows.height, result.total, what))
        if pages > 1:
            st.session_state[f"{key}_page"] = page
            at.number_input(f"Page (of {pages:,})", min_value=1, max_value=pages, step=1,
                            key=f"{key}_page")  # fmt: skip
        per.selectbox("Per page", PAGE_SIZES, key=f"{key}_size",
                      index=PAGE_SIZES.index(size) if size in PAGE_SIZES else 1)  # fmt: skip
    whole = Whole(snap, name, args, result.total, what)
    show_table(result.rows, file_name, tz, whole=whole)
    return result


def chart_with_drill(chart: Any, key: str, kind: str, f: Filters) -> None:
    """Draw a chart whose marks open the conversations behind them: a click switches to
    the Conversations page with that slice in the URL (and the current filters)."""
    from convo_analytics.dashboard._charts import PICK

    event = st.altair_chart(chart, width="stretch", key=key, on_select="rerun",
                            selection_mode=PICK)  # fmt: skip
    picked = (event.get("selection") or {}).get(PICK) or []
    drill = drill_from_selection(picked[0] if picked else {}, kind)
    if drill is not None:
        open_conversations(drill, f)


def open_conversations(drill: Drill, f: Filters) -> None:
    """Switch to the Conversations page showing the drill's slice (and the channels or
    topics it picked)."""
    target = replace(f, channels=drill.channels if drill.channels is not None else f.channels)
    if drill.channels is not None:  # the sidebar takes it before drawing its widget
        st.session_state["_pending_channels"] = list(drill.channels)
    if drill.topics is not None:
        snap = snapshot()
        choices = topic_options(snap).choices if snap is not None else {}
        picked = tuple(dict.fromkeys(choices[k] for k in drill.topics if k in choices))
        target = replace(target, topics=picked)
        st.session_state["_pending_topics"] = [c.key for c in picked]
    values = {**filters_to_params(target), **slice_to_params(drill.slice)}
    st.switch_page("app_pages/conversations.py", query_params=values)


__all__ = [
    "PAGE_SIZES",
    "PUBLISHED_DIR_ENV",
    "SLICE_PARAMS",
    "WORKSPACES_ENV",
    "ZONES",
    "TopicOptions",
    "Whole",
    "app_settings",
    "chart_with_drill",
    "connection",
    "curations_store",
    "download",
    "filters",
    "known",
    "monitor_setup",
    "named",
    "open_conversations",
    "paged_table",
    "params",
    "published_dir",
    "published_snapshot",
    "query",
    "require_snapshot",
    "restricted_workspaces",
    "show_table",
    "sidebar_filters",
    "snapshot",
    "topic_options",
    "topic_store_key",
    "write_params",
]
