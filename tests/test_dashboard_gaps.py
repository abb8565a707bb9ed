"""The Knowledge gaps page (issue 27): through AppTest, and served to headless chromium.

Its figures are the transform's report (``transform.gap_report``, the export's too) for
the sidebar's filters; a topic shows its questions, answers, sources and conversations,
and one conversation opens on the Conversations page. End users' text shows as text.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from convo_analytics.publish import current_snapshot, publish_snapshot
from convo_analytics.transform import TransformConfig, gap_report, run_transform
from convo_analytics.warehouse import open_warehouse
from incremental_support import BASE, Conversation, iso, load_conversations
from process_support import free_port
from test_dashboard_browser import (
    CHROMIUM_FLAGS,
    SHOTS,
    VIEWPORT,
    _start_dashboard,
    _wait_healthy,
    chromium,
    settle,
)
from transform_support import populated_sandbox

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "dashboards" / "streamlit_app.py")
PAGE = "app_pages/knowledge_gaps.py"


def _publish(db: Path, folder: Path, prepare: Any = None) -> None:
    con = open_warehouse(db)
    try:
        publish_snapshot(con, db, folder, prepare=prepare)
    finally:
        con.close()


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("dashboard-gaps")
    with populated_sandbox(folder, 300, ("UTC",), 100) as (_running, db):
        _publish(db, folder / "published")
        yield folder / "published"


def _app(folder: Path, monkeypatch: pytest.MonkeyPatch, query: dict[str, str] | None = None
         ) -> AppTest:  # fmt: skip
    monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(folder))
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, at.exception
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def _report(folder: Path, **kwargs: Any) -> Any:
    snap = current_snapshot(folder)
    assert snap is not None
    con = snap.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        first, last = con.execute(
            "SELECT max(started_at)::DATE - 29, max(started_at)::DATE FROM mart_conversations"
        ).fetchall()[0]
        return gap_report(con, first, last, "UTC", **kwargs)
    finally:
        con.close()


def _table(at: AppTest) -> Any:
    return next(d.value for d in at.dataframe if "verdict" in d.value.columns)


def test_the_page_ranks_the_reports_topics_and_opens_one(
    published: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _app(published, monkeypatch)
    assert at.title[0].value == "Knowledge gaps"
    report = _report(published)
    assert report.height > 1
    table = _table(at)
    assert list(table["topic"]) == report["topic"].to_list()
    assert list(table["verdict"]) == report["verdict"].to_list()
    # the first topic is open: its figures, its questions and answers as text
    shown = {m.label: m.value for m in at.metric}
    top = report.row(0, named=True)
    assert shown["Conversations"] == f"{top['conversations']:,}"
    assert shown["Impact"] == f"{top['impact']:,.1f}"
    texts = [t.value for t in at.text]
    for question, count in zip(top["questions"], top["question_counts"], strict=True):
        assert f"{question}   ({count}×)" in texts
    # its conversations, most severe first
    behind = next(d.value for d in at.dataframe if "severity" in d.value.columns)
    assert len(behind) == top["conversations"]
    assert list(behind["severity"]) == sorted(behind["severity"], reverse=True)
    # another topic
    at.selectbox(key="gap_topic").select_index(1).run()
    assert not at.exception, at.exception
    second = report.row(1, named=True)
    assert {m.label: m.value for m in at.metric}["Conversations"] == f"{second['conversations']:,}"
    # one of its conversations on the Conversations page
    conversation = at.selectbox(key="gap_conversation").value
    at.button(key="gap_open").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Conversations"
    assert at.query_params["conversation"] == conversation == at.query_params["q"]
    assert at.selectbox(key="conv_pick").value == conversation


def test_the_sidebars_channels_narrow_the_report(
    published: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _app(published, monkeypatch)
    at.sidebar.multiselect[0].select("sms").run()
    assert not at.exception, at.exception
    narrowed = _report(published, filters={"channel": ["sms"]})
    assert list(_table(at)["topic"]) == narrowed["topic"].to_list()
    assert sum(_table(at)["conversations"]) < _report(published)["conversations"].sum()


def test_the_page_prepares_the_export(published: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _app(published, monkeypatch)
    at.selectbox(key="gap_export_format").select("json").run()
    at.button(key="gap_export_prepare").click().run()
    assert not at.exception, at.exception
    names = [b.label for b in at.get("download_button")]
    assert any(".json.manifest.json" in n for n in names), names


def test_the_export_made_in_the_page_joins_the_audit_chain(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As `convo export knowledge-gaps` does (issue 30): the manifest handed out names its
    place in the audit log, whose record holds the manifest's and the file's SHA-256, so
    `convo audit verify --manifest` finds a changed one."""
    import hashlib

    import orjson

    from convo_analytics.audit import AuditLog, read_manifest, verify

    log = tmp_path / "audit" / "audit.jsonl"
    monkeypatch.setenv("CONVO_AUDIT_FILE", str(log))
    at = _app(published, monkeypatch)
    at.selectbox(key="gap_export_format").select("json").run()
    at.button(key="gap_export_prepare").click().run()
    assert not at.exception, at.exception
    files = at.session_state["gap_export_files"]
    (name,) = [n for n in files if n.endswith(".manifest.json")]
    (data_name,) = [n for n in files if n != name]
    records = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    (sealed,) = [r for r in records if r["action"] == "dashboard.export.gaps"]
    assert sealed["detail"]["manifest"]["sha256"] == hashlib.sha256(files[name]).hexdigest()
    assert sealed["detail"]["files"] == [
        {"path": data_name, "sha256": hashlib.sha256(files[data_name]).hexdigest()}
    ]
    manifest = tmp_path / name
    manifest.write_bytes(files[name])
    assert verify(AuditLog(log), manifests=[read_manifest(manifest)]).ok
    manifest.write_bytes(files[name].replace(b"{", b"{ ", 1))  # one byte more
    assert not verify(AuditLog(log), manifests=[read_manifest(manifest)]).ok


