"""Explore: a notebook of read-only SQL cells over the published snapshot, each with its
table, a chart (its kind and columns saved with the notebook) and a download, and text
cells of the author's Markdown; notebooks are plain .sql files, opened by URL
(``?notebook=NAME``), with the schema browsable beside them. A cell reads an earlier
cell's result by the name shown under its title, as a CTE of its statement (decision
D-NOTEBOOK-CELLS). A notebook's parameters
(its header's, and the built-ins $from, $to, $tz, $channel, $workspace defaulting to the
sidebar's) get a widget each, are carried in the URL as ``?p.NAME=VALUE`` and are bound
as DuckDB parameters, never written into the SQL (decision D-NOTEBOOK-PARAMS).

Queries run in the notebooks package's query processes, stopped at the time and
memory limits (decision D-EXPLORE-EXECUTOR). A cell stopped by a limit is marked
(beside a named notebook's file) and is not run again when the notebook opens, until
it is edited or run with its Run button. Text a user wrote (names, titles, the SQL
quoted in an error) is shown literally, never as markdown; a text cell's Markdown is
rendered by ``notebooks.markdown_html`` only (no raw HTML, no images, safe links)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import streamlit as st

from convo_analytics.dashboard import charts
from convo_analytics.dashboard._audit import record_query
from convo_analytics.dashboard._explore import (
    AUTO,
    CHART_KINDS,
    URL_PREFIX,
    axis_options,
    chart_for,
    literal,
    name_caption,
    page_params,
    referenced,
    values_from_url,
    values_to_url,
)
from convo_analytics.dashboard._notebooks import (
    Cell,
    Notebook,
    list_notebooks,
    load_notebook,
    notebook_name,
    render_notebook,
    save_notebook,
)
from convo_analytics.dashboard._queries import Filters
from convo_analytics.dashboard._session import (
    app_settings,
    params,
    published_dir,
    published_snapshot,
    query,
    restricted_workspaces,
    show_table,
    write_params,
)
from convo_analytics.notebooks import (
    CHART_SETTINGS,
    Executor,
    Limits,
    ParamError,
    ParamSpec,
    QueryResult,
    cell_key,
    cell_name,
    clear_mark,
    compose,
    convert,
    encode_values,
    load_marks,
    mark_stopped,
    markdown_html,
)

FIRST_QUERY = (
    "SELECT channel, count(*) AS conversations, avg(escalated::INT) AS escalation_rate\n"
    "FROM mart_conversations\nGROUP BY channel\nORDER BY conversations DESC"
)


@st.cache_resource(max_entries=2, show_spinner=False, on_release=lambda e: e.close())
def _executor(limits: Limits, published: str) -> Executor:
    """The app's query processes (one pool per set of limits, closed when replaced)."""
    return Executor(limits, hide={published: "<published>"})


class _NotCached(Exception):
    """A result the cache must not keep (stopped by a limit, or not run at all)."""

    def __init__(self, result: QueryResult) -> None:
        super().__init__(result.error)
        self.result = result


@st.cache_data(max_entries=128, show_spinner=False)
def _cached(
    path: str,
    snapshot_id: str,
    sql: str,
    timeout: float,
    row_limit: int,
    scope: tuple[str, ...] | None,
    keyed_only: bool,
    limits: Limits,
    bound: str = "{}",
    cells: tuple[str, ...] = (),
    reads: tuple[str, ...] = (),
) -> QueryResult:
    """``bound``: the parameter values the cell names, as JSON (``_params.encode_values``);
    ``cells``: the names of the cells above it, ``reads``: those its statement reads as CTEs
    (``notebooks.compose``), for the statement check's messages."""
    del snapshot_id  # part of the key: a new snapshot runs the cell again
    result = _executor(limits, str(published_dir().resolve())).run(
        Path(path), sql, timeout=timeout, row_limit=row_limit, workspaces=scope,
        keyed_only=keyed_only, params=json.loads(bound), cells=cells, reads=reads,
    )  # fmt: skip
    if result.stopped is not None or result.retry:
        raise _NotCached(result)
    return result


