"""Readers on the lake (``read.source = "lake"``): the exports (`convo export summary`,
`convo export guardrails` and `convo export knowledge-gaps`, run as a user runs them),
`convo serve` and every dashboard page read a local copy of the lake and show what the
snapshot (or the warehouse) shows."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import httpx
import orjson
import pytest

from convo_analytics._serving import ServerThread
from convo_analytics.dashboard import queries
from convo_analytics.export import export_summary
from convo_analytics.lake import LakeConfig, publish_lake
from convo_analytics.publish import (
    SnapshotUnreadable,
    current_snapshot,
    lake_snapshot,
    publish_snapshot,
)
from convo_analytics.serve import create_serve_app
from convo_analytics.warehouse import open_warehouse
from lake_support import convo_here, lake_config
from process_support import OutputWatcher, free_port
from test_dashboard import PAGES, _app
from transform_support import populated_sandbox

TOKEN = "lake_serve_token_0123456789"
#: A catalog nothing listens on (the discard port), and its password (never to be shown).
UNREACHABLE_URI = "postgresql+psycopg2://convo@127.0.0.1:9/none"
LAKE_PASSWORD = "lake-pw-never-shown-4f1d"


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

    def lake_env(self, copies: Path, lake: LakeConfig | None = None) -> dict[str, str]:
        """The environment of a `convo` process reading the lake, its copies in ``copies``."""
        lake = lake or self.lake
        return {
            "CONVO_READ_SOURCE": "lake",
            "CONVO_LAKE_CATALOG_URI": lake.catalog_uri,
            "CONVO_LAKE_WAREHOUSE": lake.warehouse,
            "CONVO_PUBLISH_DIR": str(copies),
        }


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Published]:
    folder = tmp_path_factory.mktemp("lake-readers")
    with populated_sandbox(folder, 200, ("UTC",)) as (_running, db):
        yield Published(folder, db)


def convo(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`convo ARGS` in ``cwd`` with the settings ``env`` (and HOME there), run in this
    process as a process of its own runs it (lake_support.convo_here: the same command and
    outputs, without a process start's seconds of imports; `convo serve` reading the lake as
    a process of its own is below)."""
    return convo_here(cwd, {"HOME": str(cwd), **env}, *args)


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


