"""The Conversations page's data: a slice of conversations, searched and paged.

A slice (``dashboard._views.Slice``) is what a chart's click, the page's own
widgets or a URL asks for; :func:`conversation_page` turns it and the global
filters into one SQL statement over ``mart_conversations`` (with ``EXISTS``
over messages, incidents or the lead steps where the slice needs them), and
returns one page of rows, newest first, with the total and each row's first
user message, so that paging goes past any limit and the picker can show
what a conversation was about.

Message-side conditions (a search in the text, a response's tier or band, a
day of responses) only scan messages created in the range's time window: a
conversation started in the range has its messages from the range's first
instant on, and the window lets DuckDB skip the row groups of older messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import duckdb
import polars as pl

from convo_analytics.dashboard._queries import Filters, TablePage, zone_sql
from convo_analytics.dashboard._views import Slice
from convo_analytics.transform import STEPS
from convo_analytics.transform._frames import read_frame
from convo_analytics.transform._incidents import day_bounds

__all__ = ["PAGE_SIZES", "ConversationPage", "conversation_page", "conversation_table"]

PAGE_SIZES = (50, 100, 250, 500)
#: See _earliest.
EVENT_LOOKBACK_DAYS = 60
COLUMNS = ("c.workspace_id, conversation_id, started_at, channel, locale, intent, source, status, "
           "external_user_id, user_messages, assistant_responses, avg_confidence, escalated, "
           "guardrail_triggers, lead_score, qualified_at, feedback_rating, first_response_ms, "
           "resolution_seconds")  # fmt: skip


@dataclass(frozen=True, slots=True)
class ConversationPage:
    """One page of a slice: its rows (with the first user message), and the slice's size."""

    rows: pl.DataFrame
    total: int
    page: int
    pages: int


def _where(f: Filters, s: Slice) -> tuple[list[str], list[Any]]:
    """The slice's conditions on ``c`` (mart_conversations) and their parameters."""
    lo, hi = day_bounds(f.first, f.last)
    tz = zone_sql(f.tz)
    local = f"(c.started_at AT TIME ZONE '{tz}')::DATE"
    event_based = s.day is not None and s.basis != "started"
    where: list[str] = []
    params: list[Any] = []
    if not event_based:
        where += ["c.started_at >= ?::TIMESTAMPTZ", "c.started_at < ?::TIMESTAMPTZ",
                  f"{local} BETWEEN ? AND ?"]  # fmt: skip
        params += [lo, hi, f.first, f.last]
    else:  # a day of responses, incidents or feedback dates those, not the start
        assert s.day is not None
        where += ["c.started_at >= ?::TIMESTAMPTZ", "c.started_at < ?::TIMESTAMPTZ"]
        params += [_earliest(s), day_bounds(s.day, s.day)[1]]
    chosen, chosen_params = f.where("c")
    if chosen:
        where.append(chosen.removeprefix(" AND "))
        params += chosen_params
    if s.day is not None and s.basis == "started":
        where.append(f"{local} = ?")
        params.append(s.day)
    for column in ("locale", "intent", "source"):
        value = getattr(s, column)
        if value is not None:
            where.append(f"c.{column} = ?")
            params.append(value)
    if s.statuses:
        where.append(f"c.status IN ({', '.join('?' * len(s.statuses))})")
        params += list(s.statuses)
    if s.escalated is not None:
        where.append("c.escalated = ?")
        params.append(s.escalated)
    if s.flagged is not None:
        where.append("(c.guardrail_triggers > 0) = ?")
        params.append(s.flagged)
    if s.step is not None:
        for step, column in STEPS:
            where.append(f"c.{column} IS NOT NULL")
            if step == s.step:
                break
    day_of = (
        (lambda column: f"(timezone('{tz}', {column}))::DATE = ?") if s.day is not None else None
    )
    if s.flag is not None or s.basis == "incidents":
        cond = ["g.conversation_id = c.conversation_id", "g.workspace_id = c.workspace_id"]
        if s.flag is not None:
            cond.append("g.flag = ?")
            params.append(s.flag)
        if day_of is not None and s.basis == "incidents":
            cond.append(day_of("g.triggered_at"))
            params.append(s.day)
        where.append(
            f"EXISTS (SELECT 1 FROM mart_guardrail_incidents g WHERE {' AND '.join(cond)})"
        )
    response = s.tier is not None or s.band is not None or s.below is not None
    if response or s.basis == "responses":
        cond = ["m.conversation_id = c.conversation_id", "m.workspace_id = c.workspace_id",
                "m.role = 'assistant'"]  # fmt: skip
        if s.tier is not None:
            cond.append("m.model_tier = ?")
            params.append(s.tier)
        if s.band is not None:
            cond.append("least(floor(coalesce(m.confidence, 0) * 10), 9) = ?")
            params.append(round(s.band * 10))
        if s.below is not None:
            cond.append("coalesce(m.confidence, 0) < ?")
            params.append(s.below)
        if s.day is not None and day_of is not None and s.basis == "responses":
            cond.append(day_of("m.created_at"))
            params.append(s.day)
            window_lo, window_hi = day_bounds(s.day, s.day)
        else:
            window_lo, window_hi = lo, None
        cond.append("m.created_at >= ?::TIMESTAMPTZ")
        params.append(window_lo)
        if window_hi is not None:
            cond.append("m.created_at < ?::TIMESTAMPTZ")
            params.append(window_hi)
        where.append(f"EXISTS (SELECT 1 FROM messages m WHERE {' AND '.join(cond)})")
    if s.basis == "feedback" and day_of is not None:
        where.append(day_of("c.feedback_at"))
        params.append(s.day)
    if s.search:  # ILIKE: DuckDB's fastest case-blind match; the text's own % and _ escaped
        needle = "%" + re.sub(r"([\\%_])", r"\\\1", s.search) + "%"
        where.append(
            "(c.conversation_id ILIKE ? ESCAPE '\\' OR c.external_user_id ILIKE ? ESCAPE '\\'"
            " OR (c.workspace_id, c.conversation_id) IN (SELECT (m.workspace_id,"
            " m.conversation_id) FROM messages m"
            " WHERE m.text ILIKE ? ESCAPE '\\' AND m.created_at >= ?::TIMESTAMPTZ))"
        )
        params += [needle, needle, needle, lo if not event_based else _earliest(s)]
    return where, params


