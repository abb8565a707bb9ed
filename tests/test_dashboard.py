"""The Streamlit app through AppTest: every page, populated and empty, with its figures."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

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
PAGES = ["overview", "conversations", "leads", "quality", "guardrails", "workspaces", "topics",
         "compare", "monitors", "explore", "pipeline"]  # fmt: skip


def _publish(db: Path, folder: Path) -> None:
    con = open_warehouse(db)
    try:
        publish_snapshot(con, db, folder)
    finally:
        con.close()


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("dashboard")
    with populated_sandbox(folder, 300, ("UTC",), 100) as (_running, db):
        _publish(db, folder / "published")
        yield folder / "published"


@pytest.fixture
def empty_published(tmp_path: Path) -> Path:
    db = tmp_path / "empty.duckdb"
    open_warehouse(db).close()
    _publish(db, tmp_path / "published")
    return tmp_path / "published"


def _app(
    folder: Path, monkeypatch: pytest.MonkeyPatch, page: str, query: dict[str, Any] | None = None
) -> AppTest:
    monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(folder))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query or {})
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
    if page == "monitors":  # no monitors configured here: it says how to make one
        assert len(at.info) == 1 and "No monitors yet" in at.info[0].value
    else:
        assert not at.info or page == "conversations"  # no "nothing to show" on a populated one


@pytest.mark.parametrize("page", PAGES)
def test_every_page_explains_an_empty_warehouse(
    empty_published: Path, monkeypatch: pytest.MonkeyPatch, page: str
) -> None:
    at = _app(empty_published, monkeypatch, page)
    assert not at.exception, at.exception
    if page not in ("pipeline", "explore"):  # those two show what a snapshot holds, if empty
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


def test_one_workspace_is_shown_and_changes_nothing(
    published: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warehouse of one workspace: the selector names it (nothing else to pick), every
    table names it, and the figures are the warehouse's."""
    at = _app(published, monkeypatch, "overview")
    snap = current_snapshot(published)
    assert snap is not None
    con = snap.connect()
    try:
        ((name,),) = con.execute("SELECT name FROM workspaces").fetchall()
        (held,) = con.execute("SELECT count(*) FROM mart_conversations").fetchall()[0]
    finally:
        con.close()
    selector = at.sidebar.selectbox(key="filter_workspace")
    assert selector.disabled and selector.options == [name]
    assert "workspace" not in at.query_params
    at.switch_page("app_pages/workspaces.py").run()
    (table,) = (d.value for d in at.dataframe)
    assert list(table["workspace"]) == [name, "All workspaces"]
    assert table["conversations"].iloc[0] == table["conversations"].iloc[1] <= held


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


# -- shareable views, drill-down, search and paging ---------------------------------------------


def _shown_conversations(at: AppTest) -> list[str]:
    table = next(df.value for df in at.dataframe if "conversation_id" in df.value.columns)
    return list(table["conversation_id"])


