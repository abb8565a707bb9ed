"""Conversations: a filterable table, and one conversation's transcript with its traces."""

from __future__ import annotations

import streamlit as st

from convo_analytics.dashboard._queries import STATUSES
from convo_analytics.dashboard._session import filters, query, require_snapshot, show_table

snap = require_snapshot()
f = filters()
st.title("Conversations")
left, middle, right, last = st.columns(4)
statuses = left.multiselect("Status", STATUSES, key="conv_status", placeholder="any")
escalated = middle.selectbox("Escalated", ("any", "yes", "no"), key="conv_escalated")
flagged = right.selectbox("Guardrail flagged", ("any", "yes", "no"), key="conv_flagged")
confidence = last.slider("Average confidence at most", 0.0, 1.0, 1.0, 0.05, key="conv_confidence")
choice = {"any": None, "yes": True, "no": False}
table = query(
    snap,
    "conversations",
    f,
    statuses=tuple(statuses),
    escalated=choice[escalated],
    flagged=choice[flagged],
    max_confidence=None if confidence >= 1.0 else confidence,
)
st.caption(f"{table.height:,} conversations shown (newest first, at most 500)")
show_table(table, "conversations")

st.subheader("Transcript")
ids = table["conversation_id"].to_list()
if not ids:
    st.info("No conversation matches these filters.")
    st.stop()
picked = st.selectbox("Conversation", ids, key="conv_pick")
detail = query(snap, "transcript", picked)
facts = detail["conversation"].to_dicts()[0]
cols = st.columns(4)
cols[0].metric("Status", facts["status"])
cols[1].metric("Channel", facts["channel"])
cols[2].metric("Escalations", facts["escalations"])
cols[3].metric("Guardrail triggers", facts["guardrail_triggers"])
for message in detail["messages"].iter_rows(named=True):
    role = {"user": "user", "assistant": "assistant"}.get(message["role"], "ai")
    with st.chat_message(role):
        st.markdown(message["text"] or "")
        if message["role"] == "assistant":
            flags = ", ".join(message["policy_flags"] or []) or "none"
            st.caption(
                f"{message['created_at']} · {message['latency_ms']} ms · "
                f"tier {message['model_tier']} · confidence {message['confidence']} · "
                f"flags {flags} · source {message['knowledge_source'] or '–'}"
            )
        else:
            st.caption(f"{message['created_at']} · {message['role']}")
show_table(detail["messages"], f"transcript_{picked}")
if detail["escalations"].height:
    st.markdown("**Escalations**")
    show_table(detail["escalations"], f"escalations_{picked}")
if detail["incidents"].height:
    st.markdown("**Guardrail incidents** (excerpts redacted)")
    show_table(detail["incidents"], f"incidents_{picked}")
