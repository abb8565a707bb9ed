"""Publishing only what changed (issue 19): a republish of an unchanged warehouse commits
nothing, a changed day replaces that partition alone, a day gone from the warehouse leaves
the lake, a publish killed between its commits is completed even when the warehouse went
back meanwhile, a table dropped from the lake is made again, and old snapshots expire."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import orjson

from convo_analytics.lake import LAKE_TABLES, LakeConfig, lake_state, publish_lake
from lake_support import (
    Warehouse,
    assert_lake_equals,
    convo_here,
    current_rows,
    lake_config,
    lake_rows,
    warehouse_sql,
)

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = "lake_partitions"


def _publish(db: Path, config: LakeConfig, workspaces: list[str] | None = None, **kw: Any) -> Any:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return publish_lake(con, config, workspaces, **kw)
    finally:
        con.close()


def _snapshots(config: LakeConfig) -> dict[str, int | None]:
    catalog = config.open_catalog()
    out = {}
    for namespace in (config.namespace, config.records_namespace):
        for _, name in catalog.list_tables(namespace):
            snapshot = catalog.load_table((namespace, name)).current_snapshot()
            out[name] = snapshot.snapshot_id if snapshot else None
    return out


def _files(config: LakeConfig, table: str) -> set[str]:
    loaded = config.open_catalog().load_table((config.namespace, table))
    return {task.file.file_path for task in loaded.scan().plan_files()}


_sql = warehouse_sql


def _a_conversation(db: Path, workspace: str) -> tuple[str, date]:
    """A conversation of the workspace and its (UTC) day."""
    [(cid, day)] = _sql(db, "SELECT id, CAST(created_at AS DATE) FROM conversations "
                        "WHERE workspace_id = ? ORDER BY id LIMIT 1", [workspace])  # fmt: skip
    return cid, day


def _by_table(result: Any) -> dict[str, Any]:
    return {t.table: t for t in result.tables}


def test_an_unchanged_warehouse_commits_nothing(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "w.duckdb", ["ws_a", "ws_b"])
    warehouse.grow()
    config = lake_config(tmp_path / "lake")
    first = _publish(warehouse.path, config)
    assert all(t.attempts == 1 for t in first.tables if t.rows)
    before, state = _snapshots(config), lake_state(config)
    assert PARTITIONS in before and set(before) >= {t.name for t in LAKE_TABLES}
    # the record keeps to its own namespace: the data namespace lists the data tables only
    data_tables = {name for _, name in config.open_catalog().list_tables(config.namespace)}
    assert data_tables == {t.name for t in LAKE_TABLES}
    again = _publish(warehouse.path, config)
    assert [(t.rows, t.partitions, t.attempts) for t in again.tables] == [(0, 0, 0)] * len(
        again.tables
    )
    assert _snapshots(config) == before and lake_state(config) == state
    assert_lake_equals(config, warehouse.path, ["ws_a", "ws_b"])


def test_a_changed_month_replaces_that_partition_alone(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "w.duckdb", ["ws_a", "ws_b"])
    warehouse.grow(batches=2)
    config = lake_config(tmp_path / "lake")
    _publish(warehouse.path, config)
    files_before = _files(config, "conversations")
    cid, _ = _a_conversation(warehouse.path, "ws_a")
    _sql(warehouse.path, "UPDATE conversations SET intent = 'changed_by_test' WHERE id = ? "
         "AND workspace_id = 'ws_a'", [cid])  # fmt: skip
    result = _by_table(_publish(warehouse.path, config))
    changed = result["conversations"]
    assert (changed.partitions, changed.files, changed.attempts) == (1, 1, 1)
    assert changed.rows == _sql(
        warehouse.path, "SELECT count(*) FROM conversations WHERE workspace_id = 'ws_a' AND "
        "date_trunc('month', created_at) = (SELECT date_trunc('month', created_at) "
        "FROM conversations WHERE id = ? AND workspace_id = 'ws_a')", [cid])[0][0]  # fmt: skip
    assert all(t.attempts == 0 for name, t in result.items() if name != "conversations")
    files_after = _files(config, "conversations")
    assert len(files_before - files_after) == 1 and len(files_after - files_before) == 1
    assert_lake_equals(config, warehouse.path, ["ws_a", "ws_b"])


def test_a_day_gone_from_the_warehouse_leaves_the_lake(tmp_path: Path) -> None:
    """A day's rows gone: its month is replaced by the rest of the month; a month gone
    whole leaves the lake with no file."""
    warehouse = Warehouse(tmp_path / "w.duckdb", ["ws_a"])
    warehouse.grow(batches=2)
    config = lake_config(tmp_path / "lake")
    _publish(warehouse.path, config)
    [(day, gone)] = _sql(warehouse.path, "SELECT CAST(created_at AS DATE) d, count(*) FROM "
                         "messages GROUP BY d ORDER BY d LIMIT 1")  # fmt: skip
    month = "SELECT count(*) FROM messages WHERE date_trunc('month', created_at) = ?"
    [(before,)] = _sql(warehouse.path, month, [day.replace(day=1)])
    _sql(warehouse.path, "DELETE FROM messages WHERE CAST(created_at AS DATE) = ?", [day])
    messages = _by_table(_publish(warehouse.path, config))["messages"]
    assert (messages.partitions, messages.rows) == (1, before - gone) and gone > 0
    assert messages.files == (1 if before > gone else 0)
    assert_lake_equals(config, warehouse.path, ["ws_a"])
    _sql(warehouse.path, "DELETE FROM messages WHERE date_trunc('month', created_at) = ?",
         [day.replace(day=1)])  # fmt: skip
    messages = _by_table(_publish(warehouse.path, config))["messages"]
    assert (messages.rows, messages.files) == (0, 0) and messages.partitions == (before > gone)
    assert_lake_equals(config, warehouse.path, ["ws_a"])


_KILLED = """
import sys, time
from pathlib import Path
import duckdb
from convo_analytics.lake import LakeConfig, publish_lake
db, uri, files, marker = sys.argv[1:5]
con = duckdb.connect(db, read_only=True)
def on_table(t):
    if t.attempts:  # the marker appears whole (the test reads it at once)
        Path(marker + ".part").write_text(t.table)
        Path(marker + ".part").replace(marker)
        time.sleep(600)
