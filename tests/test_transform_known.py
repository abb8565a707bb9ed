"""A small hand-built warehouse whose answers are worked out by hand (see each test).

Four conversations:
  a  started 2026-03-01 23:30Z, resolved 23:50; replies after 2 s (2000 ms, 0.9, fast);
     rated 5; lead scored 23:35, qualified 23:40 with an email; an email tripped a
     guardrail at 23:31.  Berlin sees it start on 03-02, New York on 03-01.
  b  started 2026-03-02 00:30Z, abandoned 01:00; reply 1000 ms, 0.3, standard;
     lead scored 00:35 (40 points), never qualified.
  c  started 2026-02-28 22:00Z, still open; its first reply comes 2026-03-01 01:00Z
     (500 ms, 0.6, fast: a first response 3 h later), and the user writes again 01:05Z.
  d  started 2026-03-01 10:00Z, resolved 10:30Z, no user message; escalated twice
     (10:05 to a helpdesk, 10:10 to the CRM).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb
import orjson
import polars as pl
import pytest

from convo_analytics.cli import main
from convo_analytics.export import export_summary
from convo_analytics.transform import (
    TransformConfig,
    flag_rates,
    in_range,
    incidents,
    lead_funnel,
    load_cube,
    metrics_table,
    read_facts,
    repeated,
    run_transform,
    score_bands,
)
from convo_analytics.warehouse import open_warehouse
from convo_analytics.warehouse._load import merge_summary

T = "2026-03-01T"
NIGHTLY = Path(__file__).resolve().parent.parent / "pipelines" / "nightly.py"


def _ts(text: str) -> str:
    return text if "T" in text else T + text


CONVERSATIONS = [
    dict(id="a", workspace_id="ws", external_user_id="u1", channel="web", locale="en-US",
         intent="pricing", source="homepage", status="resolved", created_at=_ts("23:30:00Z"),
         updated_at=_ts("23:50:00Z"), ended_at=_ts("23:50:00Z"), escalated=False,
         escalation_count=0, feedback_rating=5, lead_id="la"),
    dict(id="b", workspace_id="ws", external_user_id="u2", channel="sms", locale=None,
         intent="support", source="homepage", status="abandoned",
         created_at="2026-03-02T00:30:00Z", updated_at="2026-03-02T01:00:00Z",
         ended_at="2026-03-02T01:00:00Z", escalated=False, escalation_count=0, lead_id="lb"),
    dict(id="c", workspace_id="ws", external_user_id="u3", channel="web", locale="de-DE",
         intent=None, source=None, status="open", created_at="2026-02-28T22:00:00Z",
         updated_at=_ts("01:05:00Z"), escalated=False, escalation_count=0),
    dict(id="d", workspace_id="ws", external_user_id="u1", channel="web", locale="en-US",
         intent="purchase", source="checkout", status="resolved", created_at=_ts("10:00:00Z"),
         updated_at=_ts("10:30:00Z"), ended_at=_ts("10:30:00Z"), escalated=True,
         escalation_count=2),
]  # fmt: skip
MESSAGES = [
    dict(id="a0", conversation_id="a", position=0, role="user", created_at=_ts("23:30:00Z")),
    dict(id="a1", conversation_id="a", position=1, role="assistant", created_at=_ts("23:30:02Z"),
         latency_ms=2000, confidence=0.9, model_tier="fast"),
    dict(id="b0", conversation_id="b", position=0, role="user", created_at="2026-03-02T00:30:00Z"),
    dict(id="b1", conversation_id="b", position=1, role="assistant",
         created_at="2026-03-02T00:30:01Z", latency_ms=1000, confidence=0.3, model_tier="standard"),
    dict(id="c0", conversation_id="c", position=0, role="user", created_at="2026-02-28T22:00:00Z"),
    dict(id="c1", conversation_id="c", position=1, role="assistant", created_at=_ts("01:00:00Z"),
         latency_ms=500, confidence=0.6, model_tier="fast"),
    dict(id="c2", conversation_id="c", position=2, role="user", created_at=_ts("01:05:00Z")),
    dict(id="d0", conversation_id="d", position=0, role="system", created_at=_ts("10:00:00Z")),
]  # fmt: skip
LEADS = [
    dict(id="la", conversation_id="a", score=80.0, intent="pricing", created_at=_ts("23:35:00Z"),
         updated_at=_ts("23:40:00Z"), qualified_at=_ts("23:40:00Z"), email="jo@example.com"),
    dict(id="lb", conversation_id="b", score=40.0, intent="support",
         created_at="2026-03-02T00:35:00Z", updated_at="2026-03-02T00:35:00Z"),
]  # fmt: skip
ESCALATIONS = [
    dict(id="e1", conversation_id="d", position=0, created_at=_ts("10:05:00Z"),
         reason_code="user_requested", destination="helpdesk", origin="automatic"),
    dict(id="e2", conversation_id="d", position=1, created_at=_ts("10:10:00Z"),
         reason_code="sales_opportunity", destination="crm", origin="automatic"),
]  # fmt: skip
GUARDRAILS = [
    dict(id="g1", conversation_id="a", position=0, message_id="a0", triggered_at=_ts("23:31:00Z"),
         flag="pii.email", rule="pii-email", category="privacy", severity="medium",
         action="logged", excerpt="mail me at jo@example.com or +49 30 1234 5678"),
]  # fmt: skip


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]]) -> None:
    types = dict(con.execute(f"SELECT column_name, data_type FROM information_schema.columns "
                             f"WHERE table_name = '{table}'").fetchall())  # fmt: skip
    for row in rows:
        if "workspace_id" in types:
            row = {"workspace_id": "ws", **row}
        cols = list(row)
        casts = ", ".join(f"?::{types[c]}" for c in cols)
        con.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({casts})", list(row.values()))


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "known.duckdb"
    con = open_warehouse(path)
    _insert(con, "conversations", CONVERSATIONS)
    _insert(con, "messages", MESSAGES)
    _insert(con, "leads", LEADS)
    _insert(con, "conversation_escalations", ESCALATIONS)
    _insert(con, "conversation_guardrail_events", GUARDRAILS)
    run_transform(con, TransformConfig(timezones=("UTC", "Europe/Berlin")))
    con.close()
    yield path


def _totals(db: Path, first: date, last: date, tz: str) -> dict[str, Any]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        (row,) = metrics_table(load_cube(con, tz), first, last, by_day=False).to_dicts()
    finally:
        con.close()
    return row


def test_one_day_range_in_utc(db: Path) -> None:
    m = _totals(db, date(2026, 3, 1), date(2026, 3, 1), "UTC")
    # cohort: a and d started on 03-01; c's messages of 03-01 count by their own day
    assert (m["conversations"], m["engagedConversations"], m["resolved"]) == (2, 1, 2)
    assert (m["escalatedConversations"], m["containedConversations"]) == (1, 1)
    assert (m["leadsQualified"], m["feedbackCount"], m["ratingSum"], m["csat"]) == (1, 1, 5, 1.0)
    assert (m["containmentRate"], m["escalationRate"], m["abandonmentRate"]) == (0.5, 0.5, 0.0)
    assert m["medianFirstResponseMs"] == 2000.0  # a only: c started the day before
    assert m["medianTimeToResolutionSeconds"] == 1500.0  # a 1200 s, d 1800 s
    assert (m["userMessages"], m["assistantResponses"]) == (2, 2)  # a0, c2; a1, c1
    assert (m["latencyP50Ms"], m["latencyP90Ms"]) == (1250.0, 1850.0)  # of 500 and 2000
    assert math.isclose(m["latencyP99Ms"], 1985.0)
    assert math.isclose(m["avgConfidence"], 0.75) and m["lowConfidenceResponses"] == 0
    assert (m["escalations"], m["guardrailTriggers"]) == (2, 1)  # d escalated twice
    assert m["guardrailTriggersPer1000Responses"] == 500.0


@pytest.mark.parametrize(
    ("tz", "day", "started"),
    [
        ("UTC", date(2026, 3, 2), 1),  # b
        ("Europe/Berlin", date(2026, 3, 2), 2),  # a (00:30 local) and b: a built zone
        ("America/New_York", date(2026, 3, 1), 3),  # a, b and d: computed on request
        ("America/New_York", date(2026, 2, 28), 1),  # c
    ],
)
def test_days_are_cut_in_the_time_zone(db: Path, tz: str, day: date, started: int) -> None:
    assert _totals(db, day, day, tz)["conversations"] == started


def test_a_conversation_across_the_range_edge(db: Path) -> None:
    """c started on 02-28: not in 03-01's cohort, but its 03-01 messages are 03-01's."""
    before = _totals(db, date(2026, 2, 28), date(2026, 2, 28), "UTC")
    assert (before["conversations"], before["open"], before["userMessages"]) == (1, 1, 1)
    assert before["assistantResponses"] == 0 and before["latencyP50Ms"] is None
    assert before["medianFirstResponseMs"] == 3 * 3600 * 1000 + 0.0


def test_an_empty_range(db: Path) -> None:
    m = _totals(db, date(2026, 4, 1), date(2026, 4, 2), "UTC")
    assert m["conversations"] == 0 and m["assistantResponses"] == 0
    assert m["resolutionRate"] is None and m["latencyP95Ms"] is None and m["csat"] is None
    con = duckdb.connect(str(db), read_only=True)
    try:
        daily = metrics_table(load_cube(con, "UTC"), date(2026, 4, 1), date(2026, 4, 2))
    finally:
        con.close()
    assert daily["date"].to_list() == [date(2026, 4, 1), date(2026, 4, 2)]
    assert daily["conversations"].to_list() == [0, 0]


def test_the_lead_funnel(db: Path) -> None:
    con = duckdb.connect(str(db), read_only=True)
    try:
        facts = in_range(read_facts(con).conversations, date(2026, 2, 28), date(2026, 3, 2), "UTC")
    finally:
        con.close()
    funnel = lead_funnel(facts)
    assert funnel["step"].to_list() == [
        "started", "engaged", "scored", "qualified", "contact_captured", "handed_off",
    ]  # fmt: skip
    # d reached the CRM but never engaged, so the strict funnel does not count it
    assert funnel["conversations"].to_list() == [4, 3, 2, 1, 1, 0]
    assert funnel["step_conversion"].to_list()[1:] == [0.75, 2 / 3, 0.5, 1.0, 0.0]
    assert funnel["drop_off"].to_list()[1:] == [1, 1, 1, 0, 1]
    # scored 5 min after engaging (a and b); qualified 5 min after scoring; the email
    # came before qualification, so that gap is 0
    assert funnel["median_seconds_from_previous"].to_list()[1:5] == [0.0, 300.0, 300.0, 0.0]
    by_channel = lead_funnel(facts, ["channel"]).filter(pl.col("step") == "engaged")
    assert dict(zip(by_channel["channel"], by_channel["conversations"], strict=True)) == {
        "sms": 1,
        "web": 2,
    }
    bands = score_bands(facts)
    assert dict(zip(bands["band"], bands["leads"], strict=True))["80-100"] == 1
    assert bands.filter(pl.col("band") == "40-59")["qualification_rate"].to_list() == [0.0]


def test_incidents_are_redacted_unless_asked(db: Path) -> None:
    con = duckdb.connect(str(db), read_only=True)
    try:
        redacted = incidents(con, date(2026, 3, 1), date(2026, 3, 1))
        raw = incidents(con, date(2026, 3, 1), date(2026, 3, 1), redact=False)
        berlin = incidents(con, date(2026, 3, 1), date(2026, 3, 1), "Europe/Berlin")
    finally:
        con.close()
    assert redacted["excerpt"].to_list() == ["mail me at [EMAIL] or [PHONE]"]
    assert raw["excerpt"].to_list() == [GUARDRAILS[0]["excerpt"]]
    assert redacted["escalated"].to_list() == [False]
    assert berlin.height == 0  # 00:31 on 03-02 in Berlin
    assert repeated(redacted, "external_user_id").height == 0


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_guardrail_export_writes_a_manifest(
    db: Path, tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "exports"
    args = ["export", "guardrails", "--from", "2026-03-01", "--to", "2026-03-01"]
    code = main([*args, "--format", fmt, "--db", str(db), "--out-dir", str(out), "--json"])
    assert code == 0
    manifest = orjson.loads(capsys.readouterr().out)
    (entry,) = manifest["files"]
    data = out / entry["path"]
    import hashlib

    assert hashlib.sha256(data.read_bytes()).hexdigest() == entry["sha256"]
    assert manifest["rowCount"] == entry["rows"] == 1
    assert manifest["parameters"]["redacted"] is True
    assert {"query", "generatedAt", "versions", "columns"} <= set(manifest)
    assert b"jo@example.com" not in data.read_bytes()
    assert (out / f"{data.name}.manifest.json").exists()


def test_unredacted_export_is_explicit(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "exports"
    args = ["export", "guardrails", "--from", "2026-03-01", "--to", "2026-03-01"]
    assert main([*args, "--no-redact", "--db", str(db), "--out-dir", str(out)]) == 0
    (data,) = out.glob("*_unredacted.jsonl")
    assert b"jo@example.com" in data.read_bytes()
    manifest = orjson.loads(next(out.glob("*_unredacted.jsonl.manifest.json")).read_bytes())
    assert manifest["parameters"]["redacted"] is False


def test_reconciliation_lists_differences_and_fails_on_request(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    con = open_warehouse(db)
    body = export_summary(con, date(2026, 3, 1), date(2026, 3, 1), "UTC")
    body["daily"][0]["conversations"] = 3  # the service counted one more
    merge_summary(con, orjson.dumps(body), "service-run", datetime.now(UTC))
    con.close()
    assert main(["transform", "--db", str(db), "--json"]) == 0
    run = orjson.loads(capsys.readouterr().out)
    wrong = [m for m in run["mismatches"] if m["metric"] == "conversations"]
    assert wrong == [
        {"workspace_id": "ws", "timezone": "UTC", "date": "2026-03-01",
         "metric": "conversations", "warehouse": 2, "service": 3}
    ]  # fmt: skip
    assert not [m for m in run["mismatches"] if m["metric"] == "resolved"]
    found = run["reconciliation"]
    assert found["outcome"] == "differences" and found["days_compared"] == 1
    assert found["days_differing"] == [
        {"workspace_id": "ws", "timezone": "UTC", "date": "2026-03-01"}
    ]
    assert found["text"].startswith(
        f"reconciliation: {len(run['mismatches'])} difference"
    ) and found["text"].endswith("from the service's own summary on 1 of 1 day (2026-03-01)")
    assert main(["transform", "--db", str(db), "--fail-on-mismatch"]) == 1
    assert main(["transform", "--db", str(db), "--tolerance", "0.5", "--fail-on-mismatch"]) == 0


def test_reconciliation_says_when_there_was_nothing_to_compare(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No service summary for any day: the run says there was nothing to compare (in its
    line, --json and the nightly step's counts), never "0 mismatches", and is no warning."""
    assert main(["transform", "--db", str(db), "--json", "--fail-on-mismatch"]) == 0
    run = orjson.loads(capsys.readouterr().out)
    assert run["reconciled_days"] == 0 and run["mismatches"] == []
    assert run["reconciliation"]["outcome"] == "nothing to compare"
    assert run["reconciliation"]["zones"] == {"UTC": 0}
    assert main(["transform", "--db", str(db)]) == 0
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.endswith(
        "reconciliation: nothing to compare, the service's own summary has no day in UTC "
        "(service_summaries is empty there)"
    ), line
    from convo_analytics.config import load_settings
    from convo_analytics.pipeline import RunContext, load_steps

    (step,) = [s for s in load_steps(NIGHTLY) if s.name == "transform"]
    ctx = RunContext(load_settings(None, {"warehouse.path": str(db)}, environ={}), "r", db)
    counts = step.run(ctx)
    assert counts["reconciliation"] == "nothing to compare" and counts["mismatches"] is None
    assert counts["reconciled_days"] == 0 and not ctx.warnings
    con = open_warehouse(db)
    body = export_summary(con, date(2026, 3, 1), date(2026, 3, 2), "UTC")
    body["daily"][1]["conversations"] += 2
    merge_summary(con, orjson.dumps(body), "service-run", datetime.now(UTC))
    con.close()
    counts = step.run(ctx)
    assert counts["reconciliation"] == "differences" and counts["mismatches"] >= 1
    (warning,) = ctx.warnings
    assert (
        warning["kind"] == "reconciliation" and "on 1 of 2 days (2026-03-02)" in warning["message"]
    )
    differing = {"date": "2026-03-02", "metric": "conversations", "warehouse": 1, "service": 3,
                 "workspace_id": "ws", "timezone": "UTC"}  # fmt: skip
    assert differing in warning["reconciliation"]["mismatches"]


