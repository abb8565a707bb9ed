"""When a report is due, and which days it covers: its period.

A **daily** report covers yesterday and is due once per day: the first run of a
day makes it (a run that misses a day skips that day's report: the next one
covers the next yesterday). A **weekly** report covers the previous ISO week,
Monday to Sunday, and is due from its weekday on: the run of that night makes
it, and when that run was missed, the next run later in the same ISO week does
(catching up). Before the weekday nothing is due. Days are the calendar days of
the report's time zone (its ``tz`` parameter, else the first of
``transform.timezones``), today being the day the run starts there.

A period is a label (``2026-11-25``, ``2026-W47``) that names the report's
folder and its idempotency key, and its first and last day, which the
notebook gets as ``from`` and ``to`` unless the report's params set them
(decision D-NOTEBOOK-SCHEDULED-REPORTS). Whether a due period was already made
is the report log's answer (``_log``), not this module's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from convo_analytics.config import WEEKDAYS

__all__ = ["Period", "due_period"]


@dataclass(frozen=True, slots=True)
class Period:
    """The days a report covers: ``label`` names it (folder, key), ``first``..``last``."""

    label: str
    first: date
    last: date


def due_period(schedule: str, weekday: str, today: date) -> Period | None:
    """The period a report with ``schedule`` (and ``weekday``) makes on ``today``, or None
    when it is not due that day (a weekly report before its weekday)."""
    if schedule == "daily":
        day = today - timedelta(days=1)
        return Period(day.isoformat(), day, day)
    if today.isoweekday() < WEEKDAYS.index(weekday) + 1:
        return None
    monday = today - timedelta(days=today.isoweekday() - 1) - timedelta(days=7)
    year, week, _ = monday.isocalendar()
    return Period(f"{year}-W{week:02d}", monday, monday + timedelta(days=6))