publish_lake(con, LakeConfig(uri, files), on_table=on_table)
"""


def test_a_killed_publish_is_completed_even_when_the_warehouse_went_back(
    tmp_path: Path,
) -> None:
    """Killed after the changed table landed and before the record of it: the record says
    pending, so the next publish replaces the day though the warehouse holds what the lake's
    record held before the killed publish."""
    warehouse = Warehouse(tmp_path / "w.duckdb", ["ws_a"], seed=5)
    warehouse.grow()
    config = lake_config(tmp_path / "lake")
    _publish(warehouse.path, config)
    cid, _ = _a_conversation(warehouse.path, "ws_a")
    [(intent,)] = _sql(warehouse.path, "SELECT intent FROM conversations WHERE id = ?", [cid])
    _sql(warehouse.path, "UPDATE conversations SET intent = 'changed_by_test' WHERE id = ?", [cid])
    marker = tmp_path / "killed-after"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_KILLED), str(warehouse.path),
         config.catalog_uri, config.warehouse, str(marker)], cwd=ROOT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.read_text() == "conversations", "the publish never committed the change"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    landed = current_rows(config, "conversations", ["ws_a"])
    assert any(r["intent"] == "changed_by_test" for r in landed), "the change landed"
    seen = lake_rows(config, ["ws_a"])["conversations"]  # readers: the last complete publish
    assert not any("changed_by_test" in row for row in seen), "a reader saw half a publish"
    _sql(warehouse.path, "UPDATE conversations SET intent = ? WHERE id = ?", [intent, cid])
    result = _by_table(_publish(warehouse.path, config))
    assert result["conversations"].partitions == 1
    assert_lake_equals(config, warehouse.path, ["ws_a"])


def test_a_table_dropped_from_the_lake_is_made_again_whole(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "w.duckdb", ["ws_a", "ws_b"])
    warehouse.grow()
    config = lake_config(tmp_path / "lake")
    _publish(warehouse.path, config)
    config.open_catalog().drop_table(("convo", "messages"))
    result = _by_table(_publish(warehouse.path, config))
    months = _sql(warehouse.path, "SELECT count(DISTINCT (workspace_id, "
                  "date_trunc('month', created_at))) FROM messages")[0][0]  # fmt: skip
    assert result["messages"].partitions == months > 1
    assert all(t.attempts == 0 for name, t in result.items() if name != "messages")
    assert_lake_equals(config, warehouse.path, ["ws_a", "ws_b"])


def test_full_replaces_every_partition_and_old_snapshots_expire(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "w.duckdb", ["ws_a"])
    warehouse.grow()
    kept = lake_config(tmp_path / "lake")
    expiring = replace(kept, keep_snapshots_hours=0)
    for round_ in range(3):
        if round_ == 2:
            pinned = _snapshots(kept)  # what readers read until the third publish completes
        result = _publish(warehouse.path, expiring if round_ == 2 else kept, full=True)
        assert all(t.attempts == 1 for t in result.tables if t.rows), round_
    catalog = kept.open_catalog()
    for spec in LAKE_TABLES:
        table = catalog.load_table(("convo", spec.name))
        # every table was committed three times; the last commit expired the snapshots
        # before it but the one readers were pinned to while it ran
        held = {s.snapshot_id for s in table.metadata.snapshots}
        now = table.current_snapshot()
        assert held <= {pinned[spec.name], now.snapshot_id if now else None}, spec.name
    assert len(catalog.load_table(("convo_meta", PARTITIONS)).metadata.snapshots) == 1
    assert_lake_equals(kept, warehouse.path, ["ws_a"])


def test_the_command_says_what_changed_and_full_replaces_all(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "w.duckdb", ["ws_a"])
    warehouse.grow()
    env = {"HOME": str(tmp_path), "CONVO_LAKE_CATALOG_URI": f"sqlite:///{tmp_path / 'catalog.db'}",
           "CONVO_LAKE_WAREHOUSE": str(tmp_path / "files"),
           "CONVO_RUN_LOCK_FILE": str(tmp_path / "lock")}  # fmt: skip

    def publish(*args: str) -> subprocess.CompletedProcess[str]:
        """`convo publish --lake` run in this process as a user's process runs it."""
        done = convo_here(tmp_path, env, "publish", "--lake", "--db", str(warehouse.path), *args)
        assert done.returncode == 0, done.stderr
        return done

    first = orjson.loads(publish("--json").stdout)
    assert first["rows"] > 0
    unchanged = publish()
    assert unchanged.stderr.count(": unchanged") == len(LAKE_TABLES)
    assert "published 0 rows in 0 of" in unchanged.stderr
    full = orjson.loads(publish("--json", "--full").stdout)
    assert full["rows"] == first["rows"]
    assert all(t["attempts"] >= 1 for t in full["tables"] if t["rows"])


