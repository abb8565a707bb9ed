"""Many workspaces in one warehouse (issue 17): extracted at once, each with its own
credentials (API key, OAuth code grant, OAuth client credentials), rate limit and
bookmarks, keyed apart; one failing leaves the others loaded; a warehouse written by the
release before upgrades in place and equals a fresh load."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from conftest import ACME_KEY, RunningSandbox
from extract_support import assert_complete, extract, warehouse_rows
from workspace_support import configure_three, convo, three_settings

FIXTURE = Path(__file__).parent / "fixtures" / "warehouse-schema4.duckdb.gz"


@pytest.fixture
def three(start_sandbox: Any, tmp_path: Path) -> dict[str, Any]:
    """Three sandbox workspaces: acme by API key, globex by an OAuth login, initech by the
    client credentials of its confidential client."""
    return configure_three(start_sandbox(**three_settings()), tmp_path)


def test_three_workspaces_in_one_run_each_complete_and_apart(three: dict[str, Any]) -> None:
    cwd, running = three["dir"], three["sandbox"]
    db = cwd / "w.duckdb"
    done = convo(cwd, "extract", "--db", str(db), "--json", **three["env"])
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert set(result["workspaces"]) == {"acme", "globex", "initech"}
    for name in ("acme", "globex", "initech"):
        ws = running.sandbox.workspaces[f"ws_{name}"]
        assert result["workspaces"][name]["workspaceId"] == ws.id
        rows = warehouse_rows(
            db, f"SELECT count(*) FROM conversations WHERE workspace_id = '{ws.id}'"
        )
        assert rows == [(len(ws.conversations.records),)]
    marks = warehouse_rows(db, "SELECT workspace_id, stream FROM bookmarks ORDER BY 1, 2")
    assert len(marks) == 6, "bookmarks per workspace and stream"
    again = json.loads(convo(cwd, "extract", "--db", str(db), "--json", **three["env"]).stdout)
    for name, ws_result in again["workspaces"].items():
        assert ws_result["streams"]["conversations"]["new"] == 0, name


def test_one_failing_workspace_leaves_the_others_loaded(three: dict[str, Any]) -> None:
    cwd = three["dir"]
    db = cwd / "w.duckdb"
    done = convo(cwd, "extract", "--db", str(db), ACME_KEY="sk_wrong_key_000000")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert "failing: acme" in last, last
    held = dict(warehouse_rows(db, "SELECT workspace_id, count(*) FROM conversations GROUP BY 1"))
    assert set(held) == {"ws_globex", "ws_initech"}
    narrowed = convo(cwd, "extract", "--db", str(db), "--workspace", "globex", "--json",
                     **three["env"])  # fmt: skip
    assert narrowed.returncode == 0
    assert list(json.loads(narrowed.stdout)["workspaces"]) == ["globex"]


def test_colliding_ids_stay_apart(start_sandbox: Any, tmp_path: Path) -> None:
    """Two workspaces whose records share ids (a per-workspace counter) are keyed apart."""
    running: RunningSandbox = start_sandbox(conversations=20)
    db = tmp_path / "w.duckdb"
    import asyncio

    from convo_analytics.extract import ExtractConfig, run_extract_many

    configs = [
        ExtractConfig(base_url=running.url, api_key=ACME_KEY, db_path=db, rate_limit="none",
                      workspace=name, workspace_id=name, implicit_workspace=False)
        for name in ("copy-a", "copy-b")
    ]  # fmt: skip
    result = asyncio.run(run_extract_many(configs))
    assert result.ok
    counts = warehouse_rows(db, "SELECT workspace_id, count(*), count(DISTINCT id) FROM "
                                "conversations GROUP BY 1 ORDER BY 1")  # fmt: skip
    assert counts == [("copy-a", 20, 20), ("copy-b", 20, 20)], "the same ids, twice, apart"
    msgs = warehouse_rows(db, "SELECT count(*) FROM messages GROUP BY workspace_id")
    assert len(msgs) == 2 and msgs[0] == msgs[1]


_VOLATILE = {"run_id", "first_run_id", "last_run_id", "loaded_at", "fetched_at",
             "committed_at", "started_at", "finished_at", "duration_seconds"}  # fmt: skip


def _table(db: Path, table: str) -> set[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        cols = [c for (c,) in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position", [table]).fetchall() if c not in _VOLATILE]  # fmt: skip
        rows = con.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
        return {tuple(repr(v) if isinstance(v, list | dict) else v for v in r) for r in rows}
    finally:
        con.close()


def test_a_warehouse_of_the_previous_release_upgrades_in_place(
    start_sandbox: Any, tmp_path: Path
) -> None:
    old = tmp_path / "old.duckdb"
    old.write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    fresh = tmp_path / "fresh.duckdb"
    running: RunningSandbox = start_sandbox(conversations=40, days=7)
    from convo_analytics.warehouse import open_warehouse

    open_warehouse(old).close()  # the upgrade
    assert extract(running.url, ACME_KEY, fresh).ok
    for table in ("conversations", "messages", "leads", "conversation_escalations",
                  "conversation_guardrail_events", "raw_conversations", "raw_leads",
                  "raw_conversation_details"):  # fmt: skip
        assert _table(old, table) == _table(fresh, table), table
    # the summary's days are the last ones before each extraction: the days both hold agree
    before, after = _table(old, "service_summaries"), _table(fresh, "service_summaries")
    common = {row[2] for row in before} & {row[2] for row in after}
    assert len(common) >= 20, "the two extractions' summary windows overlap"
    assert {r for r in before if r[2] in common} == {r for r in after if r[2] in common}
    assert warehouse_rows(old, "SELECT DISTINCT workspace_id FROM bookmarks") == [("ws_acme",)]
    upgraded = extract(running.url, ACME_KEY, old)
    assert upgraded.ok
    conversations = upgraded.streams["conversations"]
    assert conversations.new == 0 and conversations.stats.requests <= 2, "the old bookmark held"
    assert_complete(old, running.sandbox.workspaces["ws_acme"])
