"""Topics: what each workspace's conversations are about, and how each topic fares; a click
on a topic opens its conversations; renames and merges go to the app's own store.

Each workspace's topics are its own: with several workspaces shown they are listed and
drawn side by side, never summed. A rename or a merge is appended to the curation store
(``topics.curations_file``, through ``topics.curate``), never to the warehouse or the
snapshot this page reads, and shows at once: topic names are read with the store
applied on top. End users' words (examples, labels) are shown as text (decision
D-DASH-TEXT); decision D-TOPICS-PAGE says why the page is as it is."""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

from convo_analytics.dashboard import charts
from convo_analytics.dashboard._session import (
    chart_with_drill,
    connection,
    curations_store,
    filters,
    open_conversations,
    query,
    require_snapshot,
    show_table,
    topic_options,
    topic_store_key,
)
from convo_analytics.dashboard._text import plain
from convo_analytics.dashboard._views import Drill, Slice
from convo_analytics.errors import UserError
from convo_analytics.topics import Curation, curate

#: Bars per workspace in "Conversations per topic".
TOP_BARS = 15

snap = require_snapshot()
f = filters()
st.title("Topics")
options = topic_options(snap)
names: dict[str, str] = query(snap, "workspace_names")
held = sorted({c.workspace_id for c in options.choices.values()})
mine = [ws for ws in held if f.workspace is None or ws == f.workspace]
if not mine:
    which = "This workspace has" if f.workspace is not None else "No workspace has"
    st.info(
        f"{which} topics yet. A workspace's topics are discovered by `convo transform` once "
        "it has topics.min_conversations conversations with a user message; `convo publish` "
        "then brings them here."
    )
    st.stop()
report = query(snap, "topic_report", f, topic_store_key())
table: pl.DataFrame = report.table
several = len({ws for ws in table["workspace_id"].to_list() if ws is not None}) > 1


def _name(ws: Any) -> str:
    return names.get(str(ws), str(ws))


flash = st.session_state.pop("_topics_flash", None)
if flash:
    st.success(flash, icon=":material/check:")
compared = (
    f"against the {f.days} days before"
    if report.compared
    else f"no change shown: the data does not cover the {f.days} days before"
)
st.caption(
    f"{f.first} to {f.last} ({f.tz}), {compared}. Each workspace's topics are its own: "
    "its share is of the workspace's conversations in the range, and a topic merged into "
    "another counts under that one."
)

st.subheader("Conversations per topic")
workspaces = list(dict.fromkeys(table["workspace_id"].to_list()))
columns = st.columns(min(len(workspaces), 2)) if several else [st.container()]
for position, ws in enumerate(workspaces):
    bars = table.filter((pl.col("workspace_id") == ws) & pl.col("topic_id").is_not_null())
    with columns[position % len(columns)]:
        if several:
            st.markdown(f"**{plain(_name(ws))}**")
        chart = charts.bars(
            bars.head(TOP_BARS).with_columns(
                pl.format("{} (#{})", "topic", "topic_id").alias("topic")
            ),
            "topic_key",
            "conversations",
            names="topic",
        )
        chart_with_drill(chart, f"topics_bars_{position}", "topics", f)
st.caption(
    f"The {TOP_BARS} largest topics of each workspace. Click a bar to see that topic's "
    "conversations."
)

st.subheader("Every topic")
show_table(table.drop("topic_key", "merged_topic_ids"), "topics", f.tz)
st.caption(
    "Click a column's header to sort by it. The change in conversations comes with its "
    "95 % confidence interval: one that includes 0 could be noise. Examples are first "
    "messages, as written. A topic changed since the last transform is marked: its "
    "figures here count it as changed already."
)

st.subheader("Trend")
trend: pl.DataFrame = report.trend
columns = st.columns(min(len(workspaces), 2)) if several else [st.container()]
for position, ws in enumerate(workspaces):
    lines = trend.filter(pl.col("workspace_id") == ws)
    if not lines.height:
        continue
    with columns[position % len(columns)]:
        if several:
            st.markdown(f"**{plain(_name(ws))}**")
        chart_with_drill(charts.topic_trend(lines), f"topics_trend_{position}", "topic_trend", f)
st.caption("Daily conversations of each workspace's largest topics. Click a point to see "
           "that topic's conversations of that day.")  # fmt: skip