def _run(*args: Any) -> QueryResult:
    """A cell's result: cached when it has rows or an error, run again otherwise."""
    try:
        return _cached(*args)
    except _NotCached as stopped:
        return stopped.result


def _state() -> dict[str, Any]:
    """The page's notebook: its cells' ids in order, and per id what is kept apart from the
    widgets (a widget not drawn in a run loses its value): the cell's kind, a text cell's
    Markdown, a SQL cell's chart columns (drawn only when the cell has a result)."""
    state: dict[str, Any] = st.session_state.setdefault(
        "explore", {"name": None, "title": "Untitled notebook", "cells": [], "next": 0}
    )
    for part in ("kinds", "texts", "axes"):
        state.setdefault(part, {})
    return state


def _load(name: str | None, notebook: Notebook) -> None:
    """Make ``notebook`` the page's notebook (its cells' widgets take its text)."""
    state = _state()
    state.update(
        name=name,
        title=notebook.title,
        cells=[],
        description=notebook.description,
        params=list(notebook.params),
        problems=list(notebook.problems),
        generation=state.get("generation", 0) + 1,
        kinds={},
        texts={},
        axes={},
    )
    for cell in notebook.cells:
        _add(cell)
    st.session_state["explore_title"] = notebook.title
    st.session_state["explore_save_as"] = name or ""


def _add(cell: Cell) -> None:
    state = _state()
    cid = state["next"]
    state["next"] = cid + 1
    state["cells"].append(cid)
    state["kinds"][cid] = cell.kind
    st.session_state[f"cell_title_{cid}"] = cell.title
    if cell.kind == "markdown":
        state["texts"][cid] = cell.sql
        st.session_state[f"cell_edit_{cid}"] = not cell.sql.strip()  # a new one opens to edit
        return
    st.session_state[f"cell_sql_{cid}"] = cell.sql
    st.session_state[f"cell_chart_{cid}"] = cell.chart
    state["axes"][cid] = {k: getattr(cell, k) for k in CHART_SETTINGS}


def _move(cid: int, step: int) -> None:
    cells = _state()["cells"]
    at = cells.index(cid)
    to = max(0, min(len(cells) - 1, at + step))
    cells.insert(to, cells.pop(at))


def _delete(cid: int) -> None:
    _state()["cells"].remove(cid)


def _kind(cid: int) -> str:
    return str(_state()["kinds"].get(cid, "sql"))


def _sync() -> None:
    """Keep what the text and axis widgets of the last run hold (they are not drawn in
    every run: a text cell's editor only while editing, the axes only beside a result)."""
    state = _state()
    for cid in state["cells"]:
        if _kind(cid) == "markdown":
            if f"cell_md_{cid}" in st.session_state:
                state["texts"][cid] = str(st.session_state[f"cell_md_{cid}"])
            continue
        axes = state["axes"].setdefault(cid, {})
        for setting in CHART_SETTINGS:
            if f"cell_{setting}_{cid}" in st.session_state:
                axes[setting] = st.session_state[f"cell_{setting}_{cid}"] or None


def _cell(cid: int) -> Cell:
    state = _state()
    title = st.session_state.get(f"cell_title_{cid}", "")
    if _kind(cid) == "markdown":
        return Cell(title, state["texts"].get(cid, ""), kind="markdown")
    axes = state["axes"].get(cid, {})
    return Cell(
        title,
        st.session_state.get(f"cell_sql_{cid}", ""),
        st.session_state.get(f"cell_chart_{cid}", "auto"),
        **{k: axes.get(k) for k in CHART_SETTINGS},
    )


def _current() -> Notebook:
    state = _state()
    return Notebook(
        st.session_state.get("explore_title") or "Untitled notebook",
        state.get("description", ""),
        [_cell(cid) for cid in state["cells"]],
        list(state.get("params", [])),
    )


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")[:60] or "notebook"