def test_convo_serve_reads_the_lake_its_config_file_names(
    published: Published, tmp_path: Path
) -> None:
    """`convo --config FILE serve` with read.source = "lake" set in FILE alone (not in the
    environment, not in ./convo.toml) answers from the lake, like the dashboard."""
    first, last = _data_range(published)
    config = tmp_path / "elsewhere.toml"
    config.write_text(
        f'[warehouse]\npath = "{tmp_path / "no-warehouse.duckdb"}"\n'
        f'[publish]\ndir = "{tmp_path / "copies"}"\n[read]\nsource = "lake"\n'
        f'[lake]\ncatalog_uri = "{published.lake.catalog_uri}"\n'
        f'warehouse = "{published.lake.warehouse}"\n[serve]\nport = {free_port()}\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "convo_analytics.cli", "--config", str(config), "serve"],
        cwd=tmp_path, env={**env, "CONVO_SERVE_TOKEN": TOKEN},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        watch = OutputWatcher(proc.stdout, "convo serve")
        url = watch.wait_for(r"on (http://\S+) from", timeout=90).group(1)
        r = httpx.get(url + "/v1/analytics/summary", headers={"Authorization": f"Bearer {TOKEN}"},
                      params={"from": first.isoformat(), "to": last.isoformat(), "tz": "UTC"},
                      timeout=90)  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["totals"]["conversations"] > 0
    assert any(p.name.startswith("lake-") for p in (tmp_path / "copies").iterdir())


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
    monkeypatch.delenv("CONVO_LAKE_CATALOG_URI")  # refused as the settings are read (issue 24)
    monkeypatch.setenv("CONVO_READ_SOURCE", "elsewhere")
    with pytest.raises(SnapshotUnreadable, match=r"read\.source|CONVO_READ_SOURCE"):
        current_snapshot(tmp_path)


def _exports(cwd: Path, days: tuple[date, date], **env: str) -> tuple[dict[str, Any], Path]:
    """`convo export summary` (its JSON) and `convo export guardrails` (into cwd/out) run
    as a user runs them; the guardrail export's folder."""
    span = ("--from", days[0].isoformat(), "--to", days[1].isoformat())
    out = cwd / "out"
    summary = convo(cwd, "export", "summary", *span, "--workspace", "default", **env)
    assert summary.returncode == 0, summary.stderr
    log = convo(cwd, "export", "guardrails", *span, "--out-dir", str(out), **env)
    assert log.returncode == 0, log.stderr
    return orjson.loads(summary.stdout), out


def test_the_exports_read_the_lake_with_the_warehouse_gone(
    published: Published, tmp_path: Path
) -> None:
    """The CLI exports from the lake equal the warehouse's (the manifest's transform run
    apart: the lake copy's run stands for the runs it was published from), though the
    warehouse file they would have read is deleted."""
    days = _data_range(published)
    (by_warehouse := tmp_path / "warehouse").mkdir()
    db = shutil.copyfile(published.db, tmp_path / "w.duckdb")
    theirs, their_out = _exports(by_warehouse, days, CONVO_WAREHOUSE_PATH=str(db))
    db.unlink()
    (by_lake := tmp_path / "lake").mkdir()
    env = published.lake_env(tmp_path / "copies")
    ours, our_out = _exports(by_lake, days, CONVO_WAREHOUSE_PATH=str(db), **env)
    assert not db.exists() and list((tmp_path / "copies").glob("lake-*.duckdb"))
    assert _without_time(ours) == _without_time(theirs)
    assert theirs["totals"]["conversations"] > 0 and theirs["workspaceId"] == "ws_acme"
    files = sorted(p.name for p in their_out.iterdir())
    assert sorted(p.name for p in our_out.iterdir()) == files and len(files) == 2
    data = next(name for name in files if not name.endswith(".manifest.json"))
    assert (our_out / data).read_bytes() == (their_out / data).read_bytes()
    rows = [orjson.loads(line) for line in (their_out / data).read_bytes().splitlines()]
    assert rows and {r["workspace_name"] for r in rows} == {"default"}  # named, not the id
    manifests = [orjson.loads((out / f"{data}.manifest.json").read_bytes())
                 for out in (our_out, their_out)]  # fmt: skip
    run_ids = [m.pop("transformRunId") for m in manifests]
    audits = [m.pop("audit") for m in manifests]  # each its own place in its own trail
    assert [a["seq"] for a in audits] == [a["seq"] for a in audits[:1]] * 2
    assert run_ids[0].startswith("lake-") and run_ids[1]
    assert _without_time(manifests[0]) == _without_time(manifests[1])


def test_the_knowledge_gap_report_reads_the_lake(
    published: Published, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`convo export knowledge-gaps` from the lake (its failing answers, topics, facts and
    messages) equals the warehouse's; the dashboard's page shows the same figures."""
    days = _data_range(published)
    span = ("--from", days[0].isoformat(), "--to", days[1].isoformat(), "--format", "json")
    (by_warehouse := tmp_path / "warehouse").mkdir()
    theirs = convo(by_warehouse, "export", "knowledge-gaps", *span,
                   CONVO_WAREHOUSE_PATH=str(published.db))  # fmt: skip
    assert theirs.returncode == 0, theirs.stderr
    (by_lake := tmp_path / "lake").mkdir()
    env = published.lake_env(tmp_path / "copies")
    ours = convo(by_lake, "export", "knowledge-gaps", *span, **env)
    assert ours.returncode == 0, ours.stderr
    mine, expected = (_without_time(orjson.loads(r.stdout)) for r in (ours, theirs))
    assert mine == expected and expected["topics"]
    page = "knowledge_gaps"
    from_snapshot = _app(published.snapshots, monkeypatch, page)
    published.read_lake(monkeypatch)
    from_lake = _app(published.lake_dir, monkeypatch, page)
    assert not from_lake.exception and not from_lake.error, from_lake.exception
    assert (
        [(m.label, m.value) for m in from_lake.metric]
        == [(m.label, m.value) for m in from_snapshot.metric]
        != []
    )


def test_an_unreadable_lake_is_one_line_for_the_exports(
    published: Published, tmp_path: Path
) -> None:
    """No copy, an older copy (kept for the dashboard, but old figures for an export), or a
    --db that cannot be what is read: exit 2, one line naming the lake, no password."""
    days = ("--from", "2026-01-01", "--to", "2026-01-02")
    unreachable = LakeConfig(UNREACHABLE_URI, published.lake.warehouse)
    older = tmp_path / "older"
    assert lake_snapshot(published.lake, older) is not None  # a copy made while it was up
    for copies, extra in ((tmp_path / "none", ()), (older, ()), (older, ("--db", "w.duckdb"))):
        env = published.lake_env(copies, unreachable)
        for command in (("summary",), ("guardrails", "--out-dir", str(tmp_path / "out"))):
            done = convo(tmp_path, "export", *command, *days, *extra,
                         CONVO_LAKE_CATALOG_PASSWORD=LAKE_PASSWORD, **env)  # fmt: skip
            assert done.returncode == 2, (command, extra, done.stderr)
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
            assert "Traceback" not in done.stderr and LAKE_PASSWORD not in done.stderr
            says = "--db" if extra else "the lake at postgresql+psycopg2://convo:***@127.0.0.1:9"
            assert says in lines[0] and 'read.source = "snapshot"' in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_the_lake_export_names_no_workspace_it_cannot_tell(
    published: Published, tmp_path: Path
) -> None:
    """The lake names its workspaces as the warehouse did (its ``workspaces`` table). A lake
    of ids only (published before it held that table) and two configured workspaces without
    ids: the incident log (whose rows carry names) is refused with the fix; with the id
    configured, the rows are named."""
    days = _data_range(published)
    span = ("--from", days[0].isoformat(), "--to", days[1].isoformat())
    tables = '[[workspaces]]\nname = "acme"\n{}\n[[workspaces]]\nname = "globex"\n'
    config = tmp_path / "convo.toml"
    config.write_text(tables.format(""))
    con = duckdb.connect(str(published.db), read_only=True)
    try:
        [(name,)] = con.execute(
            "SELECT name FROM workspaces WHERE workspace_id = 'ws_acme'"
        ).fetchall()
        by_lake = convo(tmp_path, "export", "guardrails", *span, "--json",
                        **published.lake_env(tmp_path / "named"))  # fmt: skip
        assert by_lake.returncode == 0, by_lake.stderr
        assert orjson.loads(by_lake.stdout)["workspaces"][0]["name"] == name
        published.lake.open_catalog().drop_table(("convo", "workspaces"))  # an older lake
        _refused_then_named(published, tmp_path, config, tables, span)
    finally:
        publish_lake(con, published.lake)  # the lake's workspaces again
        con.close()


def _refused_then_named(
    published: Published, tmp_path: Path, config: Path, tables: str, span: tuple[str, ...]
) -> None:
    env = published.lake_env(tmp_path / "copies")
    refused = convo(tmp_path, "export", "guardrails", *span, **env)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "workspace_id" in refused.stderr and "'acme', 'globex'" in refused.stderr
    assert "ws_acme" in refused.stderr, refused.stderr
    config.write_text(tables.format('workspace_id = "ws_acme"'))
    named = convo(tmp_path, "export", "guardrails", *span, "--json", **env)
    assert named.returncode == 0, named.stderr
    manifest = orjson.loads(named.stdout)
    assert manifest["rowCount"] > 0
    assert manifest["workspaces"][0] == {"name": "acme", "workspaceId": "ws_acme",
                                         "rows": manifest["rowCount"]}  # fmt: skip


def test_the_dashboard_says_the_lake_could_not_be_read(
    published: Published, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An older copy of the lake shown because the lake is unreachable is not called a
    damaged snapshot: the page says the lake could not be read, and why."""
    copies = tmp_path / "copies"
    made = lake_snapshot(published.lake, copies)
    assert made is not None
    published.read_lake(monkeypatch, LakeConfig(UNREACHABLE_URI, published.lake.warehouse))
    at = _app(copies, monkeypatch, "overview")
    assert not at.error, [e.value for e in at.error]
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("The lake could not be read") and made.published_at in w
               for w in warnings), warnings  # fmt: skip
    assert not any("damaged" in w for w in warnings + [c.value for c in at.caption])
    assert any(t.value.startswith("Why: the lake at postgresql+psycopg2://convo@127.0.0.1:9")
               for t in at.text), [t.value for t in at.text]  # fmt: skip
    assert any(c.value.startswith("Lake copy made") for c in at.caption)
