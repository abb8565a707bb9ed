"""The dashboard over three workspaces (issue 17), through AppTest: the sidebar's workspace
narrows every page's figures to that workspace's own (checked against the marts by SQL
of their own), the Workspaces page shows each workspace's figures side by side, and
every table and download names the workspace."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from streamlit.testing.v1 import AppTest

from convo_analytics.dashboard import charts
from dashboard_support import WORKSPACES, RecordingManager, downloaded, three_workspaces

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "dashboards" / "streamlit_app.py")
PAGES = ["overview", "conversations", "leads", "quality", "guardrails", "workspaces",
         "topics", "compare", "explore", "pipeline"]  # fmt: skip
NAMES = {f"ws_{name}": name for name, _ in WORKSPACES}


def _expected(db: Path, first: date, last: date) -> dict[str | None, dict[str, Any]]:
    """Each workspace's figures (and all of them together, under None) for the range,
    straight from the marts by SQL: what the dashboard must show."""
    con = duckdb.connect(str(db), read_only=True)
    con.execute("SET TimeZone = 'UTC'")
    try:
        out: dict[str | None, dict[str, Any]] = {}
        for ws in (*NAMES, None):
            mine = "true" if ws is None else f"workspace_id = '{ws}'"
            conv = con.execute(
                f"""SELECT count(*), avg((status = 'resolved')::INT), avg(escalated::INT),
                           count(qualified_at), count(lead_id),
                           count(*) FILTER (positive_feedback) / count(feedback_rating)
                    FROM mart_conversations
                    WHERE started_at::DATE BETWEEN ? AND ? AND {mine}""",
                [first, last],
            ).fetchall()[0]
            latency = con.execute(
                f"""SELECT count(*), avg(coalesce(latency_ms, 0)),
                           quantile_cont(coalesce(latency_ms, 0), 0.9)
                    FROM messages WHERE role = 'assistant'
                    AND created_at::DATE BETWEEN ? AND ? AND {mine}""",
                [first, last],
            ).fetchall()[0]
            (incidents,) = con.execute(
                f"SELECT count(*) FROM mart_guardrail_incidents "
                f"WHERE triggered_at::DATE BETWEEN ? AND ? AND {mine}",
                [first, last],
            ).fetchall()[0]
            (held,) = con.execute(
                f"SELECT count(*) FROM mart_conversations WHERE {mine}"
            ).fetchall()[0]
            out[ws] = {
                "conversations": conv[0], "resolutionRate": conv[1], "escalationRate": conv[2],
                "leadsQualified": conv[3], "leads": conv[4], "csat": conv[5],
                "responses": latency[0], "avgLatencyMs": latency[1], "latencyP90Ms": latency[2],
                "guardrailTriggers": incidents, "held": held,
            }  # fmt: skip
        return out
    finally:
        con.close()


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("dashboard-workspaces")
    with three_workspaces(folder, topics_from=50) as (published, db):  # each with topics
        con = duckdb.connect(str(db), read_only=True)
        first_day, last_day = con.execute(
            "SELECT min(started_at)::DATE, max(started_at)::DATE FROM mart_conversations"
        ).fetchall()[0]
        con.close()
        first = max(first_day, last_day - timedelta(days=29))  # the dashboard's default range
        yield {"published": published, "expected": _expected(db, first, last_day)}


Downloads = list[RecordingManager]


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> list[RecordingManager]:
    return RecordingManager.record(monkeypatch)


def _csv(at: AppTest, made: list[RecordingManager]) -> dict[str, list[list[str]]]:
    """Every download button's CSV of the last run (header first), by its key."""
    out = {}
    for button in at.get("download_button"):
        name, data = downloaded(made, button)
        if name.endswith(".csv"):
            out[str(button.proto.id)] = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    return out


def _records(rows: list[list[str]]) -> list[dict[str, str]]:
    return [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


def _app(published: Path, monkeypatch: pytest.MonkeyPatch, query: dict[str, Any] | None = None
         ) -> AppTest:  # fmt: skip
    monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(published))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, at.exception
    return at


def _page(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"app_pages/{page}.py")
    at.run()
    assert not at.exception, at.exception
    return at


