"""Notebook cells without the app: the file format (markdown cells, chart settings with
quoted columns), cells read by name as CTEs (``compose``), a markdown cell rendered inert
(``markdown_html``) and the chart a result gets from its saved settings (``chart_for``).
The composed statements run in plain DuckDB here; through the executor and the page in
tests/test_dashboard_explore.py (decision D-NOTEBOOK-CELLS)."""

from __future__ import annotations

from datetime import date

import duckdb
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convo_analytics.notebooks import (
    Cell,
    Notebook,
    cell_name,
    chart_for,
    compose,
    markdown_html,
    parse_notebook,
    render_notebook,
)

# -- the file format -------------------------------------------------------------------------


def test_markdown_cells_and_chart_settings_read_back_from_the_file() -> None:
    notebook = Notebook(
        "Refunds",
        "How refunds go.",
        [
            Cell(
                "Why", "## What this shows\n\n* refunds per day  \n* by *channel*", kind="markdown"
            ),
            Cell(
                "Per day", "SELECT 1 AS n", "line", x="day", y="refunds per day", color='the "kind"'
            ),
            Cell("", "untitled text", kind="markdown"),
            Cell("Plain", "SELECT 2 AS n"),
        ],
    )
    text = render_notebook(notebook)
    assert "\n-- %% [markdown] Why\n-- ## What this shows\n--\n-- * refunds per day  \n" in text
    assert '-- chart: line x=day y="refunds per day" color="the ""kind"""\n' in text
    assert "\n-- %% [markdown]\n-- untitled text\n" in text
    assert "-- %% Plain\nSELECT 2 AS n;" in text  # no chart line: all auto
    assert parse_notebook(text) == notebook


def test_a_markdown_line_that_reads_as_a_cell_marker_stays_in_its_cell() -> None:
    notebook = Notebook("T", "", [Cell("Notes", "50\n%% of users\n  %% again", kind="markdown")])
    (cell,) = parse_notebook(render_notebook(notebook)).cells
    assert cell.kind == "markdown" and cell.title == "Notes"
    assert cell.sql == "50\n\\%% of users\n  \\%% again"  # Markdown shows \% as %
    assert markdown_html(cell.sql) == "<p>50\n%% of users\n%% again</p>\n"


def test_an_unknown_chart_setting_is_a_problem_naming_the_cell() -> None:
    notebook = parse_notebook("-- T\n\n-- %% A\n-- chart: bar x=a size=b\nSELECT 1;\n")
    (cell,) = notebook.cells
    assert (cell.chart, cell.x) == ("bar", "a") and cell.sql == "SELECT 1"
    assert notebook.problems == ["cell 'A': the chart has no setting 'size' (it takes x, y, color)"]


#: Text with what the file format gives a meaning to drawn often: spaces, %%, --, quotes, =.
_TEXT = st.text(
    st.one_of(
        st.sampled_from(' %-"=#*[]`;'),
        st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")),
    ),
    max_size=30,
)
_LINES = st.lists(_TEXT, min_size=1, max_size=6).map("\n".join)
#: A title as the page takes it: one line, not empty, not opening a markdown marker.
_TITLE = _TEXT.map(lambda t: " ".join(t.split())).filter(
    lambda t: t != "" and not t.lower().startswith("[markdown]")
)
_COLUMN = st.one_of(st.none(), _TEXT.filter(lambda t: t.strip() != ""))


@st.composite
def _cells(draw: st.DrawFn) -> Cell:
    title = draw(_TITLE)
    if draw(st.booleans()):
        text = draw(_LINES).strip("\n")
        return Cell(title, text, kind="markdown")
    number = draw(st.integers(0, 10**6))
    chart = draw(st.sampled_from(["auto", "line", "bar", "area", "point", "none"]))
    x, y, color = draw(_COLUMN), draw(_COLUMN), draw(_COLUMN)
    return Cell(title, f"SELECT {number} AS n", chart, x=x, y=y, color=color)


