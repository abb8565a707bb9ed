"""Monitors: knowing when something changed, and what changed (issue 28).

A monitor is data (``[[monitors]]`` in convo.toml, or made in the dashboard and
kept in its own store): a metric of the catalogue, a slice, a window, and a
condition. After every transform the nightly run judges each monitor's new
windows (:func:`run_monitors`), stores them in ``monitor_evaluations``, and
tells the configured channels (``notify/``) once per episode: an alert that
explains itself (the change split over slices, example conversations, dashboard
links) and a resolve notice. docs/warehouse.md ("Monitors") defines every
figure; decision D-MONITORS says why it works this way.
"""

from convo_analytics.monitors._catalogue import CATALOGUE, MetricSpec, metric_spec
from convo_analytics.monitors._definition import Monitor, check_monitor, monitors_of
from convo_analytics.monitors._evaluate import (
    EvaluationConfig,
    EvaluationResult,
    evaluate,
    notice_key,
    store_rows,
)
from convo_analytics.monitors._judge import Bounds, advance, baseline_windows, bounds
from convo_analytics.monitors._notice import format_value, notice_of
from convo_analytics.monitors._run import (
    HOLD_ENV,
    MonitorsSettings,
    load_monitors,
    monitors_settings,
    pending_notices,
    run_monitors,
)
from convo_analytics.monitors._store import delete_monitor, read_stored, save_monitor

__all__ = [
    "CATALOGUE",
    "HOLD_ENV",
    "Bounds",
    "EvaluationConfig",
    "EvaluationResult",
    "MetricSpec",
    "Monitor",
    "MonitorsSettings",
    "advance",
    "baseline_windows",
    "bounds",
    "check_monitor",
    "delete_monitor",
    "evaluate",
    "format_value",
    "load_monitors",
    "metric_spec",
    "monitors_of",
    "monitors_settings",
    "notice_key",
    "notice_of",
    "pending_notices",
    "read_stored",
    "run_monitors",
    "save_monitor",
    "store_rows",
]
