"""Notebook parameters (issue 29): header lines parsed into typed specs (a bad line is one
line naming it), values converted by type and bound by the real query process as DuckDB
parameters (a value crafted as SQL is a value: it selects what it says, the table stays),
and the Explore page's widgets and ``?p.NAME=`` URL values (AppTest over a pipeline-made
snapshot)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pytest

from convo_analytics.notebooks import (
    Executor,
    Limits,
    ParamError,
    ParamSpec,
    convert,
    parse_notebook,
    render_notebook,
)
from dashboard_support import three_workspaces
from test_dashboard_explore import _explore

CRAFTED = ["'; DROP TABLE x; --", "1 OR 1=1"]
HEADER = """-- Params
-- A notebook with one of each.
-- param: word text = hello world
-- param: n number = 3
-- param: since date = 2024-01-02
-- param: kind choice = web
-- values: SELECT DISTINCT channel FROM x ORDER BY 1
-- param: kinds choices = web, sms

-- %% One
SELECT $word AS w;
"""


def test_a_header_declares_typed_parameters_and_renders_back() -> None:
    notebook = parse_notebook(HEADER)
    assert notebook.problems == []
    assert notebook.description == "A notebook with one of each."
    assert [(p.name, p.type, p.default) for p in notebook.params] == [
        ("word", "text", "hello world"),
        ("n", "number", "3"),
        ("since", "date", "2024-01-02"),
        ("kind", "choice", "web"),
        ("kinds", "choices", ("web", "sms")),
    ]
    assert notebook.params[3].values_sql == "SELECT DISTINCT channel FROM x ORDER BY 1"
    assert parse_notebook(render_notebook(notebook)) == notebook


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("-- param: Bad-Name text", "param 'Bad-Name': a name is"),
        ("-- param: x float = 1", "param x: type 'float' is not one of"),
        ("-- param: d date = 2024-13-01", "parameter d: '2024-13-01' is not a date"),
        ("-- param: n number = ten", "parameter n: 'ten' is not a number"),
        ("-- param: from date", "param from: a built-in parameter"),
        ("-- param: lonely", "write -- param: NAME TYPE"),
        ("-- values: SELECT 1", "a -- values: line belongs right after a choice"),
    ],
)
def test_a_bad_header_line_is_one_line_naming_it(line: str, says: str) -> None:
    notebook = parse_notebook(f"-- T\n{line}\n\n-- %% A\nSELECT 1;\n")
    (problem,) = notebook.problems
    assert says in problem and "\n" not in problem
    assert notebook.params == [] and [c.sql for c in notebook.cells] == ["SELECT 1"]


def test_a_bad_value_is_one_line_naming_the_parameter() -> None:
    with pytest.raises(ParamError, match=r"^parameter since: '2024-02-30' is not a date"):
        convert(ParamSpec("since", "date"), "2024-02-30")
    for crafted in CRAFTED:  # a number parameter refuses text before anything runs
        with pytest.raises(ParamError, match=r"^parameter n: .* is not a number$"):
            convert(ParamSpec("n", "number"), crafted)


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("params") / "warehouse-1.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE x AS SELECT range AS n, CASE WHEN range % 2 = 0 THEN 'web' "
                "ELSE 'sms' END AS channel, DATE '2024-01-01' + range::INT AS day, "
                "'ws_a' AS workspace_id FROM range(10)")  # fmt: skip
    con.close()
    return path


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    with Executor(Limits(memory_mb=512, threads=1, temp_mb=256, workers=1)) as ex:
        assert ex.wait_ready()
        yield ex


def _rows(executor: Executor, snapshot: Path, sql: str, **values: Any) -> list[dict[str, Any]]:
    result = executor.run(snapshot, sql, params=values)
    assert result.error is None, result.error
    assert result.frame is not None
    return result.frame.to_dicts()


@pytest.mark.parametrize(
    ("spec", "raw", "sql", "count"),
    [
        (ParamSpec("since", "date"), "2024-01-08", "day >= $since", 3),
        (ParamSpec("n", "number"), "2.5", "n < $n", 3),
        (ParamSpec("word", "text"), "sms", "channel = $word", 5),
        (ParamSpec("kind", "choice"), "web", "channel = $kind", 5),
        (ParamSpec("kinds", "choices"), ["web", "sms"], "channel = ANY($kinds)", 10),
        (ParamSpec("kinds", "choices"), [], "channel = ANY($kinds)", 0),
    ],
    ids=["date", "number", "text", "choice", "choices", "choices-none"],
)
def test_each_type_is_bound_as_a_duckdb_parameter(
    executor: Executor, snapshot: Path, spec: ParamSpec, raw: Any, sql: str, count: int
) -> None:
    value = convert(spec, raw)
    rows = _rows(executor, snapshot, f"SELECT count(*) AS c FROM x WHERE {sql}",
                 **{spec.name: value, "unused": "only the named ones are bound"})  # fmt: skip
    assert rows == [{"c": count}]


@pytest.mark.parametrize("crafted", CRAFTED)
@pytest.mark.parametrize("kind", ["text", "choice", "choices"])
def test_a_value_crafted_as_sql_is_inert(
    executor: Executor, snapshot: Path, crafted: str, kind: str
) -> None:
    spec = ParamSpec("v", kind)  # type: ignore[arg-type]
    value = convert(spec, [crafted] if kind == "choices" else crafted)
    where = "channel = ANY($v)" if kind == "choices" else "channel = $v"
    sql = f"SELECT count(*) AS c, any_value($v) AS v FROM x WHERE {where}"
    rows = _rows(executor, snapshot, sql, v=value)
    assert rows == [{"c": 0, "v": None}]  # the value selects what it says: no row
    assert _rows(executor, snapshot, "SELECT count(*) AS c FROM x") == [{"c": 10}]
    echoed = _rows(executor, snapshot, "SELECT $v AS v", v=value)
    assert echoed == [{"v": value}]


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("SELECT count(*) FROM x WHERE channel = $nope", "$nope is not a parameter of this"),
        ("SELECT count(*) FROM x WHERE n = ?", "name each parameter"),
        ("DELETE FROM x WHERE n = $n", "DELETE statements are refused"),
    ],
)
def test_an_undeclared_positional_or_writing_query_is_refused_in_one_line(
    executor: Executor, snapshot: Path, sql: str, says: str
) -> None:
    result = executor.run(snapshot, sql, params={"n": 1})
    assert result.frame is None and result.error is not None
    assert says in result.error and "\n" not in result.error
    assert _rows(executor, snapshot, "SELECT count(*) AS c FROM x") == [{"c": 10}]


def test_a_date_list_and_text_bind_together(executor: Executor, snapshot: Path) -> None:
    rows = _rows(
        executor, snapshot,
        "SELECT n FROM x WHERE day BETWEEN $from AND $to AND channel = ANY($channel) "
        "AND $tz = 'UTC' ORDER BY n",
        **{"from": date(2024, 1, 2), "to": date(2024, 1, 6), "channel": ["web"], "tz": "UTC"},
    )  # fmt: skip
    assert rows == [{"n": 2}, {"n": 4}]


# -- the Explore page ---------------------------------------------------------------------

ECHO = """-- Echo
-- param: word text = plain
-- param: kinds choices
-- values: SELECT DISTINCT channel FROM mart_conversations ORDER BY 1

