"""A notebook as a plain ``.sql`` file anyone can read, diff and run elsewhere.

A title comment, an optional description, then cells, each opened by a
``-- %% <title>`` line, optionally followed by ``-- chart: <kind>``, then its
query::

    -- Escalations by reason and channel
    -- Which reasons send conversations to a person, and through which channel.
    -- param: reason text = timeout

    -- %% Escalations by reason
    -- chart: bar
    SELECT reason_code, count(*) AS escalations FROM mart_escalations GROUP BY 1

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
    "Cell",
    "ChartKind",
    "Notebook",
    "notebook_name",
    "parse_notebook",
    "render_notebook",
]

ChartKind = Literal["auto", "line", "bar", "area", "point", "none"]
CHART_KINDS: tuple[ChartKind, ...] = ("auto", "line", "bar", "area", "point", "none")
#: A notebook's name is its file's stem: a name from a URL cannot point outside its folder.
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_CELL = re.compile(r"^--\s*%%\s*(.*)$")
_CHART = re.compile(r"^--\s*chart:\s*(\w+)\s*$")
_PARAM = re.compile(r"^--\s*param:(.*)$")
_VALUES = re.compile(r"^--\s*values:(.*)$")


@dataclass
class Cell:
    title: str
    sql: str
    chart: ChartKind = "auto"


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
            cells.append(Cell(marker.group(1).strip() or f"Cell {len(cells) + 1}", ""))
            continue
        if not cells:
            if (declared := _PARAM.match(line)) is not None:
                _declare(declared.group(1), params, problems)
            elif (values := _VALUES.match(line)) is not None:
                _values_of(values.group(1), params, problems)
            else:
                head.append(line)
            continue
        chart = _CHART.match(line)
        cell = cells[-1]
        if chart and not cell.sql.strip() and chart.group(1) in CHART_KINDS:
            cell.chart = chart.group(1)  # type: ignore[assignment]
        else:
            cell.sql += line + "\n"
    comments = [ln[2:].strip() for ln in head if ln.startswith("--")]
    stray = "\n".join(ln for ln in head if ln.strip() and not ln.startswith("--"))
    if stray:
        cells.insert(0, Cell("Cell 1", stray))
    for cell in cells:
        cell.sql = cell.sql.strip().rstrip(";").strip()
    title = comments[0] if comments else "Untitled notebook"
    return Notebook(title, " ".join(c for c in comments[1:] if c), cells, params, problems)


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
        lines += ["", f"-- %% {' '.join(cell.title.split()) or 'Cell'}"]
        if cell.chart != "auto":
            lines.append(f"-- chart: {cell.chart}")
        lines.append(cell.sql.strip().rstrip(";").strip() + ";")
    return "\n".join(lines) + "\n"
