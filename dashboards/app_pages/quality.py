"""Quality: latency percentiles and confidence over time, feedback and CSAT; a click on a
day (or a band) opens the conversations behind it."""

from __future__ import annotations

import streamlit as st

from convo_analytics.dashboard import charts
from convo_analytics.dashboard._session import (
    chart_with_drill,
    download,
    filters,
    query,
    require_snapshot,
)

snap = require_snapshot()
f = filters()
st.title("Quality")
st.caption("Click a point or a bar to see the conversations behind it.")
daily = query(snap, "daily", f)
st.subheader("Assistant latency")
chart_with_drill(charts.latency_percentiles(daily), "quality_latency", "latency", f)
download(daily.select("date", *charts.PERCENTILES), "latency_percentiles")
st.subheader("Confidence")
distribution = query(snap, "confidence_distribution", f)
chart_with_drill(charts.confidence_bands(distribution), "quality_bands", "confidence", f)
download(distribution, "confidence_distribution")
st.subheader("Low-confidence responses")
chart_with_drill(charts.daily_line(daily, "lowConfidenceShare"), "quality_low", "low_confidence", f)
download(
    daily.select("date", "lowConfidenceResponses", "assistantResponses", "lowConfidenceShare"),
    "low_confidence",
)
st.subheader("Feedback")
left, right = st.columns(2)
with left:
    chart_with_drill(charts.daily_line(daily, "csat"), "quality_csat", "feedback", f)
with right:
    chart_with_drill(charts.daily_line(daily, "avgRating"), "quality_rating", "feedback", f)
download(daily.select("date", "feedbackCount", "avgRating", "csat"), "feedback")
