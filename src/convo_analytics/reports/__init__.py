"""Scheduled reports: notebooks run by ``convo run`` after publishing and sent to people.

A ``[[reports]]`` table of convo.toml names a notebook, parameter values, a
schedule (daily: yesterday; weekly: the previous ISO week, from its weekday
on), workspaces (one report each, over that workspace's rows only), recipients
and channels. The nightly run's ``reports`` step makes each due one headless
(``notebooks``: the same limited query processes as Explore), writes its HTML
and CSVs, and sends it through the notification channels (``notify``: email
with the files attached, the signed webhook carrying them), once per report,
workspace and period however often the run is repeated. A report that fails is
recorded in the report log and alerted (``report.failed``), and never fails the
run (decision D-NOTEBOOK-SCHEDULED-REPORTS).
"""

from convo_analytics.reports._log import done_periods, read_runs
from convo_analytics.reports._notice import ReportJob, failed_notice, ready_notice
from convo_analytics.reports._run import (
    DEFAULT_CHANNELS,
    ReportingSettings,
    check_reports,
    due_jobs,
    report_timezone,
    reporting_settings,
    run_reports,
)
from convo_analytics.reports._schedule import Period, due_period
from convo_analytics.reports._status import report_states

__all__ = [
    "DEFAULT_CHANNELS",
    "Period",
    "ReportJob",
    "ReportingSettings",
    "check_reports",
    "done_periods",
    "due_jobs",
    "due_period",
    "failed_notice",
    "read_runs",
    "ready_notice",
    "report_states",
    "report_timezone",
    "reporting_settings",
    "run_reports",
]
