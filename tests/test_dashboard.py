"""The Streamlit app through AppTest: every page, populated and empty, with its figures."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from convo_analytics.dashboard import queries
from convo_analytics.dashboard._queries import Filters
from convo_analytics.publish import current_snapshot, publish_snapshot
from convo_analytics.transform import load_cube, metrics_table
from convo_analytics.warehouse import open_warehouse
from transform_support import populated_sandbox

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "dashboards" / "streamlit_app.py")
PAGES = ["overview", "conversations", "leads", "quality", "guardrails", "pipeline"]


def _publish(db: Path, folder: Path) -> None:
    con = open_warehouse(db)
    try:
        publish_snapshot(con, db, folder)
    finally:
        con.close()


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("dashboard")
    with populated_sandbox(folder, 300, ("UTC",)) as (_running, db):
        _publish(db, folder / "published")
        yield folder / "published"


@pytest.fixture
def empty_published(tmp_path: Path) -> Path:
    db = tmp_path / "empty.duckdb"
    open_warehouse(db).close()
    _publish(db, tmp_path / "published")
    return tmp_path / "published"


def _app(folder: Path, monkeypatch: pytest.MonkeyPatch, page: str) -> AppTest:
    monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(folder))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    if page != "overview":
        at.switch_page(f"app_pages/{page}.py")
        at.run()
    return at


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_a_populated_warehouse(
    published: Path, monkeypatch: pytest.MonkeyPatch, page: str
) -> None:
    at = _app(published, monkeypatch, page)
    assert not at.exception, at.exception
    assert at.title and at.title[0].value.lower() == page
    assert not at.info or page == "conversations"  # no "nothing to show" on a populated one


@pytest.mark.parametrize("page", PAGES)
def test_every_page_explains_an_empty_warehouse(
    empty_published: Path, monkeypatch: pytest.MonkeyPatch, page: str
) -> None:
    at = _app(empty_published, monkeypatch, page)
    assert not at.exception, at.exception
    if page != "pipeline":
        assert any("convo extract" in i.value for i in at.info)


def test_nothing_published_yet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _app(tmp_path / "nothing", monkeypatch, "overview")
    assert not at.exception
    assert any("Nothing has been published yet" in i.value for i in at.info)


def test_the_tiles_show_the_transforms_figures(
    published: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _app(published, monkeypatch, "overview")
    snap = current_snapshot(published)
    assert snap is not None
    con = snap.connect()
    try:
        first_day, last_day = queries.data_range(con) or (None, None)
        assert last_day is not None
        f = Filters(max(first_day, last_day - timedelta(days=29)), last_day)
        (totals,) = metrics_table(load_cube(con, "UTC"), f.first, f.last, by_day=False).to_dicts()
    finally:
        con.close()
    shown = {m.label: m.value for m in at.metric}
    assert shown["Conversations"] == f"{totals['conversations']:,.0f}"
    assert shown["Resolution rate"] == f"{totals['resolutionRate']:.1%}"
    assert shown["Leads qualified"] == f"{totals['leadsQualified']:,.0f}"
    assert totals["conversations"] > 0


def test_a_channel_filter_narrows_every_figure(
    published: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _app(published, monkeypatch, "overview")
    before = {m.label: m.value for m in at.metric}["Conversations"]
    at.sidebar.multiselect[0].select("sms").run()
    assert not at.exception
    after = {m.label: m.value for m in at.metric}["Conversations"]
    assert int(after.replace(",", "")) < int(before.replace(",", ""))


def test_a_new_snapshot_refreshes_the_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, published: Path
) -> None:
    """Cached answers belong to a snapshot: publishing an emptied warehouse shows at once."""
    snap = current_snapshot(published)
    assert snap is not None
    copy = tmp_path / "w.duckdb"
    copy.write_bytes(snap.path.read_bytes())
    mine = tmp_path / "published"
    _publish(copy, mine)
    at = _app(mine, monkeypatch, "overview")
    assert at.metric
    con = open_warehouse(copy)
    con.execute("DELETE FROM mart_conversations")
    con.close()
    _publish(copy, mine)
    at.run()
    assert not at.exception
    assert any("no conversations yet" in i.value for i in at.info)


def test_the_pipeline_runs_while_the_app_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`convo run` (the nightly run) goes on in its own process while the app keeps rerendering."""
    import subprocess
    import threading

    from conftest import ACME_KEY
    from extract_support import cli_env

    with populated_sandbox(tmp_path, 200, ("UTC",)) as (running, db):
        folder = tmp_path / "published"
        _publish(db, folder)
        at = _app(folder, monkeypatch, "overview")
        first_id = current_snapshot(folder)
        running.admin("/_sandbox/simulate", {"workspace": "acme", "newConversations": 60})
        config = tmp_path / "convo.toml"
        config.write_text(
            f'[service]\nbase_url = "{running.url}"\nrate_limit = "none"\n'
            f'[warehouse]\npath = "{db}"\n[publish]\ndir = "{folder}"\n'
            f'[export]\ndir = "{tmp_path / "exports"}"\n'
            f'[run]\nlock_file = "{tmp_path / "run.lock"}"\n'
        )
        steps = [[sys.executable, "-m", "convo_analytics.cli", "run", "--config", str(config)]]
        results: list[int] = []

        def pipeline() -> None:
            for argv in steps:
                done = subprocess.run(argv, env=cli_env(ACME_KEY), capture_output=True, timeout=300)
                results.append(done.returncode)
                if done.returncode:
                    return

        runner = threading.Thread(target=pipeline)
        runner.start()
        renders = 0
        while runner.is_alive() and renders < 200:  # the app rerenders throughout the run
            at.run()
            assert not at.exception, at.exception
            renders += 1
        runner.join(timeout=600)
        assert results == [0], results
        assert renders > 0
        latest = current_snapshot(folder)
        assert latest is not None and first_id is not None
        assert latest.snapshot_id != first_id.snapshot_id
        con = latest.connect()
        try:
            count = con.execute("SELECT count(*) FROM mart_conversations").fetchall()[0][0]
        finally:
            con.close()
        assert count == 260
        runs = latest.connect()
        try:
            nightly = runs.execute("SELECT status FROM pipeline_runs").fetchall()
        finally:
            runs.close()
        assert nightly == [("ok",)]  # publish is the run's last step
    at.switch_page("app_pages/pipeline.py").run()
    assert not at.exception
    history = next(
        df.value
        for df in at.dataframe
        if "step" in df.value.columns and "run_id" in df.value.columns
    )
    assert "nightly run" in set(history["step"])
