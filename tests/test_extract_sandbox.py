"""Extraction against the sandbox over real HTTP: complete, incremental, resilient."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson

from conftest import ACME_KEY, RunningSandbox
from convo_analytics.sandbox import FaultSettings
from extract_support import assert_complete, cli_env, extract, extract_cli, warehouse_rows


def test_every_record_lands_exactly_once(start_sandbox, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(conversations=400)
    db = tmp_path / "w.duckdb"
    result = extract(running.url, ACME_KEY, db, page_size=70)
    assert result.ok, result.to_json()
    ws = running.sandbox.workspaces["ws_acme"]
    conv = result.streams["conversations"]
    assert conv.records == conv.new == conv.details == len(ws.conversations)
    assert conv.pagination == "cursor"
    assert_complete(db, ws)
    days = warehouse_rows(db, "SELECT count(*), sum(conversations) FROM service_summaries")
    assert days[0][0] == 30
    runs = warehouse_rows(db, "SELECT stream, status, records FROM extract_runs ORDER BY stream")
    assert runs == [
        ("conversations", "ok", 400),
        ("leads", "ok", len(ws.leads)),
        ("summary", "ok", 30),
    ]


def test_a_second_run_fetches_only_the_changes(start_sandbox, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(conversations=300)
    db = tmp_path / "w.duckdb"
    assert extract(running.url, ACME_KEY, db).ok
    again = extract(running.url, ACME_KEY, db)
    conv = again.streams["conversations"]
    assert conv.details == 0 and conv.new == 0 and conv.changed == 0
    assert conv.stats.requests <= 2, "an unchanged workspace costs a page, not 300 details"
    sim = running.admin(
        "/_sandbox/simulate", {"workspace": "acme", "newConversations": 4, "progress": 9, "seed": 5}
    )
    third = extract(running.url, ACME_KEY, db)
    conv = third.streams["conversations"]
    changed = set(sim["changed"]) - set(sim["created"])  # progress may pick a new one
    assert conv.new == 4 and conv.changed == len(changed)
    assert conv.details == 4 + len(changed)
    assert_complete(db, running.sandbox.workspaces["ws_acme"])


def test_5xx_answers_and_dropped_connections_are_survived(start_sandbox, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(
        conversations=100, faults=FaultSettings(error_rate=0.1, drop_rate=0.05)
    )
    db = tmp_path / "w.duckdb"
    result = extract(running.url, ACME_KEY, db, max_attempts=12, retry_base_seconds=0.02)
    assert result.ok, result.to_json()
    stats = result.streams["conversations"].stats
    assert stats.server_errors > 0 and stats.transport_errors > 0
    assert_complete(db, running.sandbox.workspaces["ws_acme"])


def test_a_429_storm_is_survived_and_the_real_limit_learned(start_sandbox, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The client believes it has no limit; the service allows 40/s with a burst of 4."""
    running: RunningSandbox = start_sandbox(conversations=100, rate_limit="40/s,burst=4")
    db = tmp_path / "w.duckdb"
    result = extract(running.url, ACME_KEY, db, detail_concurrency=8, max_attempts=12)
    assert result.ok, result.to_json()
    stats = result.streams["conversations"].stats
    assert 0 < stats.rate_limited < stats.requests * 0.2, "it slowed down instead of hammering"
    assert_complete(db, running.sandbox.workspaces["ws_acme"])


def test_full_refresh_and_backfill_refetch_without_duplicates(
    start_sandbox, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(conversations=120)
    db = tmp_path / "w.duckdb"
    assert extract(running.url, ACME_KEY, db).ok
    refresh = extract(running.url, ACME_KEY, db, full_refresh=True)
    conv = refresh.streams["conversations"]
    assert conv.details == 120 and conv.unchanged == 120
    from datetime import UTC, datetime

    backfill = extract(
        running.url,
        ACME_KEY,
        db,
        streams=("conversations",),
        backfill_from=datetime(2026, 11, 10, tzinfo=UTC),
        backfill_to=datetime(2026, 11, 12, tzinfo=UTC),
    )
    assert backfill.ok and backfill.mode == "backfill"
    assert 0 < backfill.streams["conversations"].records < 120
    assert_complete(db, running.sandbox.workspaces["ws_acme"])
    raw = warehouse_rows(
        db, "SELECT count(*), count(DISTINCT (id, payload_hash)) FROM raw_conversation_details"
    )
    assert raw[0][0] == raw[0][1] == 120, "an identical version is stored once"


def test_the_cli_prints_json_counts_and_exit_codes_without_the_key(
    start_sandbox, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(conversations=60)
    db = tmp_path / "w.duckdb"
    env = cli_env(ACME_KEY)
    cli = extract_cli(running.url, db)
    ok = subprocess.run(
        [*cli, "--json"], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert ok.returncode == 0, ok.stderr
    counts = orjson.loads(ok.stdout)
    assert counts["status"] == "ok"
    assert counts["streams"]["conversations"]["records"] == 60
    assert ACME_KEY not in ok.stdout + ok.stderr
    bad = subprocess.run(
        [*cli, "--json"],
        env={**env, "CONVO_API_KEY": "sk_wrong_key_12345"},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert bad.returncode == 1
    assert orjson.loads(bad.stdout)["streams"]["leads"]["error"].startswith("GET /v1/leads")
    assert "sk_wrong_key_12345" not in bad.stdout + bad.stderr
    usage = subprocess.run(
        [*cli, "--streams", "tickets"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert usage.returncode == 2 and "tickets" in usage.stderr
    nokey = subprocess.run(
        cli, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert nokey.returncode == 2 and "CONVO_API_KEY" in nokey.stderr
