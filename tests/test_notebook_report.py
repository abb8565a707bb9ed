"""``convo notebook run`` (issue 29): a notebook run without a browser, as a self-contained
HTML report and a CSV per SQL cell, over pipeline-made published data (three workspaces
of a sandbox).

Every starter notebook runs; each report's tables equal its CSVs (all cells; a table cut
at the cap says so); the HTML opens in chromium without a single request (a screenshot
goes to data/test-artifacts/screenshots/); a failed cell is its one line on stderr and
exit 1; a parameter value crafted as SQL is a value. The charts are inline SVG: well-formed,
escaped, nothing but drawing elements (``_svg``).
"""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import duckdb
import orjson
import polars as pl
import pytest

from convo_analytics.config import load_settings
from convo_analytics.notebooks import (
    HTML_ROWS,
    STARTERS_DIR,
    ChartChoice,
    Executor,
    Limits,
    parse_notebook,
    parse_param_args,
    run_notebook,
    write_report,
)
from convo_analytics.notebooks._report import csv_text
from convo_analytics.notebooks._svg import MAX_BANDS, MAX_POINTS, MAX_SERIES, svg_chart
from convo_analytics.publish import current_snapshot
from dashboard_support import Beacon, three_workspaces
from test_dashboard_browser import CHROMIUM_FLAGS, SHOTS, chromium

ROOT = Path(__file__).resolve().parent.parent
STARTERS = sorted(p.stem for p in STARTERS_DIR.glob("*.sql"))
CRAFTED = ["'; DROP TABLE x; --", "1 OR 1=1"]
#: A saved notebook: hostile markdown and data (naming the beacon), a cell past the
#: HTML cap, two cells that fail, and columns of every type CSV cannot hold as they are.
BROKEN = """-- Broken <b>and</b> big
-- A notebook whose cells fail, cut, and hold what a page must not run.

-- %% [markdown] Intro
-- ## What <script>fetch("{beacon}/md-script")</script> shows
-- ![pixel]({beacon}/md-pixel.png) and [a link](javascript:alert(1)) and <img src="{beacon}/md-img">

-- %% Many rows
-- chart: line x=n y=k
SELECT range AS n, range % 7 AS k, '<img src="{beacon}/data.png">' AS html_text
FROM range({rows});

-- %% Missing table
SELECT * FROM no_such_table;

-- %% Raises
SELECT error('boom' || chr(10) || 'second line') AS y;

-- %% Types
SELECT [1, 2] AS list, {{'a': 1, 'b': 'x'}} AS struct, 'ab'::BLOB AS bytes, NULL AS nothing,
       true AS flag, 1.5::DECIMAL(10, 2) AS dec, 'a,"b"' || chr(10) || 'c' AS text;
"""
ECHO = """-- Echo
-- A parameter's value, selected.
-- param: word text = hello

-- %% Echo
SELECT $word AS word,
       (SELECT count(*) FROM mart_conversations WHERE channel = $word) AS same_channel,
       (SELECT count(*) FROM mart_conversations WHERE channel = ANY($channel)) AS in_channels;
"""


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str
    out: Path


@dataclass
class Setup:
    published: Path
    home: Path
    beacon: Beacon
    runs: dict[str, Ran] = field(default_factory=dict)