def test_a_failed_transform_leaves_the_marts(db: Path) -> None:
    con = open_warehouse(db)
    try:
        before = con.execute("SELECT count(*) FROM mart_conversations").fetchall()[0][0]
        with pytest.raises(Exception, match=r"Not/AZone"):
            run_transform(con, TransformConfig(timezones=("UTC", "Not/AZone")))
        after = con.execute("SELECT count(*) FROM mart_conversations").fetchall()[0][0]
        status = con.execute(
            "SELECT status FROM transform_runs ORDER BY started_at DESC LIMIT 1"
        ).fetchall()
    finally:
        con.close()
    assert before == after == 4
    assert status == [("failed",)]


def test_export_summary_cli_and_bad_input(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["export", "summary", "--from", "2026-03-01", "--to", "2026-03-02", "--db", str(db)])
        == 0
    )
    body = orjson.loads(capsys.readouterr().out)
    assert body["totals"]["conversations"] == 3 and len(body["daily"]) == 2
    assert body["workspaceId"] == "ws"
    code = main(
        ["export", "summary", "--from", "2026-03-02", "--to", "2026-03-01", "--db", str(db)]
    )
    assert code == 2
    assert "before --from" in capsys.readouterr().err
    assert (
        main(["export", "summary", "--from", "03/01", "--to", "2026-03-01", "--db", str(db)]) == 2
    )
    assert "YYYY-MM-DD" in capsys.readouterr().err


