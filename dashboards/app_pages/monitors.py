"""Monitors: every monitor with the state of each of its series, a monitor's windows against
its band, its episodes and what explains an alert; a form to make or edit the dashboard's own.

UI only: the data is ``dashboard._monitors``'s, the chart ``dashboard._charts``'s. Monitors
of convo.toml (``[[monitors]]``) are shown read-only; the ones made here are kept in the
app's own store (``monitoring.store_file``, through ``monitors.save_monitor`` and
``delete_monitor``), never in the warehouse, and judged by the next run. Slice values,
topic labels and conversation ids come from users and are shown as text (decision
D-DASH-TEXT); decision D-MONITORS-PAGE says why the page is as it is."""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from convo_analytics.dashboard import charts
from convo_analytics.dashboard._format import value_text
from convo_analytics.dashboard._monitors import (
    FILTER_DIMENSIONS,
    Episode,
    breakdown_tables,
    example_links,
    form_values,
    list_monitors,
    page_link_of,
    spec_from_form,
)
from convo_analytics.dashboard._session import filters, monitor_setup, query, require_snapshot
from convo_analytics.dashboard._text import plain
from convo_analytics.errors import UserError
from convo_analytics.monitors import CATALOGUE, delete_monitor, format_value, save_monitor

NEXT_RUN = (
    "A new or edited monitor is judged at the next run (`convo run`, or `convo monitors "
    "evaluate`), and shows here once that run's warehouse is published."
)
ORIGINS = {"config": "convo.toml", "dashboard": "dashboard"}
GROUPS = {"": "none", "channel": "channel", "locale": "locale", "source": "source",
          "intent": "intent", "topic": "topic"}  # fmt: skip

snap = require_snapshot()
f = filters()
st.title("Monitors")
st.caption(
    "A monitor judges one metric over a slice, window by window, against a threshold or "
    "its usual level, and alerts once per episode. " + NEXT_RUN
)
flash = st.session_state.pop("_monitors_flash", None)
if flash:
    st.success(flash, icon=":material/check:")

setup = monitor_setup()
monitors, problems = list_monitors(setup)
if problems:
    st.warning("Some monitors cannot be judged: the run stops on them until they are fixed.",
               icon=":material/warning:")  # fmt: skip
    for problem in problems:
        st.text(problem)
evaluated: bool = query(snap, "has_monitor_evaluations")
if not evaluated:
    st.info(
        "This snapshot has no monitor evaluations: it was published by a version without "
        "monitors. Run `convo monitors evaluate` (or `convo run`), then `convo publish`, "
        "and reload."
    )
names: dict[str, str] = query(snap, "workspace_names")
scope = (f.workspace,) if f.workspace is not None else None
versions = tuple((m.name, m.version) for m in monitors)
states: pl.DataFrame = (
    query(snap, "monitor_states", versions, scope) if evaluated and versions else pl.DataFrame()
)


def _series_label(ws: Any, series: Any) -> str:
    """A series as the page names it: its workspace (by name), and its group's value."""
    label = names.get(str(ws), str(ws) or "(default)")
    return f"{label} / {series}" if series else label


def _state_text(row: dict[str, Any]) -> str:
    said = f"{_series_label(row['workspace_id'], row['series'])}: {row['state']}"
    if row["state"] == "alerting" and row["episode_start"] is not None:
        said += f" since {row['episode_start']}"
    return said


st.subheader("Every monitor")
if not monitors:
    st.info(
        "No monitors yet. Add `[[monitors]]` tables to convo.toml (docs/configuration.md, "
        '"Monitors"), or create one below.'
    )
