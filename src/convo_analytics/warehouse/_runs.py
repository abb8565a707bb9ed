"""The nightly run's own log: one row per `convo run`, with what each step did."""

from __future__ import annotations

from convo_analytics.warehouse._tables import Column, Table

PIPELINE_RUNS = Table(
    "pipeline_runs",
    (
        Column("run_id", "VARCHAR NOT NULL"),
        Column("started_at", "TIMESTAMPTZ"),
        Column("finished_at", "TIMESTAMPTZ"),
        Column(
            "status",
            "VARCHAR",
            doc="running, ok, warning (every step done, but one warned: reconciliation found "
            "differences from the service's own summary), failed, or interrupted (killed; "
            "found by the next run)",
        ),
        Column("failed_step", "VARCHAR", doc="the step that failed, if one did"),
        Column(
            "steps",
            "JSON",
            doc="per step: name, status (ok, warning, failed, skipped), seconds, counts, "
            "error, warnings (what the step warned of)",
        ),
        Column("duration_seconds", "DOUBLE"),
        Column("error", "VARCHAR", doc="why it failed (no secrets)"),
        Column("host", "VARCHAR"),
        Column("pid", "INTEGER"),
        Column("snapshot_id", "VARCHAR", doc="the snapshot it published, if it got that far"),
        Column(
            "audit_head",
            "VARCHAR",
            doc="the audit trail's head when it ended (SEQ:HASH of the last record; "
            "`convo audit verify` checks the log still reaches it; D-AUDIT-TRAIL)",
        ),
    ),
    ("run_id",),
    "One row per `convo run`, written when it starts and when it ends.",
)