def _stopped() -> dict[str, tuple[str, str]]:
    """This session's cells stopped by a limit: cell key -> (its line, the limit)."""
    return st.session_state.setdefault("explore_stopped", {})


def _remember_stop(name: str | None, sql: str, result: QueryResult) -> None:
    assert result.error is not None and result.stopped is not None
    _stopped()[cell_key(sql)] = (result.error, result.stopped)
    if name:
        mark_stopped(saved_dir, name, sql, result.error, result.stopped)


def _forget_stop(name: str | None, sql: str) -> None:
    _stopped().pop(cell_key(sql), None)
    if name:
        clear_mark(saved_dir, name, sql)


def _options(spec: ParamSpec) -> list[str]:
    """A choice's values: the first column of its ``-- values:`` query, run like a cell
    (none when it has no query or the query fails)."""
    if not spec.values_sql:
        return []
    result = _run(
        str(snap.path), snap.snapshot_id, spec.values_sql, settings["query_timeout_seconds"],
        settings["query_row_limit"], scope, allowed is not None, limits,
    )  # fmt: skip
    if result.frame is None or result.frame.width == 0:
        return []
    return [str(v) for v in result.frame.to_series(0).to_list() if v is not None]


def _widget(spec: ParamSpec, key: str, start: Any) -> Any:
    """The widget of one parameter (its first value ``start``); what it holds now."""
    label = f"${spec.name}"
    hint = f"{spec.type}" + (" (the sidebar's unless set here)" if spec.builtin else "")
    if spec.type == "date":
        st.session_state.setdefault(key, start)
        return st.date_input(label, key=key, help=hint)
    if spec.type in ("choice", "choices"):
        options = _options(spec)
        current = start if isinstance(start, list) else [start] if start is not None else []
        options += [str(v) for v in current if str(v) not in options]
        if spec.type == "choices":
            st.session_state.setdefault(key, [str(v) for v in current])
            return st.multiselect(label, options, key=key, help=hint)
        if options:
            st.session_state.setdefault(key, str(start) if start is not None else options[0])
            return st.selectbox(label, options, key=key, help=hint)
    st.session_state.setdefault(key, "" if start is None else str(start))
    return st.text_input(label, key=key, help=hint)


def _parameters(specs: list[ParamSpec]) -> tuple[dict[str, Any], dict[str, str]]:
    """A widget per parameter (the workspace is the sidebar's), the values (converted by
    type) and a one-line error per value that cannot be used; the URL follows them."""
    start, notes = values_from_url(specs, params(), chosen if isinstance(chosen, Filters) else None)
    for note in notes:
        st.warning(literal(note))
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    shown = [p for p in specs if p.name != "workspace"]
    columns = st.columns(min(4, len(shown))) if shown else []
    for at, spec in enumerate(specs):
        if spec.name == "workspace":
            values["workspace"] = start["workspace"]
            continue
        token = re.sub(r"\W+", "_", repr(start[spec.name]))[:40] if spec.builtin else ""
        key = f"nbp_{state.get('generation', 0)}_{spec.name}_{token}"
        with columns[(at - (len(specs) - len(shown))) % len(columns)]:
            raw = _widget(spec, key, start[spec.name])
        try:
            values[spec.name] = convert(spec, raw)
        except ParamError as exc:
            errors[spec.name] = str(exc)
            st.error(literal(str(exc)))
    if not errors:
        filters_now = chosen if isinstance(chosen, Filters) else None
        mine = tuple(k for k in params() if k.startswith(URL_PREFIX))
        mine += tuple(URL_PREFIX + p.name for p in specs)
        write_params(values_to_url(specs, values, filters_now), keep_others=True, owned=mine)
    for spec in specs:  # no channel picked (the sidebar's "all"): every channel is bound
        if spec.builtin and spec.type == "choices" and values.get(spec.name) == []:
            values[spec.name] = _options(spec)
    return values, errors


