"""The transform benchmarks' synthetic warehouse, and the nights that change it.

The warehouse is made by DuckDB SQL straight into the source tables (a year of
conversations, ten messages each, 15 % leads, 10 % escalated, 5 % with a
guardrail event, a daily rhythm and realistic mixes), because generating and
extracting millions of conversations through the sandbox would take far
longer than the transform it feeds. Rows carry run ids as the loaders stamp
them, so that an incremental transform sees what a night changed.

A night changes 1 % of the conversations, as the loaders would write it (a
changed conversation's row gets the night's run id, and its transcript is
deleted and written again, the loader's way even when it did not change):

- ``recent``: 0.3 % new conversations (the next day and a bit), 0.5 % of the
  newest ones finishing (two more messages, resolved), and 0.2 % spread over
  the whole year getting a late rating and their lead qualified (the detail
  re-fetched, its transcript the same);
- ``spread``: 1 % spread over the whole year each getting two more messages
  and resolved: every day's messages change (the worst case for an
  incremental run).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

if TYPE_CHECKING:
    from _common import BenchContext, Report

ROOT = Path(__file__).resolve().parents[2]

MESSAGES_PER_CONVERSATION = 10
YEAR_START = "2025-11-21 00:00:00+00"
CHANNELS = ["web"] * 5 + ["whatsapp", "whatsapp", "messenger", "sms", "email"]
LOCALES = ["en-US", "en-US", "en-GB", "de-DE", "fr-FR", "es-ES", "ja-JP"]
INTENTS = ["support", "pricing", "billing", "product_question", "purchase"]
SOURCES = ["homepage", "help-center", "pricing-page", "mobile-app"]
TIERS = ["fast", "fast", "standard", "premium"]
#: What users and the assistant say (Conversations' search reads message text).
SENTENCES = ["How do I reset my password?", "I was charged twice this month",
             "Can I get a refund for my order?", "What does the premium plan cost?",
             "The dashboard will not load since this morning", "Do you ship to Canada?",
             "Thanks, that solved it", "Can I talk to a person please?",
             "Here is how to reset it: open Settings, then Security.",
             "Refunds reach the original card within 14 days."]  # fmt: skip
#: The synthetic warehouse's layout version, in its file name: a builder change makes a new
#: file instead of reusing one without the new columns (4: message text, run ids and workspaces).
LAYOUT = 4
BUILD_RUN = "20251121T000000Z-build"
#: The span the conversations are spread over (the benchmarks' figures: a year).
YEAR_DAYS = 365


def _pick(expr: str, salt: str, options: list[str]) -> str:
    """SQL choosing one of ``options`` from a hash of ``expr`` (deterministic)."""
    values = ", ".join(f"'{o}'" for o in options)
    return f"([{values}])[1 + (hash({expr}, '{salt}') % {len(options)})::BIGINT]"


def _start(n: int, days: int = YEAR_DAYS) -> str:
    """Conversation i's start: ``days`` (a year) cut in n equal steps (i >= n: the days
    after)."""
    span = days * 86_400_000_000
    return f"TIMESTAMPTZ '{YEAR_START}' + to_microseconds((i * ({span} // {n}))::BIGINT)"


def _ids(lo: int, hi: int, where: str = "TRUE") -> str:
    return f"(SELECT i FROM range({lo}, {hi}) t(i) WHERE {where}) t"


def _conversations(
    con: duckdb.DuckDBPyConnection, ids: str, n: int, run: str, days: int = YEAR_DAYS
) -> None:
    start = _start(n, days)
    roll = "hash(i, 'status') % 100"
    con.execute(
        f"""INSERT INTO conversations BY NAME
        SELECT 'c' || i AS id, 'ws_bench' AS workspace_id,
               'u' || (hash(i, 'user') % {max(1, n // 3)}) AS external_user_id,
               {_pick("i", "ch", CHANNELS)} AS channel,
               {_pick("i", "lo", LOCALES)} AS locale,
               {_pick("i", "in", INTENTS)} AS intent,
               {_pick("i", "so", SOURCES)} AS source,
               CASE WHEN {roll} < 60 THEN 'resolved' WHEN {roll} < 85 THEN 'abandoned'
                    ELSE 'open' END AS status,
               {start} AS created_at,
               {start} + INTERVAL 20 MINUTE AS updated_at,
               CASE WHEN {roll} < 85 THEN {start} + to_microseconds(
                   (300 + hash(i, 'end') % 3600)::BIGINT * 1000000) END AS ended_at,
               CASE WHEN hash(i, 'esc') % 100 < 10 THEN 1 + (hash(i, 'esc2') % 10 = 0)::INT
                    ELSE 0 END AS escalation_count,
               hash(i, 'esc') % 100 < 10 AS escalated,
               CASE WHEN hash(i, 'fb') % 100 < 20 THEN 1 + hash(i, 'rating') % 5 END
                   AS feedback_rating,
               CASE WHEN hash(i, 'lead') % 100 < 15 THEN 'l' || i END AS lead_id,
               {start} + INTERVAL 20 MINUTE AS detail_updated_at,
               '{run}' AS first_run_id, '{run}' AS last_run_id, now() AS loaded_at
        FROM {ids}"""
    )


def _messages(
    con: duckdb.DuckDBPyConnection, ids: str, n: int, count: int, run: str, days: int = YEAR_DAYS
) -> None:
    start = _start(n, days)
    con.execute(
        f"""INSERT INTO messages BY NAME
        SELECT 'm' || i || '_' || p AS id, 'ws_bench' AS workspace_id,
               'c' || i AS conversation_id, p AS position,
               CASE WHEN p % 2 = 0 THEN 'user' ELSE 'assistant' END AS role,
               {_pick("i + p", "say", SENTENCES)} || ' (#' || (i % 9973) || ')' AS text,
               {start} + to_microseconds((p * 30 + hash(i, p) % 20)::BIGINT * 1000000)
                   AS created_at,
               CASE WHEN p % 2 = 1 THEN 150 + hash(i, p, 'lat') % 4000 END AS latency_ms,
               CASE WHEN p % 2 = 1 THEN (hash(i, p, 'conf') % 10000) / 10000.0 END AS confidence,
               CASE WHEN p % 2 = 1 THEN {_pick("i + p", "tier", TIERS)} END AS model_tier,
               'web' AS channel, '{run}' AS run_id
        FROM {ids}, range({count}) q(p)"""
    )


def _children(
    con: duckdb.DuckDBPyConnection, ids: str, n: int, run: str, days: int = YEAR_DAYS
) -> None:
    """Leads, escalations and guardrail events of new conversations."""
    start = _start(n, days)
    con.execute(
        f"""INSERT INTO leads BY NAME
        SELECT 'l' || i AS id, 'c' || i AS conversation_id, 'ws_bench' AS workspace_id,
               (hash(i, 'score') % 101)::DOUBLE AS score,
               {_pick("i", "in", INTENTS)} AS intent,
               {start} + INTERVAL 2 MINUTE AS created_at, {start} + INTERVAL 5 MINUTE AS updated_at,
               CASE WHEN hash(i, 'score') % 101 >= 70 THEN {start} + INTERVAL 5 MINUTE END
                   AS qualified_at,
               CASE WHEN hash(i, 'mail') % 2 = 0 THEN 'p' || i || '@example.com' END AS email,
               '{run}' AS first_run_id, '{run}' AS last_run_id, now() AS loaded_at
        FROM {ids} WHERE hash(i, 'lead') % 100 < 15"""
    )
    reasons = ["user_requested", "low_confidence", "sales_opportunity"]
    con.execute(
        f"""INSERT INTO conversation_escalations BY NAME
        SELECT 'e' || i || '_' || k AS id, 'ws_bench' AS workspace_id,
               'c' || i AS conversation_id, k AS position,
               {start} + to_microseconds((90 + k * 60)::BIGINT * 1000000) AS created_at,
               {_pick("i + k", "reason", reasons)} AS reason_code,
               {_pick("i + k", "dest", ["helpdesk", "live-chat", "crm"])} AS destination,
               'automatic' AS origin, '{run}' AS run_id
        FROM {ids}, range(2) r(k)
        WHERE hash(i, 'esc') % 100 < 10 AND k < 1 + (hash(i, 'esc2') % 10 = 0)::INT"""
    )
    flags = ["pii.email", "pii.phone", "prompt_injection", "blocked_term"]
    con.execute(
        f"""INSERT INTO conversation_guardrail_events BY NAME
        SELECT 'g' || i AS id, 'ws_bench' AS workspace_id, 'c' || i AS conversation_id,
               0 AS position,
               'm' || i || '_0' AS message_id, {start} AS triggered_at,
               {_pick("i", "flag", flags)} AS flag,
               'rule' AS rule, 'privacy' AS category, 'medium' AS severity, 'logged' AS action,
               'write to p' || i || '@example.com or call +1 555 010 ' || (i % 10000) AS excerpt,
               '{run}' AS run_id
        FROM {ids} WHERE hash(i, 'grd') % 100 < 5"""
    )


def build_warehouse(path: Path, conversations: int, days: int = YEAR_DAYS) -> None:
    """Fill a new warehouse with ``conversations`` conversations and 10 messages each, over
    ``days`` (a year; a smoke run's fewer days make fewer, as tiny, day partitions)."""
    from convo_analytics.warehouse import open_warehouse

    tmp = path.with_name(path.name + ".partial")
    tmp.unlink(missing_ok=True)
    con = open_warehouse(tmp)
    n = conversations
    ids = _ids(0, n)
    _conversations(con, ids, n, BUILD_RUN, days)
    _messages(con, ids, n, MESSAGES_PER_CONVERSATION, BUILD_RUN, days)
    _children(con, ids, n, BUILD_RUN, days)
    con.execute("CHECKPOINT")
    con.close()
    tmp.replace(path)


def warehouse_path(folder: Path, conversations: int) -> Path:
    """Where the synthetic warehouse of ``conversations`` conversations is kept."""
    return folder / f"transform-v{LAYOUT}-{conversations}.duckdb"


def synthetic_warehouse(ctx: BenchContext, report: Report) -> tuple[Path, int]:
    """The readers' benchmarks' synthetic warehouse for this run's size (built once and
    kept), and that size."""
    from _common import DATA_DIR

    # smoke: 500 (at 2,000 the first reader's transform spent 4 s more discovering topics)
    conversations = ctx.size(1_000_000, 100_000, 500)
    folder = DATA_DIR
    folder.mkdir(parents=True, exist_ok=True)
    db = warehouse_path(folder, conversations)
    if not db.exists():
        started = time.perf_counter()
        build_warehouse(db, conversations)
        report.note(
            f"built the synthetic warehouse in {time.perf_counter() - started:.1f} s (kept)"
        )
    return db, conversations


def publish_transformed(db: str, published: str) -> None:
    """Transform the warehouse unless its marts are current, and publish a snapshot of it
    (what the readers' benchmarks read)."""
    from convo_analytics.publish import publish_snapshot
    from convo_analytics.transform import TransformConfig, latest_transform, run_transform
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(Path(db))
    run = latest_transform(con)
    if run is None or "mart_daily_percentiles" not in run.marts:
        run_transform(con, TransformConfig(reconcile=False))
    publish_snapshot(con, Path(db), Path(published), keep=1)
    con.close()


def _rewrite(
    con: duckdb.DuckDBPyConnection,
    ids: str,
    n: int,
    count: int,
    run: str,
    changes: str,
    days: int = YEAR_DAYS,
) -> int:
    """Conversations whose detail the night loads again: transcript deleted and written
    (``count`` messages), the row updated (``changes``) with the night's run id."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE night AS SELECT 'c' || i AS id FROM {ids}")
    con.execute("DELETE FROM messages WHERE conversation_id IN (SELECT id FROM night)")
    _messages(con, ids, n, count, run, days)
    con.execute(
        f"""UPDATE conversations SET {changes}, updated_at = updated_at + INTERVAL 1 DAY,
               detail_updated_at = updated_at + INTERVAL 1 DAY, last_run_id = '{run}',
               loaded_at = now()
            WHERE id IN (SELECT id FROM night)"""
    )
    rows = con.execute("SELECT count(*) FROM night").fetchall()
    return int(rows[0][0])


def apply_night(path: Path, n: int, kind: str, night: int, days: int = YEAR_DAYS) -> int:
    """Change 1 % of the ``n`` conversations (built over ``days``) as night number
    ``night`` (1, 2, ...) would load it; returns how many changed."""
    run = f"20261122T{night:02d}0000Z-night"
    con = duckdb.connect(str(path))
    con.execute("SET TimeZone = 'UTC'")
    try:
        con.execute("BEGIN TRANSACTION")
        grown = "status = 'resolved', ended_at = created_at + INTERVAL 2 HOUR"
        if kind == "recent":
            first = n + (night - 1) * (n * 3 // 1000)
            new = _ids(first, first + n * 3 // 1000)
            _conversations(con, new, n, run, days)
            _messages(con, new, n, MESSAGES_PER_CONVERSATION, run, days)
            _children(con, new, n, run, days)
            changed = n * 3 // 1000
            newest = _ids(first - n * 5 // 1000, first)
            changed += _rewrite(con, newest, n, 12, run, grown, days)
            late = _ids(0, n, f"i % 500 = {(7 * night) % 500}")
            rated = "feedback_rating = 5"
            changed += _rewrite(con, late, n, MESSAGES_PER_CONVERSATION, run, rated, days)
            con.execute(
                f"""UPDATE leads SET qualified_at = updated_at + INTERVAL 1 DAY,
                       updated_at = updated_at + INTERVAL 1 DAY, last_run_id = '{run}'
                    WHERE conversation_id IN (SELECT id FROM night)"""
            )
        elif kind == "spread":
            spread = _ids(0, n, f"i % 100 = {(3 * night) % 100}")
            changed = _rewrite(con, spread, n, 12, run, grown, days)
        else:
            raise ValueError(f"unknown night {kind!r}")
        con.execute("COMMIT")
        con.execute("CHECKPOINT")
        return changed
    finally:
        con.close()