st.subheader("A topic")
topics = {
    row["topic_key"]: row
    for row in table.filter(pl.col("topic_key").is_not_null()).iter_rows(named=True)
}
if not topics:
    st.info("No topic has conversations in this range.")
    st.stop()


def _label(key: str) -> str:
    row = topics[key]
    said = f"{row['topic']} (#{row['topic_id']})"
    return f"{_name(row['workspace_id'])}: {said}" if several else said


if st.session_state.get("topics_pick") not in topics:
    st.session_state["topics_pick"] = next(iter(topics))
key = st.selectbox("Topic", list(topics), format_func=_label, key="topics_pick")
row = topics[key]
left, right = st.columns([3, 1])
with left:
    st.markdown("**Examples** (first messages, as written)")
    for example in row["examples"] or []:
        st.text(example)
    if row["merged_topics"]:
        st.markdown("**Merged into it**")
        st.text(", ".join(row["merged_topics"]))
with right:
    st.metric("Conversations", f"{row['conversations']:,}")
    if st.button("Show its conversations", key="topics_open", width="stretch"):
        open_conversations(Drill(Slice(), topics=(key,)), f)

st.subheader("Rename or merge")
store = curations_store()
curated = f.workspace if f.workspace is not None else held[0] if len(held) == 1 else None
if store is None:
    st.info("Set topics.curations_file (the app's own store of topic curations) to rename "
            "or merge topics here.")  # fmt: skip
    st.stop()
if curated is None:
    st.info("Choose a workspace in the sidebar to rename or merge its topics: a topic is "
            "its own workspace's.")  # fmt: skip
    st.stop()
st.caption(
    f"Renames and merges of {plain(_name(curated))}'s topics are kept in the app's own store "
    f"({plain(store, None)}), never in the warehouse, and show on every page at once. The "
    "warehouse's mart_topics (Explore's SQL, the exports) takes them at the next transform "
    "(`convo transform` or the nightly run, then `convo publish`)."
)
mine_now = {k: r for k, r in topics.items() if r["workspace_id"] == curated}
if key not in mine_now:
    st.info("The topic above is another workspace's: pick one of this workspace's.")
    st.stop()
tid = int(row["topic_id"])


def _keep(curation: Curation, said: str) -> None:
    """Append the curation to the store (checked against this snapshot's topics of the
    workspace), then show the page again with it applied."""
    try:
        curate(connection(snap), store, curation)
    except UserError as exc:
        st.error("Not kept:", icon=":material/error:")
        st.text(str(exc))
        return
    st.session_state["_topics_flash"] = said
    st.rerun()


rename_col, merge_col = st.columns(2)
with rename_col:
    new_name = st.text_input("New name", key="topics_new_name", max_chars=80,
                             placeholder="what this topic is about")  # fmt: skip
    if st.button("Rename", key="topics_rename"):
        _keep(
            Curation(curated, "rename", tid, label=new_name, created_by="dashboard"),
            f"Topic {tid} is now called {plain(' '.join(new_name.split()))}.",
        )
with merge_col:
    targets = {
        int(r["topic_id"]): _label(k)
        for k, r in mine_now.items()
        if int(r["topic_id"]) not in (0, tid)
    }
    if tid == 0:
        st.caption("Topic 0 (other) is not merged: rename it, or split it with "
                   "`convo topics split`.")  # fmt: skip
    elif targets:
        into = st.selectbox("Merge into", list(targets), format_func=lambda t: targets[t],
                            key="topics_merge_into")  # fmt: skip
        if st.button("Merge", key="topics_merge"):
            _keep(
                Curation(curated, "merge", tid, target_topic_id=into, created_by="dashboard"),
                f"Topic {tid} now counts under topic {into}.",
            )
merged = dict(zip(row["merged_topic_ids"] or [], row["merged_topics"] or [], strict=True))
if merged:
    back = st.selectbox("Unmerge", list(merged), format_func=lambda t: merged[t],
                        key="topics_unmerge_pick")  # fmt: skip
    if st.button("Unmerge", key="topics_unmerge"):
        _keep(
            Curation(curated, "unmerge", back, created_by="dashboard"),
            f"Topic {back} counts under itself again.",
        )
