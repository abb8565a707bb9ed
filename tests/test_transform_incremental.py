"""Incremental transforms: the marts they leave equal a full rebuild's, bit for bit.

Loads go through the real loaders (see incremental_support); the comparison is of every
mart's rows with exact floats and types.
"""

from __future__ import annotations

import random
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from convo_analytics.cli import main
from convo_analytics.transform import (
    DEFINITION_VERSION,
    TransformConfig,
    _rebuild,
    metrics_table,
    run_transform,
)
from convo_analytics.transform._mart_set import STAGING
from convo_analytics.transform._published import read_marts_cube
from convo_analytics.warehouse import open_warehouse
from incremental_support import (
    BASE,
    ZONES,
    World,
    assert_same_marts,
    ingest_events,
    iso,
    load_changes,
    load_conversations,
    load_leads,
    load_new,
    marts,
)
from transform_support import assert_same

CONFIG = TransformConfig(timezones=ZONES, reconcile=False)
OPERATIONS = ("new", "change", "leads", "events", "refetch", "transform")


def _apply(world: World, db: Path, con, operation: str, seed: int):  # type: ignore[no-untyped-def]
    """One load (or a transform); returns the connection (reopened after an ingest)."""
    rng = random.Random(seed)
    if operation == "new":
        load_conversations(con, world.new_conversations(rng), world.run_id())
    elif operation == "change":
        load_conversations(con, world.change(rng), world.run_id())
    elif operation == "leads":
        load_leads(con, world.lead_changes(rng), world.run_id())
    elif operation == "refetch":  # the same versions again: stored as they were
        same = sorted(world.conversations)[: rng.randrange(0, 6)]
        load_conversations(con, [world.conversations[c] for c in same], world.run_id())
    elif operation == "events":
        events = world.late_events(rng)
        con.close()
        ingest_events(db, events, f"events{world.events}")
        con = open_warehouse(db)
    else:
        assert run_transform(con, CONFIG).status == "ok"
    return con


