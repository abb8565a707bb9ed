"""The shared Iceberg lake: publishing workspaces' partitions, on SQLite and PostgreSQL
catalogs, with workers committing at once and a worker killed part-way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

from convo_analytics.lake import (
    LAKE_TABLES,
    LakeConfig,
    LakeUnavailable,
    publish_lake,
)
from lake_support import (
    Warehouse,
    assert_lake_equals,
    convo_here,
    current_lake_rows,
    lake_config,
    lake_rows,
    table_rows,
    warehouse_rows,
)
from lake_worker_support import at_once, opener, publisher

ROOT = Path(__file__).resolve().parent.parent
WORKSPACES = ("ws_a", "ws_b", "ws_c")


def _publish(db: Path, config: LakeConfig, workspaces: list[str] | None = None) -> Any:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return publish_lake(con, config, workspaces)
    finally:
        con.close()


def _files_of(config: LakeConfig, workspace: str) -> dict[str, set[str]]:
    """Each lake table's data files holding ``workspace``'s rows."""
    from pyiceberg.expressions import EqualTo

    catalog = config.open_catalog()
    files = {}
    for spec in LAKE_TABLES:
        table = catalog.load_table((config.namespace, spec.name))
        tasks = table.scan(row_filter=EqualTo(term="workspace_id", literal=workspace)).plan_files()
        files[spec.name] = {task.file.file_path for task in tasks}
    return files


def test_a_publish_equals_the_warehouse_and_a_republish_replaces_only_its_workspace(
    tmp_path: Path,
) -> None:
    warehouse = Warehouse(tmp_path / "w.duckdb", WORKSPACES)
    warehouse.grow(batches=2)
    config = lake_config(tmp_path / "lake")
    result = _publish(warehouse.path, config)
    assert set(result.workspaces) == set(WORKSPACES)
    assert [t.table for t in result.tables] == [t.name for t in LAKE_TABLES]
    assert result.rows > 0 and all(t.snapshot_id is not None for t in result.tables if t.rows)
    assert_lake_equals(config, warehouse.path, WORKSPACES)

    others_before = {ws: _files_of(config, ws) for ws in ("ws_b", "ws_c")}
    b_rows_before = lake_rows(config, ["ws_b"])
    warehouse.grow(["ws_a", "ws_b"])  # both change in the warehouse; only ws_a is published
    again = _publish(warehouse.path, config, ["ws_a"])
    assert again.workspaces == ("ws_a",)
    assert_lake_equals(config, warehouse.path, ["ws_a", "ws_c"])
    assert lake_rows(config, ["ws_b"]) == b_rows_before  # ws_b stays as it was published
    assert warehouse_rows(warehouse.path, ["ws_b"]) != b_rows_before  # ...though it changed
    for ws, before in others_before.items():
        assert _files_of(config, ws) == before, f"{ws}'s partitions were rewritten"


def test_a_postgresql_catalog_through_the_command(tmp_path: Path, postgres: Any) -> None:
    warehouse = Warehouse(tmp_path / "w.duckdb", WORKSPACES[:2], seed=2)
    warehouse.grow()
    database = postgres.create_database(f"lake_{uuid.uuid4().hex[:8]}")
    env = {
        "HOME": str(tmp_path),
        "CONVO_LAKE_CATALOG_URI": postgres.url(database=database),
        "CONVO_LAKE_WAREHOUSE": str(tmp_path / "files"),
        "CONVO_RUN_LOCK_FILE": str(tmp_path / "lock"),
        "CONVO_LAKE_CATALOG_PASSWORD": "pw-never-shown",  # trust auth: accepted, not needed
    }
    done = convo_here(tmp_path, env, "publish", "--lake", "--json", "--db", str(warehouse.path),
                      "--workspace", "ws_a", "-w", "ws_b")  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["workspaces"] == ["ws_a", "ws_b"]
    assert {t["table"] for t in report["tables"]} == {t.name for t in LAKE_TABLES}
    assert "pw-never-shown" not in done.stdout + done.stderr
    config = LakeConfig(postgres.url(database=database), f"file://{tmp_path / 'files'}", "convo")
    assert_lake_equals(config, warehouse.path, WORKSPACES[:2])


def test_the_commands_errors_name_the_setting_and_hide_the_password(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "w.duckdb", ["ws_a"])
    warehouse.grow()

    def publish(**env: str) -> subprocess.CompletedProcess[str]:
        """`convo publish --lake` (in this process; as a process of its own, with a password in
        the URL: test_cli_user_errors)."""
        return convo_here(tmp_path, {"HOME": str(tmp_path),
                                     "CONVO_RUN_LOCK_FILE": str(tmp_path / "lock"), **env},
                          "publish", "--lake", "--db", str(warehouse.path))  # fmt: skip

    refused = publish(
        CONVO_LAKE_CATALOG_URI="postgresql+psycopg2://convo@127.0.0.1:9/none",
        CONVO_LAKE_CATALOG_PASSWORD="s3cret-pw",
    )
    assert refused.returncode == 2
    assert "cannot be reached" in refused.stderr and "lake.catalog_uri" in refused.stderr
    assert "s3cret-pw" not in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    inline = publish(CONVO_LAKE_CATALOG_URI="postgresql://convo:s3cret-pw@127.0.0.1/x")
    assert inline.returncode == 2 and "s3cret-pw" not in inline.stderr
    assert "CONVO_LAKE_CATALOG_PASSWORD" in inline.stderr
    # issue 24: a password in the query is refused as well; no query value is ever quoted
    unreachable = "postgresql+psycopg2://convo@127.0.0.1:9/none"
    for query in ("password=s3cret-pw", "sslmode=disable&sslpassword=s3cret-pw",
                  "dsn=host%3D127.0.0.1%20password%3Ds3cret-pw"):  # fmt: skip
        queried = publish(CONVO_LAKE_CATALOG_URI=f"{unreachable}?{query}")
        assert queried.returncode == 2 and "s3cret-pw" not in queried.stderr, queried.stderr
        assert "PGPASSWORD" in queried.stderr and "$CONVO_LAKE_CATALOG_URI" in queried.stderr
        assert len(queried.stderr.strip().splitlines()) == 1
    kept = publish(CONVO_LAKE_CATALOG_URI=f"{unreachable}?application_name=app-s3cret-name")
    assert kept.returncode == 2 and "cannot be reached" in kept.stderr, kept.stderr
    assert "app-s3cret-name" not in kept.stderr and "application_name=***" in kept.stderr
    with pytest.raises(LakeUnavailable, match="no database driver"):
        LakeConfig("nosuchdb://somewhere/x", "file:///x").open_catalog()
    with pytest.raises(LakeUnavailable, match="not a database URL"):
        LakeConfig("::not a url::", "file:///x").open_catalog()


def test_two_workers_committing_the_same_tables_at_once_both_land(
    tmp_path: Path, postgres: Any
) -> None:
    """Two processes, each with its own warehouse of one workspace, released together by a
    barrier: every table gets both commits (the loser of each race commits again)."""
    dbs = {}
    for i, ws in enumerate(("ws_x", "ws_y")):
        w = Warehouse(tmp_path / f"{ws}.duckdb", [ws], seed=10 + i)
        w.grow(batches=2)
        dbs[ws] = w.path
    uri = postgres.url(database=postgres.create_database(f"lake_{uuid.uuid4().hex[:8]}"))
    files = f"file://{tmp_path / 'files'}"
    config = LakeConfig(uri, files)
    seed = Warehouse(tmp_path / "ws_z.duckdb", ["ws_z"], seed=12)
    seed.grow()
    _publish(seed.path, config)  # the tables exist: the race is on commits
    results = at_once(publisher, [(str(db), uri, files) for db in dbs.values()], timeout=300)
    for ws, db in dbs.items():
        assert_lake_equals(config, db, [ws])
    for result in results:  # each worker committed every table it has rows of
        assert all(t["attempts"] >= 1 for t in result["tables"] if t["rows"]), result
        assert sum(1 for t in result["tables"] if t["attempts"]) >= len(LAKE_TABLES) // 2
    assert_lake_equals(config, seed.path, ["ws_z"])
    attempts = sum(t["attempts"] for r in results for t in r["tables"])
    print(f"commits: {attempts} attempts for {2 * len(LAKE_TABLES)} table commits")


def test_workers_setting_up_a_new_catalog_at_once_all_open_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers started together on an empty catalog database race to make its tables and
    namespace; the losers' inserts fail on the winner's rows, and they open it all the same."""
    uri, files = f"sqlite:///{tmp_path / 'catalog.db'}", f"file://{tmp_path / 'files'}"
    opened = at_once(opener, [(uri, files)] * 4, timeout=90)
    assert [sorted(o) for o in opened] == [["convo", "convo_meta"]] * 4

    # the race made certain: the namespace appears between the check and the insert
    from pyiceberg.catalog.sql import SqlCatalog
    from sqlalchemy.exc import IntegrityError

    made = SqlCatalog.create_namespace_if_not_exists
    lost = []

    def lose_once(self: Any, namespace: Any, properties: Any = None) -> None:
        if not lost:
            lost.append(namespace)
            made(self, namespace)  # the other worker's insert
            raise IntegrityError("INSERT", {}, Exception("UNIQUE constraint failed"))
        made(self, namespace)

    monkeypatch.setattr(SqlCatalog, "create_namespace_if_not_exists", lose_once)
    fresh = LakeConfig(f"sqlite:///{tmp_path / 'fresh.db'}", files, "fresh")
    namespaces = sorted(fresh.open_catalog().list_namespaces())
    assert namespaces == [("fresh",), ("fresh_meta",)] and lost == ["fresh"]


