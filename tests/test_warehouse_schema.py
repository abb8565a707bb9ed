"""A warehouse made by an older release is brought up to the current tables when opened."""

from __future__ import annotations

from pathlib import Path

import duckdb

from convo_analytics.warehouse import ALL_TABLES, open_warehouse
from convo_analytics.warehouse._tables import CONVERSATIONS


def _columns(db: Path) -> set[tuple[str, str]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
        ).fetchall()
    finally:
        con.close()
    return {(t, c) for t, c in rows}


def test_missing_tables_and_columns_are_added(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    open_warehouse(db).close()
    con = duckdb.connect(str(db))
    con.execute("ALTER TABLE conversations DROP COLUMN intent")
    con.execute("DROP TABLE mart_daily_latency")
    con.execute("INSERT INTO conversations (id, status) VALUES ('c1', 'open')")
    con.close()
    assert ("conversations", "intent") not in _columns(db)
    open_warehouse(db).close()
    want = {(t.name, c.name) for t in ALL_TABLES for c in t.columns}
    assert want <= _columns(db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT id, intent FROM conversations").fetchall() == [("c1", None)]
        # in the spec's order, since loads insert by position
        names = [r[0] for r in con.execute("DESCRIBE conversations").fetchall()]
        assert names == [c.name for c in CONVERSATIONS.columns]
    finally:
        con.close()
