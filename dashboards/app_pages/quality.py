"""Quality: latency percentiles and confidence over time, feedback and CSAT."""

from __future__ import annotations

import streamlit as st

from convo_analytics.dashboard import charts
from convo_analytics.dashboard._session import download, filters, query, require_snapshot

snap = require_snapshot()
f = filters()
st.title("Quality")
daily = query(snap, "daily", f)
st.subheader("Assistant latency")
st.altair_chart(charts.latency_percentiles(daily), width="stretch")
download(daily.select("date", *charts.PERCENTILES), "latency_percentiles")
st.subheader("Confidence")
distribution = query(snap, "confidence_distribution", f)
st.altair_chart(charts.confidence_bands(distribution), width="stretch")
download(distribution, "confidence_distribution")
st.altair_chart(charts.daily_line(daily, "lowConfidenceShare"), width="stretch")
st.subheader("Feedback")
left, right = st.columns(2)
left.altair_chart(charts.daily_line(daily, "csat"), width="stretch")
right.altair_chart(charts.daily_line(daily, "avgRating"), width="stretch")
download(daily.select("date", "feedbackCount", "avgRating", "csat"), "feedback")
