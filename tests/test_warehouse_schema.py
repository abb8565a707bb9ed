"""A warehouse made by an older release is brought up to the current tables when opened."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import duckdb

from conftest import ACME_KEY, RunningSandbox
from convo_analytics.warehouse import ALL_TABLES, open_warehouse
from convo_analytics.warehouse._connection import compression_supported
from convo_analytics.warehouse._tables import (
    CONVERSATIONS,
    ESCALATIONS,
    EVENTS,
    MESSAGES,
    RAW_CONVERSATION_DETAILS,
    SCHEMA_VERSION,
)
from extract_support import extract, warehouse_rows


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
    con.execute("INSERT INTO conversations (id, workspace_id, status) VALUES ('c1', 'ws', 'open')")
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


def _keyed(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute(
        "SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'"
    ).fetchall()
    return {r[0] for r in rows}


def test_tables_gain_or_lose_their_key_index_as_the_spec_says(tmp_path: Path) -> None:
    """An older warehouse's events and first-arrival tables had a key index: rebuilt without."""
    db = tmp_path / "old.duckdb"
    open_warehouse(db).close()
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE events")
    con.execute(replace(EVENTS, indexed=True).ddl())
    con.execute("INSERT INTO events (event_id, workspace_id, payload) VALUES ('e1', 'w', '{}')")
    con.execute("DROP TABLE escalations")
    con.execute(replace(ESCALATIONS, indexed=False).ddl())
    con.execute("INSERT INTO escalations (workspace_id, escalation_key) VALUES ('ws', 'x1')")
    assert "events" in _keyed(con) and "escalations" not in _keyed(con)
    con.close()
    open_warehouse(db).close()
    con = duckdb.connect(str(db), read_only=True)
    try:
        keyed = _keyed(con)
        assert {t.name for t in ALL_TABLES if t.indexed} <= keyed
        assert not {t.name for t in ALL_TABLES if not t.indexed} & keyed
        assert con.execute("SELECT event_id, payload FROM events").fetchall() == [("e1", "{}")]
        assert con.execute("SELECT workspace_id, escalation_key FROM escalations").fetchall() == [
            ("ws", "x1")
        ]
    finally:
        con.close()


def test_a_file_in_an_older_storage_format_opens_without_the_columns_compression(
    tmp_path: Path,
) -> None:
    db = tmp_path / "v1.duckdb"
    con = duckdb.connect()
    con.execute(f"ATTACH '{db}' AS old (STORAGE_VERSION 'v1.0.0')")
    con.close()
    assert any(c.compression for c in EVENTS.columns)
    open_warehouse(db).close()  # zstd is not available in that format: the default is used
    con = duckdb.connect(str(db))
    try:
        assert not compression_supported(con)
        con.execute("INSERT INTO events (event_id, workspace_id, payload) VALUES ('e1', 'w', '{}')")
    finally:
        con.close()
    fresh = duckdb.connect(str(tmp_path / "new.duckdb"))
    try:
        assert compression_supported(fresh)
    finally:
        fresh.close()


def test_an_upgrade_fills_the_detail_tables_from_stored_details(
    shared_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    """A warehouse from before the detail escalation/guardrail tables gets them filled."""
    db = tmp_path / "w.duckdb"
    assert extract(shared_sandbox.url, ACME_KEY, db).ok
    want = {
        table: warehouse_rows(db, f"SELECT count(*) FROM {table}")[0][0]
        for table in ("conversation_escalations", "conversation_guardrail_events")
    }
    assert all(want.values())
    con = duckdb.connect(str(db))  # as the previous release left it
    con.execute("DELETE FROM conversation_escalations")
    con.execute("DELETE FROM conversation_guardrail_events")
    con.execute("DELETE FROM schema_version")
    con.execute("INSERT INTO schema_version VALUES (1, now())")
    con.close()
    open_warehouse(db).close()
    for table, count in want.items():
        assert warehouse_rows(db, f"SELECT count(*) FROM {table}")[0][0] == count
    open_warehouse(db).close()  # once only: a later open does not fill them again
    for table, count in want.items():
        assert warehouse_rows(db, f"SELECT count(*) FROM {table}")[0][0] == count


def _created(con: duckdb.DuckDBPyConnection, table: str) -> str:
    rows = con.execute("SELECT sql FROM duckdb_tables() WHERE table_name = ?", [table]).fetchall()
    return str(rows[0][0])


def test_raw_payloads_and_message_text_are_stored_with_zstd_even_in_an_older_file(
    tmp_path: Path,
) -> None:
    """Schema version 3: a file whose raw tables and messages predate zstd gets them rebuilt."""
    db = tmp_path / "old.duckdb"
    open_warehouse(db).close()
    con = duckdb.connect(str(db))
    for table in (RAW_CONVERSATION_DETAILS, MESSAGES):
        con.execute(f"DROP TABLE {table.name}")
        con.execute(table.ddl(compression=False))  # as release 2 made them
        assert "ZSTD" not in _created(con, table.name)
    con.execute(
        "INSERT INTO raw_conversation_details VALUES ('ws', ?, 'h1', NULL, ?, now(), 'r')",
        ["c1", '{"id":"c1"}'],
    )
    con.execute(
        "INSERT INTO messages (id, workspace_id, conversation_id, text) "
        "VALUES ('m1', 'ws', 'c1', 'hello')"
    )
    con.close()
    open_warehouse(db).close()
    con = duckdb.connect(str(db), read_only=True)
    try:
        for table, columns in (
            (RAW_CONVERSATION_DETAILS, ("payload_hash", "payload")),
            (MESSAGES, ('"text"',)),
        ):
            sql = _created(con, table.name)
            for column in columns:
                assert f"{column} " in sql and re.search(
                    rf"{re.escape(column)} \w+ USING COMPRESSION ZSTD", sql
                ), sql
        assert con.execute("SELECT id, payload FROM raw_conversation_details").fetchall() == [
            ("c1", '{"id":"c1"}')
        ]
        assert con.execute("SELECT id, text FROM messages").fetchall() == [("m1", "hello")]
        assert con.execute("SELECT max(version) FROM schema_version").fetchall() == [
            (SCHEMA_VERSION,)
        ]
    finally:
        con.close()