#: Every kind of load, and transforms between them: written out below for each chunk size,
#: so that each kind meets both without waiting for the random draws to reach it.
EVERY_OPERATION = [("new", 11), ("change", 12), ("leads", 13), ("events", 14), ("transform", 15),
                   ("refetch", 16), ("change", 17), ("events", 18), ("leads", 19)]  # fmt: skip


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@example(operations=EVERY_OPERATION, chunk=3)
@example(operations=EVERY_OPERATION, chunk=400_000)
@example(  # an escalation merged from a later event of another conversation moves its time
    operations=[("new", 1808990727), ("events", 1463236161), ("new", 903819041),
                ("events", 616027059), ("transform", 1983087016), ("events", 2057328410)],
    chunk=400_000,
)  # fmt: skip
@given(
    operations=st.lists(
        st.tuples(st.sampled_from(OPERATIONS), st.integers(0, 2**31)), min_size=3, max_size=9
    ),
    chunk=st.sampled_from((3, 400_000)),
)
def test_random_loads_and_incremental_transforms_end_as_one_full_rebuild(
    operations: list[tuple[str, int]], chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever was loaded between transforms, the last incremental run leaves exactly the
    marts a full rebuild makes (chunk 3: changed conversations and full rebuilds in chunks)."""
    monkeypatch.setattr(_rebuild, "CHUNK_CONVERSATIONS", chunk)
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "w.duckdb"
        world = World()
        con = open_warehouse(db)
        try:
            load_new(con, world, 1)
            assert run_transform(con, CONFIG).mode == "full"
            for operation, seed in operations:
                con = _apply(world, db, con, operation, seed)
            last = run_transform(con, CONFIG)
            assert last.mode == "incremental", last.full_reason
            incremental = marts(con)
            assert run_transform(con, replace(CONFIG, full=True)).mode == "full"
            assert_same_marts(incremental, marts(con))
        finally:
            con.close()


def _runs(con) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    rows = con.execute(
        "SELECT mode, full_reason, changed_conversations, partitions FROM transform_runs "
        "WHERE status = 'ok' ORDER BY started_at"
    ).fetchall()
    return [
        {"mode": m, "reason": r, "changed": c, "partitions": orjson.loads(p)} for m, r, c, p in rows
    ]


def _days(partitions: dict[str, object], why: str) -> dict[tuple[object, str], str]:
    """(workspace, zone) -> day ranges of the partitions rewritten for that reason."""
    groups = partitions["partitions"]
    assert isinstance(groups, list)
    return {(g["workspace_id"], g["timezone"]): g["days"] for g in groups if why in g["why"]}


def test_each_change_rewrites_the_partitions_it_touches_and_says_why(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    world = World()
    con = open_warehouse(db)
    try:
        first = world.new_conversations(random.Random(5))
        load_conversations(con, first, world.run_id())
        assert run_transform(con, CONFIG).mode == "full"
        # nothing new: nothing rewritten
        quiet = run_transform(con, CONFIG)
        assert (quiet.mode, quiet.changed_conversations, quiet.partitions["count"]) == (
            "incremental", 0, 0,
        )  # fmt: skip
        # a late rating: the cohort of its start day, in every zone; its messages stay
        rated = next(c for c in first if c.messages)
        rated.rating, rated.rated = 5, rated.updated + timedelta(days=3)
        rated.updated = rated.rated
        load_conversations(con, [rated], world.run_id())
        result = run_transform(con, CONFIG)
        assert result.changed_conversations == 1
        cohort = _days(result.partitions, "conversations")
        for tz in ZONES:
            day = rated.created.astimezone(ZoneInfo(tz)).date().isoformat()
            assert cohort[(rated.workspace, tz)] == day
        assert not _days(result.partitions, "transcripts")
        # a reply weeks later: every day from the start to the reply, for the messages
        late = rated.updated + timedelta(days=20)
        world._exchange(rated, random.Random(2), late)
        load_conversations(con, [rated], world.run_id())
        result = run_transform(con, CONFIG)
        spans = _days(result.partitions, "transcripts")[(rated.workspace, "UTC")]
        assert spans == f"{rated.created.date()}..{late.date()}"
        # an escalation event for it, late by weeks: its own day's escalations
        when = rated.created + timedelta(days=40)
        event = {
            "event": "escalation.created", "timestamp": iso(when),
            "workspaceId": rated.workspace,
            "conversationId": rated.id,
            "data": {"escalationId": "late1", "reasonCode": "user_requested",
                     "destination": "crm", "origin": "manual"},
        }  # fmt: skip
        con.close()
        ingest_events(db, [event], "late")
        con = open_warehouse(db)
        result = run_transform(con, CONFIG)
        assert _days(result.partitions, "escalations")[(rated.workspace, "UTC")] == str(when.date())
        # another set of zones, another threshold, another definition version: everything
        zones = run_transform(con, replace(CONFIG, timezones=("UTC",)))
        assert (
            zones.full_reason == "time zones changed (UTC, Pacific/Honolulu, Asia/Kolkata -> UTC)"
        )
        threshold = run_transform(
            con, replace(CONFIG, timezones=("UTC",), low_confidence_threshold=0.7)
        )
        assert threshold.full_reason == "low-confidence threshold changed (0.5 -> 0.7)"
        con.execute("UPDATE mart_state SET definition_version = definition_version - 1")
        version = run_transform(
            con, replace(CONFIG, timezones=("UTC",), low_confidence_threshold=0.7)
        )
        assert version.full_reason == (
            f"definition version {DEFINITION_VERSION - 1} -> {DEFINITION_VERSION}"
        )
        recorded = _runs(con)
    finally:
        con.close()
    assert [r["mode"] for r in recorded] == [
        "full", "incremental", "incremental", "incremental", "incremental", "full", "full", "full",
    ]  # fmt: skip
    assert recorded[2]["changed"] == 1 and recorded[2]["partitions"]["count"] == len(ZONES)
    assert recorded[-1]["reason"] == version.full_reason


def test_a_full_rebuild_in_chunks_equals_one_in_one_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Facts a hash chunk at a time and daily marts a month at a time change nothing."""
    db = tmp_path / "w.duckdb"
    world = World()
    con = open_warehouse(db)
    try:
        for seed in range(4):
            load_new(con, world, seed)
            load_changes(con, world, seed + 10)
        load_leads(con, world.lead_changes(random.Random(3)), world.run_id())
        run_transform(con, replace(CONFIG, full=True))
        whole = marts(con)
        monkeypatch.setattr(_rebuild, "CHUNK_CONVERSATIONS", 2)
        assert run_transform(con, replace(CONFIG, full=True)).changed_conversations == len(
            world.conversations
        )
        assert_same_marts(marts(con), whole)
    finally:
        con.close()


#: A transform that stops, inside its transaction, right after ``_rebuild.<hold>`` (the
#: facts swapped, or the daily marts moved), until it is killed.
_HOLDING_TRANSFORM = """
import sys, time
from pathlib import Path
from convo_analytics.transform import TransformConfig, _rebuild, run_transform
from convo_analytics.warehouse import open_warehouse

db, hold, zones, full = sys.argv[1], sys.argv[2], tuple(sys.argv[3].split(",")), sys.argv[4]
original = getattr(_rebuild, hold)

def holding(*args, **kwargs):
    out = original(*args, **kwargs)
    print("holding", flush=True)
    time.sleep(120)
    return out

setattr(_rebuild, hold, holding)
config = TransformConfig(timezones=zones, reconcile=False, full=full == "full")
run_transform(open_warehouse(Path(db)), config)
"""


def _wait_for_line(child: subprocess.Popen[str], text: str, seconds: float) -> None:
    assert child.stdout is not None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([child.stdout], [], [], 0.5)
        if ready:
            line = child.stdout.readline()
            if text in line:
                return
            if not line and child.poll() is not None:
                break
    raise AssertionError(f"the transform never said {text!r} (exit {child.poll()})")


@pytest.mark.parametrize(
    ("mode", "hold"),
    [
        ("incremental", "_write_facts"),
        ("incremental", "refresh_percentiles"),
        ("full", "refresh_slices"),  # a full rebuild's facts staged and committed
    ],
)
def test_a_killed_transform_leaves_the_marts_whole_and_a_rerun_completes_them(
    tmp_path: Path, mode: str, hold: str
) -> None:
    db = tmp_path / "w.duckdb"
    world = World()
    con = open_warehouse(db)
    load_new(con, world, 8)
    load_new(con, world, 9)
    run_transform(con, CONFIG)
    before = marts(con)
    load_changes(con, world, 4)
    load_new(con, world, 6)
    load_leads(con, world.lead_changes(random.Random(7)), world.run_id())
    con.close()
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDING_TRANSFORM, str(db), hold, ",".join(ZONES), mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_line(child, "holding", 120)
    finally:
        child.kill()  # SIGKILL: no handler, no rollback of its own
        child.wait(timeout=30)
    con = open_warehouse(db)
    try:
        assert_same_marts(marts(con), before)
        staged = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE starts_with(table_name, '_staging_')"
        ).fetchall()[0][0]
        # the marts and the knowledge gaps made from them
        assert staged == (len(STAGING.all()) if mode == "full" else 0), "what it staged is there"
        rerun = run_transform(con, CONFIG)
        assert rerun.mode == "incremental" and rerun.changed_conversations > 0
        completed = marts(con)
        assert not con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE starts_with(table_name, '_staging_')"
        ).fetchall()[0][0]
        run_transform(con, replace(CONFIG, full=True))
        assert_same_marts(completed, marts(con))
    finally:
        con.close()