@pytest.mark.parametrize("tz", ["UTC", "America/New_York"])  # from the marts, and computed
def test_filters_slice_by_dimension(db: Path, tz: str) -> None:
    con = duckdb.connect(str(db), read_only=True)
    try:
        first, last = date(2026, 2, 28), date(2026, 3, 2)
        web = load_cube(con, tz, filters={"channel": ["web"]})
        (m,) = metrics_table(web, first, last, by_day=False).to_dicts()
        by_intent = load_cube(con, tz, filters={"intent": ["unknown"], "channel": ["web"]})
        (u,) = metrics_table(by_intent, first, last, by_day=False).to_dicts()
        with pytest.raises(ValueError, match="unknown dimension"):
            load_cube(con, tz, filters={"colour": ["red"]})
    finally:
        con.close()
    # web: a, c, d (b is sms); c's intent is unknown (neither it nor a lead says)
    assert (m["conversations"], m["escalations"], m["guardrailTriggers"]) == (3, 2, 1)
    assert (m["assistantResponses"], m["latencyP50Ms"]) == (2, 1250.0)
    assert (u["conversations"], u["userMessages"], u["assistantResponses"]) == (1, 2, 1)


@pytest.mark.parametrize("tz", ["UTC", "America/New_York"])
def test_model_tier_narrows_responses_only(db: Path, tz: str) -> None:
    first, last = date(2026, 2, 28), date(2026, 3, 2)
    con = duckdb.connect(str(db), read_only=True)
    try:
        standard = load_cube(con, tz, filters={"model_tier": ["standard"]})
        (m,) = metrics_table(standard, first, last, by_day=False).to_dicts()
        rates = flag_rates(load_cube(con, tz), date(2026, 3, 1), date(2026, 3, 1))
    finally:
        con.close()
    assert (m["assistantResponses"], m["latencyP50Ms"]) == (1, 1000.0)
    assert m["conversations"] == 4 and m["userMessages"] == 0  # no tier on either
    if tz == "UTC":  # a's email on 03-01 against a1 and c1
        assert rates.to_dicts() == [
            {"flag": "pii.email", "triggers": 1, "per_1000_responses": 500.0}
        ]