else:
    rows = []
    for m in monitors:
        mine = [r for r in states.iter_rows(named=True) if r["monitor"] == m.name]
        judged = [r["last_judged"] for r in mine if r["last_judged"] is not None]
        alerting = sum(r["state"] == "alerting" for r in mine)
        rows.append({
            "monitor": m.name,
            "from": ORIGINS[m.origin],
            "enabled": m.spec.enabled,
            "alerting": alerting,
            "states": "; ".join(_state_text(r) for r in mine)
            or ("disabled" if not m.spec.enabled else "not judged yet"),
            "last judged": max(judged) if judged else None,
            "rule": m.describe(),
        })  # fmt: skip
    st.dataframe(
        pl.DataFrame(rows, schema_overrides={"last judged": pl.Date}),
        hide_index=True,
        width="stretch",
        column_config={
            "monitor": st.column_config.TextColumn("Monitor"),
            "from": st.column_config.TextColumn("From"),
            "enabled": st.column_config.CheckboxColumn("Enabled"),
            "alerting": st.column_config.NumberColumn("Series alerting"),
            "states": st.column_config.TextColumn("State of each series"),
            "last judged": st.column_config.DateColumn("Last judged window"),
            "rule": st.column_config.TextColumn("Rule"),
        },
    )
    st.caption("A series is a workspace (and, with group_by, one value of its dimension); "
               "its state is the one its latest window left it in.")  # fmt: skip


def _bounds(metric: str, lower: float | None, upper: float | None) -> str:
    """The range a window was judged normal in, in words."""
    if lower is not None and upper is not None:
        return f"{format_value(metric, lower)} to {format_value(metric, upper)}"
    if upper is not None:
        return f"up to {format_value(metric, upper)}"
    return f"from {format_value(metric, lower)}" if lower is not None else "none"


def _episodes_table(episodes: list[Episode], metric: str) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "series": _series_label(e.workspace_id, e.series),
                "opened": e.start,
                "last breach": e.last_breach,
                "resolved": e.resolved,
                "state": "open" if e.open else "resolved",
                "value": format_value(metric, e.value),
                "normal": _bounds(metric, e.lower_bound, e.upper_bound),
                "sample": e.sample,
            }
            for e in episodes
        ],
        schema_overrides={"opened": pl.Date, "last breach": pl.Date, "resolved": pl.Date},
    )


def _explain(episode: Episode, metric: str) -> None:
    """What opened the episode: the change split by dimension, example conversations and
    where to look in this dashboard."""
    where = _series_label(episode.workspace_id, episode.series)
    st.markdown(
        f"**{plain(where)}, window {episode.start}**: {metric} was "
        f"{plain(format_value(metric, episode.value))} on {episode.sample:,} conversations "
        f"(normal: {plain(_bounds(metric, episode.lower_bound, episode.upper_bound))})."
    )
    explanation = episode.explanation
    tables = breakdown_tables(explanation)
    if tables:
        st.caption(
            "What changed, per dimension: each slice's count against what the baseline "
            "expected, and its share of the change (the top slices; a share over 100 % "
            "means other slices moved the other way)."
        )
        columns = st.columns(2)
        for position, (dim, table) in enumerate(tables.items()):
            with columns[position % 2]:
                st.markdown(f"**By {dim.replace('_', ' ')}**")
                st.dataframe(
                    table,
                    hide_index=True,
                    width="stretch",
                    column_config={
                        "slice": st.column_config.TextColumn("Slice"),
                        "value": st.column_config.TextColumn("Value"),
                        "count": st.column_config.NumberColumn("Count", format="%,.1f"),
                        "expected": st.column_config.NumberColumn("Expected", format="%,.1f"),
                        "excess": st.column_config.NumberColumn("Excess", format="%+,.1f"),
                        "share": st.column_config.NumberColumn("Share", format="percent"),
                    },
                )
    else:
        st.caption("This metric does not split into counts (a mean or a percentile): the "
                   "alert is explained by its examples.")  # fmt: skip
    examples = example_links(explanation)
    if examples:
        st.markdown("**Example conversations**")
        st.dataframe(
            pl.DataFrame(
                [{k: None if v is None else str(v) for k, v in e.items()} for e, _ in examples]
            ),
            hide_index=True,
            width="stretch",
        )
        for example, link in examples:
            if link is not None:
                page, params = link
                st.page_link(page, label=f"Open conversation {plain(example['conversation_id'])}",
                             query_params=params, icon=":material/forum:")  # fmt: skip
    overall = page_link_of((explanation.get("links") or {}).get("conversations"))
    if overall is not None:
        st.page_link(overall[0], label="The conversations of this window and slice",
                     query_params=overall[1], icon=":material/filter_alt:")  # fmt: skip