def _count(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_selector_offers_every_workspace_by_name(
    three: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _app(three["published"], monkeypatch)
    selector = at.sidebar.selectbox(key="filter_workspace")
    assert selector.options == ["All workspaces", "acme", "globex", "initech"]
    assert selector.value == "" and not selector.disabled  # all workspaces by default
    tiles = {m.label: m.value for m in at.metric}
    assert _count(tiles["Conversations"]) == three["expected"][None]["conversations"]
    by_name = _app(three["published"], monkeypatch, {"workspace": "globex"})
    assert by_name.sidebar.selectbox(key="filter_workspace").value == "ws_globex"
    by_id = _app(three["published"], monkeypatch, {"workspace": "ws_initech"})
    assert by_id.sidebar.selectbox(key="filter_workspace").value == "ws_initech"
    assert by_id.query_params["workspace"] in ("ws_initech", ["ws_initech"])
    unknown = _app(three["published"], monkeypatch, {"workspace": "nobody"})
    assert unknown.sidebar.selectbox(key="filter_workspace").value == ""


@pytest.mark.parametrize("ws", sorted(NAMES))
def test_a_workspace_narrows_every_page_to_its_own_figures(
    three: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    downloads: Downloads,
    ws: str,
) -> None:
    want, name = three["expected"][ws], NAMES[ws]
    assert want["conversations"] < three["expected"][None]["conversations"]
    at = _app(three["published"], monkeypatch)
    at.sidebar.selectbox(key="filter_workspace").select(ws).run()
    assert not at.exception, at.exception
    tiles = {m.label: m.value for m in at.metric}
    assert _count(tiles["Conversations"]) == want["conversations"]
    assert tiles["Resolution rate"] == f"{want['resolutionRate']:.1%}"
    assert tiles["Escalation rate"] == f"{want['escalationRate']:.1%}"
    assert tiles["CSAT"] == f"{want['csat']:.1%}"
    assert _count(tiles["Leads qualified"]) == want["leadsQualified"]

    _page(at, "conversations")
    assert f"{want['conversations']:,} conversations" in at.caption[0].value
    assert set(at.dataframe[0].value["workspace"]) == {name}

    _page(at, "leads")
    funnel = at.dataframe[0].value
    assert funnel.loc[funnel["step"] == "started", "conversations"].item() == want["conversations"]
    qualified = at.dataframe[2].value
    assert set(qualified["workspace"]) == {name}

    _page(at, "quality")
    files = _csv(at, downloads)
    low = next(_records(rows) for rows in files.values() if "assistantResponses" in rows[0])
    assert sum(int(r["assistantResponses"]) for r in low) == want["responses"]

    _page(at, "guardrails")
    log = at.dataframe[1].value
    assert len(log) == want["guardrailTriggers"] and set(log["workspace"]) == {name}

    _page(at, "explore")
    cell = next(d.value for d in at.dataframe if "conversations" in d.value.columns)
    assert cell["conversations"].sum() == want["held"]  # Explore's tables: its rows only

    _page(at, "pipeline")
    bookmarks = at.dataframe[1].value
    assert set(bookmarks["workspace"]) == {name} and len(bookmarks) == 2

    _page(at, "workspaces")  # the comparison shows them all, whatever is chosen
    assert len(at.dataframe[0].value) == len(NAMES) + 1


def test_the_comparison_shows_each_workspaces_own_figures(
    three: dict[str, Any], monkeypatch: pytest.MonkeyPatch, downloads: Downloads
) -> None:
    at = _page(_app(three["published"], monkeypatch), "workspaces")
    table = at.dataframe[0].value
    assert list(table["workspace"]) == [*NAMES.values(), "All workspaces"]
    (raw,) = _csv(at, downloads).values()
    rows = _records(raw)
    assert [r["workspace"] for r in rows] == [*NAMES.values(), "All workspaces"]
    for row in rows:
        want = three["expected"][row["workspace_id"] or None]
        for column in ("conversations", "leads", "leadsQualified", "guardrailTriggers"):
            assert int(row[column]) == want[column], (row["workspace"], column)
        for column in ("resolutionRate", "escalationRate", "csat", "avgLatencyMs",
                       "latencyP90Ms"):  # fmt: skip
            assert float(row[column]) == pytest.approx(want[column], rel=1e-9), column
    figures = [int(r["conversations"]) for r in rows]
    assert sum(figures[:-1]) == figures[-1]  # all workspaces: the sum of each
    (chart,) = at.get("vega_lite_chart")  # a bar per workspace, in the table's order
    spec = json.loads(chart.proto.spec)
    assert spec["encoding"]["y"]["sort"] == list(NAMES.values())
    assert spec["encoding"]["color"]["scale"]["range"][:3] == charts.OKABE_ITO[:3]


@pytest.mark.parametrize("page", [p for p in PAGES if p != "explore"])  # Explore: own SQL
def test_every_table_and_download_names_the_workspace(
    three: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    downloads: Downloads,
    page: str,
) -> None:
    at = _app(three["published"], monkeypatch)
    if page != "overview":
        _page(at, page)
    tables = [d.value for d in at.dataframe]
    files = _csv(at, downloads)
    assert files and (tables or page == "quality"), page  # Quality: charts and downloads
    for table in tables:
        assert table.columns[0] == "workspace", (page, list(table.columns))
        assert set(table["workspace"]) <= {*NAMES.values(), "All workspaces", "–"}
    for url, rows in files.items():
        assert rows[0][0] == "workspace", (page, url, rows[0])


def test_the_compliance_export_is_the_chosen_workspaces(
    three: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Guardrails page's export follows the sidebar: one workspace's rows and manifest
    when one is chosen, every workspace's (each row naming its own) when none is."""
    at = _page(_app(three["published"], monkeypatch), "guardrails")
    at.button(key="export_prepare").click().run()
    assert not at.exception, at.exception
    every = {w["workspaceId"]: w["rows"] for w in at.session_state["export_manifest"]["workspaces"]}
    assert set(every) == set(NAMES) and all(every.values()), every
    ws = sorted(NAMES)[0]
    at.sidebar.selectbox(key="filter_workspace").select(ws).run()
    at.button(key="export_prepare").click().run()
    assert not at.exception, at.exception
    manifest = at.session_state["export_manifest"]
    assert [(w["workspaceId"], w["rows"]) for w in manifest["workspaces"]] == [(ws, every[ws])]
    (data,) = [b for name, b in at.session_state["export_files"].items() if name.endswith("l")]
    rows = [orjson.loads(line) for line in data.splitlines() if line.strip()]
    assert len(rows) == every[ws] and {r["workspace_id"] for r in rows} == {ws}


# -- a dashboard started for some workspaces (convo dashboard --workspace) ----------------------


def _restricted(published: Path, monkeypatch: pytest.MonkeyPatch, ids: list[str],
                query: dict[str, Any] | None = None) -> AppTest:  # fmt: skip
    monkeypatch.setenv("CONVO_DASHBOARD_WORKSPACE_IDS", json.dumps(ids))  # as the command sets
    return _app(published, monkeypatch, query)


@pytest.mark.parametrize("page", PAGES)
def test_a_dashboard_for_one_workspace_shows_only_its_rows(
    three: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    downloads: Downloads,
    page: str,
) -> None:
    """The sidebar offers that workspace alone (a URL naming another is ignored), and no
    table or download of any page holds a row of another workspace or of the whole
    warehouse; the Workspaces page compares it alone."""
    ws = "ws_globex"
    at = _restricted(three["published"], monkeypatch, [ws], {"workspace": "ws_acme"})
    selector = at.sidebar.selectbox(key="filter_workspace")
    assert selector.options == ["globex"] and selector.value == ws and selector.disabled
    tiles = {m.label: m.value for m in at.metric}
    if page != "overview":
        _page(at, page)
    if page == "overview":
        assert _count(tiles["Conversations"]) == three["expected"][ws]["conversations"]
    tables = [d.value for d in at.dataframe]
    for table in tables:
        if "workspace" in table.columns:
            assert set(table["workspace"]) <= {"globex", "All workspaces"}, (page, table)
        if "workspace_id" in table.columns:
            assert set(table["workspace_id"].dropna()) <= {ws}, (page, table)
    for url, rows in _csv(at, downloads).items():
        if rows and "workspace" in rows[0]:
            assert {r["workspace"] for r in _records(rows)} <= {"globex", "All workspaces"}, url
    if page == "workspaces":
        (table,) = tables
        assert list(table["workspace"]) == ["globex", "All workspaces"]
        assert table["conversations"].iloc[0] == table["conversations"].iloc[1]
        assert table["conversations"].iloc[0] == three["expected"][ws]["conversations"]
    if page == "pipeline":
        assert not any("quarantine" in s.value.lower() for s in at.subheader)


def test_a_dashboard_for_two_workspaces_offers_each_never_all(
    three: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _restricted(three["published"], monkeypatch, ["ws_initech", "ws_acme"])
    selector = at.sidebar.selectbox(key="filter_workspace")
    assert selector.options == ["initech", "acme"] and not selector.disabled
    assert selector.value == "ws_initech"
    tiles = {m.label: m.value for m in at.metric}
    assert _count(tiles["Conversations"]) == three["expected"]["ws_initech"]["conversations"]
    _page(at, "workspaces")
    table = at.dataframe[0].value
    assert list(table["workspace"]) == ["acme", "initech", "All workspaces"]
    both = sum(three["expected"][w]["conversations"] for w in ("ws_acme", "ws_initech"))
    assert table["conversations"].iloc[2] == both


def test_dashboard_workspace_names_resolve_like_the_exports(
    three: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By name or id, each once; a name the snapshot does not hold is one line, exit 2."""
    import subprocess
    import sys

    from convo_analytics.cli._dashboard_cmd import _workspace_ids
    from convo_analytics.config import load_settings

    monkeypatch.chdir(tmp_path)
    settings = load_settings(None, {}, environ={})
    got = _workspace_ids(settings, three["published"], ["globex", "ws_initech", "ws_globex"])
    assert got == ["ws_globex", "ws_initech"]
    done = subprocess.run(
        [sys.executable, "-m", "convo_analytics.cli", "dashboard", "--dir",
         str(three["published"]), "--workspace", "acme", "--workspace", "NOPE"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == "", done.stderr
    (line,) = done.stderr.splitlines()
    assert "'NOPE'" in line and "acme, globex, initech" in line
