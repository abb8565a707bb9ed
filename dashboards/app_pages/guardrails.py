"""Guardrails: incidents over time by flag (a click opens the conversations behind a bar),
the redacted incident log, the compliance export."""

from __future__ import annotations

import tempfile
from pathlib import Path

import streamlit as st

from convo_analytics.dashboard import charts
from convo_analytics.dashboard._audit import AuditError, audited_download, sealed_export
from convo_analytics.dashboard._session import (
    chart_with_drill,
    connection,
    download,
    filters,
    paged_table,
    query,
    require_snapshot,
    show_table,
)
from convo_analytics.dashboard._text import plain
from convo_analytics.export import FORMATS, export_guardrails, warehouse_workspaces

snap = require_snapshot()
f = filters()
st.title("Guardrails")
report = query(snap, "guardrail_report", f)
chart_with_drill(
    charts.incidents_by_flag(report["per_flag_per_day"]), "guardrails_flags", "incidents", f
)
st.caption("Click a bar to see the conversations with those incidents.")
download(report["per_flag_per_day"], "incidents_per_flag_per_day")
st.subheader("Per flag")
show_table(report["flag_rates"], "guardrail_flag_rates", f.tz)
st.subheader("Incidents")
st.caption("Excerpts are redacted: emails, card and phone numbers are replaced.")
paged_table(snap, "incident_page", (f,), "guardrail_incidents", f.tz, key="incidents",
            what="incidents")  # fmt: skip
left, right = st.columns(2)
with left:
    st.markdown("**Conversations with repeated incidents**")
    show_table(report["repeat_conversations"], "repeat_conversations", f.tz)
with right:
    st.markdown("**End users with repeated incidents**")
    show_table(report["repeat_users"], "repeat_users", f.tz)

st.subheader("Compliance export")
st.caption(
    "The same files and manifest as `convo export guardrails --workspace`, redacted: the "
    "sidebar's workspace, or every workspace; each row names its workspace."
)
fmt = st.selectbox("Format", FORMATS, key="export_format")
if st.button("Prepare the export", key="export_prepare"):
    with tempfile.TemporaryDirectory() as folder:
        result = export_guardrails(
            connection(snap),
            f.first,
            f.last,
            Path(folder),
            tz=f.tz,
            fmt=fmt,  # type: ignore[arg-type]
            workspaces=[
                w for w in warehouse_workspaces(connection(snap)) if w.workspace_id == f.workspace
            ]
            if f.workspace
            else None,
        )
        try:  # joined to the audit chain as `convo export guardrails` is
            sealed = sealed_export("dashboard.export.guardrails", result.manifest_file,
                                   [result.data_file], result.rows, f.workspace)  # fmt: skip
        except AuditError as exc:
            st.error(f"The export was not made: the audit trail cannot record it ({exc}).")
            st.stop()
        st.session_state["export_files"] = {
            result.data_file.name: result.data_file.read_bytes(),
            result.manifest_file.name: result.manifest_file.read_bytes(),
        }
        st.session_state["export_manifest"] = sealed or result.manifest
for name, data in st.session_state.get("export_files", {}).items():
    st.download_button(
        f"Download {plain(name)}",
        audited_download(data, name, None, f.workspace),
        file_name=name,
        key=f"export_{name}",
    )
if "export_manifest" in st.session_state:
    st.json(st.session_state["export_manifest"], expanded=False)
