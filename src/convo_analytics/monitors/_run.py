"""The monitors step: judge, store, then tell; and the reading side (list, history, test).

:func:`run_monitors` is what ``convo run`` calls after the transform: it judges
every monitor's new windows, writes them to ``monitor_evaluations`` (one
transaction), then records each alert and resolve notice those rows call for in
the delivery log and marks the rows as recorded (``notified_at``), then delivers
what is pending. A kill after the write leaves rows with a key and no
``notified_at``: the next run records them with the same key, and the delivery
log never sends a key twice to a channel, so the receiver sees one alert. A
failed delivery never fails the step (it is retried by the next run and shown on
the Pipeline page). Notices for windows older than ``monitoring.notify_within_days``
are stored, not sent (a new monitor's history would otherwise alert for every
past episode).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson

from convo_analytics.config import Settings
from convo_analytics.errors import UserError
from convo_analytics.monitors._definition import Monitor, monitors_of
from convo_analytics.monitors._evaluate import EvaluationConfig, evaluate, store_rows
from convo_analytics.monitors._notice import notice_of
from convo_analytics.monitors._store import read_stored
from convo_analytics.notify import Notification, deliver_pending, notify_config, record
from convo_analytics.warehouse import open_warehouse

__all__ = [
    "HOLD_ENV",
    "MonitorsSettings",
    "load_monitors",
    "monitors_settings",
    "pending_notices",
    "run_monitors",
]

log = logging.getLogger(__name__)

#: A testing knob like the runner's: ``evaluated`` holds the step after the rows are
#: written and before any notice is recorded, for up to HOLD_SECONDS (a test kills it there).
HOLD_ENV = "CONVO_MONITORS_HOLD"
HOLD_SECONDS = 120.0


@dataclass(frozen=True, slots=True)
class MonitorsSettings:
    """The monitoring settings a run needs, read once from the configuration."""

    enabled: bool
    store_file: Path | None
    default_timezone: str
    evaluation: EvaluationConfig
    notify_within_days: int


def monitors_settings(settings: Settings, run_id: str | None = None) -> MonitorsSettings:
    return MonitorsSettings(
        enabled=settings.get_bool("monitoring.enabled"),
        store_file=settings.get_path("monitoring.store_file"),
        default_timezone=(settings.get_list("transform.timezones") or ["UTC"])[0],
        evaluation=EvaluationConfig(
            lookback_days=settings.get_int("monitoring.lookback_days"),
            dashboard_url=settings.get_str("monitoring.dashboard_url"),
            run_id=run_id,
        ),
        notify_within_days=settings.get_int("monitoring.notify_within_days"),
    )


def load_monitors(settings: Settings) -> list[Monitor]:
    """Every monitor: ``[[monitors]]`` and the dashboard's store, checked (UserError)."""
    chosen = monitors_settings(settings)
    stored = read_stored(chosen.store_file) if chosen.store_file is not None else []
    return monitors_of(settings.monitors, stored, chosen.default_timezone)


def pending_notices(
    con: duckdb.DuckDBPyConnection, within_days: int, now: datetime, monitors: Sequence[Monitor]
) -> list[Notification]:
    """The notices judged rows call for and that were not recorded yet, oldest first, for
    windows that ended at most ``within_days`` days ago."""
    oldest = (now - timedelta(days=within_days)).date()
    rows = con.execute(
        "SELECT * FROM monitor_evaluations WHERE notification_key IS NOT NULL"
        " AND notified_at IS NULL AND window_end >= ? ORDER BY window_start, monitor",
        [oldest],
    ).fetchall()
    names = [d[0] for d in con.description or ()]
    described = {m.name: m.spec.description for m in monitors}
    out = []
    for values in rows:
        row = dict(zip(names, values, strict=True))
        if isinstance(row.get("explanation"), str):
            row["explanation"] = orjson.loads(row["explanation"])
        out.append(notice_of(row, described.get(row["monitor"], "")))
    return out


def _mark(con: duckdb.DuckDBPyConnection, keys: Sequence[str], at: datetime) -> None:
    if keys:
        con.execute(
            "UPDATE monitor_evaluations SET notified_at = ? WHERE notification_key IN "
            f"({', '.join('?' * len(keys))}) AND notified_at IS NULL",
            [at, *keys],
        )


def run_monitors(
    settings: Settings, db_path: Path, run_id: str | None = None, *, now: datetime | None = None
) -> dict[str, Any]:
    """Judge, store, record and deliver (see the module's docstring); the step's counts."""
    chosen = monitors_settings(settings, run_id)
    if not chosen.enabled:
        return {"skipped": "monitoring.enabled is false"}
    monitors = load_monitors(settings)
    if not monitors:
        return {"monitors": 0}
    now = now or datetime.now(UTC)
    con = open_warehouse(db_path)
    try:
        result = evaluate(con, monitors, chosen.evaluation, now=now)
        store_rows(con, result.rows)
    finally:
        con.close()
    if os.environ.get(HOLD_ENV) == "evaluated":  # a warning: shown whatever the log level
        log.warning("monitors holding after storing evaluations (%s is set)", HOLD_ENV)
        time.sleep(HOLD_SECONDS)
    counts: dict[str, Any] = {"monitors": len(monitors), **result.counts()}
    if result.unknown_workspaces:
        counts["unknown_workspaces"] = result.unknown_workspaces
    counts["deliveries"] = _tell(settings, db_path, chosen.notify_within_days, now, monitors)
    return counts


def _tell(
    settings: Settings, db_path: Path, within_days: int, now: datetime, monitors: Sequence[Monitor]
) -> dict[str, Any]:
    """Record every pending notice, mark it, and deliver; never raises."""
    try:
        config = notify_config(settings)
        con = open_warehouse(db_path)
        try:
            notices = pending_notices(con, within_days, now, monitors)
            for notice in notices:
                record(config, notice)
            _mark(con, [n.key for n in notices], datetime.now(UTC))
        finally:
            con.close()
        summary = deliver_pending(config) if notices else None
    except UserError as exc:  # e.g. the delivery log's folder cannot be written
        log.error("monitor notices could not be recorded: %s", exc)
        return {"error": str(exc)}
    except Exception as exc:  # never the step's failure; the message may hold anything
        log.error("monitor notices could not be delivered: %s", type(exc).__name__)
        return {"error": f"monitor notices could not be delivered ({type(exc).__name__})"}
    out: dict[str, Any] = {"recorded": len(notices)}
    if summary is not None:
        out.update(delivered=summary.delivered, pending=summary.pending, failed=summary.failed)
    return out