@settings(max_examples=150, deadline=None)
@given(st.lists(_cells(), max_size=5))
def test_any_notebook_of_these_cells_reads_back_the_same(cells: list[Cell]) -> None:
    notebook = Notebook("Generated", "", cells)
    back = parse_notebook(render_notebook(notebook))
    assert back.problems == []
    for was, now in zip(cells, back.cells, strict=True):
        if was.kind == "markdown":  # a line opening with %% keeps a backslash (see above)
            lines = [ln.replace("%%", "\\%%", 1) if ln.lstrip().startswith("%%") else ln
                     for ln in was.sql.strip("\n").split("\n")]  # fmt: skip
            assert now == Cell(was.title, "\n".join(lines), kind="markdown")
        else:
            assert now == was


# -- cells reading cells ---------------------------------------------------------------------


def test_a_cells_name_is_its_title_in_lower_case_with_underscores() -> None:
    assert cell_name("Escalations by reason") == "escalations_by_reason"
    assert cell_name("  Résumé: per-day (UTC)!") == "r_sum_per_day_utc"
    assert cell_name("2024 totals") == "c_2024_totals"  # an identifier does not open with a digit
    assert cell_name("!!!") == "" and len(cell_name("x" * 200)) == 63


def _rows(sql: str) -> list[tuple[object, ...]]:
    return duckdb.connect().execute(sql).fetchall()


def test_a_cell_reads_earlier_cells_and_what_they_read_in_notebook_order() -> None:
    cells = [
        Cell("Numbers", "SELECT range AS n FROM range(5);"),
        Cell("A note", "numbers and evens are read below", kind="markdown"),
        Cell("Evens", "SELECT n FROM numbers WHERE n % 2 = 0"),
        Cell("Unrelated", "SELECT 1 AS one"),
        Cell(
            "Sum of evens",
            "SELECT sum(n) AS total, (SELECT count(*) FROM numbers) AS of\n"
            "FROM evens -- the evens above",
        ),
    ]
    composed = compose(cells, 4)
    assert composed.error is None and composed.reads == ("numbers", "evens")
    assert _rows(composed.sql) == [(6, 5)]
    assert compose(cells, 2).reads == ("numbers",)
    assert _rows(compose(cells, 2).sql) == [(0,), (2,), (4,)]
    alone = compose(cells, 3)
    assert alone.sql == "SELECT 1 AS one" and alone.reads == ()


def test_a_cell_reads_no_later_cell_and_no_markdown_cell() -> None:
    cells = [
        Cell("Notes", "SELECT 1", kind="markdown"),
        Cell("First", "SELECT * FROM second"),
        Cell("Second", "SELECT 2 AS n"),
    ]
    assert compose(cells, 1).reads == () and compose(cells, 1).sql == "SELECT * FROM second"
    assert compose([*cells, Cell("Third", "SELECT * FROM notes")], 3).reads == ()


def test_names_inside_strings_and_comments_are_not_references() -> None:
    cells = [
        Cell("Totals", "SELECT 42 AS total"),
        Cell("Quoting", "SELECT 'totals' AS word -- totals\n/* totals */"),
        Cell("Quoted name", 'SELECT total FROM "Totals"'),
    ]
    assert compose(cells, 1).reads == ()
    assert _rows(compose(cells, 1).sql) == [("totals",)]
    assert compose(cells, 2).reads == ("totals",)  # a quoted identifier is one
    assert _rows(compose(cells, 2).sql) == [(42,)]


def test_two_earlier_cells_of_one_name_are_refused_in_one_line() -> None:
    cells = [
        Cell("Totals", "SELECT 1 AS n"),
        Cell("totals!", "SELECT 2 AS n"),
        Cell("Other", "SELECT 3 AS n"),
        Cell("Reader", "SELECT n FROM totals"),
    ]
    composed = compose(cells, 3)
    assert composed.error == (
        "2 earlier cells are called totals; retitle one so this cell reads the one it means"
    )
    assert compose(cells[2:], 1).error is None  # a cell that reads neither runs


