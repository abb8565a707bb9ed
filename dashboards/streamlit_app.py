"""convo-analytics dashboard: the entry script (`convo dashboard`, `make demo`).

It draws the global filters in the sidebar (restored from the URL's query
string when a session starts, written back to it on every run, so that a
view can be bookmarked or sent) and routes to the pages in app_pages/; each
page holds UI only, its data and charts come from convo_analytics.dashboard.
"""

from __future__ import annotations

import streamlit as st

from convo_analytics.dashboard._session import sidebar_filters, snapshot

st.set_page_config(
    page_title="convo-analytics",
    page_icon=":speech_balloon:",
    layout="wide",
    menu_items={"Get help": None, "Report a bug": None, "About": "convo-analytics"},
)

PAGES = [
    st.Page("app_pages/overview.py", title="Overview", icon=":material/dashboard:", default=True),
    st.Page("app_pages/conversations.py", title="Conversations", icon=":material/forum:"),
    st.Page("app_pages/leads.py", title="Leads", icon=":material/filter_alt:"),
    st.Page("app_pages/quality.py", title="Quality", icon=":material/speed:"),
    st.Page("app_pages/guardrails.py", title="Guardrails", icon=":material/shield:"),
    st.Page("app_pages/knowledge_gaps.py", title="Knowledge gaps", icon=":material/help:"),
    st.Page("app_pages/workspaces.py", title="Workspaces", icon=":material/compare_arrows:"),
    st.Page("app_pages/topics.py", title="Topics", icon=":material/topic:"),
    st.Page("app_pages/compare.py", title="Compare", icon=":material/balance:"),
    st.Page("app_pages/monitors.py", title="Monitors", icon=":material/monitor_heart:"),
    st.Page("app_pages/explore.py", title="Explore", icon=":material/query_stats:"),
    st.Page("app_pages/pipeline.py", title="Pipeline", icon=":material/sync:"),
]

page = st.navigation(PAGES)
st.session_state["filters"] = sidebar_filters(snapshot())
page.run()