def _earliest(s: Slice) -> Any:
    """How far back an event-dated slice's conversations may have started: a day of
    responses or incidents belongs to conversations at most this old (long email threads)."""
    assert s.day is not None
    return day_bounds(s.day - timedelta(days=EVENT_LOOKBACK_DAYS), s.day)[0]


def conversation_page(
    con: duckdb.DuckDBPyConnection, f: Filters, s: Slice, page: int = 1, page_size: int = 100
) -> ConversationPage:
    """Page ``page`` (1-based) of the slice, newest first, with each row's first user message."""
    where, params = _where(f, s)
    condition = " AND ".join(where) or "true"
    size = max(1, min(int(page_size), max(PAGE_SIZES)))
    current = max(1, int(page))
    rows, total = _page(con, condition, params, size, current)
    pages = max(1, -(-total // size))
    if current > pages:  # past the end (the slice shrank): its last page
        current = pages
        rows, total = _page(con, condition, params, size, current)
    return ConversationPage(_with_first_messages(con, rows), total, current, pages)


def conversation_table(
    con: duckdb.DuckDBPyConnection, f: Filters, s: Slice, offset: int = 0,
    limit: int | None = None,
) -> TablePage:  # fmt: skip
    """Rows ``offset`` on of the slice (``limit`` of them; None: every one, for the page's
    download), newest first, with each row's first user message."""
    where, params = _where(f, s)
    condition = " AND ".join(where) or "true"
    tail = f" LIMIT {int(limit)}" if limit is not None else ""
    rows = read_frame(
        con,
        f"SELECT {COLUMNS}, count(*) OVER () AS matches FROM mart_conversations c "
        f"WHERE {condition} ORDER BY c.started_at DESC, c.conversation_id{tail} "
        f"OFFSET {max(int(offset), 0)}",
        params,
    )
    total = int(rows["matches"][0]) if rows.height else 0
    return TablePage(_with_first_messages(con, rows.drop("matches")), total, offset)


def _page(
    con: duckdb.DuckDBPyConnection, condition: str, params: list[Any], size: int, page: int
) -> tuple[pl.DataFrame, int]:
    """One page of rows and the slice's size from one statement: the count is a window over
    the matches, so the conditions (a search through messages) are evaluated once."""
    rows = read_frame(
        con,
        f"SELECT {COLUMNS}, count(*) OVER () AS matches FROM mart_conversations c "
        f"WHERE {condition} ORDER BY c.started_at DESC, c.conversation_id "
        f"LIMIT {size} OFFSET {(page - 1) * size}",
        params,
    )
    if rows.height:
        return rows.drop("matches"), int(rows["matches"][0])
    total = con.execute(
        f"SELECT count(*) FROM mart_conversations c WHERE {condition}", params
    ).fetchall()[0][0]
    return rows.drop("matches"), int(total)


def _with_first_messages(con: duckdb.DuckDBPyConnection, rows: pl.DataFrame) -> pl.DataFrame:
    """Each row's first user message (the page's conversations only, from their start on)."""
    if not rows.height:
        return rows.with_columns(pl.lit(None, pl.String).alias("first_user_message"))
    firsts = read_frame(
        con,
        "SELECT m.workspace_id, m.conversation_id, arg_min(m.text, m.position) AS "
        "first_user_message FROM messages m WHERE m.role = 'user' "
        "AND m.created_at >= ?::TIMESTAMPTZ "
        "AND m.conversation_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY 1, 2",
        [rows["started_at"].min(), rows["conversation_id"].to_list()],
    )
    return rows.join(firsts, on=["workspace_id", "conversation_id"], how="left", nulls_equal=True)