if monitors:
    st.subheader("A monitor")
    by_name = {m.name: m for m in monitors}
    pending = st.session_state.pop("_monitors_pick", None)
    if pending in by_name:
        st.session_state["monitors_pick"] = pending
    if st.session_state.get("monitors_pick") not in by_name:
        st.session_state["monitors_pick"] = next(iter(by_name))
    picked = by_name[st.selectbox("Monitor", list(by_name), key="monitors_pick")]
    st.text(picked.describe())
    if picked.spec.description:
        st.text(picked.spec.description)
    if picked.origin == "config":
        st.caption("From convo.toml (`[[monitors]]`): read-only here, edited in convo.toml.")
    metric = picked.spec.metric
    history: pl.DataFrame = (
        query(snap, "monitor_history", picked.name, picked.version, scope)
        if evaluated
        else pl.DataFrame()
    )
    if not history.height:
        st.caption("Not judged yet. " + NEXT_RUN)
    else:
        keys = list(dict.fromkeys(zip(history["workspace_id"], history["series"], strict=True)))
        if st.session_state.get("monitors_series") not in keys:
            st.session_state["monitors_series"] = keys[0]
        ws, series = st.selectbox("Series", keys, key="monitors_series",
                                  format_func=lambda k: _series_label(*k),
                                  disabled=len(keys) <= 1)  # fmt: skip
        mine = history.filter((pl.col("workspace_id") == ws) & (pl.col("series") == series))
        st.altair_chart(charts.monitor_chart(mine, metric), width="stretch")
        st.caption(
            "The value of each window (line) against the band it was judged normal in, "
            "around the baseline (dashed); windows outside it are marked, larger while "
            "the episode is open (alerting). Windows with too few conversations are not "
            "judged."
        )
        kind = "percent" if CATALOGUE[metric].kind == "proportion" else "number"
        with st.expander("Every window"):
            st.dataframe(
                mine.sort("window_start", descending=True)
                .with_columns(
                    pl.col(c).map_elements(lambda v: value_text(v, kind), return_dtype=pl.String)
                    for c in ("value", "baseline", "lower_bound", "upper_bound")
                )
                .drop("workspace_id", "series"),
                hide_index=True,
                width="stretch",
            )
        episodes: list[Episode] = [
            e
            for e in query(snap, "monitor_episodes", picked.name, picked.version, scope)
            if (e.workspace_id, e.series) == (ws, series)
        ]
        st.markdown("**Episodes**")
        if not episodes:
            st.caption("No episode: every judged window was within its bounds.")
        else:
            st.dataframe(
                _episodes_table(episodes, metric),
                hide_index=True,
                width="stretch",
                column_config={
                    c: st.column_config.DateColumn(c.capitalize())
                    for c in ("opened", "last breach", "resolved")
                },
            )
            labels = {i: f"{e.start} ({'open' if e.open else 'resolved'})"
                      for i, e in enumerate(episodes)}  # fmt: skip
            chosen = st.selectbox("Alert", list(labels), format_func=labels.__getitem__,
                                  key="monitors_episode")  # fmt: skip
            _explain(episodes[chosen], metric)

st.subheader("Create or edit a monitor")
st.caption(NEXT_RUN + " Monitors of convo.toml are edited there.")
store = setup.store
if store is None:
    st.info("Set monitoring.store_file (the app's own store of monitors) to make monitors "
            "here.")  # fmt: skip
    st.stop()
stored = {m.name: m.spec for m in monitors if m.origin == "dashboard"}
pending_edit = st.session_state.pop("_monitors_edit", None)
if pending_edit is not None:
    st.session_state["mon_edit"] = pending_edit if pending_edit in stored else ""
if st.session_state.get("mon_edit", "") not in ("", *stored):
    st.session_state["mon_edit"] = ""
editing = st.selectbox("Edit", ["", *stored], key="mon_edit",
                       format_func=lambda n: n or "a new monitor")  # fmt: skip
