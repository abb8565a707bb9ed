"""A notebook as a plain ``.sql`` file anyone can read, diff and run elsewhere.

A title comment, an optional description, then cells, each opened by a
``-- %% <title>`` line, optionally followed by its chart's settings
(``-- chart: <kind> [x=COLUMN] [y=COLUMN] [color=COLUMN]``, a column name with
spaces in double quotes), then its query::

    -- Escalations by reason and channel
    -- Which reasons send conversations to a person, and through which channel.
    -- param: reason text = timeout

    -- %% Escalations by reason
    -- chart: bar
    SELECT reason_code, count(*) AS escalations FROM mart_escalations GROUP BY 1

A markdown cell, the notebook author's prose, is opened by ``-- %% [markdown]
[<title>]`` and its lines are SQL comments (``-- ## What this shows``), so the
file stays plain SQL that runs anywhere (the jupytext "percent" convention).
Its text is rendered by ``_markdown`` only, never user data.

A SQL cell's result is readable by later cells under the cell's name (its
title in lower case, each run of other characters an ``_``; module ``_cells``).

The header may declare parameters (``-- param: NAME TYPE [= DEFAULT]``, a
``-- values: SELECT ...`` line after a choice's; module ``_params``) that
cells use as ``$name``. A line that cannot be used is kept out of the
notebook and reported in :attr:`Notebook.problems` (one line each).

The format is the notebooks' own (decision D-NOTEBOOK-FORMAT): Explore edits
and saves it, and a headless runner reads the same files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal

from convo_analytics.notebooks._params import ParamError, ParamSpec, parse_param, render_param

__all__ = [
    "CHART_KINDS",
    "CHART_SETTINGS",
    "Cell",
    "CellKind",
    "ChartKind",
    "Notebook",
    "notebook_name",
    "parse_notebook",
    "render_notebook",
]

ChartKind = Literal["auto", "line", "bar", "area", "point", "none"]
CellKind = Literal["sql", "markdown"]
CHART_KINDS: tuple[ChartKind, ...] = ("auto", "line", "bar", "area", "point", "none")
#: A notebook's name is its file's stem: a name from a URL cannot point outside its folder.
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_CELL = re.compile(r"^--\s*%%\s*(.*)$")
_CHART = re.compile(r"^--\s*chart:\s*(\w+)((?:\s+\w+=(?:\"(?:[^\"]|\"\")*\"|\S+))*)\s*$")
_SETTING = re.compile(r"(\w+)=(\"(?:[^\"]|\"\")*\"|\S+)")
_MARKDOWN = re.compile(r"^\[markdown\]\s*(.*)$", re.I)
#: The chart settings a ``-- chart:`` line may hold beside the kind.
CHART_SETTINGS = ("x", "y", "color")
_PARAM = re.compile(r"^--\s*param:(.*)$")
_VALUES = re.compile(r"^--\s*values:(.*)$")


@dataclass
class Cell:
    """A SQL cell (its query in ``sql``) or a markdown cell (its text in ``sql``); a SQL
    cell's chart: the kind and the columns on each axis (None: chosen from the result)."""

    title: str
    sql: str
    chart: ChartKind = "auto"
    kind: CellKind = "sql"
    x: str | None = None
    y: str | None = None
    color: str | None = None


@dataclass
class Notebook:
    title: str
    description: str = ""
    cells: list[Cell] = field(default_factory=list)
    #: The parameters the header declares (the built-ins are not listed).
    params: list[ParamSpec] = field(default_factory=list)
    #: Header lines that could not be used, one line each (the page shows them).
    problems: list[str] = field(default_factory=list)


def notebook_name(text: str) -> str | None:
    """``text`` as a notebook name when it is one (a plain file stem), else None."""
    return text if _NAME.fullmatch(text or "") else None


