"""What the dashboard's pages show, as data: every figure comes from the transform's code.

Pages hold UI only; each calls one of these with a read-only connection to
the published snapshot and the global filters, and gets polars frames back.
Metric figures go through :func:`transform.metrics_table`, the same code as
`convo export summary`, so the dashboard and the exports cannot disagree.

A workspace chosen in the sidebar (``Filters.workspace``) narrows every
figure: the cube's rows to that workspace's (:func:`in_workspace`), the SQL
over the facts to its ``workspace_id``; with none chosen, every workspace
counts (decision D-DASH-WORKSPACES). Topics chosen in the sidebar
(``Filters.topics``) narrow them the same way, each to its own workspace's
rows (:func:`in_topics`, decision D-TOPICS-PAGE).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any

import duckdb
import orjson
import polars as pl

from convo_analytics.transform import (
    INCIDENT_COLUMNS,
    INCIDENT_QUERY,
    TIER,
    Cube,
    Mismatch,
    NotTransformed,
    Reconciliation,
    breakdown,
    flag_rates,
    in_range,
    lead_funnel,
    load_cube,
    local_date,
    metrics_table,
    per_flag_per_day,
    repeated,
    require_marts,
    score_bands,
)
from convo_analytics.transform._frames import read_frame
from convo_analytics.transform._incidents import day_bounds


@dataclass(frozen=True, slots=True)
class TopicChoice:
    """A topic the filters keep: its workspace, its id there (a topic others may be merged
    into), and the values of the marts' ``topic`` dimension it counts: its own and those of
    the topics merged into it. A topic id means nothing outside its workspace, so a choice
    keeps its workspace's rows only."""

    workspace_id: str
    topic_id: int
    values: tuple[str, ...]

    @property
    def key(self) -> str:
        """How a choice is named in the sidebar and in links: ``<workspace_id>:<topic_id>``."""
        return topic_key(self.workspace_id, self.topic_id)


def topic_key(workspace_id: str, topic_id: int) -> str:
    """A topic's name across workspaces: ``<workspace_id>:<topic_id>`` (the id is last, so a
    workspace id with a colon still reads back)."""
    return f"{workspace_id}:{topic_id}"


@dataclass(frozen=True, slots=True)
class Filters:
    """The global filters every page shares: a date range, a time zone, channels, a
    workspace (its ``workspace_id``; None: all of them) and topics (none: all)."""

    first: date
    last: date
    tz: str = "UTC"
    channels: tuple[str, ...] = ()
    workspace: str | None = None
    topics: tuple[TopicChoice, ...] = ()

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1

    def previous(self) -> Filters:
        """The period of the same length just before this one."""
        return replace(
            self, first=self.first - timedelta(days=self.days), last=self.first - timedelta(days=1)
        )

    def dimensions(self) -> dict[str, list[str]]:
        """The dimension values the marts are read for (a topic's values are its workspace's:
        :func:`in_topics` keeps each one's own rows after the read)."""
        out = {"channel": list(self.channels)} if self.channels else {}
        if self.topics:
            out["topic"] = sorted({v for choice in self.topics for v in choice.values})
        return out

    def where(self, alias: str) -> tuple[str, list[Any]]:
        """SQL conditions (`` AND ...``) keeping the chosen channels, workspace and topics of
        the table ``alias`` (a fact with ``channel``, ``workspace_id`` and ``topic``), and
        their parameters."""
        sql, params = "", list[Any]()
        if self.channels:
            sql += f" AND {alias}.channel IN ({', '.join('?' * len(self.channels))})"
            params += list(self.channels)
        if self.workspace is not None:
            sql += f" AND {alias}.workspace_id = ?"
            params.append(self.workspace)
        topics, topic_params = self.topic_sql(alias)
        return sql + topics, params + topic_params

    def topic_sql(self, alias: str) -> tuple[str, list[Any]]:
        """The SQL condition (`` AND (...)``) keeping the chosen topics' rows of ``alias``,
        each in its own workspace, and its parameters (none chosen: no condition)."""
        if not self.topics:
            return "", []
        parts, params = [], list[Any]()
        for choice in self.topics:
            marks = ", ".join("?" * len(choice.values))
            parts.append(f"({alias}.workspace_id = ? AND {alias}.topic IN ({marks}))")
            params += [choice.workspace_id, *choice.values]
        return f" AND ({' OR '.join(parts)})", params


