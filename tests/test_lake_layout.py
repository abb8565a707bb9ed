"""The lake's layout at a year's scale (issue 31, D-LAKE-MONTHS, D-LAKE-ONE-SNAPSHOT,
D-LAKE-ORPHANS, D-LAKE-VERSION-HINT): a 365-day history of two workspaces, published once
and then incrementally.

- files follow months: at most 14 live data files per table per workspace (13 calendar
  months and slack), one per month the table has rows in;
- each publish adds exactly one snapshot per table it changes (none to the others);
- pyiceberg and DuckDB over the Parquet files the table lists read equal counts, and a
  reader given only the table's folder finds its metadata through ``version-hint.text``;
- a publish killed -9 after writing its files and before committing them leaves orphans
  that the next publish removes; a lone unreferenced file is kept while younger than
  ``lake.orphan_min_age_minutes`` and removed once older;
- a table an earlier release cut by day is republished by month.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest

from convo_analytics.lake import LAKE_TABLES, LakeConfig, publish_lake
from convo_analytics.transform import run_transform
from lake_support import TRANSFORM, Warehouse, assert_lake_equals, by_day_layout, lake_config
from lake_support import warehouse_sql as _sql

WORKSPACES = ["ws_a", "ws_b"]


def _publish(db: Path, config: LakeConfig, **kw: Any) -> Any:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return publish_lake(con, config, None, **kw)
    finally:
        con.close()


def _year(path: Path) -> Warehouse:
    """Two workspaces whose conversations (and everything of them) spread over 365 days."""
    warehouse = Warehouse(path, WORKSPACES, seed=7)
    warehouse.grow(batches=10)
    con = duckdb.connect(str(path))
    try:  # each workspace's conversations spread evenly over the year before the newest
        con.execute(
            "CREATE TEMP TABLE shift AS SELECT id, workspace_id, to_days(CAST((row_number() "
            "OVER w - 1) * 364 // count(*) OVER w AS INTEGER)) AS back FROM conversations "
            "WINDOW w AS (PARTITION BY workspace_id ORDER BY id ROWS BETWEEN UNBOUNDED "
            "PRECEDING AND UNBOUNDED FOLLOWING)"
        )
        con.execute("UPDATE conversations c SET created_at = c.created_at - s.back, updated_at "
                    "= c.updated_at - s.back FROM shift s WHERE c.id = s.id")  # fmt: skip
        con.execute("UPDATE messages m SET created_at = m.created_at - s.back FROM shift s "
                    "WHERE m.conversation_id = s.id")  # fmt: skip
    finally:
        con.close()
    con = duckdb.connect(str(path))
    try:
        assert run_transform(con, replace(TRANSFORM, full=True)).status == "ok"
    finally:
        con.close()
    return warehouse


@pytest.fixture(scope="module")
def year(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _year(tmp_path_factory.mktemp("year") / "w.duckdb").path


def _live_files(config: LakeConfig, table: str) -> list[str]:
    loaded = config.open_catalog().load_table((config.namespace, table))
    return [task.file.file_path for task in loaded.scan().plan_files()]


def _snapshot_count(config: LakeConfig) -> dict[str, int]:
    catalog = config.open_catalog()
    return {
        name: len(catalog.load_table((config.namespace, name)).metadata.snapshots)
        for _, name in catalog.list_tables(config.namespace)
    }


def _parquet_on_disk(folder: Path) -> set[str]:
    return {str(p) for p in (folder / "files").rglob("*.parquet")}


def _referenced(config: LakeConfig) -> set[str]:
    """Every data file a retained snapshot of any table references (plain paths)."""
    catalog = config.open_catalog()
    out: set[str] = set()
    listed = [
        *catalog.list_tables(config.namespace),
        *catalog.list_tables(config.records_namespace),
    ]
    for identifier in listed:
        table = catalog.load_table(identifier)
        for snapshot in table.metadata.snapshots:
            for manifest in snapshot.manifests(table.io):
                for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                    out.add(entry.data_file.file_path.removeprefix("file://"))
    return out


def _stray_metadata(config: LakeConfig) -> dict[str, list[str]]:
    """Per table, metadata files in its folder that neither its current metadata nor its
    metadata log names (files a publish left behind)."""
    catalog = config.open_catalog()
    stray = {}
    for identifier in catalog.list_tables(config.namespace):
        table = catalog.load_table(identifier)
        named = {table.metadata_location, *(e.metadata_file for e in table.metadata.metadata_log)}
        named = {n.removeprefix("file://") for n in named}
        folder = Path(table.metadata_location.removeprefix("file://")).parent
        extra = sorted(str(p) for p in folder.glob("*.metadata.json") if str(p) not in named)
        if extra:
            stray[identifier[1]] = extra
    return stray


def test_a_year_is_a_file_per_month_and_a_publish_one_snapshot_per_changed_table(
    year: Path, tmp_path: Path
) -> None:
    db = tmp_path / "w.duckdb"
    db.write_bytes(year.read_bytes())
    config = lake_config(tmp_path / "lake")
    first = _publish(db, config)
    assert first.rows > 0
    [(months,)] = _sql(db, "SELECT count(DISTINCT date_trunc('month', created_at)) FROM "
                       "messages WHERE workspace_id = 'ws_a'")  # fmt: skip
    assert 12 <= months <= 14, "the history spans a year"
    for spec in LAKE_TABLES:
        files = _live_files(config, spec.name)
        for ws in WORKSPACES:
            mine = [f for f in files if f"/workspace_id={ws}/" in f]
            assert len(mine) <= 14, (spec.name, ws, len(mine))
    messages = [f for f in _live_files(config, "messages") if "/workspace_id=ws_a/" in f]
    assert len(messages) == months  # one file per month with rows
    # a change to one conversation: one new snapshot for each table it touches, no other
    before = _snapshot_count(config)
    _sql(db, "UPDATE conversations SET intent = 'changed_by_test' WHERE id = "
         "(SELECT min(id) FROM conversations WHERE workspace_id = 'ws_a')")  # fmt: skip
    con = duckdb.connect(str(db))
    try:
        assert run_transform(con, TRANSFORM).status == "ok"
    finally:
        con.close()
    result = _publish(db, config)
    changed = {t.table for t in result.tables if t.attempts}
    assert "conversations" in changed
    after = _snapshot_count(config)
    for name, count in after.items():
        if name in changed:
            assert count == before[name] + 1, name
        elif name != "lake_partitions":
            assert count == before[name], name
    catalog = config.open_catalog()
    conversations = catalog.load_table(("convo", "conversations"))
    assert conversations.current_snapshot().summary.operation.value == "overwrite"
    assert_lake_equals(config, db, WORKSPACES)
    # a publish of tables the lake has leaves no metadata file outside the tables' logs
    assert _stray_metadata(config) == {}
    # DuckDB over the listed Parquet files, and a reader with the folder alone
    from pyiceberg.table import StaticTable

    for name in ("messages", "conversations", "mart_daily_conversations"):
        table = catalog.load_table(("convo", name))
        listed = [f.removeprefix("file://") for f in _live_files(config, name)]
        [(by_duckdb,)] = duckdb.sql(f"SELECT count(*) FROM read_parquet({listed!r})").fetchall()
        assert by_duckdb == table.scan().to_arrow().num_rows > 0
        folder = Path(table.metadata_location.removeprefix("file://")).parent
        hint = (folder / "version-hint.text").read_text()
        static = StaticTable.from_metadata(str(folder / f"{hint}.metadata.json"))
        assert static.scan().to_arrow().num_rows == by_duckdb


def test_a_table_cut_by_day_is_republished_by_month(year: Path, tmp_path: Path) -> None:
    """A lake an earlier release wrote (messages cut by day): the next publish evolves the
    table's partition spec and replaces every workspace's rows by month."""
    db = tmp_path / "w.duckdb"
    db.write_bytes(year.read_bytes())
    config = lake_config(tmp_path / "lake")
    with by_day_layout(lambda name: name == "messages"):
        _publish(db, config)
    days = [f for f in _live_files(config, "messages") if "/workspace_id=ws_a/" in f]
    assert len(days) > 14, "the earlier release's lake: a file per day"
    # (rows read by month are out of day order: still one file per day)
    [(distinct,)] = _sql(db, "SELECT count(DISTINCT CAST(created_at AS DATE)) FROM messages "
                         "WHERE workspace_id = 'ws_a'")  # fmt: skip
    assert len(days) == distinct
    result = {t.table: t for t in _publish(db, config).tables}
    assert result["messages"].attempts == 1
    table = config.open_catalog().load_table(("convo", "messages"))
    assert [f.name for f in table.spec().fields] == ["workspace_id", "created_at_month"]
    months = [f for f in _live_files(config, "messages") if "/workspace_id=ws_a/" in f]
    assert len(months) <= 14 and all("created_at_month=" in f for f in months)
    assert_lake_equals(config, db, WORKSPACES)


_KILLED = """
import os, sys, time
from pathlib import Path
import duckdb
from convo_analytics.lake import LakeConfig, publish_lake
from convo_analytics.lake import _commit
db, uri, files, marker = sys.argv[1:5]
written = _commit._data_files
def data_files(*args, **kwargs):
    out = written(*args, **kwargs)
    if args[2].num_rows > 50:  # a table of some size: killed with its files on disk
        Path(marker + ".part").write_text(str(len(out)))
        Path(marker + ".part").replace(marker)
        time.sleep(600)
    return out