def _convo(home: Path, published: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVO_")}
    env["CONVO_DASHBOARD_NOTEBOOKS_DIR"] = str(home / "notebooks")
    return subprocess.run(
        [sys.executable, "-m", "convo_analytics.cli", *args,
         *(("--dir", str(published)) if args[1] == "run" else ())],
        cwd=home, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


#: Runs of the command (a process each, two at a time): (label, notebook, extra args); the
#: report goes to out/<label>.
CLI_RUNS: list[tuple[str, str, tuple[str, ...]]] = [
    *((f"starter-{name}", name, ()) for name in STARTERS),
    ("broken", "broken", ()),
]
#: Runs through the package, with one executor: (label, notebook, --param items, workspace).
RUNS: list[tuple[str, str, tuple[str, ...], str | None]] = [
    ("workspace", "escalations_by_reason_and_channel", (), "acme"),
    *((f"reason-{i}", "escalations_by_reason_and_channel", (f"reason={v}",), None)
      for i, v in enumerate(CRAFTED)),
    *((f"echo-{i}", "echo", (f"word={v}", f"channel={v}"), None) for i, v in enumerate(CRAFTED)),
    ("echo-web", "echo", ("word=web", "channel=web"), None),
]  # fmt: skip


def _in_process(home: Path, published: Path, label: str, name: str, items: tuple[str, ...],
                workspace: str | None, executor: Executor) -> Ran:  # fmt: skip
    """What `convo notebook run` does, with a shared executor (a run is then quick)."""
    settings = load_settings(None, {"publish.dir": published,
                                    "dashboard.notebooks_dir": home / "notebooks"},
                             environ={}, cwd=home)  # fmt: skip
    run = run_notebook(settings, name, params=parse_param_args(items), workspace=workspace,
                       executor=executor)  # fmt: skip
    files = write_report(run, home / "out" / label)
    printed = "".join(f"{p}\n" for p in (files.html, *files.csvs))
    return Ran(
        0 if run.ok else 1, printed, "".join(f"{f}\n" for f in run.failures), files.html.parent
    )


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """The published data, the saved notebooks, and every run of :data:`CLI_RUNS` and
    :data:`RUNS`."""
    folder = tmp_path_factory.mktemp("notebook-report")
    home = folder / "home"
    (home / "notebooks").mkdir(parents=True)
    with Beacon() as beacon, three_workspaces(folder, conversations=30) as (published, _db):
        text = BROKEN.format(beacon=beacon.url, rows=HTML_ROWS * 2 + 200)
        (home / "notebooks" / "broken.sql").write_text(text, encoding="utf-8")
        (home / "notebooks" / "echo.sql").write_text(ECHO, encoding="utf-8")
        found = Setup(published, home, beacon)

        def one(run: tuple[str, str, tuple[str, ...]]) -> tuple[str, Ran]:
            label, name, extra = run
            out = home / "out" / label
            done = _convo(home, published, "notebook", "run", name, "--out", str(out), *extra)
            return label, Ran(done.returncode, done.stdout, done.stderr, out)

        with ThreadPoolExecutor(max_workers=2) as pool:
            ran = pool.map(one, CLI_RUNS)
            with Executor(Limits(memory_mb=512, threads=1, temp_mb=256, workers=1)) as executor:
                for label, name, items, workspace in RUNS:
                    found.runs[label] = _in_process(home, published, label, name, items,
                                                    workspace, executor)  # fmt: skip
            found.runs.update(dict(ran))
        yield found


# -- reading a report back ----------------------------------------------------------------------


class _Report(HTMLParser):
    """A report's data tables (by CSV name: header and rows as text), what follows each
    (the cap note), each cell's section (its svg count and error), and every tag and
    attribute, to check that nothing could load or run."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self.after: dict[str, str] = {}
        self.sections: dict[str, dict[str, Any]] = {}
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._table: str | None = None
        self._last: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._section: dict[str, Any] | None = None
        self._error = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "section" and (a.get("id") or "").startswith("cell-"):
            self._section = {"svg": 0, "error": None, "csv": None}
            self.sections[str(a["id"])] = self._section
        elif tag == "svg" and self._section is not None:
            self._section["svg"] += 1
        elif tag == "p" and "error" in (a.get("class") or "") and self._section is not None:
            self._error, self._section["error"] = True, ""
        elif tag == "table" and "data" in (a.get("class") or ""):
            self._table = str(a["data-csv"])
            self.tables[self._table] = []
            if self._section is not None:
                self._section["csv"] = self._table
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._table is not None and self._row is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table" and self._table is not None:
            self._last, self._table = self._table, None
            self.after[self._last] = ""
        elif tag == "section":
            self._section, self._last = None, None
        elif tag == "p":
            self._error = False

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)
        elif self._error and self._section is not None:
            self._section["error"] += data
        elif self._last is not None and self._table is None:
            self.after[self._last] += data


def _read(path: Path) -> _Report:
    report = _Report()
    report.feed(path.read_text(encoding="utf-8"))
    report.close()
    return report


def _csv(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def _written(ran: Ran) -> tuple[Path, list[Path]]:
    """The report's HTML and CSVs, as the command printed them (paths, one a line)."""
    paths = [Path(line) for line in ran.stdout.splitlines()]
    assert paths and paths[0].suffix == ".html", ran.stdout
    assert all(p.is_file() and p.parent == ran.out for p in paths), ran.stdout
    return paths[0], paths[1:]


def _tables_equal_csvs(html: Path, csvs: list[Path]) -> _Report:
    """Every data table of the report equals its CSV's first HTML_ROWS rows (the header
    too); a cut table says where, and only a cut one."""
    report = _read(html)
    assert set(report.tables) == {p.name for p in csvs}
    for path in csvs:
        rows = _csv(path)
        shown = report.tables[path.name]
        assert shown == rows[: HTML_ROWS + 1], path.name
        note = " ".join(report.after[path.name].split())
        total = len(rows) - 1
        if total > HTML_ROWS:
            assert f"The first {HTML_ROWS:,} of {total:,} rows; {path.name} holds them all" in note
        else:
            assert "The first" not in note, note
    return report


def _nothing_loads(report: _Report, page: str) -> None:
    """No script, no frame, no image, no style sheet or font, no handler: nothing in the
    page can fetch or run (a link is inert until clicked, and only http(s) or mailto)."""
    tags = {tag for tag, _ in report.tags}
    assert not tags & {"script", "iframe", "img", "link", "object", "embed", "image", "use",
                       "base", "form", "audio", "video", "source", "foreignobject"}  # fmt: skip
    for tag, attrs in report.tags:
        assert not any(k.startswith("on") or k in ("src", "srcset", "xlink:href") for k in attrs)
        if "href" in attrs:
            assert tag == "a" and str(attrs["href"]).startswith(("https:", "http:", "mailto:"))
    assert "url(" not in page and "@import" not in page
    csp = [a for t, a in report.tags if t == "meta" and a.get("http-equiv")]
    assert [a["content"] for a in csp] == [
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
    ]


# -- the starters -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", STARTERS)
def test_every_starter_notebook_runs_and_its_tables_equal_its_csvs(setup: Setup, name: str) -> None:
    ran = setup.runs[f"starter-{name}"]
    assert ran.code == 0 and ran.stderr == "", ran.stderr
    html, csvs = _written(ran)
    assert html.name == f"{name}.html"
    notebook = parse_notebook((STARTERS_DIR / f"{name}.sql").read_text(encoding="utf-8"))
    sql_cells = sum(1 for cell in notebook.cells if cell.kind == "sql")
    assert len(csvs) == sql_cells
    page = html.read_text(encoding="utf-8")
    report = _tables_equal_csvs(html, csvs)
    _nothing_loads(report, page)
    assert all(s["error"] is None for s in report.sections.values())
    # a cell saved with "chart: none" has none; the others draw one (every result has rows)
    charts = [s["svg"] for s in report.sections.values()]
    assert charts == [0 if c.chart == "none" else 1 for c in notebook.cells if c.kind == "sql"]
    text = " ".join(" ".join(report.text).split())
    snap = current_snapshot(setup.published)
    assert snap is not None
    assert f"Published at {snap.published_at}" in text and "Workspace every workspace" in text
    assert "Every cell ran" in text and "Generated at " in text


def _snapshot_rows(published: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    snap = current_snapshot(published)
    assert snap is not None
    con = duckdb.connect(str(snap.path), read_only=True)
    try:
        return con.execute(sql, list(args)).fetchall()
    finally:
        con.close()


BY_REASON = """SELECT e.reason_code, count(*)::VARCHAR, count(DISTINCT e.conversation_id)::VARCHAR
FROM mart_escalations e JOIN mart_conversations c USING (workspace_id, conversation_id)
WHERE e.workspace_id LIKE ? GROUP BY 1 ORDER BY 2 DESC, 1"""


@pytest.mark.parametrize(("label", "workspace"), [("starter-escalations_by_reason_and_channel",
                                                   "%"), ("workspace", "ws_acme")])  # fmt: skip
def test_the_headless_defaults_cover_the_data_and_workspace_narrows_it(
    setup: Setup, label: str, workspace: str
) -> None:
    """With no --param: the last 30 days with data (the sandbox's ten days, whole), every
    channel, the first time zone; --workspace reads that workspace's rows only."""
    ran = setup.runs[label]
    assert ran.code == 0, ran.stderr
    html, csvs = _written(ran)
    got = sorted(tuple(r) for r in _csv(csvs[0])[1:])
    want = sorted(_snapshot_rows(setup.published, BY_REASON, workspace))
    assert got == want and want
    last = _snapshot_rows(setup.published, "SELECT max(started_at)::DATE FROM mart_conversations "
                          "WHERE workspace_id LIKE ?", workspace)[0][0]  # fmt: skip
    params = _read(html)
    text = " ".join(" ".join(params.text).split())
    assert f"from date {last - timedelta(days=29)}" in text and f"to date {last}" in text
    channels = _snapshot_rows(
        setup.published,
        "SELECT DISTINCT channel FROM mart_conversations WHERE workspace_id LIKE ? ORDER BY 1",
        workspace,
    )
    assert "tz text UTC" in text
    assert f"channel choices {', '.join(c for (c,) in channels)}" in text
    if workspace != "%":
        assert "Workspace acme (ws_acme)" in text


# -- failures, the cap, hostile content ---------------------------------------------------------


def test_a_failed_cell_is_one_line_on_stderr_exit_1_and_its_error_in_the_report(
    setup: Setup,
) -> None:
    ran = setup.runs["broken"]
    assert ran.code == 1
    lines = ran.stderr.splitlines()
    assert len(lines) == 2, ran.stderr
    assert lines[0].startswith("failed: cell 3 (Missing table): ") and "no_such_table" in lines[0]
    assert lines[1].startswith("failed: cell 4 (Raises): ") and "boom second line" in lines[1]
    html, csvs = _written(ran)  # the report is written all the same
    assert [p.name for p in csvs] == ["02_many_rows.csv", "05_types.csv"]
    report = _tables_equal_csvs(html, csvs)  # 1,200 rows: the table cut at 500, with its note
    assert len(_csv(csvs[0])) == HTML_ROWS * 2 + 200 + 1
    assert report.sections["cell-2"]["svg"] == 1
    assert "no_such_table" in report.sections["cell-3"]["error"]
    assert "boom" in report.sections["cell-4"]["error"]
    # columns CSV cannot hold as they are: as JSON, hex, empty
    assert _csv(csvs[1]) == [
        ["list", "struct", "bytes", "nothing", "flag", "dec", "text"],
        ["[1, 2]", '{"a": 1, "b": "x"}', "6162", "", "true", "1.50", 'a,"b"\nc'],
    ]


def test_the_report_opens_in_chromium_and_requests_nothing(setup: Setup) -> None:
    """The reports (hostile markdown and data naming a beacon on 127.0.0.1, and a starter's
    charts) open from their files: chromium requests nothing but the file itself."""
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    pages = [(setup.runs["broken"].out / "broken.html", "notebook-report-broken.png"),
             (setup.runs["starter-escalations_by_reason_and_channel"].out
              / "escalations_by_reason_and_channel.html", "notebook-report.png")]  # fmt: skip
    requested: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1600})
            page.on("request", lambda request: requested.append(request.url))
            page.route(lambda u: urlsplit(u).scheme != "file", lambda r: r.abort())
            for path, shot in pages:
                page.goto(path.as_uri(), wait_until="load", timeout=60_000)
                page.wait_for_timeout(300)  # anything lazy would have asked by now
                assert page.locator("script").count() == 0
                assert page.locator("table.data").count() >= 1
                page.screenshot(path=str(SHOTS / shot), full_page=True)
                assert (SHOTS / shot).stat().st_size > 10_000
            charts = page.locator("section.cell svg")
            assert charts.count() == 3 and charts.first.bounding_box() is not None
        finally:
            browser.close()
    assert requested == [path.as_uri() for path, _ in pages]
    assert setup.beacon.hits == []
    page_text = pages[0][0].read_text(encoding="utf-8")
    _nothing_loads(_read(pages[0][0]), page_text)
    assert "&lt;script&gt;" in page_text and "[image: pixel]" in page_text


# -- parameters crafted as SQL ------------------------------------------------------------------


@pytest.mark.parametrize("index", range(len(CRAFTED)))
def test_a_parameter_crafted_as_sql_is_a_value(setup: Setup, index: int) -> None:
    """The value selects what it says (no reason, no channel is called that), the report
    shows it as written, and the published tables are all there."""
    crafted = CRAFTED[index]
    ran = setup.runs[f"reason-{index}"]
    assert ran.code == 0, ran.stderr
    html, csvs = _written(ran)
    # the two cells filtered by reason find nothing; the third (not filtered by it) has rows
    assert [len(_csv(p)) - 1 for p in csvs][:2] == [0, 0] and len(_csv(csvs[2])) > 1
    report = _tables_equal_csvs(html, csvs)
    assert f"reason choice {crafted}" in " ".join(" ".join(report.text).split())
    echo = setup.runs[f"echo-{index}"]
    assert echo.code == 0, echo.stderr
    _, (echoed,) = _written(echo)
    assert _csv(echoed) == [["word", "same_channel", "in_channels"], [crafted, "0", "0"]]
    control = setup.runs["echo-web"]
    _, (web,) = _written(control)
    (row,) = _csv(web)[1:]
    assert row[0] == "web" and row[1] == row[2] and int(row[1]) > 0
    tables = _snapshot_rows(setup.published, "SELECT count(*) FROM mart_escalations")
    assert tables[0][0] > 0


def test_notebook_list_names_starters_and_saved_ones(setup: Setup) -> None:
    done = _convo(setup.home, setup.published, "notebook", "list", "--json")
    assert done.returncode == 0, done.stderr
    listed = {row["name"]: row["title"] for row in orjson.loads(done.stdout)}
    assert set(STARTERS) | {"broken", "echo"} == set(listed)
    assert listed["echo"] == "Echo" and listed["broken"] == "Broken <b>and</b> big"


# -- the charts ---------------------------------------------------------------------------------

_DRAWING = {"svg", "title", "g", "rect", "text", "line", "polyline", "path", "circle"}
HOSTILE = '<script>alert("x")</script> & </svg><img src=x>'


def _svg(frame: pl.DataFrame, choice: ChartChoice) -> tuple[ET.Element, tuple[str, ...]]:
    drawn = svg_chart(frame, choice, title=HOSTILE)
    root = ET.fromstring(drawn.markup)  # well-formed XML, one element
    for element in root.iter():
        tag = element.tag.split("}")[-1]
        assert tag in _DRAWING, tag
        assert not any(k.startswith("on") or "href" in k for k in element.attrib), element.attrib
    return root, drawn.notes


def _texts(root: ET.Element) -> list[str]:
    return [e.text or "" for e in root.iter() if e.tag.endswith("}text") or e.tag.endswith("text")]


def _count(root: ET.Element, tag: str) -> int:
    return sum(1 for e in root.iter() if e.tag.split("}")[-1] == tag)


@pytest.mark.parametrize("kind", ["line", "bar", "area", "point"])
def test_a_chart_is_svg_of_drawing_elements_with_every_text_escaped(kind: str) -> None:
    days = [date(2026, 10, 5) + timedelta(days=7 * i) for i in range(6)]
    y = '<b>n</b> & "q"'
    frame = pl.DataFrame({
        "week": days * 2, HOSTILE: [HOSTILE] * 6 + ["web"] * 6, y: [float(i) for i in range(12)],
    })  # fmt: skip
    root, notes = _svg(frame, ChartChoice(kind, "week", y, HOSTILE))  # type: ignore[arg-type]
    assert notes == ()
    texts = _texts(root)
    assert y in texts  # the axis title: as written, as text
    titles = [e.text for e in root.iter() if e.tag.split("}")[-1] == "title"]
    assert titles[0] == HOSTILE and HOSTILE in titles[1:]  # the chart's, and the legend's
    assert HOSTILE[:23] + "\u2026" in texts  # the legend's label, cut
    if kind == "bar":  # a band per week, the dates as labels, a bar per (week, series)
        assert _count(root, "rect") == 12 + 2 and str(days[0]) in texts
    else:  # a time axis: ticks on Mondays within the weeks shown
        ticks = [t for t in texts if re.fullmatch(r"\d{4}-\d{2}-\d{2}", t)]
        assert ticks and all(days[0] <= date.fromisoformat(t) <= days[-1] for t in ticks)
        assert all(date.fromisoformat(t).weekday() == 0 for t in ticks)
    if kind in ("line", "area"):
        assert _count(root, "polyline") == 2


def test_a_chart_caps_its_series_bands_and_points_and_says_so() -> None:
    frame = pl.DataFrame({
        "x": [float(i % 5) for i in range(60)], "c": [f"s{i % 12:02d}" for i in range(60)],
        "y": [float(i) for i in range(60)],
    })  # fmt: skip
    line, notes = _svg(frame, ChartChoice("line", "x", "y", "c"))
    assert _count(line, "polyline") == MAX_SERIES
    assert notes == (f"the chart draws the {MAX_SERIES} largest of 12 c values; "
                     "the table and the CSV hold them all",)  # fmt: skip
    legend = set(_texts(line))
    assert {"s11", "s10", "s04"} <= legend and "s00" not in legend  # the largest sums kept
    points, notes = _svg(frame, ChartChoice("point", "x", "y", "c"))
    assert notes == () and "other" in _texts(points) and _count(points, "circle") == 60
    bands = pl.DataFrame({"k": [f"k{i}" for i in range(70)], "v": list(range(70))})
    bars, notes = _svg(bands, ChartChoice("bar", "k", "v"))
    assert _count(bars, "rect") == MAX_BANDS and "first 50 of 70 values along x" in notes[0]
    many = pl.DataFrame({"a": list(range(MAX_POINTS + 10)), "b": list(range(MAX_POINTS + 10))})
    _, notes = _svg(many, ChartChoice("point", "a", "b"))
    assert notes == (f"the chart draws the first {MAX_POINTS:,} of {MAX_POINTS + 10:,} rows; "
                     "the table and the CSV hold them all",)  # fmt: skip
    assert svg_chart(many, ChartChoice("none")).markup == ""


def test_a_value_keeps_its_colour_from_chart_to_chart() -> None:
    """Charts of one report share their colours: sms is the same colour in each."""
    shared: dict[str, str] = {}
    first = pl.DataFrame({"k": ["a", "a", "a"], "c": ["email", "sms", "web"], "v": [1, 2, 3]})
    second = pl.DataFrame({"k": ["a", "a"], "c": ["messenger", "sms"], "v": [1, 2]})

    def fills(frame: pl.DataFrame) -> dict[str, str]:
        root = ET.fromstring(svg_chart(frame, ChartChoice("bar", "k", "v", "c"),
                                       colours=shared).markup)  # fmt: skip
        found = {}
        for g in (e for e in root.iter() if e.tag.split("}")[-1] == "g"):
            rect, text = g.find("{*}rect"), g.find("{*}text")
            assert rect is not None and text is not None
            found[str(text.text)] = rect.attrib["fill"]
        return found

    one, two = fills(first), fills(second)
    assert set(one) == {"email", "sms", "web"} and set(two) == {"messenger", "sms"}
    assert two["sms"] == one["sms"] and two["messenger"] != two["sms"]
    assert len(set(one.values())) == 3


def test_text_a_spreadsheet_would_run_is_made_inert_in_the_csv() -> None:
    """A conversation's text that starts like a formula gets a ' before it; numbers and
    other text are written as they are."""
    frame = pl.DataFrame(
        {"text": ["=HYPERLINK(\"http://x\")", "+1", "-x", "@SUM(A1)", "\tx", "ok", None],
         "n": [-1, 2, 3, 4, 5, 6, 7]}
    )  # fmt: skip
    rows = list(csv.reader(io.StringIO(csv_text(frame), newline="")))
    assert [r[0] for r in rows[1:]] == [
        "'=HYPERLINK(\"http://x\")", "'+1", "'-x", "'@SUM(A1)", "'\tx", "ok", ""
    ]  # fmt: skip
    assert [r[1] for r in rows[1:]] == ["-1", "2", "3", "4", "5", "6", "7"]
