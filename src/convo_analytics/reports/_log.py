"""The report log: one line per report run, what makes a report due or done.

A JSON-lines file in the app's own state folder (``reporting.log``, by default
``data/app-state/reports.jsonl``), appended under its lock (``_app_state``),
each line written whole and synced. A line::

    {"report", "workspace", "period", "schedule", "from", "to", "notebook",
     "status": "ok" | "failed", "run_id", "started_at", "finished_at", "seconds",
     "snapshot_id", "data_through", "dir", "html", "csvs", "key",
     "failures": [...], "error"}

``ok``: the notebook ran whole, its files are written and its delivery is
recorded in the delivery log (so a run killed after this line still delivers:
the next run's delivery of what is pending sends it). ``failed``: a cell
failed, the notebook could not start (``error``), or the files could not be
written; the report is due again at the next run in its period. A (report,
workspace, period) with an ``ok`` line is done. The log holds no secret and no
row of data: paths, counts and one-line errors.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from convo_analytics._app_state import append_line, locked, read_lines
from convo_analytics.errors import UserError

__all__ = ["append_run", "done_periods", "read_runs"]


def read_runs(path: Path) -> list[dict[str, Any]]:
    """Every report run the log holds, oldest first (none without the file)."""
    try:
        rows = read_lines(path)
    except OSError as exc:
        raise UserError(
            f"reporting.log {path}: cannot be read ({exc.strerror}); fix its permissions or "
            "point reporting.log elsewhere"
        ) from None
    return [r for r in rows if isinstance(r, dict) and {"report", "workspace", "period"} <= set(r)]


def done_periods(rows: Iterable[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """The (report, workspace, period) made whole: those with an ``ok`` line."""
    return {
        (str(r["report"]), str(r["workspace"]), str(r["period"]))
        for r in rows
        if r.get("status") == "ok"
    }


def append_run(path: Path, row: dict[str, Any]) -> None:
    """Append one report run, synced (a UserError when the folder cannot be written)."""
    try:
        with locked(path):
            append_line(path, row)
    except OSError as exc:
        raise UserError(
            f"reporting.log {path}: cannot be written ({exc.strerror}); fix its folder's "
            "permissions or point reporting.log elsewhere"
        ) from None
