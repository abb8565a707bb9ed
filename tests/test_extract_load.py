"""The load stage's mechanisms: deferred checkpoints, dedupe, transcripts, the loader thread."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from conftest import ACME_KEY, RunningSandbox
from convo_analytics.extract._list_stream import ListStreamRun
from extract_support import assert_complete, extract, warehouse_rows


def test_a_run_checkpoints_once_at_its_end(
    start_sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches commit to the write-ahead log only; the file gets them when the run ends."""
    running: RunningSandbox = start_sandbox(conversations=120)
    db = tmp_path / "w.duckdb"
    wal = Path(f"{db}.wal")
    seen: list[tuple[str, int]] = []
    commit = ListStreamRun._commit

    def watched(ext: ListStreamRun, *args: Any) -> None:
        commit(ext, *args)
        row = ext.con.execute("SELECT current_setting('checkpoint_threshold')").fetchone()
        seen.append((str(row[0]) if row else "", wal.stat().st_size if wal.exists() else 0))

    monkeypatch.setattr(ListStreamRun, "_commit", watched)
    assert extract(running.url, ACME_KEY, db, batch_records=40, page_size=20).ok
    assert len(seen) > 3
    assert all(threshold.endswith("MiB") and threshold != "16.0 MiB" for threshold, _ in seen)
    sizes = [size for _, size in seen]
    assert sizes == sorted(sizes) and sizes[0] > 0, "the log only grows during the run"
    assert not wal.exists() or wal.stat().st_size == 0, "the run checkpointed at its end"
    assert_complete(db, running.sandbox.workspaces["ws_acme"])


def test_only_changed_transcripts_are_rewritten(start_sandbox: Any, tmp_path: Path) -> None:
    """A re-fetched detail of the same version keeps its messages; a newer one replaces them."""
    running: RunningSandbox = start_sandbox(conversations=80)
    db = tmp_path / "w.duckdb"
    first = extract(running.url, ACME_KEY, db)
    assert first.ok
    sim = running.admin(
        "/_sandbox/simulate", {"workspace": "acme", "progress": 6, "newConversations": 0, "seed": 3}
    )
    changed = set(sim["changed"])
    assert changed
    refresh = extract(running.url, ACME_KEY, db, full_refresh=True)
    assert refresh.ok and refresh.streams["conversations"].details == 80
    assert_complete(db, running.sandbox.workspaces["ws_acme"])
    runs = dict(
        warehouse_rows(db, "SELECT conversation_id, any_value(run_id) FROM messages GROUP BY 1")
    )
    rewritten = {cid for cid, run in runs.items() if run == refresh.run_id}
    assert rewritten == changed & set(runs)
    assert {runs[cid] for cid in set(runs) - changed} == {first.run_id}


def _load_batch(con: Any, pages: list[dict[str, Any]], details: list[dict[str, Any]]) -> None:
    """One batch through the loader as the runner commits it (conversations stream)."""
    from datetime import UTC, datetime

    from convo_analytics.warehouse import WHOLE_BODY, RecordPaths, transaction
    from convo_analytics.warehouse import _load as load

    paths, now = RecordPaths("data", "id", "updatedAt"), datetime.now(UTC)
    with transaction(con):
        load.stage_records(con, "listed", [orjson.dumps(p) for p in pages], paths)
        load.insert_raw(con, "raw_conversations", "listed", "run", now)
        whole = RecordPaths(WHOLE_BODY, "id", "updatedAt")
        bodies = [orjson.dumps(d) for d in details]
        load.stage_details(con, "detailed", bodies, whole)
        load.insert_raw(con, "raw_conversation_details", "detailed", "run", now)
        load.merge_conversations(con, "listed", "detailed", "run", now)


def _conversation(cid: str, updated: str, messages: list[str]) -> dict[str, Any]:
    return {
        "id": cid,
        "updatedAt": updated,
        "messageCount": len(messages),
        "messages": [{"id": m, "role": "user", "text": m} for m in messages],
    }


def test_raw_versions_and_messages_stay_unique_without_indexes(tmp_path: Path) -> None:
    """Repeats within a batch and across batches are stored once, with no index to enforce it."""
    from convo_analytics.warehouse import open_warehouse

    con = open_warehouse(tmp_path / "w.duckdb")
    keyed = con.execute(
        "SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY' "
        "AND table_name IN ('raw_conversations', 'raw_conversation_details', 'messages')"
    ).fetchall()
    assert keyed == [], "the raw tables and messages are unique by construction"
    a1 = _conversation("c1", "2026-11-01T10:00:00.000Z", ["m1", "m2"])
    b1 = _conversation("c2", "2026-11-01T11:00:00.000Z", ["m3", "m2"])  # m2 is c1's too
    listed = [{"id": c["id"], "updatedAt": c["updatedAt"]} for c in (a1, b1)]
    # the same page and the same detail twice in one batch (a listing that moved under us)
    _load_batch(con, [{"data": listed}, {"data": listed[:1]}], [a1, b1, a1])
    _load_batch(con, [{"data": listed}], [a1, b1])  # a re-fetch of the same versions
    a2 = _conversation("c1", "2026-11-02T10:00:00.000Z", ["m1", "m4"])
    c3 = _conversation("c3", "2026-11-02T11:00:00.000Z", ["m3", "m5"])  # m3 is c2's: kept there
    later = [{"id": c["id"], "updatedAt": c["updatedAt"]} for c in (a2, c3)]
    _load_batch(con, [{"data": later}], [a2, c3])

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return con.execute(sql).fetchall()

    assert rows("SELECT id, count(*) FROM raw_conversations GROUP BY id ORDER BY id") == [
        ("c1", 2),
        ("c2", 1),
        ("c3", 1),
    ]
    assert rows("SELECT id, count(*) FROM raw_conversation_details GROUP BY id ORDER BY id") == [
        ("c1", 2),
        ("c2", 1),
        ("c3", 1),
    ]
    assert rows("SELECT conversation_id, id, position FROM messages ORDER BY id") == [
        ("c1", "m1", 0),
        ("c2", "m3", 0),
        ("c1", "m4", 1),
        ("c3", "m5", 1),
    ]
    con.close()