def _facts(published: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    snap = current_snapshot(published)
    assert snap is not None
    con = snap.connect()
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def test_a_url_with_filters_restores_the_view(
    published: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ((first, last),) = _facts(published, "SELECT min(started_at)::DATE, max(started_at)::DATE "
                              "FROM mart_conversations")  # fmt: skip
    view = {"from": str(first + timedelta(days=2)), "to": str(last - timedelta(days=1)),
            "tz": "Europe/Berlin", "channel": "sms"}  # fmt: skip
    at = _app(published, monkeypatch, "overview", view)
    assert not at.exception, at.exception
    assert at.sidebar.date_input[0].value == (first + timedelta(days=2), last - timedelta(days=1))
    assert at.sidebar.selectbox[0].value == "Europe/Berlin"
    assert at.sidebar.multiselect[0].value == ["sms"]
    assert at.query_params["tz"] == "Europe/Berlin" and at.query_params["channel"] == "sms"
    assert "(Europe/Berlin)" in at.caption[0].value
    # the same view on another page keeps the filters (and the URL names them)
    at.switch_page("app_pages/conversations.py").run()
    assert not at.exception, at.exception
    assert set(
        next(df.value for df in at.dataframe if "channel" in df.value.columns)["channel"]
    ) == {"sms"}


def test_a_drill_down_url_narrows_conversations_to_that_slice(
    published: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ((locale, count),) = _facts(published, "SELECT locale, count(*) FROM mart_conversations "
                                "GROUP BY 1 ORDER BY 2 DESC LIMIT 1")  # fmt: skip
    ((first, last),) = _facts(published, "SELECT min(started_at)::DATE, max(started_at)::DATE "
                              "FROM mart_conversations")  # fmt: skip
    view = {"from": str(first), "to": str(last), "locale": locale}
    at = _app(published, monkeypatch, "conversations", view)
    at.switch_page("app_pages/conversations.py").run()
    at.selectbox(key="conv_page_size").select(500).run()
    assert not at.exception, at.exception
    shown = _shown_conversations(at)
    assert len(shown) == count
    locales = _facts(published, "SELECT DISTINCT locale FROM mart_conversations WHERE "
                     "conversation_id IN (SELECT unnest(?))", [shown])  # fmt: skip
    assert locales == [(locale,)]
    assert any(f"locale: {locale}" in i.value for i in at.info)
    at.button(key="conv_clear_drill").click().run()  # "Show all" drops the slice
    assert not at.exception, at.exception
    assert "locale" not in at.query_params and len(_shown_conversations(at)) > count


def test_conversations_search_paging_and_picker(
    published: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ((first, last, total),) = _facts(
        published,
        "SELECT min(started_at)::DATE, max(started_at)::DATE, count(*) FROM mart_conversations",
    )
    at = _app(published, monkeypatch, "conversations", {"from": str(first), "to": str(last)})
    at.switch_page("app_pages/conversations.py").run()
    at.selectbox(key="conv_page_size").select(50).run()
    assert not at.exception, at.exception
    seen: list[str] = []
    pages = int(at.number_input(key="conv_page").max)
    assert pages == -(-total // 50) and pages > 1
    for number in range(1, pages + 1):  # paging reaches every conversation, once
        at.number_input(key="conv_page").set_value(number).run()
        assert not at.exception, at.exception
        seen += _shown_conversations(at)
    assert len(seen) == len(set(seen)) == total
    # the picker shows time, channel and the first user message
    picker = at.selectbox(key="conv_pick")
    assert (
        " · " in picker.format_func(picker.options[0]) if hasattr(picker, "format_func") else True
    )
    ((word,),) = _facts(published, "SELECT lower(regexp_extract(text, '([A-Za-z]{6,})', 1)) "
                        "FROM messages WHERE role = 'user' AND regexp_matches(text, "
                        "'[A-Za-z]{6,}') LIMIT 1")  # fmt: skip
    expected = {r[0] for r in _facts(published,
        "SELECT DISTINCT conversation_id FROM messages WHERE strpos(lower(text), ?) > 0 "
        "UNION SELECT conversation_id FROM mart_conversations WHERE "
        "strpos(lower(conversation_id), ?) > 0 OR strpos(lower(external_user_id), ?) > 0",
        [word, word, word])}  # fmt: skip
    at.text_input(key="conv_search").input(word.upper()).run()  # any case
    at.selectbox(key="conv_page_size").select(500).run()
    assert not at.exception, at.exception
    assert set(_shown_conversations(at)) == expected and expected
    assert at.query_params["q"] == word.upper()
    picked = at.selectbox(key="conv_pick").value
    assert at.query_params["conversation"] == picked
    # the search's text is matched as written: % and _ are not wildcards
    literal = {r[0] for r in _facts(published, "SELECT DISTINCT conversation_id FROM messages "
                                    "WHERE strpos(text, '%') > 0")}  # fmt: skip
    at.text_input(key="conv_search").input("%").run()
    assert not at.exception, at.exception
    assert set(_shown_conversations(at)) == literal
    assert literal or any("No conversation matches" in c.value for c in at.caption)


# -- Explore -------------------------------------------------------------------------------------


def _explore(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **query: str
) -> AppTest:
    monkeypatch.setenv("CONVO_DASHBOARD_NOTEBOOKS_DIR", str(tmp_path / "notebooks"))
    monkeypatch.setenv("CONVO_DASHBOARD_QUERY_TIMEOUT_SECONDS", "1")
    at = _app(published, monkeypatch, "overview", query)
    at.switch_page("app_pages/explore.py").run()
    assert not at.exception, at.exception
    return at


def _cell_sql(at: AppTest) -> list[Any]:
    return [t for t in at.text_area if str(t.key).startswith("cell_sql_")]


def test_an_explore_cell_shows_rows_a_chart_and_a_download(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    at = _explore(published, monkeypatch, tmp_path)
    (cell,) = _cell_sql(at)
    cell.input("SELECT started_at::DATE AS day, count(*) AS conversations "
               "FROM mart_conversations GROUP BY 1 ORDER BY 1").run()  # fmt: skip
    assert not at.exception, at.exception
    assert not at.error
    (days,) = _facts(published, "SELECT count(DISTINCT started_at::DATE) FROM mart_conversations")
    table = next(df.value for df in at.dataframe if "conversations" in df.value.columns)
    assert len(table) == days[0] and list(table.columns) == ["day", "conversations"]
    charts = at.get("vega_lite_chart")
    assert charts and '"mark": {"type": "line"' in charts[0].proto.spec.replace("\n", "")
    assert any(b.proto.label == "Download as CSV" for b in at.get("download_button"))


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "read_csv() is not available in Explore"),
        ("COPY mart_conversations TO '/tmp/convo-explore-copy.csv'", "COPY statements are"),
        ("ATTACH '/tmp/convo-explore.duckdb' AS other", "ATTACH statements are refused"),
        ("INSTALL httpfs", "INSTALL statements are refused"),
        ("SELECT count(*) FROM range(100000000000)", "stopped after 1 s"),
    ],
)
def test_explore_refuses_with_one_line_and_stops_long_queries(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sql: str, says: str
) -> None:
    at = _explore(published, monkeypatch, tmp_path)
    _cell_sql(at)[0].input(sql).run()
    assert not at.exception, at.exception
    (error,) = at.error
    assert says in error.value and "\n" not in error.value
    assert not Path("/tmp/convo-explore-copy.csv").exists()
    assert not Path("/tmp/convo-explore.duckdb").exists()


def test_explore_notebooks_open_by_url_change_and_save(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    at = _explore(published, monkeypatch, tmp_path, notebook="escalations_by_reason_and_channel")
    assert [c.value.split()[0] for c in _cell_sql(at)] == ["SELECT"] * 3
    assert not at.error, [e.value for e in at.error]
    assert len(at.get("vega_lite_chart")) == 3  # each starter cell charts its result
    titles = [t.value for t in at.text_input if str(t.key).startswith("cell_title_")]
    assert titles[0] == "Escalations by reason"
    first, second = (str(t.key).removeprefix("cell_sql_") for t in _cell_sql(at)[:2])
    at.button(key=f"cell_down_{first}").click().run()  # reorder
    assert [str(t.key) for t in _cell_sql(at)][:2] == [f"cell_sql_{second}", f"cell_sql_{first}"]
    at.button(key=f"cell_delete_{second}").click().run()  # delete
    at.button(key="explore_add").click().run()  # add
    cells = _cell_sql(at)
    assert len(cells) == 3 and cells[-1].value == ""
    cells[-1].input("SELECT 42 AS answer").run()
    at.text_input(key="explore_save_as").input("my-escalations").run()
    at.button(key="explore_save").click().run()
    assert not at.exception, at.exception
    saved = tmp_path / "notebooks" / "my-escalations.sql"
    text = saved.read_text()
    assert "SELECT 42 AS answer;" in text and "-- %% Escalations by reason\n" in text
    assert at.query_params["notebook"] == "my-escalations"
    again = _explore(published, monkeypatch, tmp_path, notebook="my-escalations")
    assert [c.value for c in _cell_sql(again)][-1] == "SELECT 42 AS answer"
    assert len(_cell_sql(again)) == 3


# -- comparisons: the Compare page and the Overview's deltas (issue 28) ---------------------------


def _compare_table(at: AppTest) -> Any:
    """The Compare page's table (a pandas frame of what it shows), by KPI."""
    table = next(df.value for df in at.dataframe if "KPI" in df.value.columns)
    return table.set_index("KPI")


def _span(published: Path) -> tuple[date, date]:
    ((first, last),) = _facts(published, "SELECT min(started_at)::DATE, max(started_at)::DATE "
                              "FROM mart_conversations")  # fmt: skip
    return first, last


def _rate_sql(published: Path, first: date, last: date, where: str = "",
              params: list[Any] | None = None) -> tuple[int, int]:  # fmt: skip
    """(resolved, conversations) started on first..last (UTC) by SQL over the daily mart."""
    ((resolved, conversations),) = _facts(
        published,
        "SELECT sum(d.resolved)::BIGINT, sum(d.conversations)::BIGINT "
        "FROM mart_daily_conversations d JOIN mart_slices s USING (slice_key) "
        f"WHERE d.timezone = 'UTC' AND d.date BETWEEN ? AND ?{where}",
        [first, last, *(params or [])],
    )
    return int(resolved or 0), int(conversations or 0)


def test_compare_two_periods_every_kpi_with_its_interval(
    published: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two periods from the URL: every KPI of the compare package side by side, each figure
    with its interval, the difference with a verdict; the figures are the marts'."""
    first, last = _span(published)
    a = (first, first + timedelta(days=4))
    b = (first + timedelta(days=5), last)
    view = {"compare": "periods", "a_from": str(a[0]), "a_to": str(a[1]),
            "b_from": str(b[0]), "b_to": str(b[1])}  # fmt: skip
    at = _app(published, monkeypatch, "overview", view)
    at.switch_page("app_pages/compare.py").run()
    assert not at.exception, at.exception
    assert at.date_input(key="compare_a_range").value == a
    assert at.date_input(key="compare_b_range").value == b
    table = _compare_table(at)
    assert list(table.index) == [
        "Resolution rate", "Escalation rate", "Containment rate", "CSAT",
        "Low-confidence share", "Guardrail triggers / 1,000 responses", "p50 latency",
        "p90 latency", "p95 latency",
    ]  # fmt: skip
    for side, days in (("A", a), ("B", b)):
        resolved, conversations = _rate_sql(published, *days)
        assert conversations >= 30
        assert table.loc["Resolution rate", side].startswith(f"{resolved / conversations:.1%} (")
        assert " to " in table.loc["Resolution rate", side]
    difference = table.loc["Resolution rate", "Difference (B − A)"]
    assert difference.endswith(" pts)") and difference[0] in "+-"
    assert set(table["Verdict"]) <= {"difference real", "could be noise", "too few", "no data"}
    assert not at.warning  # both periods hold enough conversations
    assert at.query_params["compare"] == "periods" and at.query_params["b_to"] == str(b[1])
    # without periods of its own: the sidebar's range (B) against the days before it (A),
    # following the sidebar when its range changes
    fresh = _app(published, monkeypatch, "overview",
                 {"from": str(last - timedelta(days=3)), "to": str(last)})  # fmt: skip
    fresh.switch_page("app_pages/compare.py").run()
    assert fresh.date_input(key="compare_b_range").value == (last - timedelta(days=3), last)
    assert fresh.date_input(key="compare_a_range").value == (
        last - timedelta(days=7), last - timedelta(days=4))  # fmt: skip
    fresh.sidebar.date_input(key="filter_range").set_value((last - timedelta(days=1), last))
    fresh.run()
    assert not fresh.exception, fresh.exception
    assert fresh.date_input(key="compare_a_range").value == (
        last - timedelta(days=3), last - timedelta(days=2))  # fmt: skip


def test_compare_two_slices_raw_and_adjusted_for_topic_mix(
    published: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two channels over the sidebar's range: the topic-adjusted difference is shown (the
    conversations have topics), with its note; the URL carries the choice."""
    first, last = _span(published)
    (top, second) = [r[0] for r in _facts(
        published, "SELECT channel, count(*) FROM mart_conversations GROUP BY 1 "
        "ORDER BY 2 DESC, 1 LIMIT 2")]  # fmt: skip
    view = {"from": str(first), "to": str(last), "compare": "slices", "dimension": "channel",
            "side_a": top, "side_b": second}  # fmt: skip
    at = _app(published, monkeypatch, "overview", view)
    at.switch_page("app_pages/compare.py").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="compare_side_a").value == top
    assert at.selectbox(key="compare_side_b").value == second
    table = _compare_table(at)
    for side, channel in (("A", top), ("B", second)):
        resolved, conversations = _rate_sql(published, first, last, " AND s.channel = ?",
                                            [channel])  # fmt: skip
        assert table.loc["Resolution rate", side].startswith(f"{resolved / conversations:.1%} (")
    adjusted = table.loc["Resolution rate", "Adjusted for topic mix"]
    assert adjusted[0] in "+-" and "pts" in adjusted  # a figure, not a dash
    assert table.loc["p95 latency", "Adjusted for topic mix"] == "–"  # percentiles are not
    assert any("pooled mix" in c.value for c in at.caption)
    assert at.query_params["side_a"] == top and at.query_params["dimension"] == "channel"
    # two model tiers: their responses only; the conversation figures do not apply
    at.selectbox(key="compare_dimension").set_value("model_tier").run()
    assert not at.exception, at.exception
    tiers = _compare_table(at)
    assert tiers.loc["Resolution rate", "A"] == "not applicable"
    assert tiers.loc["Resolution rate", "Verdict"] == "not applicable"
    assert tiers.loc["p95 latency", "A"] != "not applicable"
    assert any("responses only" in c.value for c in at.caption)


def test_compare_warns_when_a_side_is_under_the_minimum(
    published: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A locale with fewer than 30 conversations: a warning names the side, and its
    differences are marked too few."""
    from convo_analytics.compare import MIN_CONVERSATIONS

    first, last = _span(published)
    ((rare, count), (common, _)) = _facts(
        published, "(SELECT locale, count(*) AS n FROM mart_conversations GROUP BY 1 "
        "ORDER BY 2, 1 LIMIT 1) UNION ALL (SELECT locale, count(*) FROM mart_conversations "
        "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1)")  # fmt: skip
    assert count < MIN_CONVERSATIONS
    view = {"from": str(first), "to": str(last), "compare": "slices", "dimension": "locale",
            "side_a": common, "side_b": rare}  # fmt: skip
    at = _app(published, monkeypatch, "overview", view)
    at.switch_page("app_pages/compare.py").run()
    assert not at.exception, at.exception
    (warning,) = [w.value for w in at.warning]
    assert warning.startswith(f"Side B has {count:,} conversations, fewer than the minimum")
    table = _compare_table(at)
    assert set(table["Verdict"]) <= {"too few", "no data"}


def _per_topic(con: Any, table: str, columns: str, where: str, params: list[Any]
               ) -> dict[str, tuple[int, ...]]:  # fmt: skip
    """``columns`` (sums) of a daily mart per ``workspace:topic`` by SQL, rows of ``where``."""
    rows = con.execute(
        f"SELECT m.workspace_id || ':' || s.topic, {columns} FROM {table} m "
        f"JOIN mart_slices s USING (slice_key) WHERE m.timezone = 'UTC' {where} GROUP BY 1",
        params,
    ).fetchall()
    return {r[0]: tuple(int(v or 0) for v in r[1:]) for r in rows}


def test_side_counts_are_the_marts_sums(published: Path) -> None:
    """A side's counts, histogram and split by topic equal SQL's sums over the marts: a
    period, a channel of it, a model tier of it (which has no conversation figures)."""
    from convo_analytics.dashboard._compare import Side, side_counts

    first, last = _span(published)
    snap = current_snapshot(published)
    assert snap is not None
    con = snap.connect()
    try:
        ((channel, tier),) = con.execute(
            "SELECT (SELECT min(channel) FROM mart_conversations), "
            "(SELECT min(model_tier) FROM mart_daily_latency)"
        ).fetchall()
        cases = [
            (Side(first + timedelta(days=2), last), "", []),
            (Side(first, last, "channel", channel), " AND s.channel = ?", [channel]),
            (Side(first, last, "model_tier", tier), " AND m.model_tier = ?", [tier]),
        ]
        for side, sliced, values in cases:
            counts = side_counts(con, Filters(first, last), side)
            tiered = side.dimension == "model_tier"
            where, params = " AND m.date BETWEEN ? AND ?", [side.first, side.last]
            sums = (
                "sum(conversations), sum(resolved), sum(escalated_conversations), "
                "sum(contained_conversations), sum(feedback_count), sum(positive_feedback)"
            )
            unsliced = tiered  # a tier narrows responses only
            convs = _per_topic(con, "mart_daily_conversations", sums,
                               where + ("" if unsliced else sliced),
                               params + ([] if unsliced else values))  # fmt: skip
            msgs = _per_topic(con, "mart_daily_messages", "sum(assistant_responses), "
                              "sum(low_confidence_responses)", where + sliced,
                              params + values)  # fmt: skip
            flags = _per_topic(con, "mart_daily_guardrails", "sum(triggers)",
                               where + ("" if tiered else sliced),
                               params + ([] if tiered else values))  # fmt: skip
            latency = dict(con.execute(
                "SELECT m.latency_ms::DOUBLE, sum(m.responses)::BIGINT FROM mart_daily_latency m "
                f"JOIN mart_slices s USING (slice_key) WHERE m.timezone = 'UTC'{where}{sliced} "
                "GROUP BY 1", params + values).fetchall())  # fmt: skip
            assert dict(counts.latency) == {k: v for k, v in latency.items() if v}
            assert set(counts.by_topic) >= set(msgs)
            for key, mine in counts.by_topic.items():
                assert (mine.conversations, mine.resolved, mine.escalated_conversations,
                        mine.contained_conversations, mine.feedback_count,
                        mine.positive_feedback) == (
                    (0,) * 6 if tiered else convs.get(key, (0,) * 6)), key  # fmt: skip
                pair = (mine.assistant_responses, mine.low_confidence_responses)
                assert pair == msgs.get(key, (0, 0)), key
                assert mine.guardrail_triggers == (0 if tiered else flags.get(key, (0,))[0]), key
            assert counts.conversations == (0 if tiered else sum(c[0] for c in convs.values()))
            assert counts.assistant_responses == sum(m[0] for m in msgs.values()) > 0
            assert len({k.split(":")[1] for k in counts.by_topic}) > 1  # topics, not just unknown
    finally:
        con.close()


def test_the_overview_deltas_show_their_interval(
    published: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the previous period covered, every tile's change comes with its 95 % interval
    and says in its help whether it could be noise."""
    _, last = _span(published)
    view = {"from": str(last - timedelta(days=3)), "to": str(last)}
    at = _app(published, monkeypatch, "overview", view)
    assert not at.exception, at.exception
    tiles = {m.label: m for m in at.metric}
    for label in ("Resolution rate", "CSAT", "p95 latency", "Conversations",
                  "Guardrail triggers / 1k responses"):  # fmt: skip
        assert "(95 % CI " in tiles[label].delta and " to " in tiles[label].delta, label
        assert tiles[label].help, label
    assert tiles["Resolution rate"].delta.endswith(" pts)")
    assert any(m.help.startswith(("Could be noise", "A real change", "A period has fewer"))
               for m in at.metric)  # fmt: skip
