"""Where each report stands now: what ``convo reports list`` shows.

One row per report and workspace: its schedule, the period a run would make
now (``due now``), or that it is made already, or the weekday it is due from,
and its last run as the report log records it. Read only: nothing is run,
written or sent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from convo_analytics.config import Settings
from convo_analytics.reports._log import done_periods, read_runs
from convo_analytics.reports._run import report_timezone, reporting_settings
from convo_analytics.reports._schedule import due_period

__all__ = ["report_states"]


def report_states(settings: Settings, now: datetime) -> list[dict[str, Any]]:
    """Each configured report's state per workspace (see the module's docstring)."""
    chosen = reporting_settings(settings)
    runs = read_runs(chosen.log)
    done = done_periods(runs)
    last: dict[tuple[str, str], dict[str, Any]] = {}
    for row in runs:
        last[(str(row["report"]), str(row["workspace"]))] = row
    out = []
    for spec in settings.reports:
        tz = report_timezone(spec, chosen.default_timezone)
        period = due_period(spec.schedule, spec.weekday, now.astimezone(ZoneInfo(tz)).date())
        schedule = "daily" if spec.schedule == "daily" else f"weekly on {spec.weekday}"
        for workspace in spec.workspaces or chosen.workspaces:
            if not spec.enabled or not chosen.enabled:
                state = "disabled"
            elif period is None:
                state = f"due from {spec.weekday}"
            elif (spec.name, workspace, period.label) in done:
                state = f"made ({period.label})"
            else:
                state = f"due now ({period.label})"
            previous = last.get((spec.name, workspace))
            out.append({
                "report": spec.name, "workspace": workspace, "notebook": spec.notebook,
                "schedule": schedule, "timezone": tz, "state": state,
                "period": period.label if period is not None else None,
                "last": None if previous is None else {
                    k: previous.get(k) for k in ("period", "status", "finished_at", "dir",
                                                 "failures")
                },
            })  # fmt: skip
    return out
