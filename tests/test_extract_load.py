"""The load stage's mechanisms: deferred checkpoints, dedupe, transcripts, the loader thread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import ACME_KEY, RunningSandbox
from convo_analytics.extract._runner import Extraction
from extract_support import assert_complete, extract, warehouse_rows


def test_a_run_checkpoints_once_at_its_end(
    start_sandbox: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches commit to the write-ahead log only; the file gets them when the run ends."""
    running: RunningSandbox = start_sandbox(conversations=120)
    db = tmp_path / "w.duckdb"
    wal = Path(f"{db}.wal")
    seen: list[tuple[str, int]] = []
    commit = Extraction._commit

    def watched(ext: Extraction, *args: Any) -> None:
        commit(ext, *args)
        assert ext.con is not None
        row = ext.con.execute("SELECT current_setting('checkpoint_threshold')").fetchone()
        seen.append((str(row[0]) if row else "", wal.stat().st_size if wal.exists() else 0))

    monkeypatch.setattr(Extraction, "_commit", watched)
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
