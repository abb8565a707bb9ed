"""Helpers for extraction tests: run an extraction, compare the warehouse with the sandbox."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import duckdb

from convo_analytics.extract import ExtractConfig, ExtractResult, run_extract
from convo_analytics.sandbox._model import iso
from convo_analytics.sandbox._workspace import Workspace


def extract(url: str, key: str, db: Path, **overrides: Any) -> ExtractResult:
    config = ExtractConfig(
        base_url=url, api_key=key, db_path=db, **{"rate_limit": "none", **overrides}
    )
    return asyncio.run(run_extract(config))


def warehouse_rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def assert_complete(db: Path, ws: Workspace) -> None:
    """Every conversation (current version, with its transcript) and lead, each exactly once."""
    convs = ws.conversations.records
    rows = warehouse_rows(
        db,
        "SELECT id, strftime(updated_at, '%Y-%m-%dT%H:%M:%S.%g') || 'Z', "
        "detail_updated_at = updated_at, message_count FROM conversations",
    )
    assert len(rows) == len(convs), "one row per conversation"
    for rid, updated, detailed, count in rows:
        conv = convs[rid]
        assert updated == iso(conv.updated_at), rid
        assert detailed, f"{rid} has its current detail"
        assert count == len(conv.messages)
    messages = warehouse_rows(db, "SELECT id, conversation_id, position FROM messages")
    want = {(m.id, c.id, i) for c in convs.values() for i, m in enumerate(c.messages)}
    assert len(messages) == len(want) and set(messages) == want
    leads = {r[0]: r[1] for r in warehouse_rows(db, "SELECT id, score FROM leads")}
    assert leads == {lead.id: lead.score for lead in ws.leads.records.values()}


def extract_cli(url: str, db: Path, rate_limit: str = "none", *extra: str) -> list[str]:
    """The ``convo extract`` command line, run as a real subprocess by CLI tests."""
    import sys

    return [sys.executable, "-m", "convo_analytics.cli", "extract", "--base-url", url,
            "--db", str(db), "--rate-limit", rate_limit, *extra]  # fmt: skip


def cli_env(key: str | None, **extra: str) -> dict[str, str]:
    """A bare environment for a CLI subprocess: no CONVO_* settings leak in from ours."""
    env = {"PATH": "/usr/bin:/bin", **extra}
    if key is not None:
        env["CONVO_API_KEY"] = key
    return env