def test_an_empty_warehouse_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "empty.duckdb"
    open_warehouse(db).close()
    _publish(db, tmp_path / "published")
    at = _app(tmp_path / "published", monkeypatch)
    assert any("convo extract" in i.value for i in at.info)


def test_a_snapshot_from_before_knowledge_gaps_says_what_to_run(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    snap = current_snapshot(published)
    assert snap is not None
    db = tmp_path / "w.duckdb"
    db.write_bytes(snap.path.read_bytes())
    _publish(db, tmp_path / "published", lambda con: con.execute("DROP TABLE knowledge_gaps"))
    at = _app(tmp_path / "published", monkeypatch)
    assert any("published before they existed" in i.value for i in at.info)


#: What an end user may write, that rendered Markdown would turn into a link and an image.
HOSTILE = "[sign in again](http://127.0.0.1:9/phish) ![x](http://127.0.0.1:9/beacon.png)"


def test_questions_show_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "w.duckdb"
    made = []
    for n in range(2):
        start = BASE + timedelta(hours=n)
        c = Conversation(f"c{n}", "ws_a", "web", None, None, start, start)
        c.messages = [
            {"id": f"c{n}_m0", "role": "user", "text": HOSTILE, "createdAt": iso(start),
             "channel": "web", "policyFlags": []},
            {"id": f"c{n}_m1", "role": "assistant", "text": "I don't know.",
             "createdAt": iso(start + timedelta(seconds=2)), "channel": "web",
             "confidence": 0.9, "policyFlags": []},
        ]  # fmt: skip
        made.append(c)
    con = open_warehouse(db)
    load_conversations(con, made, "run0001")
    run_transform(con, TransformConfig(timezones=("UTC",), reconcile=False))
    con.close()
    _publish(db, tmp_path / "published")
    at = _app(tmp_path / "published", monkeypatch)
    assert f"{HOSTILE}   (2×)" in [t.value for t in at.text]
    rendered = [m.value for m in at.markdown] + [c.value for c in at.caption]
    assert not any("127.0.0.1:9" in text for text in rendered)


def test_the_page_in_chromium(published: Path) -> None:
    """Served by `convo dashboard`, drawn by chromium: no error, the chart and the table;
    a screenshot is kept (data/test-artifacts/screenshots/knowledge-gaps.png)."""
    from playwright.sync_api import sync_playwright

    snap = current_snapshot(published)
    assert snap is not None
    con = duckdb.connect(str(snap.path), read_only=True)
    first, last = (str(d) for d in con.execute(
        "SELECT min(started_at)::DATE, max(started_at)::DATE FROM mart_conversations"
    ).fetchall()[0])  # fmt: skip
    con.close()
    port = free_port()
    proc = _start_dashboard(port, published)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        SHOTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
            try:
                page = browser.new_page(viewport=VIEWPORT)
                page.goto(f"{url}/knowledge_gaps?from={first}&to={last}",
                          wait_until="domcontentloaded", timeout=60_000)  # fmt: skip
                settle(page, "Knowledge gaps")
                assert page.locator("[data-testid='stException']").count() == 0
                assert page.locator("[data-testid='stAlertContentError']").count() == 0
                assert page.get_by_role("heading", name="Topics by impact").count() == 1
                assert page.locator("[data-testid='stVegaLiteChart']").count() >= 1
                shot = SHOTS / "knowledge-gaps.png"
                page.screenshot(path=str(shot), full_page=True)
                assert shot.stat().st_size > 10_000, f"{shot} looks blank"
            finally:
                browser.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
