"""Capped tables say so and download whole (AppTest): a table with more rows than its page
says "Showing 1-25 of N" (with an en dash), pages through every row once, and its CSV holds
all N rows (the file is made from the full query when the button is clicked, not from the
shown page); and the default range ends on the data's last day."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import duckdb
import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

from convo_analytics.publish import current_snapshot, publish_snapshot
from convo_analytics.warehouse import open_warehouse
from transform_support import populated_sandbox

APP = str(Path(__file__).resolve().parent.parent / "dashboards" / "streamlit_app.py")


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("dashboard-tables")
    with populated_sandbox(folder, 400, ("UTC",)) as (_running, db):
        con = open_warehouse(db)
        try:
            publish_snapshot(con, db, folder / "published")
        finally:
            con.close()
        yield folder / "published"


class _Manager(MediaFileManager):
    """AppTest's media file manager, kept so that a test can click a download whose file is
    made on demand (Streamlit's deferred downloads) and read what it hands over."""

    made: ClassVar[list[_Manager]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _Manager.made.append(self)


@pytest.fixture
def managers(monkeypatch: pytest.MonkeyPatch) -> list[_Manager]:
    _Manager.made = []
    monkeypatch.setattr("streamlit.testing.v1.app_test.MediaFileManager", _Manager)
    return _Manager.made


def _downloaded(at: AppTest, managers: list[_Manager], key: str) -> tuple[str, list[list[str]]]:
    """The label of the download button ``key`` and the CSV it hands over when clicked."""
    (button,) = [b for b in at.get("download_button") if b.proto.id.endswith(key)]
    manager = managers[-1]
    url = button.proto.url or manager.execute_deferred(button.proto.deferred_file_id)
    content = manager._storage.get_file(url.rsplit("/", 1)[-1]).content
    return button.proto.label, list(csv.reader(io.StringIO(bytes(content).decode("utf-8"))))


def _facts(published: Path, sql: str) -> list[tuple[Any, ...]]:
    snap = current_snapshot(published)
    assert snap is not None
    con = duckdb.connect(str(snap.path), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _app(published: Path, monkeypatch: pytest.MonkeyPatch, page: str) -> AppTest:
    ((first, last),) = _facts(
        published, "SELECT min(started_at)::DATE, max(started_at)::DATE FROM mart_conversations"
    )
    monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(published))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"from": str(first), "to": str(last)})
    at.run()
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def test_the_qualified_leads_say_they_are_paged_and_download_whole(
    published: Path, monkeypatch: pytest.MonkeyPatch, managers: list[_Manager]
) -> None:
    leads = {r[0] for r in _facts(published, "SELECT id FROM leads WHERE qualified_at IS NOT NULL")}
    total = len(leads)
    assert total > 25, total  # more than the smallest page
    at = _app(published, monkeypatch, "leads")
    at.selectbox(key="leads_size").select(25).run()
    assert not at.exception, at.exception
    table = at.dataframe[2].value
    assert len(table) == 25
    assert any(c.value == f"Showing 1–25 of {total:,} qualified leads" for c in at.caption)
    label, rows = _downloaded(at, managers, "download_qualified_leads")
    assert label == f"Download all {total:,} qualified leads as CSV"
    assert rows[0][:2] == ["workspace", "workspace_id"] and "lead_id" in rows[0]
    column = rows[0].index("lead_id")
    assert sorted(r[column] for r in rows[1:]) == sorted(leads)  # every row, once
    pages = int(at.number_input(key="leads_page").max)
    assert pages == -(-total // 25)
    seen: list[str] = []
    for number in range(1, pages + 1):
        at.number_input(key="leads_page").set_value(number).run()
        assert not at.exception, at.exception
        seen += list(at.dataframe[2].value["lead_id"])
    assert sorted(seen) == sorted(leads)
    assert any(c.value.startswith(f"Showing {(pages - 1) * 25 + 1:,}–") for c in at.caption)


def test_the_conversations_download_holds_the_whole_slice_not_the_page(
    published: Path, monkeypatch: pytest.MonkeyPatch, managers: list[_Manager]
) -> None:
    ids = {r[0] for r in _facts(published, "SELECT conversation_id FROM mart_conversations")}
    at = _app(published, monkeypatch, "conversations")
    at.selectbox(key="conv_page_size").select(50).run()
    assert not at.exception, at.exception
    assert len(at.dataframe[0].value) == 50 < len(ids)
    label, rows = _downloaded(at, managers, "download_conversations")
    assert label == f"Download all {len(ids):,} conversations as CSV"
    column = rows[0].index("conversation_id")
    assert {r[column] for r in rows[1:]} == ids and len(rows) == len(ids) + 1
    assert "first_user_message" in rows[0]


def test_a_table_that_fits_its_page_says_nothing_and_downloads_what_it_shows(
    published: Path, monkeypatch: pytest.MonkeyPatch, managers: list[_Manager]
) -> None:
    at = _app(published, monkeypatch, "guardrails")
    ((incidents,),) = _facts(published, "SELECT count(*) FROM mart_guardrail_incidents")
    at.selectbox(key="incidents_size").select(500).run()
    assert not at.exception, at.exception
    assert len(at.dataframe[1].value) == incidents <= 500
    assert not any(c.value.startswith("Showing ") for c in at.caption)
    label, rows = _downloaded(at, managers, "download_guardrail_incidents")
    assert label == "Download as CSV" and len(rows) == incidents + 1


def test_the_default_range_ends_on_the_datas_last_day_and_follows_a_new_snapshot(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without a URL the range is the last 30 days up to the data's last day; a session
    still on it moves with a snapshot that holds later days, one on a range of its own
    keeps it."""
    from datetime import timedelta

    snap = current_snapshot(published)
    assert snap is not None
    whole, older = tmp_path / "whole.duckdb", tmp_path / "older.duckdb"
    whole.write_bytes(snap.path.read_bytes())
    older.write_bytes(snap.path.read_bytes())
    con = duckdb.connect(str(older))
    con.execute("SET TimeZone = 'UTC'")
    ((first, last),) = con.execute(
        "SELECT min(started_at)::DATE, max(started_at)::DATE FROM mart_conversations"
    ).fetchall()
    con.execute("DELETE FROM mart_conversations WHERE started_at::DATE = ?", [last])
    con.close()
    mine = tmp_path / "published"

    def publish(db: Path) -> None:
        con = open_warehouse(db)
        try:
            publish_snapshot(con, db, mine)
        finally:
            con.close()

    def default(day: Any) -> tuple[Any, Any]:
        return (max(first, day - timedelta(days=29)), day)

    publish(older)
    monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(mine))
    following, keeping = (AppTest.from_file(APP, default_timeout=60) for _ in range(2))
    for at in (following, keeping):
        at.run()
        assert not at.exception, at.exception
        assert at.sidebar.date_input(key="filter_range").value == default(last - timedelta(1))
    own = (first, first + timedelta(days=1))
    keeping.sidebar.date_input(key="filter_range").set_value(own).run()
    publish(whole)
    following.run()
    keeping.run()
    assert following.sidebar.date_input(key="filter_range").value == default(last)
    assert following.query_params["to"] == str(last)
    assert keeping.sidebar.date_input(key="filter_range").value == own