_commit._data_files = data_files
con = duckdb.connect(db, read_only=True)
publish_lake(con, LakeConfig(uri, files))
"""


def test_a_publish_killed_before_its_commit_leaves_no_orphan_after_the_next(
    year: Path, tmp_path: Path
) -> None:
    db = tmp_path / "w.duckdb"
    db.write_bytes(year.read_bytes())
    folder = tmp_path / "lake"
    config = lake_config(folder)
    marker = tmp_path / "written"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_KILLED), str(db), config.catalog_uri,
         config.warehouse, str(marker)],
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert marker.exists(), "the publish never wrote a file"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    orphans = _parquet_on_disk(folder) - _referenced(config)
    assert orphans, "the killed commit left its files"
    # the default safety age (60 minutes): this host's killed commit goes at once
    assert config.orphan_min_age_minutes == 60
    _publish(db, config)
    assert _parquet_on_disk(folder) - _referenced(config) == set()
    assert_lake_equals(config, db, WORKSPACES)
    # a lone file nobody committed (another host's, say): kept while young, gone when old
    some = sorted(f for f in _referenced(config)
                  if "/conversations/data/workspace_id=ws_a/" in f)[0]  # fmt: skip
    lone = Path(some).with_name("00000-0-not-committed-by-anyone.parquet")
    lone.write_bytes(Path(some).read_bytes())
    _sql(db, "UPDATE conversations SET intent = 'again' WHERE workspace_id = 'ws_a'")
    _publish(db, config)
    assert lone.exists()
    hours_ago = time.time() - 2 * 3600
    os.utime(lone, (hours_ago, hours_ago))
    _sql(db, "UPDATE conversations SET intent = 'once more' WHERE workspace_id = 'ws_a'")
    _publish(db, config)
    assert not lone.exists()
    assert _parquet_on_disk(folder) - _referenced(config) == set()


def test_workspace_id_is_required_and_keys_are_identifier_fields(
    year: Path, tmp_path: Path
) -> None:
    """New tables: ``workspace_id`` required everywhere, the warehouse's key (with the
    workspace) declared as identifier fields; a table an earlier release made all optional
    is brought to the same by its next publish."""
    from convo_analytics.lake import _commit

    db = tmp_path / "w.duckdb"
    db.write_bytes(year.read_bytes())
    config = lake_config(tmp_path / "lake")
    keyed = _commit._keyed
    made = _commit.ensure_table

    def optional(catalog: Any, identifier: Any, day_column: Any, schema: Any, *key: Any) -> Any:
        import pyarrow as pa

        loose = pa.schema([pa.field(f.name, f.type, True) for f in schema])
        return made(catalog, identifier, day_column, loose)

    _commit._keyed = lambda txn, key: None  # type: ignore[assignment]
    _commit.ensure_table = optional  # type: ignore[assignment]
    try:
        _publish(db, config)
    finally:
        _commit._keyed = keyed  # type: ignore[assignment]
        _commit.ensure_table = made  # type: ignore[assignment]
    catalog = config.open_catalog()
    old = catalog.load_table(("convo", "conversations")).schema()
    assert not old.find_field("workspace_id").required and not old.identifier_field_ids
    _sql(db, "UPDATE conversations SET intent = 'x' WHERE workspace_id = 'ws_a'")
    _publish(db, config)
    fresh = lake_config(tmp_path / "fresh")
    _publish(db, fresh)
    for spec in LAKE_TABLES:  # a new lake: every table
        schema = fresh.open_catalog().load_table(("convo", spec.name)).schema()
        assert schema.find_field("workspace_id").required, spec.name
    for lake in (config, fresh):  # the earlier release's: each table its next commit makes
        catalog = lake.open_catalog()
        conversations = catalog.load_table(("convo", "conversations")).schema()
        names = {conversations.find_column_name(i) for i in conversations.identifier_field_ids}
        assert names == {"workspace_id", "id"}
        assert conversations.find_field("id").required
        messages = catalog.load_table(("convo", "messages")).schema()
        assert not messages.identifier_field_ids  # no key in the warehouse
    assert_lake_equals(config, db, WORKSPACES)


def test_an_earlier_releases_record_moves_to_its_own_namespace(year: Path, tmp_path: Path) -> None:
    """The lake's record (``lake_partitions``) in the data namespace, as an earlier
    release kept it: readers still find it, and the next publish moves it to the records
    namespace whole (nothing republished: the fingerprints came along)."""
    db = tmp_path / "w.duckdb"
    db.write_bytes(year.read_bytes())
    config = lake_config(tmp_path / "lake")
    _publish(db, config)
    catalog = config.open_catalog()
    meta = ("convo_meta", "lake_partitions")
    record = catalog.load_table(meta)
    rows = record.scan().to_arrow()
    old = catalog.create_table(("convo", "lake_partitions"), record.schema(),
                               partition_spec=record.spec())  # fmt: skip
    old.append(rows)
    catalog.drop_table(meta)
    assert_lake_equals(config, db, WORKSPACES)  # readers find the record where it is
    result = _publish(db, config)
    assert [t.table for t in result.tables if t.attempts] == []  # the record's fingerprints held
    names = {name for _, name in catalog.list_tables("convo")}
    assert "lake_partitions" not in names
    moved = catalog.load_table(meta).scan().to_arrow()
    assert moved.num_rows == rows.num_rows
    assert_lake_equals(config, db, WORKSPACES)