def in_workspace(cube: Cube, workspace: str | None) -> Cube:
    """The cube's rows of one workspace (None: all of them, summed by every reader)."""
    if workspace is None:
        return cube
    frames = {
        name: getattr(cube, name).filter(pl.col("workspace_id") == workspace)
        for name in cube.frames
    }
    return replace(cube, **frames, daily_percentiles=None)


def topic_rows(topics: tuple[TopicChoice, ...]) -> pl.Expr:
    """Rows (with ``workspace_id`` and ``topic``) of the chosen topics, each in its own
    workspace (none chosen: every row)."""
    if not topics:
        return pl.lit(True)
    return pl.any_horizontal(
        (pl.col("workspace_id") == choice.workspace_id) & pl.col("topic").is_in(choice.values)
        for choice in topics
    )


def in_topics(cube: Cube, topics: tuple[TopicChoice, ...]) -> Cube:
    """The cube's rows of the chosen topics, each topic's in its own workspace (none
    chosen: the cube as it is). Rows are keyed by slice; a slice's topic is in
    ``cube.slices``."""
    if not topics:
        return cube
    keep = pl.concat(
        [
            cube.slices.filter(pl.col("topic").is_in(choice.values))
            .select("slice_key")
            .with_columns(pl.lit(choice.workspace_id).alias("workspace_id"))
            for choice in topics
        ]
    ).unique()
    frames = {
        name: getattr(cube, name).join(keep, on=["workspace_id", "slice_key"], how="semi")
        for name in cube.frames
    }
    return replace(cube, **frames, daily_percentiles=None)


def cube_of(con: duckdb.DuckDBPyConnection, f: Filters) -> Cube:
    """The daily cube of the filters' range, channels, workspace and topics."""
    cube = load_cube(con, f.tz, first=f.first, last=f.last, filters=f.dimensions())
    return in_topics(in_workspace(cube, f.workspace), f.topics)


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


def data_range(
    con: duckdb.DuckDBPyConnection, workspace: str | None = None
) -> tuple[date, date] | None:
    """The first and last day (UTC) with conversations (of one workspace, if given)."""
    row = con.execute(
        "SELECT min(started_at)::DATE, max(started_at)::DATE FROM mart_conversations"
        + (" WHERE workspace_id = ?" if workspace is not None else ""),
        [workspace] if workspace is not None else [],
    ).fetchall()[0]
    return (row[0], row[1]) if row[0] is not None else None


def previous_covered(con: duckdb.DuckDBPyConnection, f: Filters) -> bool:
    """Whether the data reaches back over the whole previous period: a comparison with
    days the warehouse holds nothing for would show growth that is only missing data."""
    span = data_range(con, f.workspace)
    return span is not None and span[0] <= f.previous().first