def test_a_cell_with_its_own_with_reads_an_earlier_cell() -> None:
    cells = [
        Cell("Base", "SELECT range AS n FROM range(4)"),
        Cell("Doubled", "WITH d AS (SELECT n * 2 AS n FROM base)\nSELECT sum(n) AS s FROM d;"),
        Cell("Shadowed", "WITH base AS (SELECT 100 AS n) SELECT n FROM base"),
    ]
    composed = compose(cells, 1)
    assert composed.reads == ("base",) and _rows(composed.sql) == [(12,)]
    assert _rows(compose(cells, 2).sql) == [(100,)]  # its own CTE of that name wins


# -- a markdown cell, inert ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown", "absent"),
    [
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;", "<script"),
        ('<img src="http://127.0.0.1:9/p.png">', "&lt;img src=", "<img"),
        ("<iframe src=https://evil.example>", "&lt;iframe", "<iframe"),
        ("![x](http://evil.example/x.png)", "[image: x]", "evil.example"),
        ("![](http://evil.example/x.png)", "[image]", "evil.example"),
        ("[l](javascript:alert(1))", "[l](javascript:alert(1))", "href"),
        ("[l](data:text/html,hi)", "[l](data:text/html,hi)", "href"),
        ("[l](file:///etc/passwd)", "l", "href"),
        ("[l](//evil.example/x)", "<p>l</p>", "evil.example"),  # protocol-relative: elsewhere
        ("[l](ftp://evil.example/x)", "<p>l</p>", "evil.example"),
        ("[l](other-page)", "<p>l</p>", "href"),  # relative: a page of the dashboard's own
        ("<a href='javascript:alert(1)'>x</a>", "&lt;a href=", "<a "),
        ("[ref]\n\n[ref]: javascript:alert(1)", "[ref]", "href"),
    ],
)
def test_markdown_renders_no_html_image_or_unsafe_link(text: str, shown: str, absent: str) -> None:
    body = markdown_html(text)
    assert shown in body and absent not in body, body


def test_markdown_keeps_headings_tables_and_safe_links() -> None:
    body = markdown_html(
        "# Title\n\n| a | b |\n|---|---|\n| 1 | ~~2~~ |\n\n"
        "[docs](https://example.com/d) [mail](mailto:a@example.com) [top](#title)"
    )
    assert "<h1>Title</h1>" in body and "<table>" in body and "<s>2</s>" in body
    for target in ("https://example.com/d", "mailto:a@example.com", "#title"):
        assert f'<a href="{target}" rel="noopener noreferrer nofollow">' in body


# -- the chart a result gets -----------------------------------------------------------------

FRAME = pl.DataFrame(
    {
        "day": [date(2024, 1, 1), date(2024, 1, 2)],
        "channel": ["web", "sms"],
        "conversations": [3, 4],
        "escalated": [1, 0],
    }
)


def test_saved_columns_are_used_where_the_result_has_them() -> None:
    choice = chart_for(FRAME, Cell("c", "", "bar", x="channel", y="escalated", color="day"))
    assert (choice.kind, choice.x, choice.y, choice.color, choice.note) == (
        "bar", "channel", "escalated", "day", None)  # fmt: skip
    auto = chart_for(FRAME, Cell("c", "", y="escalated"))  # the kind and x from the types
    assert (auto.kind, auto.x, auto.y, auto.color) == ("line", "day", "escalated", "channel")


def test_a_saved_column_the_result_lacks_falls_back_with_a_note() -> None:
    renamed = chart_for(FRAME, Cell("c", "", x="week", y="escalated"))
    assert (renamed.x, renamed.y) == ("day", "escalated")
    assert renamed.note is not None and "saved column week is not a usable" in renamed.note
    text_y = chart_for(FRAME, Cell("c", "", y="channel"))
    assert text_y.y == "conversations" and "saved column channel" in (text_y.note or "")


def test_no_chart_for_none_or_no_rows_whatever_is_saved() -> None:
    assert chart_for(FRAME, Cell("c", "", "none", x="day", y="conversations")).kind == "none"
    empty = chart_for(FRAME.clear(), Cell("c", "", "bar", x="day", y="conversations"))
    assert empty.kind == "none" and empty.note is None
    words = pl.DataFrame({"a": ["x"], "b": ["y"]})  # nothing to put on y
    none = chart_for(words, Cell("c", "", "bar", x="a"))
    assert none.kind == "none"
