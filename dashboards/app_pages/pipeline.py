"""Pipeline: how the last nightly run ended, freshness, the reconciliation with the service's
own summary (the days and figures that differ), the run history, the alerts not delivered,
and what was quarantined and why."""

from __future__ import annotations

import polars as pl
import streamlit as st

from convo_analytics.dashboard._deliveries import alert_deliveries
from convo_analytics.dashboard._format import delta_text, metric_kind, value_text
from convo_analytics.dashboard._queries import Filters, ReconciliationView, TablePage
from convo_analytics.dashboard._session import (
    app_settings,
    paged_table,
    published_snapshot,
    query,
    restricted_workspaces,
    show_table,
)
from convo_analytics.dashboard._text import plain


def _figures(differences: pl.DataFrame) -> pl.DataFrame:
    """The differences with each figure written as its metric's figures are everywhere
    (a rate as a percentage, a latency as a duration), the difference beside them."""
    rows = []
    for row in differences.iter_rows(named=True):
        kind = metric_kind(row["metric"], row["service"])
        rows.append({**row, "warehouse": value_text(row["warehouse"], kind),
                     "service": value_text(row["service"], kind),
                     "difference": delta_text(row["warehouse"], row["service"], kind)
                     or "–"})  # fmt: skip
    schema = {**differences.schema, "warehouse": pl.String, "service": pl.String,
              "difference": pl.String}  # fmt: skip
    return pl.DataFrame(rows, schema=schema, orient="row")


st.title("Pipeline")
snap = published_snapshot()
st.caption(f"Snapshot {snap.snapshot_id}, published {snap.published_at}")
chosen = st.session_state.get("filters")
whole = restricted_workspaces() is None  # started for some workspaces: theirs only
workspace = chosen.workspace if isinstance(chosen, Filters) else None
tz = chosen.tz if isinstance(chosen, Filters) else None
status = query(snap, "pipeline_status", workspace, whole_warehouse=whole)
found: ReconciliationView | None = query(snap, "reconciliation", workspace)
latest: TablePage = query(snap, "run_history", workspace, offset=0, limit=50)
nightly = latest.rows.filter(latest.rows["step"] == "nightly run").head(1).to_dicts()
if not whole:  # the nightly run is the whole warehouse's
    nightly = []
if nightly and nightly[0]["status"] == "warning":
    run = nightly[0]
    st.warning(
        f"The last nightly run ({plain(run['run_id'])}) ended with a warning"
        + (f": {plain(run['warning'], None)}" if run["warning"] else "")
        + ". The differences are listed under Reconciliation below.",
        icon=":material/warning:",
    )
elif nightly and nightly[0]["status"] == "failed":
    run = nightly[0]
    st.error(
        f"The last nightly run ({plain(run['run_id'])}) failed in "
        f"{plain(run['part'] or 'its start')}: {plain(run['error'], 300)}",
        icon=":material/error:",
    )
st.caption(
    "Extractions and bookmarks are each workspace's; the nightly run, webhook ingests, "
    "transforms and the quarantine serve the whole warehouse (workspace –)."
    if whole
    else "Extractions and bookmarks of this workspace (the whole warehouse's runs and "
    "quarantine are not shown to a dashboard started for some workspaces)."
)
st.subheader("Freshness")
show_table(status["freshness"], "freshness", tz)
show_table(status["bookmarks"], "bookmarks", tz)

st.subheader("Reconciliation")
if found is None:
    st.info("No transform has run yet: nothing was compared with the service's own summary.")
elif not found.recorded:
    st.info(
        "This copy of the lake does not carry the reconciliation; the warehouse's "
        "`transform_runs` does (`convo transform --json`)."
    )
else:
    said = found.found.describe()
    said = said[:1].upper() + said[1:]
    when = f" (transform {found.transform_run_id}, finished {found.finished_at:%Y-%m-%d %H:%M} UTC)"
    if found.found.outcome == "differences":
        st.warning(
            f"{said}{when}. Each day and figure that differs is below: a difference that "
            "persists means the warehouse misses what the service counted (a page, a "
            "detail), or counts what it does not.",
            icon=":material/warning:",
        )
        show_table(_figures(found.differences), "reconciliation_differences", tz,
                   raw=found.differences)  # fmt: skip
    elif found.found.outcome == "nothing to compare":
        st.info(
            f"{said}{when}: the service's summary endpoint gave no day to compare with, so "
            "nothing was checked (not a match). `convo extract` says why for its summary "
            "stream.",
            icon=":material/info:",
        )
    else:
        st.success(f"{said}{when}.", icon=":material/check_circle:")

st.subheader("Run history")
paged_table(snap, "run_history", (workspace, whole), "runs", tz, key="runs", what="runs")
if not whole:  # the whole warehouse's run alerts and quarantine are not this reader's
    st.stop()
st.subheader("Alert deliveries")
sent = alert_deliveries(app_settings()["delivery_log"])
if sent.undelivered.height:
    pending = sent.undelivered.filter(sent.undelivered["status"] == "pending").height
    st.warning(
        f"{sent.undelivered.height:,} alert deliveries were not delivered: "
        f"{pending:,} pending (the next run tries them again, with the same idempotency "
        "key), the others refused for good by their receiver or abandoned (check that "
        "channel's settings).",
        icon=":material/notifications_off:",
    )
    show_table(sent.undelivered, "alert_deliveries", tz, workspace=False)
elif sent.delivered:
    st.success(f"Every alert of the last {sent.days} days was delivered ({sent.delivered:,}).")
else:
    st.caption(f"No alert to deliver in the last {sent.days} days.")
st.subheader("Quarantine")
if status["quarantine"].height:
    st.caption(
        "Open rows only: lines loaded since by `convo webhooks quarantine replay` "
        "(or a later read of their file) are resolved and not counted."
    )
    show_table(status["quarantine"], "quarantine", tz)
else:
    st.success("Nothing quarantined is open.")
