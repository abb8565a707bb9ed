"""Incremental transforms: the marts they leave equal a full rebuild's, bit for bit.

Loads go through the real loaders (see incremental_support); the comparison is of every
mart's rows with exact floats and types.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convo_analytics.transform import TransformConfig, _rebuild, run_transform
from convo_analytics.warehouse import open_warehouse
from incremental_support import (
    ZONES,
    World,
    assert_same_marts,
    ingest_events,
    load_conversations,
    load_leads,
    marts,
)

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


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
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
            load_conversations(con, world.new_conversations(random.Random(1)), world.run_id())
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
