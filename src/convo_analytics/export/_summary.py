"""The warehouse's answer to GET /v1/analytics/summary, in the service's exact shape."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import duckdb

from convo_analytics.config import WorkspaceConfig
from convo_analytics.errors import UserError
from convo_analytics.export._workspaces import ALL_WORKSPACES, summary_scope, warehouse_workspaces
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


def empty_range_warning(
    con: duckdb.DuckDBPyConnection,
    first: date,
    last: date,
    tz: str,
    ids: Sequence[str] | None = None,
) -> str | None:
    """Why an export of ``first``..``last`` is empty when no conversation started in it
    (zeros alone read as a quiet period), naming the days the warehouse does hold
    (of the workspaces ``ids``; of all for ``None``)."""
    where, params = "", []
    if ids is not None:
        where = f" WHERE workspace_id IN ({', '.join('?' * len(ids))})" if ids else " WHERE false"
        params = list(ids)
    held, started, latest = con.execute(
        "SELECT count(*) FILTER (WHERE timezone(?, started_at)::DATE BETWEEN ? AND ?), "
        "min(timezone(?, started_at))::DATE, max(timezone(?, started_at))::DATE "
        f"FROM mart_conversations{where}",
        [tz, first, last, tz, tz, *params],
    ).fetchall()[0]
    if held:
        return None
    if started is None:
        return (
            "there are no conversations to read yet (run 'convo extract', then "
            "'convo transform'; reading the lake, wait for a complete publish): the export "
            "is empty"
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
    workspace: str | None = None,
    all_workspaces: bool = False,
    configured: Sequence[WorkspaceConfig] = (),
) -> dict[str, Any]:
    """The summary body for ``first``..``last`` made from the published marts.

    ``workspace`` (a name or an id) reports that workspace alone, with its id as
    ``workspaceId``; ``all_workspaces`` rolls every workspace up, ``workspaceId``
    being ``"*"``. Without either, a warehouse of one workspace reports it, and
    one of several is a UserError naming them (decision D-EXPORT-WORKSPACE).
    """
    check_range(first, last, tz)
    scope = choose_summary(con, workspace, all_workspaces, configured)
    return workspace_summary(
        con,
        first,
        last,
        tz,
        workspace_id=scope.label,
        ids=scope.ids,
        low_confidence_threshold=low_confidence_threshold,
    )


@dataclass(frozen=True, slots=True)
class SummaryScope:
    """What a summary reports: its ``workspaceId`` and the workspaces' ids it sums
    (``None``: every row of the warehouse)."""

    label: str
    ids: list[str] | None


def choose_summary(
    con: duckdb.DuckDBPyConnection,
    workspace: str | None = None,
    all_workspaces: bool = False,
    configured: Sequence[WorkspaceConfig] = (),
) -> SummaryScope:
    """The scope of ``--workspace`` / ``--all-workspaces`` (UserErrors as
    :func:`summary_scope` says)."""
    known = warehouse_workspaces(con, configured)
    chosen, whole = summary_scope(
        known, (workspace,) if workspace else (), all_workspaces, configured
    )
    if all_workspaces:
        return SummaryScope(ALL_WORKSPACES, None)
    label = chosen[0].workspace_id if chosen else "unknown"
    return SummaryScope(label, None if whole else [w.workspace_id for w in chosen])


def workspace_summary(
    con: duckdb.DuckDBPyConnection,
    first: date,
    last: date,
    tz: str,
    *,
    workspace_id: str,
    ids: Sequence[str] | None,
    low_confidence_threshold: float | None = None,
) -> dict[str, Any]:
    """The summary body of the rows of ``ids`` (every row for ``None``), labelled
    ``workspace_id``: what the export and `convo serve` answer once they chose."""
    check_range(first, last, tz)
    cube = load_cube(
        con,
        tz,
        low_confidence_threshold,
        first=first,
        last=last,
        by_dimension=False,
        workspaces=ids,
    )
    now = datetime.now(UTC)
    return summary_body(
        cube,
        first,
        last,
        workspace_id=workspace_id,
        generated_at=now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
    )
