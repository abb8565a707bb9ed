"""The Explore page under hostile input, through AppTest over a snapshot of three workspaces
made by the pipeline: queries stopped at the limits in one line (the page answering the
next one), stopped cells not run again when their notebook opens, user text shown as
written, and a dashboard started for one workspace (``convo dashboard --workspace``, whose
environment is set here as the command sets it) reaching nothing of the others."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from convo_analytics.dashboard._explore import literal
from dashboard_support import RecordingManager, downloaded, three_workspaces
from test_notebooks_executor import REGEXP, SORT, TABLE_FUNCTION_CASES

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "dashboards" / "streamlit_app.py")
SLOW = "SELECT sum(hash(range)) FROM range(100000000000)"
MINE, OTHERS = "ws_acme", ("ws_globex", "ws_initech")


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("dashboard-explore")
    with three_workspaces(folder, conversations=60) as (path, _db):
        yield path


def _explore(
    published: Path,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    *,
    timeout: str = "2",
    only: list[str] | None = None,
    **query: str,
) -> AppTest:
    monkeypatch.setenv("CONVO_PUBLISHED_DIR", str(published))
    monkeypatch.setenv("CONVO_DASHBOARD_NOTEBOOKS_DIR", str(tmp_path / "notebooks"))
    monkeypatch.setenv("CONVO_DASHBOARD_QUERY_TIMEOUT_SECONDS", timeout)
    monkeypatch.setenv("CONVO_DASHBOARD_QUERY_MEMORY_MB", "512")
    monkeypatch.setenv("CONVO_DASHBOARD_QUERY_WORKERS", "1")
    if only is not None:
        monkeypatch.setenv("CONVO_DASHBOARD_WORKSPACE_IDS", json.dumps(only))
    else:
        monkeypatch.delenv("CONVO_DASHBOARD_WORKSPACE_IDS", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(query)
    at.run()
    assert not at.exception, at.exception
    at.switch_page("app_pages/explore.py").run()
    assert not at.exception, at.exception
    return at


def _cells(at: AppTest) -> list[Any]:
    return [t for t in at.text_area if str(t.key).startswith("cell_sql_")]


def _cid(cell: Any) -> str:
    return str(cell.key).removeprefix("cell_sql_")


def _shown(at: AppTest) -> str:
    """Everything the page shows as text: messages, captions, markdown and every table."""
    parts = [e.value for kind in ("error", "warning", "info", "success", "caption", "markdown",
                                  "text", "code") for e in at.get(kind)]  # fmt: skip
    parts += [d.value.to_csv() for d in at.dataframe]
    return "\n".join(str(p) for p in parts)


@pytest.mark.parametrize("sql", [SORT, REGEXP], ids=["list_sort", "regexp_replace"])
def test_the_page_stops_a_query_in_one_line_and_answers_the_next(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sql: str
) -> None:
    at = _explore(published, monkeypatch, tmp_path)
    (cell,) = _cells(at)
    cell.input(sql).run()
    assert not at.exception, at.exception
    (error,) = at.error
    assert error.value.startswith(("stopped after 2 s", "needed more than 512 MiB of memory"))
    assert "\n" not in error.value and "Traceback" not in _shown(at)
    assert at.button(key=f"cell_run_{_cid(cell)}")  # it can be run again by hand
    _cells(at)[0].input("SELECT 42 AS answer").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(list(d.value["answer"]) == [42] for d in at.dataframe if "answer" in d.value)


def test_a_stopped_cell_is_not_run_again_when_its_notebook_opens(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    at = _explore(published, monkeypatch, tmp_path, timeout="1")
    _cells(at)[0].input(SLOW).run()
    assert at.error[0].value.startswith("stopped after 1 s")
    at.text_input(key="explore_save_as").input("slow-one").run()
    at.button(key="explore_save").click().run()
    assert not at.exception, at.exception
    marks_file = tmp_path / "notebooks" / "slow-one.stopped.json"
    marks = json.loads(marks_file.read_text())
    (mark,) = marks.values()
    assert mark["reason"] == "time" and mark["line"].startswith("stopped after 1 s")
    mark["at"] = "2000-01-01T00:00:00+00:00"  # a run on open would stamp it anew
    marks_file.write_text(json.dumps(marks))

    again = _explore(published, monkeypatch, tmp_path, timeout="1", notebook="slow-one")
    (cell,) = _cells(again)
    assert cell.value == SLOW
    (error,) = again.error
    assert error.value.startswith("stopped after 1 s")
    assert any("not run when the notebook opens" in c.value for c in again.caption)
    assert json.loads(marks_file.read_text()) == marks  # not run: the mark is as it was

    again.button(key=f"cell_run_{_cid(cell)}").click().run()  # run by hand: stopped again
    assert not again.exception, again.exception
    assert again.error[0].value.startswith("stopped after 1 s")
    (renewed,) = json.loads(marks_file.read_text()).values()
    assert renewed["at"] != "2000-01-01T00:00:00+00:00"

    _cells(again)[0].input("SELECT 7 AS seven").run()  # edited: it runs
    assert not again.error and any("seven" in d.value for d in again.dataframe)


@pytest.mark.parametrize(
    "bad", ["[x](https://evil.example)", "<img src=x onerror=alert(1)>", "# big :red[loud]"]
)
def test_a_bad_notebook_name_in_the_url_is_shown_as_written(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, bad: str
) -> None:
    at = _explore(published, monkeypatch, tmp_path, notebook=bad)
    (error,) = at.error
    assert error.value.startswith("That is not a notebook name")
    assert error.value.endswith(literal(bad))  # a code span: markdown shows it as written


def test_an_error_quoting_the_sql_is_shown_as_written(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    at = _explore(published, monkeypatch, tmp_path)
    _cells(at)[0].input('SELECT "[click](https://evil.example)" FROM mart_conversations').run()
    (error,) = at.error
    assert error.value.startswith("`") and "[click](https://evil.example)" in error.value
    assert error.value == literal(error.value.strip("`").strip())


#: What reaches past one workspace's views on the page (see test_notebooks_executor.HOSTILE).
HOSTILE = [
    "SELECT * FROM snapshot.main.mart_conversations",
    "SELECT * FROM read_blob('{path}')",
    "SELECT * FROM json_execute_serialized_sql(json_serialize_sql("
    "'SELECT * FROM snapshot.main.mart_conversations'))",
    "SELECT * FROM duckdb_databases()",
    "SELECT * FROM duckdb_settings()",
    "SELECT current_setting('temp_directory')",
    "SELECT * FROM pg_settings",
    "SELECT * FROM quarantine",
]


@pytest.mark.parametrize("sql", HOSTILE)
def test_a_dashboard_for_one_workspace_shows_nothing_else(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sql: str
) -> None:
    at = _explore(published, monkeypatch, tmp_path, only=[MINE])
    snapshot = next(published.glob("warehouse-*.duckdb"))
    _cells(at)[0].input(sql.format(path=snapshot)).run()
    assert not at.exception, at.exception
    (error,) = at.error
    assert not [d for d in at.dataframe if "column" not in d.value]  # no rows, only the schema
    shown = _shown(at)
    for other in (*OTHERS, "globex", "initech", str(published.parent), str(ROOT)):
        assert other not in shown, (other, error.value)


def test_a_dashboard_for_one_workspace_reads_its_rows(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    at = _explore(published, monkeypatch, tmp_path, only=[MINE], workspace="ws_globex")
    assert at.sidebar.selectbox(key="filter_workspace").value == MINE  # not the URL's
    _cells(at)[0].input(
        "SELECT workspace_id, count(*) AS n FROM mart_conversations GROUP BY ALL UNION ALL "
        "SELECT workspace_id, count(*) FROM messages GROUP BY ALL UNION ALL "
        "SELECT workspace_id, count(*) FROM workspaces GROUP BY ALL"
    ).run()
    assert not at.error, [e.value for e in at.error]
    table = next(d.value for d in at.dataframe if "n" in d.value)
    assert set(table["workspace_id"]) == {MINE} and len(table) == 3
    tables = next(t.value for t in at.table if "column" in t.value)  # the schema, whole
    assert "`workspace_id`" in set(tables["column"])
    schema = at.selectbox(key="explore_schema_table")
    assert "quarantine" not in schema.options and "pipeline_runs" not in schema.options


@pytest.mark.parametrize("name", sorted(TABLE_FUNCTION_CASES))
def test_an_allowed_table_function_works_for_one_workspace(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str
) -> None:
    sql, rows = TABLE_FUNCTION_CASES[name]
    at = _explore(published, monkeypatch, tmp_path, only=[MINE])
    _cells(at)[0].input(sql).run()
    assert not at.error, [e.value for e in at.error]
    (column,) = rows[0]
    table = next(d.value for d in at.dataframe if column in d.value)
    assert table.to_dict("records") == rows


def test_a_cells_download_is_named_after_it_and_a_copy_after_its_name(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    made = RecordingManager.record(monkeypatch)
    """The download of a cell titled "Cell 4 escalations" is cell_4_escalations.csv (not the
    widget's number); a notebook saved under a new name is titled after it, not after the one
    it was copied from; the page says the sidebar's dates and channels reach the cells as
    parameters (issue 29)."""
    at = _explore(published, monkeypatch, tmp_path)
    assert "dates, time zone and channels reach them as the parameters $from" in _shown(at)
    (cell,) = _cells(at)
    at.text_input(key=f"cell_title_{_cid(cell)}").input("Cell 4 escalations").run()
    cell.input("SELECT 42 AS answer").run()
    assert not at.exception, at.exception
    names = [downloaded(made, b)[0] for b in at.get("download_button")]
    assert "cell_4_escalations.csv" in names, names
    at.text_input(key="explore_title").input("Escalations by reason").run()
    at.text_input(key="explore_save_as").input("first").run()
    at.button(key="explore_save").click().run()
    at.text_input(key="explore_save_as").input("my-copy").run()
    at.button(key="explore_save").click().run()
    assert not at.exception, at.exception
    saved = (tmp_path / "notebooks" / "my-copy.sql").read_text()
    assert "My copy" in saved.splitlines()[0] and "Escalations by reason" not in saved


# -- cells that read cells, text cells, chart settings (issue 29) -------------------------------

#: Cells 2 and 3 read the earlier cells' results by name (3 reads 2, which reads 1, and 1).
CHAINED = """-- Cells reading cells

-- %% Per channel
SELECT channel, count(*) AS conversations FROM mart_conversations GROUP BY channel

-- %% Busiest channel
SELECT channel, conversations FROM per_channel ORDER BY conversations DESC, channel LIMIT 1;

-- %% Busiest share
SELECT channel, conversations, conversations / (SELECT sum(conversations) FROM per_channel)
    AS portion
FROM busiest_channel
"""


def _facts(published: Path, sql: str) -> list[tuple[Any, ...]]:
    snapshot = next(published.glob("warehouse-*.duckdb"))
    con = duckdb.connect(str(snapshot), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _notebook(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / "notebooks").mkdir(exist_ok=True)
    (tmp_path / "notebooks" / f"{name}.sql").write_text(text)


def test_a_cell_reads_the_results_of_earlier_cells_by_name(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _notebook(tmp_path, "chained", CHAINED)
    at = _explore(published, monkeypatch, tmp_path, notebook="chained")
    assert not at.error, [e.value for e in at.error]
    per_channel = dict(_facts(published, "SELECT channel, count(*) FROM mart_conversations "
                              "GROUP BY channel"))  # fmt: skip
    busiest = min(per_channel.items(), key=lambda kv: (-kv[1], kv[0]))
    assert len(per_channel) > 1 and len(at.dataframe) == 3
    first, second, third = (d.value.to_dict("records") for d in at.dataframe)
    assert {r["channel"]: r["conversations"] for r in first} == per_channel
    assert second == [{"channel": busiest[0], "conversations": busiest[1]}]
    (share,) = third
    assert (share["channel"], share["conversations"]) == busiest
    assert share["portion"] == pytest.approx(busiest[1] / sum(per_channel.values()))
    captions = [c.value for c in at.caption]
    for name in ("per_channel", "busiest_channel", "busiest_share"):
        assert f"Later cells read this result as `{name}`." in captions, captions


def test_an_unknown_cell_name_is_one_line_in_that_cell_only(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _notebook(tmp_path, "chained", CHAINED)
    at = _explore(published, monkeypatch, tmp_path, notebook="chained")
    _cells(at)[2].input("SELECT * FROM busiest_chanel").run()
    assert not at.exception, at.exception
    (error,) = at.error
    assert "there is no table or earlier cell called busiest_chanel" in error.value
    assert "called per_channel, busiest_channel" in error.value and "\n" not in error.value
    assert len(at.dataframe) == 2  # the cells above it still show their rows


def test_retitling_a_cell_names_the_missing_name_in_the_cell_that_read_it(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _notebook(tmp_path, "chained", CHAINED)
    at = _explore(published, monkeypatch, tmp_path, notebook="chained")
    first = _cid(_cells(at)[0])
    at.text_input(key=f"cell_title_{first}").input("By channel").run()
    assert not at.exception, at.exception
    assert "Later cells read this result as `by_channel`." in [c.value for c in at.caption]
    errors = [e.value for e in at.error]
    assert len(errors) == 2 and len(at.dataframe) == 1  # cells 2 and 3 read per_channel
    assert all("there is no table or earlier cell called per_channel" in e for e in errors)
    assert "the cells above this one are called by_channel" in errors[0]
    assert all("\n" not in e for e in errors)


#: A text cell an author could be tricked into pasting: none of it may run or fetch.
HOSTILE_TEXT = """# Read me
<script>fetch("http://127.0.0.1:9/script")</script>
<img src=http://127.0.0.1:9/pixel.png>
![x](http://evil.example/x.png)
[l](javascript:alert(1)) and [the docs](https://example.com/docs)
"""


def _html(at: AppTest) -> str:
    (html,) = at.html
    return str(html.value)


def _assert_inert(body: str) -> None:
    assert "<h1>Read me</h1>" in body
    assert "<script" not in body and "&lt;script&gt;" in body
    assert "<img" not in body and "&lt;img src=http://127.0.0.1:9/pixel.png&gt;" in body
    assert "evil.example" not in body and "[image: x]" in body
    assert "[l](javascript:alert(1))" in body  # text: no link
    assert body.count("<a ") == 1 and "href=" not in body.replace('<a href="https://', "")
    assert '<a href="https://example.com/docs" rel="noopener noreferrer nofollow">' in body


def test_a_text_cell_renders_its_markdown_inert_and_is_saved_moved_and_deleted(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    at = _explore(published, monkeypatch, tmp_path)
    at.button(key="explore_add_text").click().run()
    (editor,) = [t for t in at.text_area if str(t.key).startswith("cell_md_")]
    text_cell = str(editor.key).removeprefix("cell_md_")
    assert at.toggle(key=f"cell_edit_{text_cell}").value  # a new text cell opens to edit
    editor.input(HOSTILE_TEXT).run()
    assert not at.exception, at.exception
    _assert_inert(_html(at))
    at.toggle(key=f"cell_edit_{text_cell}").set_value(False).run()  # done editing: kept
    assert not [t for t in at.text_area if str(t.key).startswith("cell_md_")]
    _assert_inert(_html(at))
    at.button(key=f"cell_up_{text_cell}").click().run()  # moved above the SQL cell
    at.text_input(key=f"cell_title_{text_cell}").input("Notes").run()
    at.text_input(key="explore_save_as").input("with-notes").run()
    at.button(key="explore_save").click().run()
    assert not at.exception, at.exception
    saved = (tmp_path / "notebooks" / "with-notes.sql").read_text()
    assert "-- %% [markdown] Notes\n-- # Read me\n-- <script>" in saved
    assert saved.index("[markdown]") < saved.index("-- %% Cell 1")

    again = _explore(published, monkeypatch, tmp_path, notebook="with-notes")
    _assert_inert(_html(again))
    (title,) = [t for t in again.text_input if t.value == "Notes"]
    assert len(_cells(again)) == 1 and not again.error
    again.button(key=f"cell_delete_{str(title.key).removeprefix('cell_title_')}").click().run()
    assert not again.html and len(_cells(again)) == 1 and not again.error


def test_chart_settings_are_chosen_from_the_result_and_survive_save_and_reload(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    at = _explore(published, monkeypatch, tmp_path)
    (cell,) = _cells(at)
    cid = _cid(cell)
    cell.input(
        "SELECT channel, count(*) AS conversations, "
        "count(*) FILTER (WHERE escalated) AS escalated FROM mart_conversations GROUP BY ALL"
    ).run()
    assert not at.error, [e.value for e in at.error]
    y = at.selectbox(key=f"cell_y_{cid}")
    assert y.value == "" and y.options == ["auto", "conversations", "escalated"]
    assert at.selectbox(key=f"cell_x_{cid}").options == [
        "auto", "channel", "conversations", "escalated"]  # fmt: skip
    y.select("escalated").run()
    at.selectbox(key=f"cell_chart_{cid}").select("point").run()
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert spec["encoding"]["y"]["field"] == "escalated" and spec["mark"]["type"] == "point"
    at.text_input(key="explore_save_as").input("charted").run()
    at.button(key="explore_save").click().run()
    saved = (tmp_path / "notebooks" / "charted.sql").read_text()
    assert "-- chart: point y=escalated\n" in saved

    again = _explore(published, monkeypatch, tmp_path, notebook="charted")
    (cell,) = _cells(again)
    cid = _cid(cell)
    assert again.selectbox(key=f"cell_y_{cid}").value == "escalated"
    spec = json.loads(again.get("vega_lite_chart")[0].proto.spec)
    assert spec["encoding"]["y"]["field"] == "escalated" and spec["mark"]["type"] == "point"
    # the column renamed: the chart falls back, says so, and keeps the setting until changed
    cell.input("SELECT channel, count(*) AS conversations FROM mart_conversations GROUP BY 1").run()
    assert not again.error, [e.value for e in again.error]
    assert any("saved column escalated is not a usable column" in c.value for c in again.caption)
    spec = json.loads(again.get("vega_lite_chart")[0].proto.spec)
    assert spec["encoding"]["y"]["field"] == "conversations"
    assert again.selectbox(key=f"cell_y_{cid}").value == "escalated"
    again.button(key="explore_save").click().run()
    assert "-- chart: point y=escalated\n" in (tmp_path / "notebooks" / "charted.sql").read_text()


def test_the_lead_funnel_starter_explains_itself_and_builds_on_its_first_cell(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    at = _explore(published, monkeypatch, tmp_path, notebook="lead_funnel_by_source")
    assert not at.error, [e.value for e in at.error]
    assert "<code>funnel_steps_by_source</code>" in _html(at)
    steps, rates = (d.value for d in at.dataframe)
    assert len(steps) > 1 and list(rates.columns) == ["source", "qualification_rate",
                                                      "conversations"]  # fmt: skip
    assert sorted(rates["source"]) == sorted(steps["source"])
    assert list(rates["conversations"]) == [
        steps.set_index("source").loc[s, "started"] for s in rates["source"]]  # fmt: skip
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)  # its saved settings
    assert spec["encoding"]["x"]["field"] == "source" and spec["mark"]["type"] == "bar"


# -- the audit trail (issue 30): who read what ---------------------------------------------------


def _audit_records(log: Path, action: str) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [r for r in lines if r["action"] == action]


def test_each_query_a_session_reads_is_audited_once_with_its_text_and_rows(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Three cells shown: three explore.query records (the statement each ran, its rows, the
    session); the page run again shows them from the cache: no new record."""
    log = tmp_path / "audit" / "audit.jsonl"
    monkeypatch.setenv("CONVO_AUDIT_FILE", str(log))
    _notebook(tmp_path, "chained", CHAINED)
    at = _explore(published, monkeypatch, tmp_path, notebook="chained")
    assert not at.error, [e.value for e in at.error]
    records = _audit_records(log, "explore.query")
    shown = [len(d.value) for d in at.dataframe]
    assert [r["rows"] for r in records] == shown and len(shown) == 3
    assert records[0]["what"].startswith("SELECT channel, count(*)")
    assert "per_channel" in records[1]["what"] and records[1]["who"].startswith("session:")
    assert {r["detail"]["notebook"] for r in records} == {"chained"}
    at.run()
    assert not at.exception
    assert len(_audit_records(log, "explore.query")) == 3


def test_a_query_whose_audit_record_cannot_be_written_shows_no_rows(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the log's folder should be")
    monkeypatch.setenv("CONVO_AUDIT_FILE", str(blocker / "audit.jsonl"))
    _notebook(tmp_path, "chained", CHAINED)
    at = _explore(published, monkeypatch, tmp_path, notebook="chained")
    errors = [e.value for e in at.error]
    assert len(errors) == 3 and all("audit record cannot be written" in e for e in errors)
    assert len(at.dataframe) == 0


def test_a_download_is_audited_when_its_bytes_are_made(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The button's data is a callable: nothing is recorded until a click makes the bytes;
    then one dashboard.download record with the file's name and rows."""
    from convo_analytics.dashboard._audit import audited_download

    log = tmp_path / "audit.jsonl"
    monkeypatch.setenv("CONVO_AUDIT_FILE", str(log))
    data = audited_download(lambda: b"a,b\n1,2\n", "cells.csv", 1, "ws_acme")
    assert _audit_records(log, "dashboard.download") == []
    assert data() == b"a,b\n1,2\n"
    (record,) = _audit_records(log, "dashboard.download")
    assert (record["what"], record["rows"], record["workspace"]) == ("cells.csv", 1, "ws_acme")
