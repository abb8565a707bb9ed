"""Readers on the lake (``read.source = "lake"``): the summary export, `convo serve` and
every dashboard page read a local copy of the lake and show what the snapshot shows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from convo_analytics._serving import ServerThread
from convo_analytics.dashboard import queries
from convo_analytics.export import export_summary
from convo_analytics.lake import LakeConfig, publish_lake
from convo_analytics.publish import SnapshotUnreadable, current_snapshot, publish_snapshot
from convo_analytics.serve import create_serve_app
from convo_analytics.warehouse import open_warehouse
from lake_support import lake_config
from test_dashboard import PAGES, _app
from transform_support import populated_sandbox

TOKEN = "lake_serve_token_0123456789"


class Published:
    """One sandbox warehouse published both ways: a snapshot, and the lake."""

    def __init__(self, folder: Path, db: Path) -> None:
        self.db = db
        self.snapshots = folder / "published"
        self.lake_dir = folder / "lake-read"  # where readers keep their copy of the lake
        self.lake = lake_config(folder / "lake")
        con = open_warehouse(db)
        try:
            publish_snapshot(con, db, self.snapshots)
            publish_lake(con, self.lake)
        finally:
            con.close()

    def read_lake(self, monkeypatch: pytest.MonkeyPatch, lake: LakeConfig | None = None) -> None:
        lake = lake or self.lake
        monkeypatch.setenv("CONVO_READ_SOURCE", "lake")
        monkeypatch.setenv("CONVO_LAKE_CATALOG_URI", lake.catalog_uri)
        monkeypatch.setenv("CONVO_LAKE_WAREHOUSE", lake.warehouse)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Published]:
    folder = tmp_path_factory.mktemp("lake-readers")
    with populated_sandbox(folder, 200, ("UTC",)) as (_running, db):
        yield Published(folder, db)


def _snapshot_con(published: Published) -> duckdb.DuckDBPyConnection:
    snap = current_snapshot(published.snapshots)
    assert snap is not None
    return snap.connect()


def _without_time(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "generatedAt"}


def _data_range(published: Published) -> tuple[date, date]:
    """The snapshot's first and last day with conversations."""
    con = _snapshot_con(published)
    try:
        found = queries.data_range(con)
    finally:
        con.close()
    assert found is not None
    return found


def _summaries(con: duckdb.DuckDBPyConnection, first: date, last: date) -> list[dict[str, Any]]:
    """The summary in the marts' zone and in one they lack (computed on the spot)."""
    return [
        _without_time(export_summary(con, first, last, zone)) for zone in ("UTC", "Europe/Berlin")
    ]


def test_the_summary_export_from_the_lake_equals_the_snapshots(
    published: Published, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, last = _data_range(published)
    con = _snapshot_con(published)
    try:
        theirs = _summaries(con, first, last)
    finally:
        con.close()
    published.read_lake(monkeypatch)
    snap = current_snapshot(published.lake_dir)
    assert snap is not None and snap.path.name.startswith("lake-")
    lake = snap.connect()
    try:
        ours = _summaries(lake, first, last)
    finally:
        lake.close()
    assert ours == theirs
    assert theirs[0]["totals"]["conversations"] > 0


def test_convo_serve_answers_from_the_lake(
    published: Published, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, last = _data_range(published)
    params = {"from": first.isoformat(), "to": last.isoformat(), "tz": "UTC"}
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answers = []
    for source in ("snapshot", "lake"):
        if source == "lake":
            published.read_lake(monkeypatch)
        folder = published.snapshots if source == "snapshot" else published.lake_dir
        missing = published.db.parent / "not-the-warehouse.duckdb"  # only the published is read
        with ServerThread(create_serve_app(missing, TOKEN, folder)) as server:
            r = httpx.get(server.url + "/v1/analytics/summary", params=params, headers=headers,
                          timeout=60)  # fmt: skip
        assert r.status_code == 200, r.text
        answers.append(_without_time(r.json()))
    assert answers[0] == answers[1]


@pytest.mark.parametrize("page", PAGES)
def test_every_dashboard_page_reads_the_lake(
    published: Published, monkeypatch: pytest.MonkeyPatch, page: str
) -> None:
    from_snapshot = _app(published.snapshots, monkeypatch, page)
    published.read_lake(monkeypatch)
    from_lake = _app(published.lake_dir, monkeypatch, page)
    assert not from_lake.exception, from_lake.exception
    assert not any("Nothing has been published" in i.value for i in from_lake.info)
    assert not from_lake.error, [e.value for e in from_lake.error]
    assert from_lake.title and from_lake.title[0].value.lower() == page
    assert [(m.label, m.value) for m in from_lake.metric] == [
        (m.label, m.value) for m in from_snapshot.metric
    ]
    if page == "overview":
        shown = {m.label: m.value for m in from_lake.metric}
        assert int(shown["Conversations"].replace(",", "")) > 0


def test_a_new_commit_makes_a_new_copy_and_an_unreachable_lake_keeps_the_last(
    published: Published, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    published.read_lake(monkeypatch)
    folder = tmp_path / "copies"
    first = current_snapshot(folder)
    assert first is not None
    assert current_snapshot(folder) == first  # nothing committed: the same copy
    con = duckdb.connect(str(published.db), read_only=True)
    try:
        last_day = queries.data_range(con)
        publish_lake(con, published.lake, full=True)  # a new commit of every table, same rows
    finally:
        con.close()
    second = current_snapshot(folder)
    assert second is not None and second.snapshot_id != first.snapshot_id
    assert sorted(p.name for p in folder.glob("lake-*.duckdb")) == sorted(
        {first.path.name, second.path.name}
    )
    unreachable = LakeConfig("postgresql+psycopg2://convo@127.0.0.1:9/none", "file:///x")
    published.read_lake(monkeypatch, unreachable)
    fallback = current_snapshot(folder)
    assert fallback is not None and fallback.path == second.path
    assert fallback.passed_over and "cannot be read" in fallback.passed_over
    lake = fallback.connect()
    try:
        assert queries.data_range(lake) == last_day
    finally:
        lake.close()
    with pytest.raises(SnapshotUnreadable, match="cannot be read"):
        current_snapshot(tmp_path / "never-copied")


def test_a_bad_lake_setting_is_one_reason_every_reader_shows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CONVO_READ_SOURCE", "lake")
    monkeypatch.setenv("CONVO_LAKE_CATALOG_URI", "postgresql://convo:hunter2-pw@127.0.0.1/x")
    with pytest.raises(SnapshotUnreadable) as caught:
        current_snapshot(tmp_path)
    assert "CONVO_LAKE_CATALOG_PASSWORD" in str(caught.value)
    assert "hunter2-pw" not in str(caught.value)
    monkeypatch.setenv("CONVO_READ_SOURCE", "elsewhere")
    with pytest.raises(SnapshotUnreadable, match=r"read\.source|CONVO_READ_SOURCE"):
        current_snapshot(tmp_path)