def test_exports_from_a_warehouse_without_marts_say_to_transform(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = tmp_path / "bare.duckdb"
    con = open_warehouse(bare)
    con.execute("DROP TABLE transform_runs")  # as a release before the marts left it
    con.close()
    for args in (["summary"], ["guardrails"]):
        code = main(["export", *args, "--from", "2026-03-01", "--to", "2026-03-01",
                     "--db", str(bare), "--out-dir" if args == ["guardrails"] else "--tz",
                     str(tmp_path) if args == ["guardrails"] else "UTC"])  # fmt: skip
        assert code == 2
        err = capsys.readouterr().err
        assert "convo transform" in err and "Traceback" not in err


def test_an_export_of_an_empty_range_warns_on_stderr(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Zeros alone read as a quiet period: an export of days without conversations says so
    (and still succeeds); one with data says nothing more."""
    empty = ["--from", "2026-04-01", "--to", "2026-04-02", "--db", str(db)]
    assert main(["export", "summary", *empty]) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: no conversation started from 2026-04-01 to 2026-04-02")
    assert "the warehouse holds 2026-02-28 to 2026-03-02" in err and len(err.splitlines()) == 1
    out = ["--out-dir", str(tmp_path / "out")]
    assert main(["export", "guardrails", *empty, *out]) == 0
    assert "warning: no conversation started" in capsys.readouterr().err
    full = ["--from", "2026-03-01", "--to", "2026-03-02", "--db", str(db)]
    assert main(["export", "summary", *full]) == 0
    assert "warning" not in capsys.readouterr().err