def parse_notebook(text: str) -> Notebook:
    """A notebook from its file's text (lenient: text before any cell marker with SQL in
    it becomes the first cell)."""
    head: list[str] = []
    cells: list[Cell] = []
    params: list[ParamSpec] = []
    problems: list[str] = []
    for line in text.splitlines():
        marker = _CELL.match(line)
        if marker:
            cells.append(_opened(marker.group(1).strip(), len(cells) + 1))
            continue
        if not cells:
            if (declared := _PARAM.match(line)) is not None:
                _declare(declared.group(1), params, problems)
            elif (values := _VALUES.match(line)) is not None:
                _values_of(values.group(1), params, problems)
            else:
                head.append(line)
            continue
        cell = cells[-1]
        if cell.kind == "markdown":
            cell.sql += _uncomment(line) + "\n"
            continue
        chart = _CHART.match(line)
        if chart and not cell.sql.strip() and chart.group(1) in CHART_KINDS:
            cell.chart = chart.group(1)  # type: ignore[assignment]
            _chart_settings(cell, chart.group(2), problems)
        else:
            cell.sql += line + "\n"
    comments = [ln[2:].strip() for ln in head if ln.startswith("--")]
    stray = "\n".join(ln for ln in head if ln.strip() and not ln.startswith("--"))
    if stray:
        cells.insert(0, Cell("Cell 1", stray))
    for cell in cells:
        if cell.kind == "markdown":
            cell.sql = cell.sql.strip("\n")
        else:
            cell.sql = cell.sql.strip().rstrip(";").strip()
    title = comments[0] if comments else "Untitled notebook"
    return Notebook(title, " ".join(c for c in comments[1:] if c), cells, params, problems)


def _opened(text: str, number: int) -> Cell:
    """The cell a ``-- %%`` line opens (a markdown cell's title may be empty)."""
    markdown = _MARKDOWN.match(text)
    if markdown is not None:
        return Cell(markdown.group(1).strip(), "", kind="markdown")
    return Cell(text or f"Cell {number}", "")


def _uncomment(line: str) -> str:
    """A markdown cell's line without its comment mark (``-- `` or ``--``)."""
    if line.startswith("-- "):
        return line[3:]
    return line[2:] if line.startswith("--") else line


def _chart_settings(cell: Cell, text: str, problems: list[str]) -> None:
    for key, raw in _SETTING.findall(text):
        value = raw[1:-1].replace('""', '"') if raw.startswith('"') else raw
        if key not in CHART_SETTINGS:
            problems.append(
                f"cell {cell.title!r}: the chart has no setting {key!r} (it takes x, y, color)"
            )
        elif value:
            setattr(cell, key, value)


def _column(name: str) -> str:
    plain = re.fullmatch(r"[^\s\"]+", name) is not None
    return name if plain else '"' + name.replace('"', '""') + '"'


def _chart_line(cell: Cell) -> str | None:
    settings = [(k, getattr(cell, k)) for k in CHART_SETTINGS if getattr(cell, k)]
    if cell.chart == "auto" and not settings:
        return None
    return " ".join([f"-- chart: {cell.chart}", *(f"{k}={_column(v)}" for k, v in settings)])


def _commented(line: str) -> str:
    """A markdown cell's line as a comment, as written (trailing spaces are a Markdown line
    break); a line that would read as a cell marker gets a backslash before its ``%%``
    (Markdown shows ``\\%`` as ``%``)."""
    if line.lstrip().startswith("%%"):
        at = len(line) - len(line.lstrip())
        line = line[:at] + "\\" + line[at:]
    return f"-- {line}" if line else "--"


def _declare(text: str, params: list[ParamSpec], problems: list[str]) -> None:
    try:
        spec = parse_param(text)
    except ParamError as exc:
        problems.append(str(exc))
        return
    if any(p.name == spec.name for p in params):
        problems.append(f"param {spec.name}: declared twice; the first line holds")
        return
    params.append(spec)


def _values_of(text: str, params: list[ParamSpec], problems: list[str]) -> None:
    sql = text.strip().rstrip(";").strip()
    last = params[-1] if params else None
    if last is None or last.type not in ("choice", "choices") or last.values_sql is not None:
        problems.append("a -- values: line belongs right after a choice or choices -- param: line")
        return
    if not sql:
        problems.append(f"param {last.name}: its -- values: line needs a query")
        return
    params[-1] = replace(last, values_sql=sql)


def render_notebook(notebook: Notebook) -> str:
    """The file's text (``parse_notebook`` reads it back to the same notebook)."""
    lines = [f"-- {notebook.title.strip() or 'Untitled notebook'}"]
    if notebook.description.strip():
        lines.append(f"-- {' '.join(notebook.description.split())}")
    for spec in notebook.params:
        lines += render_param(spec)
    for cell in notebook.cells:
        title = " ".join(cell.title.split())
        if cell.kind == "markdown":
            lines += ["", f"-- %% [markdown] {title}".rstrip()]
            lines += [_commented(ln) for ln in cell.sql.strip("\n").splitlines()]
            continue
        lines += ["", f"-- %% {title or 'Cell'}"]
        if (chart := _chart_line(cell)) is not None:
            lines.append(chart)
        lines.append(cell.sql.strip().rstrip(";").strip() + ";")
    return "\n".join(lines) + "\n"
