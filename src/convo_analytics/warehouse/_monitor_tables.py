"""The table of what the monitors found: one row a monitor, series and window judged.

Written by the monitors step after every transform (issue 28), in one transaction
per run, before any alert is recorded for delivery: a run killed after the write
delivers on the next run (``notified_at`` still empty), one killed before it judges
the same windows again. A series is a monitor's definition version, a workspace and
(with ``group_by``) one value of a dimension; its rows, in window order, carry the
episode state machine (decision D-MONITORS).
"""

from __future__ import annotations

from convo_analytics.warehouse._tables import Column, Table

_TS = "TIMESTAMPTZ"

MONITOR_EVALUATIONS = Table(
    "monitor_evaluations",
    (
        Column("monitor", "VARCHAR NOT NULL", doc="the monitor's name"),
        Column(
            "definition_version",
            "VARCHAR NOT NULL",
            doc="a hash of what the monitor judges (metric, filters, window, condition, "
            "sample, severity): a changed definition is a new series, its episodes new",
        ),
        Column(
            "workspace_id",
            "VARCHAR NOT NULL",
            doc="the workspace judged ('' for a warehouse's rows without one)",
        ),
        Column(
            "series",
            "VARCHAR NOT NULL",
            doc="the value of the monitor's group_by dimension this series watches ('' "
            "without group_by)",
        ),
        Column("window_start", "DATE NOT NULL", doc="first day of the judged window"),
        Column("window_end", "DATE NOT NULL", doc="last day of the judged window"),
        Column("window_kind", "VARCHAR", doc="day or week"),
        Column("timezone", "VARCHAR", doc="the time zone the window's days are cut in"),
        Column("metric", "VARCHAR", doc="the catalogue metric judged"),
        Column("value", "DOUBLE", doc="the metric over the window (NULL: undefined, e.g. 0/0)"),
        Column(
            "baseline",
            "DOUBLE",
            doc="what the value was expected to be: the mean of the baseline windows "
            "(threshold monitors: NULL)",
        ),
        Column(
            "lower_bound",
            "DOUBLE",
            doc="the lowest value judged normal (baseline - k * spread, or the threshold "
            "'below'; NULL: no lower bound)",
        ),
        Column(
            "upper_bound",
            "DOUBLE",
            doc="the highest value judged normal (baseline + k * spread, or the threshold "
            "'above'; NULL: no upper bound)",
        ),
        Column("sample", "BIGINT", doc="conversations started in the window (the sample size)"),
        Column(
            "baseline_windows",
            "INTEGER",
            doc="baseline windows with at least min_sample conversations that were used",
        ),
        Column(
            "judged",
            "BOOLEAN",
            doc="whether the window was judged (false: sample under min_sample, no "
            "baseline, or no value; the state then carries over)",
        ),
        Column("breach", "BOOLEAN", doc="judged and outside the bounds"),
        Column("reason", "VARCHAR", doc="why not judged, or which bound was crossed"),
        Column(
            "state",
            "VARCHAR",
            doc="ok, alerting (an episode is open), or resolved (the first judged window "
            "within bounds after an episode)",
        ),
        Column(
            "episode_start",
            "DATE",
            doc="the window_start that opened the episode this row belongs to (NULL: none)",
        ),
        Column("severity", "VARCHAR", doc="the monitor's severity: info, warning or critical"),
        Column(
            "explanation",
            "JSON",
            doc="for the window that opened an episode: the change broken down by slice, "
            "three example conversations and dashboard links (see 'Monitors')",
        ),
        Column(
            "notification_key",
            "VARCHAR",
            doc="the idempotency key of the alert (state alerting, episode opened) or "
            "resolve notice (state resolved) of this row; NULL: nothing to tell",
        ),
        Column(
            "notified_at",
            _TS,
            doc="when the notification was recorded for delivery (NULL with a key: not yet, "
            "or too old to send: see monitoring.notify_within_days)",
        ),
        Column("evaluated_at", _TS, doc="when the window was judged"),
        Column("run_id", "VARCHAR", doc="the convo run that judged it (NULL: a command)"),
    ),
    ("monitor", "definition_version", "workspace_id", "series", "window_start"),
    "Every judged window of every monitor (decision D-MONITORS).",
    indexed=False,
)

MONITOR_TABLES = (MONITOR_EVALUATIONS,)
