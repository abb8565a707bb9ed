"""Workspaces: every workspace side by side on the main KPIs for the chosen range (the
sidebar's channels apply; the comparison shows every workspace whatever one is chosen)."""

from __future__ import annotations

import streamlit as st

from convo_analytics.dashboard import charts
from convo_analytics.dashboard._session import (
    filters,
    query,
    require_snapshot,
    restricted_workspaces,
    show_table,
)
from convo_analytics.dashboard._workspaces import COMPARED, workspace_label

snap = require_snapshot()
f = filters()
st.title("Workspaces")
names = query(snap, "workspace_names")
st.caption(
    f"{f.first} to {f.last} ({f.tz}): each workspace's figures, and all of them together "
    "(counts summed, rates and percentiles over the summed conversations and responses)."
)
comparison = query(snap, "compare_workspaces", f, restricted_workspaces())
per_workspace = comparison.filter(comparison["workspace_id"].is_not_null())
labels = {column: label for column, label, _ in COMPARED}
metric = st.selectbox(
    "Compare", list(labels), format_func=lambda m: labels[m], key="workspaces_metric"
)
fmt = next(kind for column, _, kind in COMPARED if column == metric)
st.altair_chart(
    charts.workspace_bars(
        per_workspace,
        metric,
        labels[metric],
        fmt,
        workspace_label(names, f.workspace) if f.workspace else None,
    ),
    width="stretch",
)
show_table(comparison, "workspace_comparison", f.tz)
