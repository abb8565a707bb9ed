"""Leads: the funnel with conversion per step, score bands, and the qualified leads (a page
at a time, every one in the download); a click on a step opens the conversations that
reached it."""

from __future__ import annotations

import streamlit as st

from convo_analytics.dashboard import charts
from convo_analytics.dashboard._format import enum_label
from convo_analytics.dashboard._session import (
    chart_with_drill,
    filters,
    paged_table,
    query,
    require_snapshot,
    show_table,
    topic_options,
    topic_store_key,
)

snap = require_snapshot()
f = filters()
st.title("Leads")
splits = (
    "nothing",
    "channel",
    "source",
    "intent",
    *(("topic",) if topic_options(snap).labels else ()),
)
by = st.selectbox("Split the funnel by", splits, format_func=enum_label, key="funnel_by")
if by == "topic":  # each workspace's topics apart, as analysts name them
    result = query(snap, "topic_funnel", f, topic_store_key())
else:
    result = query(snap, "funnel", f, () if by == "nothing" else (by,))
funnel = result["funnel"]
if by == "nothing":
    chart_with_drill(charts.funnel_chart(funnel), "leads_funnel", "funnel", f)
    st.caption("Click a step to see the conversations that reached it.")
show_table(funnel, "lead_funnel", f.tz)
st.subheader("Score bands")
show_table(result["bands"], "score_bands", f.tz)
st.subheader("Qualified leads")
st.caption("Contact details are named, not shown; the CRM holds them.")
paged_table(snap, "qualified_leads", (f,), "qualified_leads", f.tz, key="leads",
            what="qualified leads")  # fmt: skip
