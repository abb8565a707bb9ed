"""Explore: a notebook of read-only SQL cells over the published snapshot, each with its
table, a chart and a download; notebooks are plain .sql files, opened by URL
(``?notebook=NAME``), with the schema browsable beside them."""

from __future__ import annotations

import re
from typing import Any

import streamlit as st

from convo_analytics.dashboard import charts
from convo_analytics.dashboard._explore import CHART_KINDS, choose_chart, run_query
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
    published_snapshot,
    query,
    show_table,
    write_params,
)

FIRST_QUERY = (
    "SELECT channel, count(*) AS conversations, avg(escalated::INT) AS escalation_rate\n"
    "FROM mart_conversations\nGROUP BY channel\nORDER BY conversations DESC"
)


@st.cache_data(max_entries=128, show_spinner=False)
def _run(
    path: str, snapshot_id: str, sql: str, timeout: float, row_limit: int, workspace: str | None
) -> Any:
    del snapshot_id  # part of the key: a new snapshot runs the cell again
    from pathlib import Path

    return run_query(Path(path), sql, timeout=timeout, row_limit=row_limit, workspace=workspace)


def _state() -> dict[str, Any]:
    return st.session_state.setdefault(
        "explore", {"name": None, "title": "Untitled notebook", "cells": [], "next": 0}
    )


def _load(name: str | None, notebook: Notebook) -> None:
    """Make ``notebook`` the page's notebook (its cells' widgets take its text)."""
    state = _state()
    state.update(name=name, title=notebook.title, cells=[], description=notebook.description)
    for cell in notebook.cells:
        _add(cell)
    st.session_state["explore_title"] = notebook.title
    st.session_state["explore_save_as"] = name or ""


def _add(cell: Cell) -> None:
    state = _state()
    cid = state["next"]
    state["next"] = cid + 1
    state["cells"].append(cid)
    st.session_state[f"cell_title_{cid}"] = cell.title
    st.session_state[f"cell_sql_{cid}"] = cell.sql
    st.session_state[f"cell_chart_{cid}"] = cell.chart


def _move(cid: int, step: int) -> None:
    cells = _state()["cells"]
    at = cells.index(cid)
    to = max(0, min(len(cells) - 1, at + step))
    cells.insert(to, cells.pop(at))


def _delete(cid: int) -> None:
    _state()["cells"].remove(cid)


def _current() -> Notebook:
    state = _state()
    return Notebook(
        st.session_state.get("explore_title") or "Untitled notebook",
        state.get("description", ""),
        [
            Cell(
                st.session_state.get(f"cell_title_{cid}", ""),
                st.session_state.get(f"cell_sql_{cid}", ""),
                st.session_state.get(f"cell_chart_{cid}", "auto"),
            )
            for cid in state["cells"]
        ],
    )


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")[:60] or "notebook"


snap = published_snapshot()
settings = app_settings()
chosen = st.session_state.get("filters")
workspace = chosen.workspace if isinstance(chosen, Filters) else None
saved_dir = settings["notebooks_dir"]
st.title("Explore")
st.caption(
    "Read-only SQL over the published snapshot (DuckDB). Each cell shows its rows, a chart "
    "and a download. Queries cannot read files or the network, run at most "
    f"{settings['query_timeout_seconds']:g} s and return at most "
    f"{settings['query_row_limit']:,} rows."
    + (
        f" The tables hold workspace {query(snap, 'workspace_names').get(workspace, workspace)}"
        "'s rows only (the sidebar's choice)."
        if workspace
        else ""
    )
)

available = list_notebooks(saved_dir)
wanted = (params().get("notebook") or [None])[-1]
if wanted is not None and notebook_name(wanted) is None:
    st.error(f"{wanted!r} is not a notebook name; pick one below.")
    wanted = None
state = _state()
if wanted != state["name"] or not state.get("loaded"):
    state["loaded"] = True
    loaded = load_notebook(saved_dir, wanted) if wanted else None
    if wanted and loaded is None:
        st.warning(f"There is no notebook called {wanted}; here is a new one.")
    _load(
        wanted if loaded else None,
        loaded or Notebook("Untitled notebook", "", [Cell("Cell 1", FIRST_QUERY)]),
    )

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
    write_params({"notebook": picked} if picked else {}, keep_others=True, owned=("notebook",))
    st.rerun()
save_as = top[1].text_input("Save as", key="explore_save_as", placeholder="a-file-name")
if top[2].button("Save", key="explore_save", width="stretch"):
    name = notebook_name(save_as.strip()) or notebook_name(_slug(st.session_state["explore_title"]))
    if name is None:
        st.error("Name the notebook with lower-case letters, digits, - and _.")
    else:
        where = save_notebook(saved_dir, name, _current())
        state["name"] = name
        write_params({"notebook": name}, keep_others=True, owned=("notebook",))
        st.success(f"Saved as {where}; its link opens it: ?notebook={name}")
top[3].download_button(
    ".sql",
    render_notebook(_current()).encode(),
    file_name=f"{state['name'] or 'notebook'}.sql",
    mime="application/sql",
    key="explore_download_sql",
    width="stretch",
)

cells_col, schema_col = st.columns([3, 1])
with schema_col:
    st.markdown("**Schema**")
    tables = query(snap, "schema")
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
        st.dataframe(
            [{"column": c, "type": t, "meaning": m} for c, t, m in doc.columns],
            hide_index=True,
            width="stretch",
            height=420,
        )

with cells_col:
    st.text_input("Title", key="explore_title")
    for position, cid in enumerate(list(state["cells"])):
        with st.container(border=True):
            head = st.columns([4, 2, 1, 1, 1])
            head[0].text_input("Cell title", key=f"cell_title_{cid}", label_visibility="collapsed")
            head[1].selectbox(
                "Chart", CHART_KINDS, key=f"cell_chart_{cid}", label_visibility="collapsed"
            )
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
                disabled=position == len(state["cells"]) - 1,
                help="Move down",
            )
            head[4].button(
                "✕", key=f"cell_delete_{cid}", on_click=_delete, args=(cid,), help="Delete the cell"
            )
            sql = st.text_area(
                "SQL", key=f"cell_sql_{cid}", height=140, label_visibility="collapsed"
            )
            if not sql.strip():
                st.caption("Write a query: one SELECT statement over the tables on the right.")
                continue
            result = _run(
                str(snap.path),
                snap.snapshot_id,
                sql,
                settings["query_timeout_seconds"],
                settings["query_row_limit"],
                workspace,
            )
            if result.error is not None:
                st.error(result.error)
                continue
            frame = result.frame
            more = f" (the first {frame.height:,}; there are more)" if result.truncated else ""
            st.caption(f"{frame.height:,} rows{more} in {result.seconds:.2f} s")
            choice = choose_chart(frame, st.session_state[f"cell_chart_{cid}"])
            if choice.kind != "none" and choice.x and choice.y:
                st.altair_chart(
                    charts.result_chart(frame, choice.kind, choice.x, choice.y, choice.color),
                    width="stretch",
                )
            show_table(frame, f"cell_{cid}", relabel=False, workspace=False)
    st.button(
        "Add a cell",
        key="explore_add",
        on_click=_add,
        args=(Cell(f"Cell {len(state['cells']) + 1}", ""),),
    )