snap = published_snapshot()
settings = app_settings()
limits = Limits(
    memory_mb=settings["query_memory_mb"],
    threads=settings["query_threads"],
    temp_mb=settings["query_temp_mb"],
    workers=settings["query_workers"],
)
allowed = restricted_workspaces()
chosen = st.session_state.get("filters")
workspace = chosen.workspace if isinstance(chosen, Filters) else None
if allowed is not None:  # started for these workspaces: their rows only, never the rest
    scope: tuple[str, ...] | None = (workspace,) if workspace in allowed else allowed
elif workspace:
    scope = (workspace,)
else:
    scope = None
saved_dir = settings["notebooks_dir"]
st.title("Explore")
names_of = query(snap, "workspace_names") if scope else {}
st.caption(
    "Read-only SQL over the published snapshot (DuckDB). Each cell shows its rows, a chart "
    "and a download. Queries cannot read files or the network, run at most "
    f"{settings['query_timeout_seconds']:g} s in at most "
    f"{limits.memory_mb:,} MiB of memory and return at most "
    f"{settings['query_row_limit']:,} rows. The sidebar's workspace applies to them; its "
    "dates, time zone and channels reach them as the parameters $from, $to, $tz and "
    "$channel (a list: `channel = ANY($channel)`), its topics do not."
    + (
        " The tables hold the rows of "
        + ", ".join(literal(names_of.get(ws, ws)) for ws in scope)
        + " only."
        if scope
        else ""
    )
)

available = list_notebooks(saved_dir)
wanted = (params().get("notebook") or [None])[-1]
if wanted is not None and notebook_name(wanted) is None:
    st.error(
        "That is not a notebook name (lower-case letters, digits, - and _); pick one below: "
        + literal(wanted)
    )
    wanted = None
state = _state()
if wanted != state["name"] or not state.get("loaded"):
    state["loaded"] = True
    loaded = load_notebook(saved_dir, wanted) if wanted else None
    if wanted and loaded is None:
        st.warning(f"There is no notebook called {literal(wanted)}; here is a new one.")
    _load(
        wanted if loaded else None,
        loaded or Notebook("Untitled notebook", "", [Cell("Cell 1", FIRST_QUERY)]),
    )

_sync()

names = ["", *available]
top = st.columns([3, 2, 1, 1])
picked = top[0].selectbox(
    "Notebook",
    names,
    index=names.index(state["name"]) if state["name"] in names else 0,
    format_func=lambda n: available.get(n, "(a new notebook)") if n else "(a new notebook)",
    key=f"explore_pick_{state['name']}",
)
if (picked or None) != state["name"]:
    owned = ("notebook", *(k for k in params() if k.startswith(URL_PREFIX)))
    write_params({"notebook": picked} if picked else {}, keep_others=True, owned=owned)
    st.rerun()
save_as = top[1].text_input("Save as", key="explore_save_as", placeholder="a-file-name")
if top[2].button("Save", key="explore_save", width="stretch"):
    name = notebook_name(save_as.strip()) or notebook_name(_slug(st.session_state["explore_title"]))
    if name is None:
        st.error("Name the notebook with lower-case letters, digits, - and _.")
    else:
        if name != state["name"] and st.session_state["explore_title"] == state["title"]:
            # a copy saved under another name is not titled as the one it was copied from
            state["title"] = name.replace("-", " ").replace("_", " ").capitalize()
            st.session_state["explore_title"] = state["title"]
        current = _current()
        save_notebook(saved_dir, name, current)
        for at, cell in enumerate(current.cells):  # its stopped cells stay stopped
            ran = compose(current.cells, at).sql  # under the new name
            if cell.kind == "sql" and (stop := _stopped().get(cell_key(ran))) is not None:
                mark_stopped(saved_dir, name, ran, *stop)
        state["name"], state["title"] = name, current.title
        write_params({"notebook": name}, keep_others=True, owned=("notebook",))
        st.success(f"Saved; its link opens it: {literal('?notebook=' + name)}")
