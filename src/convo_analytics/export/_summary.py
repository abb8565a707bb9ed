"""The warehouse's answer to GET /v1/analytics/summary, in the service's exact shape."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import duckdb

from convo_analytics.errors import UserError
from convo_analytics.transform import load_cube, summary_body

#: The longest range one summary covers, as the sandbox allows.
MAX_SUMMARY_DAYS = 732


def check_range(first: date, last: date, tz: str) -> None:
    """Raise a UserError naming the bad input (the same rules as the service's endpoint)."""
    if last < first:
        raise UserError(f"--to {last} is before --from {first}; give the first day, then the last")
    if (last - first).days >= MAX_SUMMARY_DAYS:
        raise UserError(f"the range may span at most {MAX_SUMMARY_DAYS} days; split it")
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise UserError(f"--tz {tz!r} is not an IANA time zone (e.g. UTC, Europe/Berlin)") from None


def parse_day(flag: str, value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise UserError(f"{flag} {value!r} is not a date; use YYYY-MM-DD") from None


def warehouse_workspace(con: duckdb.DuckDBPyConnection) -> str:
    """The workspace the warehouse holds (one warehouse per workspace)."""
    rows = con.execute(
        "SELECT workspace_id, count(*) AS n FROM conversations WHERE workspace_id IS NOT NULL "
        "GROUP BY workspace_id ORDER BY n DESC"
    ).fetchall()
    if len(rows) > 1:
        names = ", ".join(str(r[0]) for r in rows[:5])
        raise UserError(
            f"the warehouse holds several workspaces ({names}); pass --workspace-id to name one"
        )
    return str(rows[0][0]) if rows else "unknown"


def empty_range_warning(
    con: duckdb.DuckDBPyConnection, first: date, last: date, tz: str
) -> str | None:
    """Why an export of ``first``..``last`` is empty when no conversation started in it
    (zeros alone read as a quiet period), naming the days the warehouse does hold."""
    held, started, latest = con.execute(
        "SELECT count(*) FILTER (WHERE timezone(?, started_at)::DATE BETWEEN ? AND ?), "
        "min(timezone(?, started_at))::DATE, max(timezone(?, started_at))::DATE "
        "FROM mart_conversations",
        [tz, first, last, tz, tz],
    ).fetchall()[0]
    if held:
        return None
    if started is None:
        return (
            "the warehouse holds no conversations yet (run 'convo extract', then "
            "'convo transform'): the export is empty"
        )
    return (
        f"no conversation started from {first} to {last} ({tz}), so the export is empty; "
        f"the warehouse holds {started} to {latest}"
    )


def export_summary(
    con: duckdb.DuckDBPyConnection,
    first: date,
    last: date,
    tz: str = "UTC",
    *,
    low_confidence_threshold: float | None = None,
    workspace_id: str | None = None,
) -> dict[str, Any]:
    """The summary body for ``first``..``last`` made from the published marts."""
    check_range(first, last, tz)
    cube = load_cube(con, tz, low_confidence_threshold, first=first, last=last, by_dimension=False)
    now = datetime.now(UTC)
    return summary_body(
        cube,
        first,
        last,
        workspace_id=workspace_id or warehouse_workspace(con),
        generated_at=now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
    )
