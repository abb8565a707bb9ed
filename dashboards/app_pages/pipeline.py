"""Pipeline: freshness, the run history, and what was quarantined and why."""

from __future__ import annotations

import streamlit as st

from convo_analytics.dashboard._queries import Filters
from convo_analytics.dashboard._session import (
    published_snapshot,
    query,
    restricted_workspaces,
    show_table,
)

st.title("Pipeline")
snap = published_snapshot()
st.caption(f"Snapshot {snap.snapshot_id}, published {snap.published_at}")
chosen = st.session_state.get("filters")
whole = restricted_workspaces() is None  # started for some workspaces: theirs only
status = query(snap, "pipeline_status", chosen.workspace if isinstance(chosen, Filters) else None,
               whole_warehouse=whole)  # fmt: skip
st.caption(
    "Extractions and bookmarks are each workspace's; the nightly run, webhook ingests, "
    "transforms and the quarantine serve the whole warehouse (workspace –)."
    if whole
    else "Extractions and bookmarks of this workspace (the whole warehouse's runs and "
    "quarantine are not shown to a dashboard started for some workspaces)."
)
st.subheader("Freshness")
show_table(status["freshness"], "freshness")
show_table(status["bookmarks"], "bookmarks")
st.subheader("Run history")
show_table(status["runs"], "runs")
if not whole:
    st.stop()
st.subheader("Quarantine")
if status["quarantine"].height:
    st.caption(
        "Open rows only: lines loaded since by `convo webhooks quarantine replay` "
        "(or a later read of their file) are resolved and not counted."
    )
    show_table(status["quarantine"], "quarantine")
else:
    st.success("Nothing quarantined is open.")
