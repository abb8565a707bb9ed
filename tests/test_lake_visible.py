"""Readers see complete lake publishes only (issue 25): a `convo publish --lake` killed
between any two of its commits leaves readers (`read_lake`, the lake copy the dashboard and
`convo serve` read, `convo export summary` with read.source = "lake") on the previous
complete publish's figures, saying that a publish is unfinished, never a mix; the next
publish completes, and readers then see it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from convo_analytics.lake import LakeConfig, publish_lake
from convo_analytics.publish import _lake_copy, lake_snapshot
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

ROOT = Path(__file__).resolve().parent.parent
WORKSPACES = ["ws_a", "ws_b"]
#: More than any publish here makes (a pending record, 25 tables, the record): it completes.
NEVER = 99
#: Paused before its last commit (the record, after every table): each table is new.
BEFORE_RECORD = -1

#: `convo publish --lake` as a user runs it, paused before commit number N+1 (after N have
#: landed; N < 0: before the record that follows the tables) until the test kills it: each
#: commit goes through the publish's commit_overwrite.
_PAUSED = """
import runpy, sys, time
from pathlib import Path
import convo_analytics.lake._publish as publish
marker, after = Path(sys.argv[1]), int(sys.argv[2])
real, landed = publish.commit_overwrite, []
def counted(catalog, config, name, *args, **kwargs):
    last = after < 0 and name == "lake_partitions" and set(landed) - {name}
    if len(landed) == after or last:  # the marker appears whole (the test reads it at once)
        marker.with_suffix(".part").write_text(",".join(landed))
        marker.with_suffix(".part").replace(marker)
        time.sleep(600)
    table = real(catalog, config, name, *args, **kwargs)
    landed.append(name)
    return table
publish.commit_overwrite = counted
sys.argv = ["convo", *sys.argv[3:]]
runpy.run_module("convo_analytics.cli", run_name="__main__")
"""


def env_of(folder: Path, db: Path, config: LakeConfig, **extra: str) -> dict[str, str]:
    """The environment of `convo` run on the warehouse ``db`` and the lake ``config``."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(folder),
        "CONVO_WAREHOUSE_PATH": str(db),
        "CONVO_LAKE_CATALOG_URI": config.catalog_uri,
        "CONVO_LAKE_WAREHOUSE": config.warehouse,
        "CONVO_RUN_LOCK_FILE": str(folder / "lock"),
        **extra,
    }


def killed_publish(folder: Path, env: dict[str, str], commits: int, *args: str) -> list[str] | None:
    """`convo publish --lake` killed (SIGKILL) once ``commits`` commits landed: the tables
    they went to (None: the publish made fewer and completed)."""
    marker = folder / "paused"
    marker.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_PAUSED), str(marker), str(commits),
         "publish", "--lake", *args],
        cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not marker.exists():
            assert proc.wait(timeout=240) == 0, proc.stderr.read() if proc.stderr else ""
            return None
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    text = marker.read_text()
    return text.split(",") if text else []