def test_a_commit_made_on_stale_metadata_is_rebased_not_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What publishing at once rests on: a worker's commit made from metadata another
    worker has since moved past is refused by the catalog, then made again on the new
    metadata (the other workspace's partitions checked untouched), so both land."""
    from pyiceberg.expressions import In

    warehouse = Warehouse(tmp_path / "w.duckdb", ["ws_a", "ws_b"])
    warehouse.grow()
    config = lake_config(tmp_path / "lake")
    _publish(warehouse.path, config, ["ws_a"])
    stale = config.open_catalog().load_table((config.namespace, "conversations"))
    _publish(warehouse.path, config, ["ws_b"])  # moves the table past the stale handle
    with duckdb.connect(str(warehouse.path), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        rows = con.sql("SELECT * FROM conversations WHERE workspace_id = 'ws_a'").to_arrow_table()
    caplog.set_level("WARNING", logger="pyiceberg")
    stale.overwrite(rows.cast(stale.schema().as_arrow()),
                    overwrite_filter=In(term="workspace_id", literals=["ws_a"]))  # fmt: skip
    assert "concurrent update, retrying" in caplog.text
    assert_lake_equals(config, warehouse.path, ["ws_a", "ws_b"])


_KILLED = """
import sys, time
from pathlib import Path
import duckdb
from convo_analytics.lake import LakeConfig, publish_lake
db, uri, files, marker, after = sys.argv[1:6]
con = duckdb.connect(db, read_only=True)
done = []
def on_table(t):
    done.append(t.table)
    if len(done) == int(after):  # the marker appears whole (the test reads it at once)
        Path(marker + ".part").write_text(",".join(done))
        Path(marker + ".part").replace(marker)
        time.sleep(600)
publish_lake(con, LakeConfig(uri, files), ["ws_a"], on_table=on_table)
"""


def test_a_killed_publish_leaves_each_table_whole_and_a_rerun_completes_it(
    tmp_path: Path,
) -> None:
    warehouse = Warehouse(tmp_path / "w.duckdb", ["ws_a", "ws_b"], seed=3)
    warehouse.grow()
    config = lake_config(tmp_path / "lake")
    _publish(warehouse.path, config)
    before = lake_rows(config, ["ws_a"])
    warehouse.grow(["ws_a"], batches=2)
    after = warehouse_rows(warehouse.path, ["ws_a"])
    marker = tmp_path / "killed-after"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_KILLED), str(warehouse.path),
         config.catalog_uri, config.warehouse, str(marker), "14"],
        cwd=ROOT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), "the publish never got that far"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    committed = set(marker.read_text().split(","))
    assert len(committed) == 14
    seen = current_lake_rows(config, ["ws_a"])  # each table's current snapshot
    for spec in LAKE_TABLES:
        expected = after[spec.name] if spec.name in committed else before[spec.name]
        assert seen[spec.name] == expected, f"{spec.name} is neither whole before nor after"
    assert any(before[n] != after[n] for n in committed), "the kill came after no change"
    assert any(before[n] != after[n] for n in after if n not in committed), "nothing was left"
    assert lake_rows(config, ["ws_a"]) == before  # readers: the last complete publish
    assert lake_rows(config, ["ws_b"]) == warehouse_rows(warehouse.path, ["ws_b"])
    _publish(warehouse.path, config, ["ws_a"])  # the retried publish completes it
    assert_lake_equals(config, warehouse.path, ["ws_a", "ws_b"])


def test_rows_of_one_workspace_per_table_compare_by_value(tmp_path: Path) -> None:
    """The comparison itself can fail: a lake short of one row is caught. (Readers keep
    showing the last complete publish until convo publishes again.)"""
    warehouse = Warehouse(tmp_path / "w.duckdb", ["ws_a"])
    warehouse.grow()
    config = lake_config(tmp_path / "lake")
    _publish(warehouse.path, config)
    table = config.open_catalog().load_table((config.namespace, "messages"))
    from pyiceberg.expressions import EqualTo

    victim = table_rows(duckdb.connect(str(warehouse.path), read_only=True), "messages", ["ws_a"])
    table.delete(EqualTo(term="id", literal=victim[0][0]))
    with pytest.raises(AssertionError, match="messages"):
        assert_lake_equals(config, warehouse.path, ["ws_a"], current_lake_rows)
    assert_lake_equals(config, warehouse.path, ["ws_a"])
