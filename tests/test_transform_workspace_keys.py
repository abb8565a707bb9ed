"""Two workspaces that number their records alike: each one's facts and marts are what they
would be alone, in the incremental path and in a full rebuild (decision D-WORKSPACE-ID).

The same loads are replayed into a warehouse holding both workspaces (transformed
incrementally between loads) and into one warehouse per workspace holding only its own
(transformed once, in full); every mart row of a workspace, and the summary made of them,
must be the same in both.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from convo_analytics.transform import (
    TransformConfig,
    incidents,
    repeated,
    run_transform,
    summary_body,
)
from convo_analytics.transform._cube import Cube
from convo_analytics.transform._frames import read_frame
from convo_analytics.warehouse import open_warehouse
from convo_analytics.warehouse._marts import DAILY_MARTS, MART_SLICES
from incremental_support import (
    BASE,
    ZONES,
    World,
    assert_same_marts,
    ingest_events,
    iso,
    load_conversations,
    load_leads,
    marts,
)

CONFIG = TransformConfig(timezones=ZONES, reconcile=False)
WORKSPACES = ("ws_a", "ws_b")
#: Days holding everything the world does (late replies and events included).
SPAN = (BASE.date() - timedelta(days=25), BASE.date() + timedelta(days=60))


@dataclass
class Script:
    """What was loaded, in order, as copies taken when it was loaded (the World changes its
    conversations in place): ``(kind, items)``, kind one of conversations, leads, events,
    transform."""

    steps: list[tuple[str, list[Any]]] = field(default_factory=list)

    def add(self, kind: str, items: list[Any]) -> None:
        self.steps.append((kind, copy.deepcopy(items)))


def _script() -> tuple[Script, World]:
    world = World()
    script = Script()
    for seed in range(6):
        script.add("conversations", world.new_conversations(random.Random(seed)))
    script.add("transform", [])
    for seed in range(10, 16):
        rng = random.Random(seed)
        script.add("conversations", world.change(rng))
        script.add("leads", world.lead_changes(rng))
        script.add("events", world.late_events(rng))
        script.add("conversations", world.new_conversations(rng))
        script.add("transform", [])
    script.add("events", _wrong_workspace_events(world))
    return script, world


def _wrong_workspace_events(world: World) -> list[dict[str, Any]]:
    """Escalations and incidents naming one workspace for a conversation id the other holds
    (whether or not the named one holds that id too): they are the named workspace's."""
    events = []
    for n, c in enumerate(world.in_workspace("ws_a")[:4]):
        other = "ws_b"
        events.append(
            {"event": "escalation.created", "timestamp": iso(c.updated + timedelta(minutes=5)),
             "workspaceId": other, "conversationId": c.id,
             "data": {"escalationId": f"cross_e{n}", "reasonCode": "sales_opportunity",
                      "destination": "crm", "origin": "manual"}}
        )  # fmt: skip
        events.append(
            {"event": "guardrail.triggered", "timestamp": iso(c.updated + timedelta(minutes=6)),
             "workspaceId": other, "conversationId": c.id,
             "data": {"guardrailEventId": f"cross_g{n}", "messageId": f"{c.id}_m0",
                      "flag": "pii.email", "rule": "r", "action": "escalated",
                      "excerpt": "a@b.example"}}
        )  # fmt: skip
    return events


def _replay(db: Path, script: Script, only: str | None) -> duckdb.DuckDBPyConnection:
    """Load the script (only ``only``'s records and events when given; its transforms only
    into the warehouse of both) and return the open warehouse."""
    con = open_warehouse(db)
    for index, (kind, items) in enumerate(script.steps):
        run_id = f"run{index + 1:04d}"
        if kind == "conversations":
            load_conversations(con, [c for c in items if only in (None, c.workspace)], run_id)
        elif kind == "leads":
            load_leads(con, [pair for pair in items if only in (None, pair[0])], run_id)
        elif kind == "events":
            events = [e for e in items if only in (None, e["workspaceId"])]
            if events:
                con.close()
                ingest_events(db, events, f"events{index}")
                con = open_warehouse(db)
        elif only is None:
            assert run_transform(con, CONFIG).status == "ok"
    return con


def _rows_of(marts: dict[str, pl.DataFrame], workspace: str) -> dict[str, pl.DataFrame]:
    """Each mart's rows of one workspace (mart_slices, shared by all, left out)."""
    return {
        name: frame.filter(pl.col("workspace_id") == workspace)
        for name, frame in marts.items()
        if name != MART_SLICES.name
    }


def _summary(con: duckdb.DuckDBPyConnection, workspace: str, tz: str) -> dict[str, Any]:
    """The service summary of one workspace over the whole world, from its mart rows."""
    frames = {
        name: read_frame(
            con,
            f"SELECT * EXCLUDE (timezone) FROM {table.name} WHERE timezone = ? "
            "AND workspace_id = ?",
            [tz, workspace],
        )
        for name, table in DAILY_MARTS.items()
    }
    cube = Cube.of(tz, 0.5, frames, slices=read_frame(con, f"SELECT * FROM {MART_SLICES.name}"))
    first, last = SPAN
    return summary_body(cube, first, last, workspace_id=workspace, generated_at="fixed")