def test_batches_commit_in_the_loader_thread_while_fetching_goes_on(
    start_sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first commit holds on until the event loop has sent more requests, which it can
    only do if the commit does not block it."""
    running: RunningSandbox = start_sandbox(conversations=120)
    db = tmp_path / "w.duckdb"
    threads: list[str] = []
    progressed: list[bool] = []
    commit = ListStreamRun._commit

    def slow_commit(ext: ListStreamRun, *a: Any) -> None:
        threads.append(threading.current_thread().name)
        stats = ext.result.stats
        if not progressed:
            before = stats.requests
            waited = 0.0
            while stats.requests == before and waited < 20:
                time.sleep(0.01)
                waited += 0.01
            progressed.append(stats.requests > before)
        commit(ext, *a)

    monkeypatch.setattr(ListStreamRun, "_commit", slow_commit)
    assert extract(running.url, ACME_KEY, db, batch_records=40, page_size=20).ok
    assert progressed == [True], "requests went out while the first batch was committing"
    assert threads and all(name.startswith("convo-load") for name in threads)
    assert_complete(db, running.sandbox.workspaces["ws_acme"])


def test_a_failed_commit_fails_the_run_and_a_rerun_completes(
    start_sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    running: RunningSandbox = start_sandbox(conversations=120)
    db = tmp_path / "w.duckdb"
    commit = ListStreamRun._commit
    calls: list[int] = []

    def failing(ext: ListStreamRun, *args: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        commit(ext, *args)

    with monkeypatch.context() as patch:
        patch.setattr(ListStreamRun, "_commit", failing)
        with pytest.raises(RuntimeError, match="disk full"):
            extract(running.url, ACME_KEY, db, batch_records=40, page_size=20)
    assert len(calls) == 2, "no batch is committed after one failed"
    held = warehouse_rows(db, "SELECT count(*) FROM conversations")[0][0]
    assert 0 < held < 120
    assert extract(running.url, ACME_KEY, db).ok
    assert_complete(db, running.sandbox.workspaces["ws_acme"])


def test_staged_details_keep_bodies_verbatim_and_transcript_places(tmp_path: Path) -> None:
    """Details are staged as Arrow tables: the raw payload is the body byte for byte (its
    hash too), transcript items keep their places around a null item, malformed JSON is
    refused, and unstaging lets go of every staged table."""
    import hashlib
    from datetime import UTC, datetime

    import duckdb

    from convo_analytics.warehouse import WHOLE_BODY, RecordPaths, open_warehouse, transaction
    from convo_analytics.warehouse import _load as load

    con = open_warehouse(tmp_path / "w.duckdb")
    bodies = [
        b'{"id": "c1",  "updatedAt": "2026-11-01T10:00:00.000Z",\n "messages": '
        b'[{"id": "m1", "role": "user"}, null, {"id": "m2", "role": "assistant"}]}',
        b'{"id":"c2","updatedAt":"2026-11-01T11:00:00.000Z"}',
    ]
    page = [{"id": "c1", "updatedAt": "2026-11-01T10:00:00.000Z"}]
    page.append({"id": "c2", "updatedAt": "2026-11-01T11:00:00.000Z"})
    now, whole = datetime.now(UTC), RecordPaths(WHOLE_BODY, "id", "updatedAt")
    with transaction(con):
        load.stage_records(
            con, "listed", [orjson.dumps({"data": page})], RecordPaths("data", "id", "updatedAt")
        )
        load.stage_details(con, "detailed", bodies, whole)
        load.insert_raw(con, "raw_conversation_details", "detailed", "run", now)
        load.merge_conversations(con, "listed", "detailed", "run", now)
    load.unstage(con, "listed", "detailed")
    stored = con.execute(
        "SELECT payload::VARCHAR, payload_hash FROM raw_conversation_details ORDER BY id"
    ).fetchall()
    assert stored == [(b.decode(), hashlib.md5(b).hexdigest()) for b in bodies]
    assert con.execute(
        "SELECT conversation_id, id, position FROM messages ORDER BY position"
    ).fetchall() == [
        ("c1", "m1", 0),
        ("c1", "m2", 2),
    ]
    for name in ("detailed", "detailed_messages", "listed"):
        with pytest.raises(duckdb.CatalogException):
            con.execute(f"SELECT count(*) FROM {name}")
    with pytest.raises(duckdb.InvalidInputException, match="Malformed JSON"):
        load.stage_details(con, "detailed", [b'{"id": "c3",'], whole)
    con.close()