def channels(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute("SELECT DISTINCT channel FROM mart_slices ORDER BY 1").fetchall()
    return [str(r[0]) for r in rows]


def daily(con: duckdb.DuckDBPyConnection, f: Filters) -> pl.DataFrame:
    """Every metric per day of the range (days without data included)."""
    return metrics_table(cube_of(con, f), f.first, f.last)


def breakdown_by(con: duckdb.DuckDBPyConnection, f: Filters, dimension: str) -> pl.DataFrame:
    """Headline figures per value of a dimension (channel, locale, intent, source or model
    tier; per topic: ``_topics.topic_breakdown``, which names each workspace's topics)."""
    cube = cube_of(con, f)
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
    return headline_by(convs, [dimension])


def headline_by(convs: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """The breakdowns' headline figures per value of ``keys`` (rows of the cube's
    conversations, their dimensions joined on), largest first."""
    return (
        convs.group_by(keys)
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


def transcript(
    con: duckdb.DuckDBPyConnection, conversation_id: str, workspace: str | None = None
) -> dict[str, pl.DataFrame]:
    """One conversation: its facts, messages with trace metadata, escalations and incidents
    (of one workspace, if given: ids are a workspace's own, decision D-WORKSPACE-ID)."""
    key = "conversation_id = ? AND (?::VARCHAR IS NULL OR workspace_id = ?)"
    param = [conversation_id, workspace, workspace]
    return {
        "conversation": read_frame(con, f"SELECT * FROM mart_conversations WHERE {key}", param),
        "messages": read_frame(
            con,
            "SELECT workspace_id, position, created_at, role, text, latency_ms, model_tier, "
            f"confidence, policy_flags, knowledge_source FROM messages WHERE {key} "
            "ORDER BY workspace_id, position",
            param,
        ),
        "escalations": read_frame(
            con,
            "SELECT workspace_id, escalated_at, reason_code, destination, owner, priority, "
            f"origin, seen_in FROM mart_escalations WHERE {key} ORDER BY escalated_at",
            param,
        ),
        "incidents": read_frame(
            con,
            "SELECT workspace_id, triggered_at, flag, rule, severity, action, escalated, "
            f"excerpt_redacted AS excerpt FROM mart_guardrail_incidents WHERE {key} "
            "ORDER BY triggered_at",
            param,
        ),
    }


def started_conversations(con: duckdb.DuckDBPyConnection, f: Filters) -> pl.DataFrame:
    """The facts (``mart_conversations``) of the conversations started in the range, of the
    chosen channels, workspace and topics."""
    facts = read_frame(
        con,
        "SELECT * FROM mart_conversations WHERE started_at >= ?::TIMESTAMPTZ "
        "AND started_at < ?::TIMESTAMPTZ",
        list(day_bounds(f.first, f.last)),
    )
    facts = facts.filter(_chosen(f))
    return in_range(facts, f.first, f.last, f.tz)


def funnel(
    con: duckdb.DuckDBPyConnection, f: Filters, by: tuple[str, ...] = ()
) -> dict[str, pl.DataFrame]:
    """The lead funnel of conversations started in the range, and the score bands."""
    started = started_conversations(con, f)
    return {"funnel": lead_funnel(started, by), "bands": score_bands(started)}


@dataclass(frozen=True, slots=True)
class TablePage:
    """Rows ``offset`` on of a table (all of them when asked without a limit), and how many
    rows the whole table has: a page that shows fewer says so, and its download runs the
    same query without the limit."""

    rows: pl.DataFrame
    total: int
    offset: int = 0


def _limit(limit: int | None, offset: int) -> str:
    """The SQL that keeps rows ``offset`` on (``limit`` of them; None: all)."""
    if limit is None:
        return f" OFFSET {max(int(offset), 0)}" if offset else ""
    return f" LIMIT {max(int(limit), 0)} OFFSET {max(int(offset), 0)}"


def _paged(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[Any], offset: int, limit: int | None
) -> TablePage:
    """``sql`` (ordered) one page at a time, with the whole result's size from one statement
    (a window count over the matches)."""
    rows = read_frame(
        con, f"SELECT *, count(*) OVER () AS _rows FROM ({sql}){_limit(limit, offset)}", params
    )
    if rows.height:
        return TablePage(rows.drop("_rows"), int(rows["_rows"][0]), offset)
    total = con.execute(f"SELECT count(*) FROM ({sql})", params).fetchall()[0][0]
    return TablePage(rows.drop("_rows"), int(total), offset)


def qualified_leads(
    con: duckdb.DuckDBPyConnection, f: Filters, offset: int = 0, limit: int | None = None
) -> TablePage:
    """Leads qualified in the range (days in the filters' zone), best score first, rows
    ``offset`` on (``limit`` of them; None: every one), and how many there are (contact
    details named, not shown)."""
    lo, hi = day_bounds(f.first, f.last)
    keep, params = "", list[Any]()
    if f.channels:
        keep += f" AND c.channel IN ({', '.join('?' * len(f.channels))})"
        params += list(f.channels)
    if f.workspace is not None:
        keep += " AND l.workspace_id = ?"
        params.append(f.workspace)
    topics, topic_params = f.topic_sql("c")
    keep += topics
    params += topic_params
    sql = (
        "SELECT l.workspace_id, l.id AS lead_id, l.conversation_id, l.score, l.intent, "
        "l.qualified_at, l.contact_fields, c.channel, c.source FROM leads l "
        "LEFT JOIN mart_conversations c ON c.conversation_id = l.conversation_id "
        "AND c.workspace_id = l.workspace_id "
        "WHERE l.qualified_at >= ?::TIMESTAMPTZ AND l.qualified_at < ?::TIMESTAMPTZ "
        f"AND (l.qualified_at AT TIME ZONE '{zone_sql(f.tz)}')::DATE BETWEEN ? AND ?{keep} "
        "ORDER BY l.score DESC, l.qualified_at, l.workspace_id, l.id"
    )
    return _paged(con, sql, [lo, hi, f.first, f.last, *params], offset, limit)


def _chosen(f: Filters) -> pl.Expr:
    """Rows (with ``channel``, ``workspace_id`` and ``topic``) of the chosen channels,
    workspace and topics."""
    keep = pl.lit(True)
    if f.channels:
        keep = keep & pl.col("channel").is_in(list(f.channels))
    if f.workspace is not None:
        keep = keep & (pl.col("workspace_id") == f.workspace)
    return keep & topic_rows(f.topics)


def confidence_distribution(con: duckdb.DuckDBPyConnection, f: Filters) -> pl.DataFrame:
    """Assistant responses per day and confidence band (tenths)."""
    lo, hi = day_bounds(f.first, f.last)
    chosen, chosen_params = f.where("c")
    frame = read_frame(
        con,
        f"""SELECT (m.created_at AT TIME ZONE '{zone_sql(f.tz)}')::DATE AS date,
                   least(floor(coalesce(m.confidence, 0) * 10), 9) / 10 AS band,
                   count(*) AS responses
            FROM messages m JOIN mart_conversations c ON c.conversation_id = m.conversation_id
              AND c.workspace_id = m.workspace_id
            WHERE m.role = 'assistant' AND m.created_at >= ?::TIMESTAMPTZ
              AND m.created_at < ?::TIMESTAMPTZ{chosen}
            GROUP BY ALL ORDER BY 1, 2""",
        [lo, hi, *chosen_params],
    )
    return frame.filter(pl.col("date").is_between(f.first, f.last))


def incident_log(con: duckdb.DuckDBPyConnection, f: Filters) -> pl.DataFrame:
    """The incidents of the range (redacted) with their workspace, of the chosen channels
    and workspace: the transform's incident log (``transform.incidents``), the workspace
    column kept."""
    require_marts(con)
    lo, hi = day_bounds(f.first, f.last)
    frame = read_frame(con, INCIDENT_QUERY, [lo, hi])
    frame = frame.filter(local_date("triggered_at", f.tz).is_between(f.first, f.last) & _chosen(f))
    return frame.with_columns(pl.col("excerpt_redacted").alias("excerpt")).select(
        "workspace_id", *INCIDENT_COLUMNS
    )


def incident_page(
    con: duckdb.DuckDBPyConnection, f: Filters, offset: int = 0, limit: int | None = None
) -> TablePage:
    """Rows ``offset`` on of :func:`incident_log` (``limit`` of them; None: all)."""
    log = incident_log(con, f)
    return TablePage(log.slice(offset, limit), log.height, offset)


def guardrail_report(con: duckdb.DuckDBPyConnection, f: Filters) -> dict[str, pl.DataFrame]:
    """Incidents (redacted), per flag per day, flag rates and repeat offenders."""
    log = incident_log(con, f)
    cube = cube_of(con, f)
    return {
        "incidents": log,
        "per_flag_per_day": per_flag_per_day(log, f.tz),
        "flag_rates": flag_rates(cube, f.first, f.last),
        "repeat_conversations": repeated(log, "conversation_id"),
        "repeat_users": repeated(log, "external_user_id"),
    }


def has_column(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    """Whether the snapshot's ``table`` has ``column`` (a snapshot published by an older
    release may lack it)."""
    found = con.execute(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = ? "
        "AND column_name = ? AND table_schema = current_schema()",
        [table, column],
    ).fetchall()
    return bool(found[0][0])


def _open_rows(con: duckdb.DuckDBPyConnection) -> str:
    """The filter for open quarantine rows; a snapshot published before schema 4 has no
    resolved rows (nor the column)."""
    return "WHERE resolved_at IS NULL" if has_column(con, "quarantine", "resolved_at") else ""


def _of_workspace(column: str) -> str:
    """Rows of the workspace given twice as parameters (NULL: any), or of none."""
    return f"({column} IS NULL OR ?::VARCHAR IS NULL OR {column} = ?)"


def pipeline_status(
    con: duckdb.DuckDBPyConnection, workspace: str | None = None, whole_warehouse: bool = True
) -> dict[str, pl.DataFrame]:
    """Freshness (last successful runs, a run with a warning included; bookmarks) and the
    open quarantine (rows a replay or a later read has loaded since are resolved, not
    counted); the run history is :func:`run_history`.

    Extractions and bookmarks are a workspace's (``workspace``: that one's only); the
    nightly run, webhook ingests, transforms and the quarantine serve the whole warehouse,
    so they are shown whatever the workspace, their ``workspace_id`` NULL; without
    ``whole_warehouse`` (a dashboard started for some workspaces) they are left out.
    """
    if not whole_warehouse:
        return {
            name: frame.filter(pl.col("workspace_id").is_not_null())
            for name, frame in pipeline_status(con, workspace).items()
        }
    ws = "workspace_id" if has_column(con, "extract_runs", "workspace_id") else "NULL"
    mine = _of_workspace(ws)
    chosen = [workspace, workspace]
    freshness = read_frame(
        con,
        f"""SELECT step, workspace_id, max(finished_at) AS last_success FROM (
               SELECT 'nightly run' AS step, NULL::VARCHAR AS workspace_id, finished_at
               FROM pipeline_runs WHERE status IN ('ok', 'warning')
               UNION ALL SELECT 'extract', {ws}, finished_at FROM extract_runs
               WHERE status = 'ok' AND {mine}
               UNION ALL SELECT 'webhook ingest', NULL, finished_at FROM ingest_runs
               WHERE status = 'ok'
               UNION ALL SELECT 'transform', NULL, finished_at FROM transform_runs
               WHERE status = 'ok')
           GROUP BY ALL ORDER BY step, workspace_id""",
        chosen,
    )
    marks = "workspace_id" if has_column(con, "bookmarks", "workspace_id") else "NULL"
    return {
        "freshness": freshness,
        "bookmarks": read_frame(
            con,
            f"SELECT {marks} AS workspace_id, stream, high_water_mark, run_id, committed_at "
            f"FROM bookmarks WHERE {_of_workspace(marks)} ORDER BY 1, 2",
            chosen,
        ),
        "quarantine": read_frame(
            con,
            "SELECT NULL::VARCHAR AS workspace_id, reason, count(*) AS lines, "
            "count(DISTINCT source_file) AS files, "
            f"max(quarantined_at) AS last_seen FROM quarantine {_open_rows(con)} "
            "GROUP BY ALL ORDER BY lines DESC",
        ),
    }


def run_history(
    con: duckdb.DuckDBPyConnection,
    workspace: str | None = None,
    whole_warehouse: bool = True,
    offset: int = 0,
    limit: int | None = None,
) -> TablePage:
    """Every run (nightly runs, extractions of the workspace, webhook ingests, transforms),
    newest first, rows ``offset`` on (``limit`` of them; None: all), with what each said
    beyond its status: a nightly run's warnings, a transform's differences from the
    service's own summary. Without ``whole_warehouse`` (a dashboard started for some
    workspaces), the workspace's extractions only."""
    ws = "workspace_id" if has_column(con, "extract_runs", "workspace_id") else "NULL"
    differences = (
        "CASE WHEN json_array_length(reconciliation) > 0 THEN "
        "json_array_length(reconciliation) || CASE WHEN json_array_length(reconciliation) = 1 "
        "THEN ' difference' ELSE ' differences' END || ' from the service''s own summary' END"
    )
    sql = f"""SELECT * FROM (
           SELECT 'nightly run' AS step, NULL::VARCHAR AS workspace_id, run_id,
                  failed_step AS part, started_at, finished_at, status, NULL::BIGINT AS count,
                  error, nullif(array_to_string(
                      json_extract_string(steps, '$[*].warnings[*]'), '; '), '') AS warning
           FROM pipeline_runs
           UNION ALL
           SELECT 'extract' AS step, {ws}, run_id, stream AS part, started_at, finished_at,
                  status, records AS count, error, NULL FROM extract_runs
           WHERE {_of_workspace(ws)}
           UNION ALL
           SELECT 'webhook ingest', NULL, ingest_run_id, NULL, started_at, finished_at, status,
                  loaded, error, NULL FROM ingest_runs
           UNION ALL
           SELECT 'transform', NULL, transform_run_id, NULL, started_at, finished_at, status,
                  conversations, error, {differences} FROM transform_runs)
           {"" if whole_warehouse else "WHERE workspace_id IS NOT NULL"}
           ORDER BY started_at DESC NULLS LAST, step, run_id"""
    return _paged(con, sql, [workspace, workspace], offset, limit)


def has_table(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    found = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ? "
        "AND table_schema = current_schema()",
        [table],
    ).fetchall()
    return bool(found[0][0])


@dataclass(frozen=True, slots=True)
class ReconciliationView:
    """What the newest transform found against the service's own summary (the Pipeline
    page's section): the run, the outcome, and each difference."""

    transform_run_id: str
    finished_at: Any
    found: Reconciliation
    #: Each difference: workspace, zone, day, metric, both figures and their difference.
    differences: pl.DataFrame
    #: False when the snapshot does not carry the comparison (a copy of the lake).
    recorded: bool = True


def reconciliation(
    con: duckdb.DuckDBPyConnection, workspace: str | None = None
) -> ReconciliationView | None:
    """The newest successful transform's reconciliation (of one workspace, if given), or
    None when no transform ran."""
    if not has_table(con, "transform_runs"):
        return None
    rows = con.execute(
        "SELECT transform_run_id, finished_at, timezones, CAST(reconciliation AS VARCHAR) "
        "FROM transform_runs WHERE status = 'ok' ORDER BY finished_at DESC LIMIT 1"
    ).fetchall()
    if not rows:
        return None
    run_id, finished, zones, listed = rows[0]
    days: dict[str, int] = {str(tz): 0 for tz in zones or ()}
    if has_table(con, "service_summaries"):
        mine = " AND workspace_id = ?" if workspace is not None else ""
        for tz, n in con.execute(
            f"SELECT timezone, count(*) FROM service_summaries WHERE 1 = 1{mine} GROUP BY 1",
            [workspace] if workspace is not None else [],
        ).fetchall():
            if str(tz) in days:
                days[str(tz)] = int(n)
    found = [
        Mismatch(
            m["timezone"],
            date.fromisoformat(m["date"]),
            m["metric"],
            m.get("warehouse"),
            m.get("service"),
            m.get("workspace_id"),
        )
        for m in (orjson.loads(listed) if listed else [])
        if workspace is None or m.get("workspace_id") in (None, workspace)
    ]
    schema = {"workspace_id": pl.String, "timezone": pl.String, "date": pl.Date,
              "metric": pl.String, "warehouse": pl.Float64, "service": pl.Float64}  # fmt: skip
    frame = (
        pl.DataFrame([{**m.as_json(), "date": m.date} for m in found], schema=schema, orient="row")
        if found
        else pl.DataFrame(schema=schema)
    )
    frame = frame.with_columns((pl.col("warehouse") - pl.col("service")).alias("difference")).sort(
        "workspace_id", "timezone", "date", "metric"
    )
    return ReconciliationView(
        str(run_id), finished, Reconciliation(days, tuple(found)), frame, listed is not None
    )