def test_summary_figures_are_the_same_with_several_workspaces(tmp_path: Path) -> None:
    """Per-day percentile rows are a workspace's; with several workspaces in a range the
    summary computes the day's percentiles from the histograms instead: same figures as
    the cube by slice, and as one workspace's rows when there is one."""
    db = tmp_path / "w.duckdb"
    world = World()
    con = open_warehouse(db)
    try:
        for seed in range(3):
            load_new(con, world, seed)
        run_transform(con, CONFIG)
        workspaces = con.execute(
            "SELECT count(DISTINCT coalesce(workspace_id, '')) FROM mart_daily_percentiles"
        ).fetchall()[0][0]
        assert workspaces > 1
        first, last = BASE.date(), (BASE + timedelta(days=9)).date()
        for tz in ZONES:
            summed = read_marts_cube(con, tz, 0.5, first=first, last=last, by_dimension=False)
            sliced = read_marts_cube(con, tz, 0.5, first=first, last=last)
            assert_same(
                metrics_table(summed, first, last).to_dicts(),
                metrics_table(sliced, first, last).to_dicts(),
            )
    finally:
        con.close()


def test_convo_transform_is_incremental_unless_full_is_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "w.duckdb"
    world = World()
    con = open_warehouse(db)
    load_new(con, world, 11)
    con.close()
    base = ["transform", "--db", str(db), "--no-reconcile", "--json"]
    runs = []
    for extra in ([], [], ["--full"]):
        assert main([*base, *extra]) == 0
        runs.append(orjson.loads(capsys.readouterr().out))
    assert [r["mode"] for r in runs] == ["full", "incremental", "full"]
    assert runs[1]["partitions"] == {"count": 0, "partitions": []}
    assert runs[2]["full_reason"] == "--full asked"
    assert runs[2]["definition_version"] == DEFINITION_VERSION
    assert runs[0]["mart_rows"] == runs[2]["mart_rows"]
    assert main([*base[:-1]]) == 0
    line = capsys.readouterr().err
    assert "incremental, 0 conversations changed; 0 partitions rewritten" in line
