"""What the dashboard's pages show, as data: every figure comes from the transform's code.

Pages hold UI only; each calls one of these with a read-only connection to
the published snapshot and the global filters, and gets polars frames back.
Metric figures go through :func:`transform.metrics_table`, the same code as
`convo export summary`, so the dashboard and the exports cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any

import duckdb
import polars as pl

from convo_analytics.transform import (
    TIER,
    NotTransformed,
    breakdown,
    flag_rates,
    in_range,
    incidents,
    lead_funnel,
    load_cube,
    metrics_table,
    per_flag_per_day,
    repeated,
    require_marts,
    score_bands,
)
from convo_analytics.transform._frames import read_frame
from convo_analytics.transform._incidents import day_bounds


@dataclass(frozen=True, slots=True)
class Filters:
    """The global filters every page shares: a date range, a time zone, channels."""

    first: date
    last: date
    tz: str = "UTC"
    channels: tuple[str, ...] = ()

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1

    def previous(self) -> Filters:
        """The period of the same length just before this one."""
        return replace(
            self, first=self.first - timedelta(days=self.days), last=self.first - timedelta(days=1)
        )

    def dimensions(self) -> dict[str, list[str]]:
        return {"channel": list(self.channels)} if self.channels else {}


#: KPI tiles: (label, metric, format). Rates are shown as percentages, latency as a duration.
KPIS: tuple[tuple[str, str, str], ...] = (
    ("Conversations", "conversations", "count"),
    ("Resolution rate", "resolutionRate", "percent"),
    ("Containment rate", "containmentRate", "percent"),
    ("Escalation rate", "escalationRate", "percent"),
    ("CSAT", "csat", "percent"),
    ("Leads qualified", "leadsQualified", "count"),
    ("p95 latency", "latencyP95Ms", "ms"),
    ("Guardrail triggers / 1k responses", "guardrailTriggersPer1000Responses", "number"),
)


def is_empty(con: duckdb.DuckDBPyConnection) -> bool:
    """True when the snapshot has no conversations in its marts (nothing to show yet),
    or no marts at all (published from a warehouse that was never transformed)."""
    try:
        require_marts(con)
    except NotTransformed:
        return True
    return not con.execute("SELECT count(*) FROM mart_conversations").fetchall()[0][0]


def data_range(con: duckdb.DuckDBPyConnection) -> tuple[date, date] | None:
    """The first and last day (UTC) with conversations."""
    row = con.execute(
        "SELECT min(started_at)::DATE, max(started_at)::DATE FROM mart_conversations"
    ).fetchall()[0]
    return (row[0], row[1]) if row[0] is not None else None


def previous_covered(con: duckdb.DuckDBPyConnection, f: Filters) -> bool:
    """Whether the data reaches back over the whole previous period: a comparison with
    days the warehouse holds nothing for would show growth that is only missing data."""
    span = data_range(con)
    return span is not None and span[0] <= f.previous().first


def channels(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute("SELECT DISTINCT channel FROM mart_slices ORDER BY 1").fetchall()
    return [str(r[0]) for r in rows]


def kpis(con: duckdb.DuckDBPyConnection, f: Filters) -> list[dict[str, Any]]:
    """Each KPI for the range and for the previous period of the same length."""
    now = _totals(con, f)
    before = _totals(con, f.previous())
    return [
        {"label": label, "metric": metric, "format": fmt, "value": now[metric],
         "previous": before[metric]}
        for label, metric, fmt in KPIS
    ]  # fmt: skip


def _totals(con: duckdb.DuckDBPyConnection, f: Filters) -> dict[str, Any]:
    cube = load_cube(con, f.tz, first=f.first, last=f.last, filters=f.dimensions())
    (row,) = metrics_table(cube, f.first, f.last, by_day=False).to_dicts()
    return row


def daily(con: duckdb.DuckDBPyConnection, f: Filters) -> pl.DataFrame:
    """Every metric per day of the range (days without data included)."""
    cube = load_cube(con, f.tz, first=f.first, last=f.last, filters=f.dimensions())
    return metrics_table(cube, f.first, f.last)


def breakdown_by(con: duckdb.DuckDBPyConnection, f: Filters, dimension: str) -> pl.DataFrame:
    """Headline figures per value of a dimension (channel, locale, intent, source or model tier)."""
    cube = load_cube(con, f.tz, first=f.first, last=f.last, filters=f.dimensions())
    if dimension == TIER:
        responses = breakdown(
            cube, f.first, f.last, "messages", TIER, "assistant_responses", by_day=False
        )
        return (
            responses.drop("date")
            .rename({"assistant_responses": "responses"})
            .with_columns((pl.col("responses") / pl.col("responses").sum()).alias("share"))
        )
    convs = cube.with_dimensions("conversations").filter(pl.col("date").is_between(f.first, f.last))
    return (
        convs.group_by(dimension)
        .agg(
            pl.col("conversations").sum(),
            pl.col("resolved").sum(),
            pl.col("escalated_conversations").sum(),
            pl.col("leads_qualified").sum(),
        )
        .with_columns(
            (pl.col("resolved") / pl.col("conversations")).alias("resolution_rate"),
            (pl.col("escalated_conversations") / pl.col("conversations")).alias("escalation_rate"),
        )
        .sort("conversations", descending=True)
    )


#: A conversation's statuses, in the order the page offers them.
STATUSES = ("open", "resolved", "abandoned")


def zone_sql(tz: str) -> str:
    """A zone name safe to inline in SQL (AT TIME ZONE takes no parameter)."""
    if not all(ch.isalnum() or ch in "/_+-" for ch in tz):
        raise ValueError(f"{tz!r} is not an IANA time zone name")
    return tz


def transcript(con: duckdb.DuckDBPyConnection, conversation_id: str) -> dict[str, pl.DataFrame]:
    """One conversation: its facts, messages with trace metadata, escalations and incidents."""
    param = [conversation_id]
    return {
        "conversation": read_frame(
            con, "SELECT * FROM mart_conversations WHERE conversation_id = ?", param
        ),
        "messages": read_frame(
            con,
            "SELECT position, created_at, role, text, latency_ms, model_tier, confidence, "
            "policy_flags, knowledge_source FROM messages WHERE conversation_id = ? "
            "ORDER BY position",
            param,
        ),
        "escalations": read_frame(
            con,
            "SELECT escalated_at, reason_code, destination, owner, priority, origin, seen_in "
            "FROM mart_escalations WHERE conversation_id = ? ORDER BY escalated_at",
            param,
        ),
        "incidents": read_frame(
            con,
            "SELECT triggered_at, flag, rule, severity, action, escalated, excerpt_redacted "
            "AS excerpt FROM mart_guardrail_incidents WHERE conversation_id = ? "
            "ORDER BY triggered_at",
            param,
        ),
    }


def funnel(
    con: duckdb.DuckDBPyConnection, f: Filters, by: tuple[str, ...] = ()
) -> dict[str, pl.DataFrame]:
    """The lead funnel of conversations started in the range, and the score bands."""
    facts = read_frame(
        con,
        "SELECT * FROM mart_conversations WHERE started_at >= ?::TIMESTAMPTZ "
        "AND started_at < ?::TIMESTAMPTZ",
        list(day_bounds(f.first, f.last)),
    )
    if f.channels:
        facts = facts.filter(pl.col("channel").is_in(list(f.channels)))
    started = in_range(facts, f.first, f.last, f.tz)
    return {"funnel": lead_funnel(started, by), "bands": score_bands(started)}


def qualified_leads(con: duckdb.DuckDBPyConnection, f: Filters, limit: int = 500) -> pl.DataFrame:
    """Leads qualified in the range, best score first (contact details named, not shown)."""
    lo, hi = day_bounds(f.first, f.last)
    frame = read_frame(
        con,
        "SELECT l.id AS lead_id, l.conversation_id, l.score, l.intent, l.qualified_at, "
        "l.contact_fields, c.channel, c.source FROM leads l "
        "LEFT JOIN mart_conversations c ON c.conversation_id = l.conversation_id "
        "WHERE l.qualified_at >= ?::TIMESTAMPTZ AND l.qualified_at < ?::TIMESTAMPTZ "
        "ORDER BY l.score DESC, l.qualified_at",
        [lo, hi],
    )
    frame = frame.filter(
        pl.col("qualified_at").dt.convert_time_zone(f.tz).dt.date().is_between(f.first, f.last)
    )
    if f.channels:
        frame = frame.filter(pl.col("channel").is_in(list(f.channels)))
    return frame.head(limit)


def confidence_distribution(con: duckdb.DuckDBPyConnection, f: Filters) -> pl.DataFrame:
    """Assistant responses per day and confidence band (tenths)."""
    lo, hi = day_bounds(f.first, f.last)
    frame = read_frame(
        con,
        f"""SELECT (m.created_at AT TIME ZONE '{zone_sql(f.tz)}')::DATE AS date,
                   least(floor(coalesce(m.confidence, 0) * 10), 9) / 10 AS band,
                   count(*) AS responses
            FROM messages m JOIN mart_conversations c ON c.conversation_id = m.conversation_id
            WHERE m.role = 'assistant' AND m.created_at >= ?::TIMESTAMPTZ
              AND m.created_at < ?::TIMESTAMPTZ
              {"AND c.channel IN (" + ", ".join("?" * len(f.channels)) + ")" if f.channels else ""}
            GROUP BY ALL ORDER BY 1, 2""",
        [lo, hi, *f.channels],
    )
    return frame.filter(pl.col("date").is_between(f.first, f.last))


def guardrail_report(con: duckdb.DuckDBPyConnection, f: Filters) -> dict[str, pl.DataFrame]:
    """Incidents (redacted), per flag per day, flag rates and repeat offenders."""
    log = incidents(con, f.first, f.last, f.tz, filters=f.dimensions())
    cube = load_cube(con, f.tz, first=f.first, last=f.last, filters=f.dimensions())
    return {
        "incidents": log,
        "per_flag_per_day": per_flag_per_day(log, f.tz),
        "flag_rates": flag_rates(cube, f.first, f.last),
        "repeat_conversations": repeated(log, "conversation_id"),
        "repeat_users": repeated(log, "external_user_id"),
    }


def _open_rows(con: duckdb.DuckDBPyConnection) -> str:
    """The filter for open quarantine rows; a snapshot published before schema 4 has no
    resolved rows (nor the column)."""
    found = con.execute(
        "SELECT count(*) FROM information_schema.columns "
        "WHERE table_name = 'quarantine' AND column_name = 'resolved_at'"
    ).fetchall()
    return "WHERE resolved_at IS NULL" if found[0][0] else ""


def pipeline_status(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
    """Freshness (last successful runs, bookmarks), run history and the open quarantine (rows
    a replay or a later read has loaded since are resolved, not counted)."""
    runs = read_frame(
        con,
        """SELECT 'nightly run' AS step, run_id, failed_step AS part, started_at, finished_at,
                  status, NULL AS count, error FROM pipeline_runs
           UNION ALL
           SELECT 'extract' AS step, run_id, stream AS part, started_at, finished_at, status,
                  records AS count, error FROM extract_runs
           UNION ALL
           SELECT 'webhook ingest', ingest_run_id, NULL, started_at, finished_at, status,
                  loaded, error FROM ingest_runs
           UNION ALL
           SELECT 'transform', transform_run_id, NULL, started_at, finished_at, status,
                  conversations, error FROM transform_runs
           ORDER BY started_at DESC NULLS LAST LIMIT 200""",
    )
    freshness = read_frame(
        con,
        """SELECT step, max(finished_at) AS last_success FROM (
               SELECT 'nightly run' AS step, finished_at FROM pipeline_runs WHERE status = 'ok'
               UNION ALL SELECT 'extract', finished_at FROM extract_runs WHERE status = 'ok'
               UNION ALL SELECT 'webhook ingest', finished_at FROM ingest_runs WHERE status = 'ok'
               UNION ALL SELECT 'transform', finished_at FROM transform_runs WHERE status = 'ok')
           GROUP BY step ORDER BY step""",
    )
    return {
        "freshness": freshness,
        "bookmarks": read_frame(
            con, "SELECT stream, high_water_mark, run_id, committed_at FROM bookmarks ORDER BY 1"
        ),
        "runs": runs,
        "quarantine": read_frame(
            con,
            "SELECT reason, count(*) AS lines, count(DISTINCT source_file) AS files, "
            f"max(quarantined_at) AS last_seen FROM quarantine {_open_rows(con)} "
            "GROUP BY reason ORDER BY lines DESC",
        ),
    }