-- %% Echo
SELECT $word AS word, count(*) AS conversations FROM mart_conversations
WHERE channel = ANY($channel) AND started_at::DATE BETWEEN $from AND $to
  AND (len($kinds) = 0 OR channel = ANY($kinds));
"""


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("dashboard-params")
    with three_workspaces(folder, conversations=20) as (path, _db):
        yield path


def test_the_page_shows_a_widget_per_parameter_and_uses_the_urls_values(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "echo.sql").write_text(ECHO)
    crafted = CRAFTED[0]
    at = _explore(published, monkeypatch, tmp_path, notebook="echo", **{"p.word": crafted})
    assert not at.error, [e.value for e in at.error]
    labels = {w.label for kind in ("text_input", "date_input", "multiselect")
              for w in at.get(kind) if str(w.key).startswith("nbp_")}  # fmt: skip
    assert labels == {"$word", "$kinds", "$from", "$to", "$channel"}
    (word,) = [w for w in at.text_input if w.label == "$word"]
    assert word.value == crafted
    (frame,) = [d.value for d in at.dataframe if "word" in d.value.columns]
    assert list(frame["word"]) == [crafted] and int(frame["conversations"][0]) > 0
    word.input("changed").run()
    assert at.query_params["p.word"] == "changed"
    (frame,) = [d.value for d in at.dataframe if "word" in d.value.columns]
    assert list(frame["word"]) == ["changed"]


def test_a_bad_url_value_is_a_note_and_the_default_is_used(
    published: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    at = _explore(
        published, monkeypatch, tmp_path,
        notebook="escalations_by_reason_and_channel", **{"p.from": "2024-02-30"},
    )  # fmt: skip
    notes = [w.value for w in at.warning]
    assert any("?p.from: parameter from: '2024-02-30' is not a date" in n for n in notes), notes
    assert not at.error, [e.value for e in at.error]
    assert {w.label for w in at.date_input} >= {"$from", "$to"}
    assert len(at.get("vega_lite_chart")) == 3  # the starter's cells ran with the sidebar's


def test_an_interval_column_arrives_as_its_text(executor: Executor, snapshot: Path) -> None:
    """Arrow's month-day-nano interval is a type polars cannot read (it panicked the app's
    process): the query process hands intervals over as text, alone or inside a list."""
    rows = _rows(executor, snapshot, "SELECT INTERVAL 90 MINUTE AS i, [INTERVAL 1 DAY] AS l, "
                 "n FROM x WHERE n = $n", n=3)  # fmt: skip
    assert rows == [{"i": "01:30:00", "l": "[1 day]", "n": 3}]