top[3].download_button(
    ".sql",
    render_notebook(_current()).encode(),
    file_name=f"{state['name'] or 'notebook'}.sql",
    mime="application/sql",
    key="explore_download_sql",
    width="stretch",
)

for problem in state.get("problems", []):
    st.error(literal(problem))
notebook = _current()
specs = page_params(state.get("params", []), [c.sql for c in notebook.cells if c.kind == "sql"])
values, bad = _parameters(specs)

marks = load_marks(saved_dir, state["name"]) if state["name"] else {}
cells_col, schema_col = st.columns([3, 1])
with schema_col:
    st.markdown("**Schema**")
    tables = query(snap, "schema")
    if allowed is not None:  # the tables of no workspace are not this dashboard's
        tables = [t for t in tables if any(c[0] == "workspace_id" for c in t.columns)]
    by_name = {t.name: t for t in tables}
    table = st.selectbox(
        "Table",
        list(by_name),
        key="explore_schema_table",
        index=list(by_name).index("mart_conversations") if "mart_conversations" in by_name else 0,
    )
    if table:
        doc = by_name[table]
        if doc.description:
            st.caption(doc.description)
        with st.container(height=420):  # each meaning whole (a data grid clips long text)
            st.table(
                [{"column": f"`{c}`", "type": t, "meaning": m} for c, t, m in doc.columns],
                border="horizontal",
            )

