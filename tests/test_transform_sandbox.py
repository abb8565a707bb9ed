"""The transform on a sandbox history: every metric against SQL and the service's own summary."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import ACME_KEY, RunningSandbox
from convo_analytics.export import export_summary
from convo_analytics.transform import breakdown, load_cube, metrics_table
from transform_support import assert_same, populated_sandbox

BUILT_ZONES = ("UTC", "America/New_York")
#: (first, last, tz): the whole history, one day, a day in a zone the marts were not cut in,
#: and a range with no data at all.
RANGES = [
    (date(2026, 11, 8), date(2026, 11, 18), "UTC"),
    (date(2026, 11, 12), date(2026, 11, 12), "America/New_York"),
    (date(2026, 11, 10), date(2026, 11, 14), "Asia/Kolkata"),
    (date(2025, 1, 1), date(2025, 1, 31), "UTC"),
]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningSandbox, Path]]:
    with populated_sandbox(tmp_path_factory.mktemp("transform"), 400, BUILT_ZONES) as made:
        yield made


def _read(db: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(db), read_only=True)
    con.execute("SET TimeZone = 'UTC'")
    return con


@pytest.mark.parametrize(("first", "last", "tz"), RANGES)
def test_exported_summary_equals_the_services(
    warehouse: tuple[RunningSandbox, Path], first: date, last: date, tz: str
) -> None:
    running, db = warehouse
    with running.client() as client:
        r = client.get(
            "/v1/analytics/summary",
            params={"from": first.isoformat(), "to": last.isoformat(), "tz": tz},
        )
    r.raise_for_status()
    theirs = r.json()
    with _read(db) as con:
        ours = export_summary(con, first, last, tz)
    del theirs["generatedAt"], ours["generatedAt"]
    assert_same(ours, theirs)


def _independent(
    con: duckdb.DuckDBPyConnection, first: date, last: date, tz: str
) -> dict[str, Any]:
    """Every summary metric for the range, written directly in DuckDB SQL over the source tables."""
    day = f"(({{}}) AT TIME ZONE '{tz}')::DATE BETWEEN DATE '{first}' AND DATE '{last}'"
    cohort = con.execute(
        f"""
        WITH c AS (SELECT * FROM conversations WHERE {day.format("created_at")}),
        first_user AS (
            SELECT conversation_id, min(position) AS pos FROM messages WHERE role = 'user'
            GROUP BY conversation_id),
        first_reply AS (
            SELECT m.conversation_id,
                   epoch_ms(arg_min(r.created_at, r.position))
                       - epoch_ms(arg_min(m.created_at, m.position)) AS ms
            FROM messages m JOIN first_user f ON f.conversation_id = m.conversation_id
                 AND m.position = f.pos
            JOIN messages r ON r.conversation_id = m.conversation_id AND r.role = 'assistant'
                 AND r.position > f.pos
            GROUP BY m.conversation_id)
        SELECT count(*),
               count(*) FILTER (WHERE c.id IN (SELECT conversation_id FROM first_user)),
               count(*) FILTER (WHERE status = 'resolved'),
               count(*) FILTER (WHERE status = 'abandoned'),
               count(*) FILTER (WHERE status = 'open'),
               count(*) FILTER (WHERE escalation_count > 0),
               count(*) FILTER (WHERE escalation_count = 0 AND status <> 'open'),
               count(*) FILTER (WHERE c.id IN (SELECT conversation_id FROM leads
                                                WHERE qualified_at IS NOT NULL)),
               count(feedback_rating),
               count(*) FILTER (WHERE feedback_rating >= 4),
               coalesce(sum(feedback_rating), 0),
               (SELECT quantile_cont(ms, 0.5) FROM first_reply WHERE conversation_id IN
                    (SELECT id FROM c)),
               quantile_cont(epoch_ms(ended_at) - epoch_ms(created_at), 0.5)
                   FILTER (WHERE status = 'resolved') / 1000.0
        FROM c"""
    ).fetchall()[0]
    events = con.execute(
        f"""
        SELECT count(*) FILTER (WHERE role = 'user'),
               count(*) FILTER (WHERE role = 'assistant'),
               quantile_cont(coalesce(latency_ms, 0), [0.5, 0.9, 0.95, 0.99])
                   FILTER (WHERE role = 'assistant'),
               avg(coalesce(confidence, 0)) FILTER (WHERE role = 'assistant'),
               count(*) FILTER (WHERE role = 'assistant' AND coalesce(confidence, 0) < 0.5),
               (SELECT count(*) FROM conversation_escalations WHERE {day.format("created_at")}),
               (SELECT count(*) FROM conversation_guardrail_events
                WHERE {day.format("triggered_at")})
        FROM messages WHERE {day.format("created_at")}"""
    ).fetchall()[0]
    names = (
        "conversations", "engagedConversations", "resolved", "abandoned", "open",
        "escalatedConversations", "containedConversations", "leadsQualified", "feedbackCount",
        "positiveFeedback", "ratingSum", "medianFirstResponseMs", "medianTimeToResolutionSeconds",
    )  # fmt: skip
    out = dict(zip(names, cohort, strict=True))
    latency = events[2] or [None] * 4
    out.update(
        userMessages=events[0],
        assistantResponses=events[1],
        latencyP50Ms=latency[0],
        latencyP90Ms=latency[1],
        latencyP95Ms=latency[2],
        latencyP99Ms=latency[3],
        avgConfidence=events[3],
        lowConfidenceResponses=events[4],
        escalations=events[5],
        guardrailTriggers=events[6],
    )
    return out


@pytest.mark.parametrize(("first", "last", "tz"), RANGES)
def test_every_metric_equals_an_independent_sql_computation(
    warehouse: tuple[RunningSandbox, Path], first: date, last: date, tz: str
) -> None:
    _, db = warehouse
    with _read(db) as con:
        want = _independent(con, first, last, tz)
        (got,) = metrics_table(load_cube(con, tz), first, last, by_day=False).to_dicts()
    for name, value in want.items():
        if value is None or got[name] is None:
            assert value is None and got[name] is None, name
        else:
            assert math.isclose(got[name], value, rel_tol=1e-9), (name, got[name], value)


def test_totals_equal_the_sum_of_the_daily_series(warehouse: tuple[RunningSandbox, Path]) -> None:
    _, db = warehouse
    first, last = date(2026, 11, 8), date(2026, 11, 18)
    with _read(db) as con:
        body = export_summary(con, first, last, "America/New_York")
        cube = load_cube(con, "America/New_York")
    assert body["totals"]["conversations"] > 0
    for name, value in body["totals"].items():
        if isinstance(value, int):
            assert value == sum(day[name] for day in body["daily"]), name
    flags = breakdown(cube, first, last, "guardrails", "flag", "triggers", by_day=False)
    assert (
        dict(zip(flags["flag"], flags["triggers"], strict=True))
        == body["totals"]["guardrailTriggersByFlag"]
    )


def test_facts_from_details_and_events_are_counted_once(
    warehouse: tuple[RunningSandbox, Path],
) -> None:
    running, db = warehouse
    ws = running.sandbox.workspace_for(ACME_KEY)
    assert ws is not None
    convs = ws.conversations.records.values()
    with _read(db) as con:
        assert con.execute("SELECT count(*) FROM escalations").fetchall()[0][0] > 0
        escalations = con.execute("SELECT escalation_id FROM mart_escalations").fetchall()
        incidents = con.execute("SELECT incident_id FROM mart_guardrail_incidents").fetchall()
        sources = {
            r[0] for r in con.execute("SELECT DISTINCT source FROM conversations").fetchall()
        }
    assert sorted(r[0] for r in escalations) == sorted(e.id for c in convs for e in c.escalations)
    assert sorted(r[0] for r in incidents) == sorted(
        g.id for c in convs for g in c.guardrail_events
    )
    assert sources == {c.metadata.get("source") for c in convs}


def test_a_second_transform_replaces_the_marts(warehouse: tuple[RunningSandbox, Path]) -> None:
    _, db = warehouse
    from convo_analytics.transform import TransformConfig, run_transform
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(db)
    try:
        before = con.execute("SELECT count(*) FROM mart_daily_conversations").fetchall()[0][0]
        result = run_transform(con, TransformConfig(timezones=BUILT_ZONES))
        after = con.execute("SELECT count(*) FROM mart_daily_conversations").fetchall()[0][0]
        runs = con.execute("SELECT count(*) FROM transform_runs WHERE status = 'ok'").fetchall()
    finally:
        con.close()
    assert result.status == "ok" and result.mismatches == []
    assert before == after == result.mart_rows["mart_daily_conversations"]
    assert runs[0][0] >= 2
