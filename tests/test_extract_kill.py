"""kill -9 at any moment, then re-run: the warehouse ends complete, without duplicates."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import ACME_KEY, RunningSandbox
from extract_support import assert_complete, cli_env, extract_cli, warehouse_rows


def _start(url: str, db: Path, cwd: Path) -> subprocess.Popen[bytes]:
    env = cli_env(
        ACME_KEY,
        CONVO_EXTRACT_BATCH_SECONDS="0.2",
        CONVO_EXTRACT_BATCH_RECORDS="40",
        HOME=str(cwd),
    )
    cli = extract_cli(url, db, "80/s,burst=10", "--page-size", "50", "--json")
    return subprocess.Popen(
        cli, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )


def _wait_for_a_commit(db: Path, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Until the run has committed a batch (its log grew by one), however slow the machine is.

    The run's bookkeeping rows are small; a batch of conversations with their
    details and transcripts writes well over 64 KiB.
    """
    wal = db.with_name(db.name + ".wal")
    start = wal.stat().st_size if wal.exists() else 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if wal.exists() and wal.stat().st_size > start + 65_536:
            return
        assert proc.poll() is None, "the run ended before it was killed"
        time.sleep(0.02)
    raise AssertionError(f"no commit within {timeout} s")


def test_killed_runs_resume_to_a_complete_warehouse(start_sandbox, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    running: RunningSandbox = start_sandbox(conversations=350)
    db = tmp_path / "w.duckdb"
    for delay in (0.0, 1.0):  # right after a first commit, then deeper into the run
        proc = _start(running.url, db, tmp_path)
        _wait_for_a_commit(db, proc)
        time.sleep(delay)
        assert proc.poll() is None, "the run should still be going when it is killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # changes keep happening between runs, as they would in production
        running.admin(
            "/_sandbox/simulate",
            {"workspace": "acme", "progress": 5, "newConversations": 2, "seed": int(delay * 10)},
        )
    partial = warehouse_rows(db, "SELECT count(*) FROM conversations")[0][0]
    assert 0 < partial < 354, "the killed runs committed some batches, not all"
    final = _start(running.url, db, tmp_path)
    out, _ = final.communicate(timeout=120)
    assert final.returncode == 0, out
    assert_complete(db, running.sandbox.workspaces["ws_acme"])
    statuses = [
        r[0]
        for r in warehouse_rows(
            db, "SELECT status FROM extract_runs WHERE stream = 'conversations' ORDER BY started_at"
        )
    ]
    assert statuses == ["interrupted", "interrupted", "ok"]
    # the raw tables and messages have no index: the loader alone keeps them unique
    for raw in ("raw_conversations", "raw_conversation_details", "raw_leads"):
        dup = warehouse_rows(db, f"SELECT count(*) - count(DISTINCT (id, payload_hash)) FROM {raw}")
        assert dup == [(0,)], raw
    assert warehouse_rows(db, "SELECT count(*) - count(DISTINCT id) FROM messages") == [(0,)]