def test_the_row_filter_used_for_files_it_cannot_place_replaces_the_same(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Files the publish cannot place by partition (another spec, row deletes) are replaced
    through the row filter of the same partitions: same rows, and the others untouched."""
    from convo_analytics.lake import _publish as publish_module
    from convo_analytics.lake._changes import overwrite_filter

    warehouse = Warehouse(tmp_path / "w.duckdb", ["ws_a", "ws_b"])
    warehouse.grow(batches=2)
    # ws_a's messages spread over four months (a partition is a month)
    _sql(warehouse.path, "UPDATE messages SET created_at = created_at - "
         "to_months(CAST(hash(id) % 4 AS INTEGER)) WHERE workspace_id = 'ws_a'")  # fmt: skip
    config = lake_config(tmp_path / "lake")
    _publish(warehouse.path, config)
    used = []

    def unplaceable(changes: Any, column_type: str) -> Any:
        def fallback(table: Any) -> Any:
            used.append(changes.spec.name)
            return overwrite_filter(changes, column_type)

        return fallback

    monkeypatch.setattr(publish_module, "files_to_replace", unplaceable)
    months = _sql(warehouse.path, "SELECT DISTINCT CAST(date_trunc('month', created_at) AS DATE)"
                  " m FROM messages WHERE workspace_id = 'ws_a' ORDER BY m")  # fmt: skip
    assert len(months) >= 4
    changed = [months[0][0], months[1][0], months[-1][0]]  # a run of two months, one apart
    for month in changed:
        _sql(warehouse.path, "UPDATE messages SET text = text || ' (edited)' WHERE "
             "workspace_id = 'ws_a' AND date_trunc('month', created_at) = ?", [month])  # fmt: skip
    b_files = {f for f in _files(config, "messages") if "workspace_id=ws_b" in f}
    result = _by_table(_publish(warehouse.path, config))
    assert used == ["messages"] and result["messages"].partitions == 3
    assert {f for f in _files(config, "messages") if "workspace_id=ws_b" in f} == b_files
    assert_lake_equals(config, warehouse.path, ["ws_a", "ws_b"])
