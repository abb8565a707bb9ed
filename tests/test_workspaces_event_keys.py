"""The per-kind webhook tables key a subject by its workspace and its id (schema 6, decision
D-TRANSFORM-WORKSPACE-KEY): two workspaces' events of the same escalation, guardrail,
message, feedback or lead id are both stored and each counts for its own workspace's
conversation; within one workspace the first arrival of a subject still wins; a warehouse
of the previous schema upgrades in place, keeping every row."""

from __future__ import annotations

import gzip
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb

from convo_analytics.transform import TransformConfig, run_transform
from convo_analytics.warehouse import open_warehouse
from convo_analytics.warehouse._tables import EVENT_TABLES, SCHEMA_VERSION
from fixtures.make_events_fixture import events
from incremental_support import BASE, Conversation, ingest_events, iso, load_conversations
from webhook_support import delivery, rows, run

FIXTURE = Path(__file__).parent / "fixtures" / "warehouse-schema5-events.duckdb.gz"
#: One event of each kind the per-kind tables hold, all naming the same subject ids.
SUBJECTS = (
    ("message.responded", "message_traces", "message_id", {"messageId": "msg_1"}),
    ("guardrail.triggered", "guardrail_events", "guardrail_event_id",
     {"guardrailEventId": "ge_1", "messageId": "msg_1"}),
    ("conversation.feedback", "feedback", "feedback_id", {"feedbackId": "fb_1"}),
    ("lead.qualified", "lead_qualifications", "lead_id", {"leadId": "lead_1"}),
    ("escalation.created", "escalations", "escalation_key", {"escalationId": "esc_1"}),
    ("conversation.created", "conversation_lifecycle", "conversation_key", {}),
)  # fmt: skip


def _envelope(kind: str, workspace: str | None, minute: int, data: dict[str, Any]) -> dict:
    envelope = {
        "event": kind,
        "timestamp": f"2026-09-21T12:{minute:02d}:00Z",
        "conversationId": "conv_1",
        "data": {**data, "channel": f"ch_{workspace}_{minute}"},
    }
    if workspace is not None:
        envelope["workspaceId"] = workspace
    return envelope


def test_two_workspaces_subjects_of_one_id_are_both_stored(tmp_path: Path) -> None:
    lines = []
    for minute, workspace in enumerate(("ws_a", "ws_b", "ws_a", None)):
        for k, (kind, _, _, data) in enumerate(SUBJECTS):
            lines.append(delivery(_envelope(kind, workspace, minute, data), key=f"e{minute}{k}"))
    # the escalation completed by its second event in ws_a only, the conversation ended too
    completing = {"escalationId": "esc_1", "reason": "asked"}
    lines.append(delivery(_envelope("conversation.escalated", "ws_a", 5, completing), key="x1"))
    ended = {"outcome": "resolved"}
    lines.append(delivery(_envelope("conversation.completed", "ws_a", 6, ended), key="x2"))
    archive = tmp_path / "webhooks.jsonl"
    archive.write_bytes(b"".join(lines))
    counts = run(tmp_path, [archive])
    assert counts["loaded"] == 4 * len(SUBJECTS) + 2 and not counts["quarantined"]
    db = tmp_path / "w.duckdb"
    for k, (_, table, key, _) in enumerate(SUBJECTS[:4]):  # first arrival wins
        stored = rows(db, f"SELECT workspace_id, {key}, event_id FROM {table} ORDER BY ALL")
        # ws_a's second event of each subject (minute 2) is stored, its subject is not again
        assert stored == [(w, stored[0][1], f"e{m}{k}") for m, w in
                          ((3, "default"), (0, "ws_a"), (1, "ws_b"))], table  # fmt: skip
    assert rows(db, "SELECT workspace_id, seen_created, seen_escalated, reason_code "
                "FROM escalations ORDER BY ALL") == [
        ("default", True, False, None), ("ws_a", True, True, "asked"),
        ("ws_b", True, False, None)]  # fmt: skip
    assert rows(db, "SELECT workspace_id, channel, outcome FROM conversation_lifecycle "
                "ORDER BY ALL") == [
        ("default", "ch_None_3", None), ("ws_a", "ch_ws_a_0", "resolved"),
        ("ws_b", "ch_ws_b_1", None)]  # fmt: skip
    again = run(tmp_path, [archive], full=True)
    assert again["loaded"] == 0 and again["duplicates"] == counts["loaded"]
    for _, table, _, _ in SUBJECTS:
        assert rows(db, f"SELECT count(*) FROM {table}") == [(3,)], table


def _conversation(workspace: str, cid: str) -> Conversation:
    start = BASE + timedelta(hours=2)
    return Conversation(cid, workspace, "web", "pricing", "homepage", start, start)