def export_summary(
    folder: Path, env: dict[str, str], days: tuple[date, date]
) -> tuple[dict[str, Any], str]:
    """`convo export summary` of every workspace from the lake (a fresh copy of it), run in
    this process as a user's process runs it: the body without its time, and the stderr."""
    copies = folder / f"copies-{time.monotonic_ns()}"
    done = convo_here(
        folder, {**env, "CONVO_READ_SOURCE": "lake", "CONVO_PUBLISH_DIR": str(copies)},
        "export", "summary", "--from", days[0].isoformat(), "--to", days[1].isoformat(),
        "--all-workspaces",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    body = orjson.loads(done.stdout)
    body.pop("generatedAt", None)
    return body, done.stderr


def publish_again(folder: Path, env: dict[str, str], *args: str) -> None:
    """The next `convo publish --lake` (run in this process as a user's process runs it)
    completes."""
    done = convo_here(folder, env, "publish", "--lake", *args)
    assert done.returncode == 0, done.stderr


class Lake:
    """A lake holding one complete publish of a warehouse that has changed since, kept as a
    template: each example starts from a fresh copy of both, at the same paths."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.work = folder / "work"
        self.template = folder / "template"
        self.warehouse = Warehouse(self.template / "w.duckdb", WORKSPACES, seed=7)
        self.warehouse.grow()
        self.config = lake_config(self.work / "lake")
        self.work.mkdir()
        shutil.copyfile(self.warehouse.path, self.db)
        with duckdb.connect(str(self.db), read_only=True) as con:
            publish_lake(con, self.config)
        self.before = lake_rows(self.config, WORKSPACES)
        self.before_a = lake_rows(self.config, ["ws_a"])
        self.days = _days(self.db)
        self.summary_before = self.summary()[0]
        self.warehouse.path = self.db
        self.warehouse.grow(["ws_a"], batches=2)  # the publish to kill replaces ws_a's days
        self.after = warehouse_rows(self.db, WORKSPACES)
        self.after_a = warehouse_rows(self.db, ["ws_a"])
        assert self.before != self.after
        shutil.rmtree(self.template)
        shutil.copytree(self.work, self.template)

    @property
    def db(self) -> Path:
        return self.work / "w.duckdb"

    def reset(self) -> None:
        shutil.rmtree(self.work)
        shutil.copytree(self.template, self.work)
        _lake_copy._catalogs.clear()  # this process's catalogs opened the files just replaced

    def env(self) -> dict[str, str]:
        return env_of(self.work, self.db, self.config)

    def summary(self) -> tuple[dict[str, Any], str]:
        return export_summary(self.work, self.env(), self.days)

    def publish_killed_after(self, commits: int) -> list[str] | None:
        return killed_publish(self.work, self.env(), commits)


def _days(db: Path) -> tuple[date, date]:
    with duckdb.connect(str(db), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        [(first, last)] = con.execute(
            "SELECT min(CAST(started_at AS DATE)), max(CAST(started_at AS DATE)) "
            "FROM mart_conversations"
        ).fetchall()
    return first, last


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    yield Lake(tmp_path_factory.mktemp("lake-visible"))


@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# Hypothesis draws the least value first: from 4, so that neither draw repeats an example; to
# 12, the last count that stops the publish (it commits the record, 12 tables, the record:
# more would repeat BEFORE_RECORD or NEVER)
@given(commits=st.integers(min_value=4, max_value=12))
@example(commits=0)  # before anything landed
@example(commits=1)  # the record saying which partitions are pending, and no table yet
@example(commits=3)  # conversations and messages of the new publish, nothing else
@example(commits=BEFORE_RECORD)  # every table new, the record (the last commit) not
@example(commits=NEVER)  # it completes
def test_a_killed_publish_leaves_readers_on_the_last_complete_one(
    lake: Lake, commits: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    lake.reset()
    landed = lake.publish_killed_after(commits)
    complete = landed is None
    if not complete:
        assert landed is not None
        assert len(landed) == commits or commits == BEFORE_RECORD
        tables = {name for name in landed if name != "lake_partitions"}
        if tables:  # the tables it reached hold the new rows: a reader of them alone mixes
            raw = current_lake_rows(lake.config, WORKSPACES)
            assert all(raw[name] == lake.after[name] for name in tables)
            assert any(raw[name] != lake.before[name] for name in tables)
            assert commits != BEFORE_RECORD or raw == lake.after
    expected = lake.after if complete else lake.before
    assert lake_rows(lake.config, WORKSPACES) == expected, "read_lake mixed two publishes"
    copy = lake_snapshot(lake.config, tmp_path_factory.mktemp("copies"))
    assert copy is not None
    with copy.connect() as con:
        assert {name: table_rows(con, name, WORKSPACES) for name in expected} == expected
    said = copy.unfinished or ""
    body, stderr = lake.summary()
    if complete:
        assert not said and "warning" not in stderr
        assert body != lake.summary_before
        return
    assert body == lake.summary_before, "the export mixed two publishes"
    if commits == 0:  # nothing landed: nothing to say
        assert not said and "warning" not in stderr
    else:
        assert "a publish of ws_a is in progress or was stopped" in said, said
        assert "shown as its last complete publish left it" in said
        assert stderr.strip() == f"warning: {said}", stderr
    # the next publish completes it, and readers see it
    publish_again(lake.work, lake.env())
    assert_lake_equals(lake.config, lake.db, WORKSPACES)
    body, stderr = lake.summary()
    assert "warning" not in stderr and body != lake.summary_before


def test_a_publish_stopped_half_way_for_other_engines_serve_and_the_dashboard(
    lake: Lake, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One publish stopped after five commits, read three ways (one killed publish for all
    three: each only reads the lake)."""
    lake.reset()
    landed = lake.publish_killed_after(5)
    assert landed is not None and len(landed) == 5
    _the_pins_are_what_another_engine_can_read_at(lake)
    _serve_and_the_dashboard_say_a_publish_is_unfinished(lake, tmp_path_factory, monkeypatch)


def _the_pins_are_what_another_engine_can_read_at(lake: Lake) -> None:
    """The lake's record names, per workspace and table, the snapshot its last complete
    publish left: an engine reading each table there (here pyiceberg) gets the previous
    publish's rows while a publish is stopped half-way, as our readers do."""
    from pyiceberg.expressions import And, EqualTo

    catalog = lake.config.open_catalog()
    record = catalog.load_table(("convo_meta", "lake_partitions"))
    pins = record.scan(
        row_filter=And(EqualTo(term="scope", literal="table"),
                       EqualTo(term="workspace_id", literal="ws_a")),
        selected_fields=("table_name", "snapshot_id", "publish_id"),
    ).to_arrow().to_pylist()  # fmt: skip
    assert pins and all(p["publish_id"] for p in pins)
    for pin in pins:
        if pin["table_name"] not in ("conversations", "messages"):  # committed again
            continue
        table = catalog.load_table(("convo", pin["table_name"]))
        of_ws_a = EqualTo(term="workspace_id", literal="ws_a")
        pinned = table.scan(row_filter=of_ws_a, snapshot_id=pin["snapshot_id"]).to_arrow()
        assert len(lake.before_a[pin["table_name"]]) != len(lake.after_a[pin["table_name"]])
        assert pinned.num_rows == len(lake.before_a[pin["table_name"]])
        assert table.scan(row_filter=of_ws_a).to_arrow().num_rows == len(
            lake.after_a[pin["table_name"]]
        )


def _serve_and_the_dashboard_say_a_publish_is_unfinished(
    lake: Lake, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readers other than the exports say it too: `convo serve`'s app answers the previous
    publish's figures with an X-Convo-Data-Notice header, and the dashboard shows the notice
    (as text) above the same figures. (`convo serve` reading the lake as a process of its
    own: test_lake_readers.)"""
    import httpx
    from streamlit.testing.v1 import AppTest

    from convo_analytics._serving import ServerThread
    from convo_analytics.serve import create_serve_app
    from convo_analytics.serve._app import NOTICE_HEADER

    copies = tmp_path_factory.mktemp("reader-copies")
    env = {**lake.env(), "CONVO_READ_SOURCE": "lake", "CONVO_PUBLISH_DIR": str(copies)}
    for name in [k for k in os.environ if k.startswith("CONVO_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(lake.work)
    token = "serve-token-unfinished-0001"
    missing = lake.work / "not-the-warehouse.duckdb"  # only the lake's copy is read
    with ServerThread(create_serve_app(missing, token, copies)) as server:
        answer = httpx.get(
            f"{server.url}/v1/analytics/summary",
            params={"from": lake.days[0].isoformat(), "to": lake.days[1].isoformat(),
                    "workspace": "*"},
            headers={"Authorization": f"Bearer {token}"}, timeout=120,
        )  # fmt: skip
    assert answer.status_code == 200, answer.text
    notice = answer.headers.get(NOTICE_HEADER, "")
    assert "a publish of ws_a is in progress or was stopped" in notice, answer.headers
    body = answer.json()
    body.pop("generatedAt", None)
    assert body == lake.summary_before
    monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(copies))
    at = AppTest.from_file(str(ROOT / "dashboards" / "streamlit_app.py"), default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    warned = [w.value for w in at.warning]
    assert any("lake publish is unfinished" in w for w in warned), warned
    assert any("a publish of ws_a is in progress" in t.value for t in at.text)


def test_a_first_publish_killed_part_way_shows_nothing_of_it(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No complete publish yet: readers leave the workspace out and say why, rather than
    show the tables the first publish reached beside empty ones."""
    warehouse = Warehouse(tmp_path / "w.duckdb", ["ws_a"], seed=11)
    warehouse.grow()
    config = lake_config(tmp_path / "lake")
    env = env_of(tmp_path, warehouse.path, config)
    landed = killed_publish(tmp_path, env, 3)
    assert landed is not None and landed[:2] == ["conversations", "messages"]
    assert current_lake_rows(config, ["ws_a"])["conversations"]  # in the table itself
    assert not any(lake_rows(config, ["ws_a"]).values())
    copy = lake_snapshot(config, tmp_path_factory.mktemp("copies"))
    assert copy is not None and copy.unfinished is not None
    assert copy.unfinished.startswith("ws_a has no complete publish yet"), copy.unfinished
    body, stderr = export_summary(tmp_path, env, _days(warehouse.path))
    assert stderr.splitlines()[0] == f"warning: {copy.unfinished}"  # then: the export is empty
    assert body["totals"]["conversations"] == 0
    publish_again(tmp_path, env)  # the next publish completes
    assert_lake_equals(config, warehouse.path, ["ws_a"])
    body, stderr = export_summary(tmp_path, env, _days(warehouse.path))
    assert "warning" not in stderr and body["totals"]["conversations"] > 0


def test_another_workers_publish_shows_while_a_killed_one_does_not(tmp_path: Path) -> None:
    """Workers publishing one workspace each into the same tables: ws_a's publish killed
    after its first tables, then ws_b's completes on top of it. Readers show ws_a as its
    last complete publish left it and ws_b's new rows (each workspace at its own pin)."""
    warehouse = Warehouse(tmp_path / "w.duckdb", WORKSPACES, seed=13)
    warehouse.grow()
    config = lake_config(tmp_path / "lake")
    with duckdb.connect(str(warehouse.path), read_only=True) as con:
        for ws in WORKSPACES:  # one worker each: each workspace pinned to its own snapshots
            publish_lake(con, config, [ws])
    before_a = lake_rows(config, ["ws_a"])
    warehouse.grow()
    env = env_of(tmp_path, warehouse.path, config)
    landed = killed_publish(tmp_path, env, 3, "--workspace", "ws_a")
    assert landed == ["lake_partitions", "conversations", "messages"]
    with duckdb.connect(str(warehouse.path), read_only=True) as con:
        done = publish_lake(con, config, ["ws_b"])
    assert {"conversations", "messages"} <= {t.table for t in done.tables if t.attempts}
    assert lake_rows(config, ["ws_a"]) == before_a  # (each reads the whole lake at once)
    assert_lake_equals(config, warehouse.path, ["ws_b"])
    said = lake_snapshot(config, tmp_path / "copies")
    assert said is not None and said.unfinished is not None
    assert said.unfinished.startswith("a publish of ws_a is in progress"), said.unfinished
    assert "ws_b" not in said.unfinished
    publish_again(tmp_path, env, "--workspace", "ws_a")
    assert_lake_equals(config, warehouse.path, WORKSPACES)
