"""Knowledge gaps: where the assistant fails, per topic, ranked by impact, with a verdict;
a topic's questions, answers, sources and conversations (one opens on the Conversations
page); the same report as `convo export knowledge-gaps`.

What end users wrote (questions, the topic names made of their words) is shown as text:
``st.text``, tables, and ``_text.plain`` inside our own sentences (decision D-DASH-TEXT)."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import polars as pl
import streamlit as st

from convo_analytics.dashboard._audit import AuditError, audited_download, sealed_export
from convo_analytics.dashboard._charts import PICK
from convo_analytics.dashboard._gaps import TABLE_COLUMNS, impact_chart
from convo_analytics.dashboard._session import (
    connection,
    filters,
    paged_table,
    query,
    require_snapshot,
    show_table,
)
from convo_analytics.dashboard._text import plain, shorten
from convo_analytics.dashboard._views import filters_to_params
from convo_analytics.export import GAP_FORMATS, export_knowledge_gaps, warehouse_workspaces

snap = require_snapshot()
f = filters()
st.title("Knowledge gaps")
if not query(snap, "has_gaps"):
    st.info(
        "This snapshot has no knowledge gaps: it was published before they existed. Run "
        "`convo transform` with this release, then `convo publish`."
    )
    st.stop()
st.caption(
    "Answers that did not answer: fallbacks (recognised by their words or by no knowledge "
    "source with low confidence) and low-confidence answers, grouped by topic. Impact = "
    "conversations affected × mean severity (1, plus one each for a following escalation, "
    "a rating of 2 or less, abandonment). Missing content: no answer of the topic used a "
    "knowledge source; content that does not answer: sources were used, still failing."
)
report = query(snap, "gap_topics", f)
if report.is_empty():
    st.success(f"No failing answer from {f.first} to {f.last} ({f.tz}) in these filters.")
    st.stop()

keys = report["key"].to_list()
event = st.altair_chart(impact_chart(report), width="stretch", key="gaps_chart",
                        on_select="rerun", selection_mode=PICK)  # fmt: skip
picked = (event.get("selection") or {}).get(PICK) or []
clicked = picked[0].get("key") if picked else None
if clicked in keys and clicked != st.session_state.get("_gaps_clicked"):
    st.session_state["gap_topic"] = clicked  # a click on a bar picks its topic
st.session_state["_gaps_clicked"] = clicked
st.caption("Click a bar to see that topic below.")

st.subheader("Topics by impact")
show_table(report.select(TABLE_COLUMNS), "knowledge_gaps", f.tz, raw=report.drop("key"))

st.subheader("A topic")
labels = {
    row["key"]: f"{shorten(row['topic_label'], 70)} (#{row['topic']}) · {row['verdict']}"
    for row in report.iter_rows(named=True)
}
if st.session_state.get("gap_topic") not in labels:
    st.session_state["gap_topic"] = keys[0]
chosen = st.selectbox(
    "Topic", keys, format_func=lambda k: labels.get(k, k), key="gap_topic"
)  # fmt: skip
row = report.filter(report["key"] == chosen).row(0, named=True)
cols = st.columns(4)
cols[0].metric("Impact", f"{row['impact']:,.1f}")
cols[1].metric("Conversations", f"{row['conversations']:,}")
cols[2].metric("Failing answers", f"{row['failing_answers']:,}")
cols[3].metric("Mean severity", f"{row['mean_severity']:.2f}")
st.markdown(
    f"**Verdict: {row['verdict']}.** {row['escalated']:,} escalated after a failing answer, "
    f"{row['low_rated']:,} rated 2 or less, {row['abandoned']:,} abandoned; "
    f"{row['responses_with_source']:,} of the topic's {row['responses']:,} answers in the "
    f"range used a knowledge source. Topic {plain(row['topic'])}: "
    f"{plain(row['topic_label'])}."
)
left, right = st.columns(2)
with left:
    st.markdown("**What users asked** (most frequent first; redacted)")
    for text, count in zip(row["questions"], row["question_counts"], strict=True):
        st.text(f"{text}   ({count}×)")  # as written: no Markdown
with right:
    st.markdown("**What the assistant answered** (redacted)")
    for text, count in zip(row["answers"], row["answer_counts"], strict=True):
        st.text(f"{text}   ({count}×)")
st.markdown("**Knowledge sources its answers used**")
if row["sources"]:
    show_table(
        pl.DataFrame({"source": row["sources"], "responses": row["source_responses"]}),
        f"gap_sources_{row['topic']}", workspace=False,
    )  # fmt: skip
else:
    st.text("None: no answer of this topic in the range used a knowledge source.")

st.markdown("**Its conversations** (most severe first)")
args = (f, row["workspace_id"], row["topic"])
result = paged_table(snap, "gap_conversation_page", args, f"gap_conversations_{row['topic']}",
                     f.tz, key="gap_conversations", what="conversations")  # fmt: skip
ids = result.rows["conversation_id"].to_list()
if ids:
    pick, go = st.columns([4, 1], vertical_alignment="bottom")
    conversation = pick.selectbox("Conversation", ids, key="gap_conversation")
    if go.button("Open in Conversations", key="gap_open"):
        target = replace(f, workspace=row["workspace_id"])
        st.switch_page(
            "app_pages/conversations.py",
            query_params={**filters_to_params(target), "q": conversation,
                          "conversation": conversation},
        )  # fmt: skip

st.subheader("Export")
st.caption(
    "The same report as `convo export knowledge-gaps` (redacted): the sidebar's filters "
    "(range, zone, channels, workspace); CSV has a row per topic, JSON the whole report."
)
fmt = st.selectbox("Format", GAP_FORMATS, key="gap_export_format")
if st.button("Prepare the export", key="gap_export_prepare"):
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / f"knowledge-gaps_{f.first}_{f.last}.{fmt}"
        con = connection(snap)
        made = export_knowledge_gaps(
            con, f.first, f.last, tz=f.tz, fmt=fmt,  # type: ignore[arg-type]
            workspaces=[w for w in warehouse_workspaces(con) if w.workspace_id == f.workspace]
            if f.workspace else None,
            filters=f.dimensions(), out=out,
        )  # fmt: skip
        assert made.manifest_file is not None
        try:  # joined to the audit chain as `convo export knowledge-gaps` is
            sealed_export("dashboard.export.gaps", made.manifest_file, [out], made.topics,
                          f.workspace)  # fmt: skip
        except AuditError as exc:
            st.error(f"The export was not made: the audit trail cannot record it ({exc}).")
            st.stop()
        st.session_state["gap_export_files"] = {
            out.name: out.read_bytes(),
            made.manifest_file.name: made.manifest_file.read_bytes(),
        }
for name, data in st.session_state.get("gap_export_files", {}).items():
    st.download_button(
        f"Download {plain(name)}",
        audited_download(data, name, None, f.workspace),
        file_name=name,
        key=f"gap_{name}",
    )