def _repeats(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Conversations with guardrail incidents, each one of its workspace."""
    log = incidents(con, *SPAN, with_workspace=True)
    return repeated(log, "conversation_id", minimum=1).sort("workspace_id", "conversation_id")


def test_two_workspaces_with_the_same_ids_have_the_facts_and_marts_each_would_alone(
    tmp_path: Path,
) -> None:
    script, world = _script()
    ids = {ws: {c.id for c in world.in_workspace(ws)} for ws in WORKSPACES}
    assert ids["ws_a"] & ids["ws_b"], "the world must hold the same ids in both workspaces"

    both = _replay(tmp_path / "both.duckdb", script, None)
    try:
        last = run_transform(both, CONFIG)
        assert last.mode == "incremental", last.full_reason
        incremental = marts(both)
        summaries = {(ws, tz): _summary(both, ws, tz) for ws in WORKSPACES for tz in ZONES}
        repeats = _repeats(both)
        assert run_transform(both, replace(CONFIG, full=True)).mode == "full"
        full = marts(both)
        # the same conversation, message, escalation and guardrail ids in both, apart
        shared = both.execute(
            """SELECT (SELECT count(*) FROM (SELECT conversation_id FROM mart_conversations
                       GROUP BY ALL HAVING count(DISTINCT workspace_id) = 2)),
                      (SELECT count(*) FROM (SELECT id FROM messages
                       GROUP BY ALL HAVING count(DISTINCT workspace_id) = 2))"""
        ).fetchall()[0]
        assert min(shared) > 0, shared
        assert repeats.group_by("conversation_id").len()["len"].max() == 2, "shared ids"
    finally:
        both.close()
    assert_same_marts(incremental, full)

    for ws in WORKSPACES:
        alone = _replay(tmp_path / f"{ws}.duckdb", script, ws)
        try:
            assert run_transform(alone, CONFIG).mode == "full"
            own = marts(alone)
            assert set(own["mart_conversations"]["workspace_id"].to_list()) == {ws}
            assert repeats.filter(pl.col("workspace_id") == ws).equals(_repeats(alone))
            for tz in ZONES:
                expected = _summary(alone, ws, tz)
                assert expected["totals"]["conversations"] > 0
                assert summaries[(ws, tz)] == expected, (ws, tz)
        finally:
            alone.close()
        assert_same_marts(_rows_of(incremental, ws), _rows_of(own, ws))
        assert_same_marts(_rows_of(full, ws), _rows_of(own, ws))


def test_an_event_naming_the_other_workspace_never_attaches_to_this_ones_conversation(
    tmp_path: Path,
) -> None:
    """ws_a's conversation c000 and an escalation event for c000 naming ws_b: ws_a's facts
    do not count it; once ws_b loads its own c000, that one does (an incremental run)."""
    world = World()
    rng = random.Random(1)
    while not world.in_workspace("ws_a"):
        world.new_conversations(rng)
    mine = world.in_workspace("ws_a")[0]
    db = tmp_path / "w.duckdb"
    con = open_warehouse(db)
    load_conversations(con, [mine], "run0001")
    run_transform(con, CONFIG)
    con.close()
    event = {
        "event": "escalation.created", "timestamp": iso(mine.updated + timedelta(hours=1)),
        "workspaceId": "ws_b", "conversationId": mine.id,
        "data": {"escalationId": "x1", "reasonCode": "user_requested", "destination": "crm",
                 "origin": "manual"},
    }  # fmt: skip
    ingest_events(db, [event], "cross")
    con = open_warehouse(db)
    try:
        run_transform(con, CONFIG)
        counted = "SELECT workspace_id, conversation_id, escalations FROM mart_conversations"
        assert con.execute(counted).fetchall() == [("ws_a", mine.id, len(mine.escalations))]
        assert not con.execute(
            "SELECT * FROM mart_escalations WHERE seen_in = 'webhook'"
        ).fetchall()
        twin = replace(mine, workspace="ws_b", escalations=[], guardrails=[], messages=[])
        load_conversations(con, [twin], "run0002")
        result = run_transform(con, CONFIG)
        assert result.mode == "incremental" and result.changed_conversations == 1
        assert sorted(con.execute(counted + " ORDER BY ALL").fetchall()) == [
            ("ws_a", mine.id, len(mine.escalations)),
            ("ws_b", mine.id, 1),
        ]
        webhook = (
            "SELECT workspace_id, escalation_id FROM mart_escalations WHERE seen_in = 'webhook'"
        )
        assert con.execute(webhook).fetchall() == [("ws_b", "x1")]
    finally:
        con.close()