with cells_col:
    st.text_input("Title", key="explore_title")
    count = len(state["cells"])
    for position, cid in enumerate(list(state["cells"])):
        with st.container(border=True):
            head = st.columns([4, 2, 1, 1, 1])
            head[2].button(
                "↑",
                key=f"cell_up_{cid}",
                on_click=_move,
                args=(cid, -1),
                disabled=position == 0,
                help="Move up",
            )
            head[3].button(
                "↓",
                key=f"cell_down_{cid}",
                on_click=_move,
                args=(cid, 1),
                disabled=position == count - 1,
                help="Move down",
            )
            head[4].button(
                "✕", key=f"cell_delete_{cid}", on_click=_delete, args=(cid,), help="Delete the cell"
            )
            if _kind(cid) == "markdown":
                head[0].text_input(
                    "Text cell title",
                    key=f"cell_title_{cid}",
                    label_visibility="collapsed",
                    placeholder="A title (optional)",
                )
                if head[1].toggle("Edit", key=f"cell_edit_{cid}", help="Edit the text"):
                    st.session_state.setdefault(f"cell_md_{cid}", state["texts"].get(cid, ""))
                    state["texts"][cid] = st.text_area(
                        "Text (Markdown)",
                        key=f"cell_md_{cid}",
                        height=140,
                        label_visibility="collapsed",
                        placeholder="Notes in Markdown: # headings, **bold**, lists, links",
                    )
                body = markdown_html(state["texts"].get(cid, ""))  # the one Markdown rendered
                if body.strip():
                    st.html(body)
                else:
                    st.caption("An empty text cell: turn on Edit and write some Markdown.")
                continue
            cell = notebook.cells[position]
            head[0].text_input("Cell title", key=f"cell_title_{cid}", label_visibility="collapsed")
            others = [c.title for at, c in enumerate(notebook.cells)
                      if at != position and c.kind == "sql"]  # fmt: skip
            st.caption(name_caption(cell.title, others))
            sql = st.text_area(
                "SQL", key=f"cell_sql_{cid}", height=140, label_visibility="collapsed"
            )
            settings_row = st.columns(4)
            settings_row[0].selectbox("Chart", CHART_KINDS, key=f"cell_chart_{cid}")
            if not sql.strip():
                st.caption("Write a query: one SELECT statement over the tables on the right.")
                continue
            composed = compose(notebook.cells, position)
            if composed.error is not None:
                st.error(literal(composed.error))  # names cells: shown as written
                continue
            earlier = tuple(
                name
                for c in notebook.cells[:position]
                if c.kind == "sql" and (name := cell_name(c.title))
            )
            names = sorted(referenced([composed.sql]))
            unusable = [n for n in names if n in bad]
            if unusable:
                st.caption(f"Not run: set ${unusable[0]} above to a value it can use.")
                continue
            bound = json.dumps(
                encode_values({n: values[n] for n in names if n in values}), sort_keys=True
            )
            key = cell_key(composed.sql)
            mark = marks.get(key)
            stop = _stopped().get(key) or ((mark.line, mark.reason) if mark else None)
            run_button = stop is not None
            if run_button and not st.button("Run", key=f"cell_run_{cid}"):
                st.error(stop[0])  # the executor's own line: no user text in it
                st.caption(
                    "Stopped by a limit when it last ran, so it is not run when the notebook "
                    "opens: edit it, or press Run to run it again."
                )
                continue
            result = _run(
                str(snap.path),
                snap.snapshot_id,
                composed.sql,
                settings["query_timeout_seconds"],
                settings["query_row_limit"],
                scope,
                allowed is not None,
                limits,
                bound,
                earlier,
                composed.reads,
            )
            if result.stopped is not None:
                _remember_stop(state["name"], composed.sql, result)
                st.error(result.error)  # "stopped after 10 s ...": the executor's own line
                if not run_button:
                    st.button("Run", key=f"cell_run_{cid}")
                continue
            if stop is not None and not result.retry:
                _forget_stop(state["name"], composed.sql)
            if result.error is not None:
                st.error(literal(result.error))  # quotes the SQL: shown as written
                continue
            frame = result.frame
            assert frame is not None
            refused = record_query(
                f"{snap.snapshot_id}\x1f{key}\x1f{bound}\x1f{scope}",
                composed.sql,
                frame.height,
                workspace,
                {"notebook": state["name"], "cell": cell.title, "params": json.loads(bound),
                 "snapshot": snap.snapshot_id, "truncated": result.truncated},
            )  # fmt: skip
            if refused is not None:
                st.error(literal(refused))
                continue
            if cell.chart != "none":
                numbers = [c for c, t in frame.schema.items() if t.is_numeric()]
                for at, (setting, label, offered) in enumerate(
                    [
                        ("x", "x", frame.columns),
                        ("y", "y", numbers),
                        ("color", "Colour", frame.columns),
                    ]
                ):
                    saved = getattr(cell, setting)
                    options = axis_options(offered, saved)
                    widget = f"cell_{setting}_{cid}"
                    if st.session_state.get(widget) not in options:  # not drawn last run
                        st.session_state[widget] = saved or AUTO
                    settings_row[at + 1].selectbox(
                        label,
                        options,
                        key=widget,
                        format_func=lambda v, have=tuple(offered): (
                            "auto" if v == AUTO else v if v in have else f"{v} (not usable here)"
                        ),
                    )
            more = (
                " (cut at Explore's row limit, dashboard.query_row_limit: there are more; "
                "aggregate or filter in the SQL)"
                if result.truncated
                else ""
            )
            st.caption(f"{frame.height:,} rows{more} in {result.seconds:.2f} s")
            choice = chart_for(frame, cell)
            if choice.note:
                st.caption(literal(choice.note))  # names a column: shown as written
            if choice.kind != "none" and choice.x and choice.y:
                st.altair_chart(
                    charts.result_chart(frame, choice.kind, choice.x, choice.y, choice.color),
                    width="stretch",
                )
            show_table(frame, f"cell_{cid}", relabel=False, workspace=False,
                       file_name=cell_name(cell.title) or f"cell_{position + 1}")  # fmt: skip
    adding = st.columns([1, 1, 3])
    adding[0].button(
        "Add a cell",
        key="explore_add",
        on_click=_add,
        args=(Cell(f"Cell {len(state['cells']) + 1}", ""),),
    )
    adding[1].button(
        "Add a text cell",
        key="explore_add_text",
        on_click=_add,
        args=(Cell("", "", kind="markdown"),),
    )