def _fact_events(workspace: str | None, destination: str, flag: str) -> list[dict[str, Any]]:
    at = BASE + timedelta(hours=3)
    named = {} if workspace is None else {"workspaceId": workspace}
    return [
        {"event": "escalation.created", "timestamp": iso(at), **named, "conversationId": "c1",
         "data": {"escalationId": "esc_1", "reasonCode": "user_requested",
                  "destination": destination, "origin": "manual"}},
        {"event": "guardrail.triggered", "timestamp": iso(at), **named, "conversationId": "c1",
         "data": {"guardrailEventId": "ge_1", "messageId": "m", "flag": flag, "rule": "r",
                  "action": "logged", "excerpt": "x"}},
    ]  # fmt: skip


def test_each_workspace_event_counts_for_its_own_conversation(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    con = open_warehouse(db)
    load_conversations(con, [_conversation(w, "c1") for w in ("ws_a", "ws_b", "default")], "r1")
    con.close()
    ingest_events(db, _fact_events("ws_a", "crm", "pii.email"), "a")
    ingest_events(db, _fact_events("ws_b", "helpdesk", "pii.phone"), "b")
    ingest_events(db, _fact_events(None, "live-chat", "prompt_injection"), "flat")
    con = open_warehouse(db)
    try:
        assert run_transform(con, TransformConfig(reconcile=False)).status == "ok"
        escalations = con.execute(
            "SELECT workspace_id, escalation_id, conversation_id, destination "
            "FROM mart_escalations ORDER BY ALL"
        ).fetchall()
        incidents = con.execute(
            "SELECT workspace_id, incident_id, conversation_id, flag "
            "FROM mart_guardrail_incidents ORDER BY ALL"
        ).fetchall()
        escalated = con.execute(
            "SELECT workspace_id, escalations FROM mart_conversations ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()
    assert escalations == [
        ("default", "esc_1", "c1", "live-chat"),
        ("ws_a", "esc_1", "c1", "crm"),
        ("ws_b", "esc_1", "c1", "helpdesk"),
    ]
    assert incidents == [
        ("default", "ge_1", "c1", "prompt_injection"),
        ("ws_a", "ge_1", "c1", "pii.email"),
        ("ws_b", "ge_1", "c1", "pii.phone"),
    ]
    assert escalated == [("default", 1), ("ws_a", 1), ("ws_b", 1)]


def _table(con: duckdb.DuckDBPyConnection, name: str) -> set[tuple[Any, ...]]:
    return set(con.execute(f"SELECT * FROM {name}").fetchall())


def test_a_schema_5_warehouse_upgrades_keeping_every_event_row(tmp_path: Path) -> None:
    """The fixture's per-kind tables hold ws_a's subjects (ws_b's events of the same ids,
    stored in ``events``, got no rows) and subjects of events naming no workspace: after the
    upgrade they hold every row they held (NULL workspace read as ``default``), ws_b's too,
    exactly as a fresh ingest of the same deliveries makes them."""
    db = tmp_path / "old.duckdb"
    db.write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT max(version) FROM schema_version").fetchall() == [(5,)]
    before = {t.name: _table(con, t.name) for t in EVENT_TABLES}
    events_before = _table(con, "events")
    con.close()
    assert all(len(r) == 2 for r in before.values()), "ws_a's subjects and flat ones"
    open_warehouse(db).close()  # the upgrade
    fresh = tmp_path / "fresh" / "w.duckdb"
    fresh.parent.mkdir()
    archive = tmp_path / "webhooks.jsonl"
    archive.write_bytes(b"".join(events()))
    assert run(fresh.parent, [archive])["loaded"] == len(events_before)
    con = duckdb.connect(str(db), read_only=True)
    new = duckdb.connect(str(fresh), read_only=True)
    try:
        assert con.execute("SELECT max(version) FROM schema_version").fetchall() == [
            (SCHEMA_VERSION,)
        ]
        assert _table(con, "events") == events_before
        for table in EVENT_TABLES:
            at = [c.name for c in table.columns].index("workspace_id")
            kept = {(*r[:at], r[at] or "default", *r[at + 1 :]) for r in before[table.name]}
            upgraded = _table(con, table.name)
            if table.name not in ("escalations", "conversation_lifecycle"):  # merged anew
                assert kept <= upgraded, table.name
            assert upgraded == _table(new, table.name), table.name
            assert {r[at] for r in upgraded} == {"ws_a", "ws_b", "default"}, table.name
            nullable = con.execute(
                "SELECT is_nullable FROM information_schema.columns "
                "WHERE table_name = ? AND column_name = 'workspace_id'",
                [table.name],
            ).fetchall()
            assert nullable == [("NO",)], table.name
    finally:
        con.close()
        new.close()
