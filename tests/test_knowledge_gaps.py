"""Knowledge gaps (issue 27): the failing answers the transform keeps, the report by topic,
the export, over real warehouses (a sandbox's history, and loads through the real loaders).

Nothing here depends on the sandbox's exact texts or counts: the rows are checked against
a recomputation in plain Python over the messages, the report against its definitions.
"""

from __future__ import annotations

import csv
import hashlib
import io
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson
import polars as pl
import pytest

from convo_analytics.config import load_settings
from convo_analytics.errors import UserError
from convo_analytics.topics import Curation, TopicConfig, append_curation
from convo_analytics.transform import (
    CONTENT_DOES_NOT_ANSWER,
    FALLBACK_PATTERNS,
    MISSING_CONTENT,
    REPORT_COLUMNS,
    TransformConfig,
    gap_conversations,
    gap_report,
    run_transform,
    transform_config,
)
from convo_analytics.transform._frames import read_frame
from convo_analytics.warehouse import open_warehouse
from incremental_support import (
    BASE,
    Conversation,
    World,
    ingest_events,
    iso,
    load_changes,
    load_conversations,
    load_leads,
    load_new,
)
from transform_support import populated_sandbox

CONFIG = TransformConfig(timezones=("UTC",), reconcile=False)


def _rows(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    return read_frame(con, "SELECT * FROM knowledge_gaps ORDER BY ALL")


@pytest.fixture(scope="module")
def sandbox_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A sandbox's history extracted, ingested and transformed (topics discovered)."""
    with populated_sandbox(tmp_path_factory.mktemp("gaps"), 300, ("UTC",), 100) as (_running, db):
        yield db


@pytest.fixture
def sandbox_copy(sandbox_db: Path, tmp_path: Path) -> Path:
    """A copy of it a test may change."""
    db = tmp_path / "w.duckdb"
    shutil.copy(sandbox_db, db)
    return db


def _span(con: duckdb.DuckDBPyConnection) -> tuple[date, date]:
    first, last = con.execute(
        "SELECT min(answered_at)::DATE, max(answered_at)::DATE FROM knowledge_gaps"
    ).fetchall()[0]
    return first, last


# -- the rows ----------------------------------------------------------------------------------


def _recomputed(
    con: duckdb.DuckDBPyConnection, threshold: float, patterns: tuple[str, ...]
) -> set[tuple[Any, ...]]:
    """The failing answers, recomputed in Python from the messages, the conversations'
    own rows, their topics and their escalations, rule by rule as docs/warehouse.md
    defines them."""
    compiled = [re.compile(p, re.I | re.A) for p in patterns]
    conversations = {
        (ws, cid): (status, rating)
        for ws, cid, status, rating in con.execute(
            "SELECT workspace_id, id, status, feedback_rating FROM conversations"
        ).fetchall()
    }
    topics = {
        (ws, cid): topic
        for ws, cid, topic in con.execute(
            "SELECT workspace_id, conversation_id, topic_id FROM conversation_topics"
        ).fetchall()
    }
    escalations: dict[tuple[str, str], list[datetime]] = {}
    for ws, cid, at in con.execute(
        "SELECT workspace_id, conversation_id, escalated_at FROM mart_escalations"
    ).fetchall():
        escalations.setdefault((ws, cid), []).append(at)
    out = set()
    question: str | None = None
    current = None
    for ws, cid, mid, role, text, at, confidence, source in con.execute(
        "SELECT workspace_id, conversation_id, id, role, text, created_at, confidence, "
        "knowledge_source FROM messages ORDER BY workspace_id, conversation_id, position"
    ).fetchall():
        if (ws, cid) != current:
            current, question = (ws, cid), None
        if role == "user" and text and text.strip():
            question = text
        if role != "assistant" or (ws, cid) not in conversations:
            continue
        low = confidence is not None and confidence < threshold
        reasons = []
        if any(p.search(text or "") for p in compiled):
            reasons.append("fallback_pattern")
        if low and not (source or "").strip():
            reasons.append("no_source_low_confidence")
        if low:
            reasons.append("low_confidence")
        if not reasons:
            continue
        status, rating = conversations[(ws, cid)]
        after = any(e is not None and e >= at for e in escalations.get((ws, cid), []))
        low_rating = rating is not None and rating <= 2
        abandoned = status == "abandoned"
        out.add((ws, cid, mid, at, topics.get((ws, cid)), question, text, confidence, source,
                 tuple(reasons), after, low_rating, abandoned,
                 1 + after + low_rating + abandoned))  # fmt: skip
    return out


def _stored(con: duckdb.DuckDBPyConnection) -> set[tuple[Any, ...]]:
    return {
        (*row[:9], tuple(row[9]), *row[10:])
        for row in con.execute(
            "SELECT workspace_id, conversation_id, message_id, answered_at, topic_id, question, "
            "answer, confidence, knowledge_source, reasons, escalated_after, low_rating, "
            "abandoned, severity FROM knowledge_gaps"
        ).fetchall()
    }


def test_the_rows_are_the_failing_answers_recomputed_from_the_messages(sandbox_db: Path) -> None:
    con = duckdb.connect(str(sandbox_db), read_only=True)
    try:
        stored = _stored(con)
        assert stored == _recomputed(con, 0.5, FALLBACK_PATTERNS)
        reasons = {r for row in stored for r in row[9]}
        assert reasons >= {"fallback_pattern", "low_confidence"}, reasons
        assert {row[13] for row in stored} > {1}, "some answers were followed by worse"
        assert any(row[4] is not None for row in stored), "the sandbox's topics are there"
    finally:
        con.close()


def _gap_world(db: Path) -> tuple[World, duckdb.DuckDBPyConnection]:
    world = World()
    con = open_warehouse(db)
    for seed in range(3):
        load_new(con, world, seed)
    return world, con


def test_incremental_runs_keep_the_rows_a_full_rebuild_makes(tmp_path: Path) -> None:
    """New conversations, replies, ratings, escalations and late events between incremental
    transforms: the rows they leave are exactly a full rebuild's."""
    db = tmp_path / "w.duckdb"
    world, con = _gap_world(db)
    try:
        assert run_transform(con, CONFIG).mode == "full"
        first = _rows(con)
        for seed in range(4):
            load_new(con, world, 20 + seed)
            load_changes(con, world, 30 + seed)
            load_leads(con, world.lead_changes(random.Random(seed)), world.run_id())
            result = run_transform(con, CONFIG)
            assert result.mode == "incremental", result.full_reason
            assert result.gaps.scope == "changed"
        # a late escalation of a conversation with a failing answer, by webhook
        ws, cid, mid, at = con.execute(
            "SELECT workspace_id, conversation_id, message_id, answered_at FROM knowledge_gaps "
            "WHERE NOT escalated_after ORDER BY ALL LIMIT 1"
        ).fetchall()[0]
        con.close()
        event = {
            "event": "escalation.created", "timestamp": iso(at + timedelta(days=40)),
            "workspaceId": ws, "conversationId": cid,
            "data": {"escalationId": "late_gap", "reasonCode": "user_requested",
                     "destination": "helpdesk", "origin": "manual"},
        }  # fmt: skip
        ingest_events(db, [event], "late_gap")
        con = open_warehouse(db)
        assert run_transform(con, CONFIG).mode == "incremental"
        incremental = _rows(con)
        late = incremental.filter(
            (pl.col("workspace_id") == ws)
            & (pl.col("conversation_id") == cid)
            & (pl.col("message_id") == mid)
        )
        assert late["escalated_after"].to_list() == [True]
        assert incremental.height > first.height > 0
        assert set(incremental["severity"].to_list()) > {1}
        assert run_transform(con, replace(CONFIG, full=True)).mode == "full"
        assert incremental.equals(_rows(con))
    finally:
        con.close()


def test_other_fallback_patterns_recompute_every_row(sandbox_copy: Path) -> None:
    con = open_warehouse(sandbox_copy)
    try:
        before = _rows(con)
        assert before.height
        # every answer with a word in it a fallback: confident answers become gaps too
        every = run_transform(con, replace(CONFIG, fallback_patterns=(r"\w",)))
        assert every.mode == "incremental"
        assert (every.gaps.scope, every.gaps.reason) == ("all", "fallback patterns changed")
        assert _rows(con).height > before.height
        assert _stored(con) == _recomputed(con, 0.5, (r"\w",))
        # fallbacks by their trace and confidence only
        quiet = run_transform(con, replace(CONFIG, fallback_patterns=()))
        assert (quiet.gaps.scope, quiet.gaps.reason) == ("all", "fallback patterns changed")
        without = _rows(con)
        assert not without.filter(pl.col("reasons").list.contains("fallback_pattern")).height
        assert before.filter(pl.col("reasons").list.contains("fallback_pattern")).height
        assert _stored(con) == _recomputed(con, 0.5, ())
        # the same patterns again: only what changed (nothing)
        again = run_transform(con, replace(CONFIG, fallback_patterns=()))
        assert (again.gaps.scope, again.gaps.written) == ("changed", 0)
        assert _rows(con).equals(without)
        # back to the defaults: the rows they made
        back = run_transform(con, CONFIG)
        assert back.gaps.scope == "all"
        assert _rows(con).equals(before)
        state = con.execute("SELECT fallback_patterns FROM mart_state").fetchall()[0][0]
        assert tuple(state) == FALLBACK_PATTERNS
    finally:
        con.close()


def test_the_patterns_come_from_the_settings_and_a_bad_one_names_the_setting(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    defaults = load_settings(None, {}, {}, cwd=empty)
    assert defaults.get_list("transform.fallback_patterns") == FALLBACK_PATTERNS
    assert transform_config(defaults).fallback_patterns == FALLBACK_PATTERNS
    env = {"CONVO_TRANSFORM_FALLBACK_PATTERNS": "no idea\nnot in the knowledge base"}
    mine = load_settings(None, {}, env, cwd=empty)
    assert transform_config(mine).fallback_patterns == ("no idea", "not in the knowledge base")
    for bad in ("(unclosed", "(?=look-ahead)", r"(a)\1"):
        broken = load_settings(None, {}, {"CONVO_TRANSFORM_FALLBACK_PATTERNS": bad}, cwd=empty)
        with pytest.raises(UserError, match=r"transform\.fallback_patterns: .* RE2"):
            transform_config(broken)


# -- the report ------------------------------------------------------------------------------


def _exchange(
    c: Conversation,
    at: datetime,
    question: str,
    answer: str,
    confidence: float,
    source: str | None = None,
) -> None:
    n = len(c.messages)
    c.messages += [
        {"id": f"{c.id}_m{n}", "role": "user", "text": question, "createdAt": iso(at),
         "channel": c.channel, "policyFlags": []},
        {"id": f"{c.id}_m{n + 1}", "role": "assistant", "text": answer,
         "createdAt": iso(at + timedelta(seconds=2)), "channel": c.channel,
         "confidence": confidence, "knowledgeSource": source, "policyFlags": []},
    ]  # fmt: skip
    c.updated = at + timedelta(seconds=30)


def _conversation(workspace: str, cid: str, hours: int, channel: str = "web") -> Conversation:
    start = BASE + timedelta(hours=hours)
    return Conversation(cid, workspace, channel, None, None, start, start)


def _verdict_world(db: Path) -> duckdb.DuckDBPyConnection:
    """Two workspaces without topics (so every conversation is 'unknown'): ws_a's answers
    never used a source; ws_b's failing answer used none but another of its answers did."""
    a1 = _conversation("ws_a", "c1", 1)
    _exchange(a1, a1.created, "Do you ship to Mars?", "I don't have information about that.",
              0.9)  # fmt: skip
    _exchange(a1, a1.created + timedelta(minutes=1), "And the Moon?", "Sure, next week.", 0.2)
    a1.status, a1.ended, a1.rating, a1.rated = "abandoned", a1.updated, 1, a1.updated
    a1.escalations.append({"id": "e1", "createdAt": iso(a1.updated), "reasonCode": "x",
                           "destination": "helpdesk", "origin": "manual"})  # fmt: skip
    a2 = _conversation("ws_a", "c2", 2, channel="sms")
    _exchange(a2, a2.created, "Do you ship to Mars?", "Let me check: I'm not sure.", 0.95)
    a3 = _conversation("ws_a", "c3", 3)
    _exchange(a3, a3.created, "hello", "Hello! How can I help?", 0.99)
    b1 = _conversation("ws_b", "c1", 1)
    _exchange(b1, b1.created, "How do refunds work?", "I couldn't find that.", 0.3)
    b2 = _conversation("ws_b", "c2", 2)
    _exchange(b2, b2.created, "Where is my invoice?", "Under Billing.", 0.9, "kb://billing")
    _exchange(b2, b2.created + timedelta(minutes=1), "ok", "Glad to help.", 0.4, "kb://faq")
    con = open_warehouse(db)
    load_conversations(con, [a1, a2, a3, b1, b2], "run0001")
    run_transform(con, CONFIG)
    return con


def test_the_report_ranks_topics_and_says_what_is_missing(tmp_path: Path) -> None:
    con = _verdict_world(tmp_path / "w.duckdb")
    try:
        day = BASE.date()
        report = gap_report(con, day, day, "UTC")
        assert report.columns == list(REPORT_COLUMNS)
        rows = {r["workspace_id"]: r for r in report.iter_rows(named=True)}
        a, b = rows["ws_a"], rows["ws_b"]
        # ws_a: c1 (two failing answers: a fallback, then a low-confidence one; abandoned,
        # rated 1, escalated after both: severity 4) and c2 (a fallback, severity 1)
        assert (a["topic"], a["topic_id"], a["topic_label"]) == ("unknown", None, "unknown")
        assert (a["conversations"], a["failing_answers"]) == (2, 3)
        assert a["mean_severity"] == pytest.approx((4 + 4 + 1) / 3)
        assert a["impact"] == pytest.approx(2 * (4 + 4 + 1) / 3)
        assert (a["escalated"], a["low_rated"], a["abandoned"]) == (1, 1, 1)
        assert a["verdict"] == MISSING_CONTENT and a["sources"] == []
        assert a["questions"][0] == "Do you ship to Mars?" and a["question_counts"][0] == 2
        assert set(a["answers"]) == {"I don't have information about that.", "Sure, next week.",
                                     "Let me check: I'm not sure."}  # fmt: skip
        assert (a["responses"], a["responses_with_source"]) == (4, 0)
        # ws_b: sources used by its answers, the failing one's included or not
        assert b["verdict"] == CONTENT_DOES_NOT_ANSWER
        assert b["sources"] == ["kb://billing", "kb://faq"]
        assert (b["responses"], b["responses_with_source"]) == (3, 2)
        assert (b["conversations"], b["failing_answers"]) == (2, 2)
        assert report["workspace_id"].to_list() == ["ws_a", "ws_b"], "highest impact first"
        # the slices: sms keeps ws_a's c2 only
        sms = gap_report(con, day, day, "UTC", filters={"channel": ["sms"]})
        assert sms.select("workspace_id", "conversations", "failing_answers").rows() == [
            ("ws_a", 1, 1)
        ]
        assert gap_report(con, day, day, "UTC", workspaces=["ws_b"])["workspace_id"].to_list() == [
            "ws_b"
        ]
        assert gap_report(con, day - timedelta(days=3), day - timedelta(days=1), "UTC").is_empty()
        # the drill-down: the conversations behind ws_a's unknown topic, worst first
        drill = gap_conversations(con, day, day, "UTC", "ws_a", "unknown")
        assert drill.select("conversation_id", "failing_answers", "severity").rows() == [
            ("c1", 2, 4),
            ("c2", 1, 1),
        ]
        assert drill["question"].to_list() == ["Do you ship to Mars?", "Do you ship to Mars?"]
    finally:
        con.close()


def test_a_merged_topic_counts_under_the_one_it_was_merged_into(
    sandbox_copy: Path, tmp_path: Path
) -> None:
    con = open_warehouse(sandbox_copy)
    try:
        first, last = _span(con)
        before = gap_report(con, first, last, "UTC")
        known = before.filter(pl.col("topic_id").is_not_null() & (pl.col("topic_id") > 0))
        assert known.height >= 2, "the sandbox's gaps fall in several topics"
        (ws, gone, gone_n), (_, kept, kept_n) = known.select(
            "workspace_id", "topic_id", "conversations"
        ).rows()[:2]
        store = tmp_path / "curations.jsonl"
        append_curation(store, Curation(ws, "merge", gone, target_topic_id=kept))
        topics = TopicConfig(curations_path=store)
        assert run_transform(con, replace(CONFIG, topics=topics)).mode == "incremental"
        after = gap_report(con, first, last, "UTC")
        assert str(gone) not in after.filter(pl.col("workspace_id") == ws)["topic"].to_list()
        merged = after.filter((pl.col("workspace_id") == ws) & (pl.col("topic") == str(kept)))
        assert merged["conversations"].item() == gone_n + kept_n  # a conversation has one topic
        # a filter on the merged topic's own id still finds its conversations
        mine = gap_report(con, first, last, "UTC", filters={"topic": [str(gone)]})
        assert mine["topic"].to_list() == [str(kept)]
        assert mine["conversations"].item() == gone_n
    finally:
        con.close()


# -- the export ------------------------------------------------------------------------------


def _convo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "convo_analytics.cli", *args],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


def test_the_export_writes_a_row_per_topic_or_the_whole_report(
    sandbox_db: Path, tmp_path: Path
) -> None:
    con = duckdb.connect(str(sandbox_db), read_only=True)
    try:
        first, last = _span(con)
        report = gap_report(con, first, last, "UTC")
    finally:
        con.close()
    span = ["--from", str(first), "--to", str(last)]
    out = tmp_path / "gaps.csv"
    done = _convo("export", "knowledge-gaps", "--db", str(sandbox_db), *span, "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert len(rows) == report.height > 0
    assert list(rows[0])[:3] == ["workspace_id", "workspace_name", "rank"]
    assert [int(r["rank"]) for r in rows] == list(range(1, len(rows) + 1))
    assert [r["topic"] for r in rows] == report["topic"].to_list()
    assert [float(r["impact"]) for r in rows] == sorted(
        (float(r["impact"]) for r in rows), reverse=True
    )
    for row, expected in zip(rows, report.iter_rows(named=True), strict=True):
        assert row["questions"] == "\n".join(expected["questions"])
        assert row["verdict"] in (MISSING_CONTENT, CONTENT_DOES_NOT_ANSWER)
        assert len([s for s in row["sources"].split("\n") if s]) == len(expected["sources"])
    manifest = orjson.loads((tmp_path / "gaps.csv.manifest.json").read_bytes())
    (file,) = manifest["files"]
    assert file["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert manifest["rowCount"] == len(rows) and manifest["parameters"]["redacted"] is True
    # JSON to stdout: the whole structure, the conversations behind each topic included
    done = _convo("export", "knowledge-gaps", "--db", str(sandbox_db), *span, "--format", "json")
    assert done.returncode == 0, done.stderr
    body = orjson.loads(done.stdout)
    assert (body["kind"], body["from"], body["to"]) == ("knowledge-gaps", str(first), str(last))
    topics = body["topics"]
    assert [t["topic"] for t in topics] == report["topic"].to_list()
    for topic in topics:
        assert set(topic) >= {"questions", "answers", "sources", "conversation_ids", "verdict"}
        assert all(set(q) == {"text", "failing_answers"} for q in topic["questions"])
        assert all(set(s) == {"source", "responses"} for s in topic["sources"])
        assert len(topic["conversation_ids"]) == topic["conversations"]


def test_the_export_redacts_personal_data_unless_asked(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    c = _conversation("ws_a", "c1", 5)
    _exchange(c, c.created, "mail me at ana@example.com or +49 170 1234567",
              "I don't know.", 0.9)  # fmt: skip
    con = open_warehouse(db)
    load_conversations(con, [c], "run0001")
    run_transform(con, CONFIG)
    con.close()
    day = ["--from", str(BASE.date()), "--to", str(BASE.date())]
    redacted = _convo("export", "knowledge-gaps", "--db", str(db), *day)
    assert redacted.returncode == 0, redacted.stderr
    assert "ana@example.com" not in redacted.stdout and "[EMAIL]" in redacted.stdout
    assert "[PHONE]" in redacted.stdout
    plain = _convo("export", "knowledge-gaps", "--db", str(db), *day, "--no-redact")
    assert "ana@example.com" in plain.stdout
    # no range: the 30 days up to the newest conversation
    default = _convo("export", "knowledge-gaps", "--db", str(db), "--format", "json")
    body = orjson.loads(default.stdout)
    newest = (BASE + timedelta(hours=5)).astimezone(UTC).date()
    assert (body["from"], body["to"]) == (str(newest - timedelta(days=29)), str(newest))
    assert len(body["topics"]) == 1