if st.session_state.get("_mon_loaded") != editing:
    for field, value in form_values(stored.get(editing) if editing else None).items():
        st.session_state[f"mon_{field}"] = value
    st.session_state["_mon_loaded"] = editing

left, right = st.columns(2)
with left:
    st.text_input("Name", key="mon_name", max_chars=63, disabled=bool(editing),
                  help="Letters, digits, '.', '_' and '-'.")  # fmt: skip
    metrics = sorted(CATALOGUE)
    if st.session_state.get("mon_metric") not in metrics:
        st.session_state["mon_metric"] = "escalationRate"
    st.selectbox("Metric", metrics, key="mon_metric")
    st.radio("Window", ["day", "week"], key="mon_window", horizontal=True)
    st.text_input("Time zone", key="mon_timezone", placeholder=setup.default_timezone,
                  help="Blank: the first of transform.timezones.")  # fmt: skip
    st.selectbox("One series per", list(GROUPS), format_func=GROUPS.__getitem__,
                 key="mon_group_by")  # fmt: skip
    st.text_area("Description", key="mon_description", max_chars=500)
with right:
    condition = st.radio("Condition", ["baseline", "threshold"], key="mon_condition",
                         horizontal=True)  # fmt: skip
    if condition == "baseline":
        baseline = st.selectbox("Baseline", ["same_weekday", "trailing"], key="mon_baseline")
        if baseline == "same_weekday":
            st.number_input("Weeks", key="mon_weeks", step=1)
        else:
            st.number_input("Windows", key="mon_windows", step=1)
        st.number_input("k (standard deviations)", key="mon_k", step=0.5)
        st.selectbox("Direction", ["both", "up", "down"], key="mon_direction")
    else:
        st.text_input("Above", key="mon_above", help="Alert above this value (blank: none).")
        st.text_input("Below", key="mon_below", help="Alert below this value (blank: none).")
    st.number_input("Minimum sample (conversations)", key="mon_min_sample", step=1)
    st.text_input(
        "Delay (days)",
        key="mon_delay_days",
        help="Days a window waits before it is judged (blank: the metric's own).",
    )
    st.selectbox("Severity", ["info", "warning", "critical"], key="mon_severity")
    st.checkbox("Enabled", key="mon_enabled")
with st.expander("Filters"):
    st.caption("Comma-separated values of each dimension (blank: all). A workspace by name "
               "or id; a topic by its number in its workspace.")  # fmt: skip
    for dim in FILTER_DIMENSIONS:
        st.text_input(dim.capitalize(), key=f"mon_filter_{dim}")

if st.button("Save monitor", key="mon_save", type="primary"):
    values = {k.removeprefix("mon_"): v for k, v in st.session_state.items()
              if isinstance(k, str) and k.startswith("mon_")}  # fmt: skip
    if editing:
        values["name"] = editing
    spec, refused = spec_from_form(values, setup, list(stored), editing or None)
    if spec is None:
        st.error("Not saved:", icon=":material/error:")
        for line in refused:
            st.text(line)
    else:
        try:
            save_monitor(store, spec, by="dashboard")
        except (UserError, OSError) as exc:
            st.error("Not saved:", icon=":material/error:")
            st.text(str(exc))
        else:
            st.session_state["_monitors_flash"] = f"Monitor {plain(spec.name)} saved. " + NEXT_RUN
            st.session_state["_monitors_edit"] = spec.name
            st.session_state["_monitors_pick"] = spec.name
            st.session_state.pop("_mon_loaded", None)
            st.rerun()

if stored:
    st.subheader("Delete a monitor")
    st.caption("Only monitors made here; its evaluations stay in the warehouse.")
    doomed = st.selectbox("Monitor to delete", list(stored), key="mon_delete_pick")
    if st.button("Delete", key="mon_delete"):
        try:
            removed = delete_monitor(store, doomed, by="dashboard")
        except (UserError, OSError) as exc:
            st.error("Not deleted:", icon=":material/error:")
            st.text(str(exc))
        else:
            if removed:
                st.session_state["_monitors_flash"] = f"Monitor {plain(doomed)} deleted."
                st.session_state["_monitors_edit"] = ""
                st.session_state.pop("_mon_loaded", None)
            st.rerun()
