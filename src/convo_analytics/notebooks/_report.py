"""A notebook run as files a person reads: one self-contained HTML report and a CSV per cell.

Reports are mailed, and mail clients run no scripts and should load nothing
(decision D-NOTEBOOK-REPORTS):

* every table is a static ``<table>`` of at most :data:`HTML_ROWS` rows, with
  a note where it cut; the cell's CSV holds every row. A table shows each
  value as its CSV writes it, so the two always agree;
* each chart is inline SVG (``_svg``), drawn by the same rule as Explore's
  (``chart_for``);
* the page holds no script and no link to a style sheet, font or image, and
  a Content-Security-Policy lets it load nothing at all, from beside the file
  or from the network;
* every piece of text from the data or the notebook is escaped; a markdown
  cell is the author's prose, rendered by ``_markdown`` (no raw HTML, no
  images).

The report says what it was run with (each parameter's value) and over which
data (the snapshot's publication time, the latest conversation in it, the
workspace), and when it was generated. A cell that failed shows its one-line
error in place of its table. Files are written whole (a temporary name, then
a rename), so a report folder never holds half a file.
"""

from __future__ import annotations

import csv
import html
import io
import json
import os
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import polars as pl

from convo_analytics.notebooks._chart import chart_for
from convo_analytics.notebooks._headless import HEADLESS_ROW_LIMIT, CellRun, NotebookRun
from convo_analytics.notebooks._markdown import markdown_html
from convo_analytics.notebooks._svg import svg_chart

__all__ = ["HTML_ROWS", "ReportFiles", "csv_name", "csv_text", "render_html", "write_report"]

#: Rows of a cell's table the HTML shows (its CSV holds them all): enough to read, small
#: enough for a mail (500 rows of a few columns are some 100 KB).
HTML_ROWS = 500
#: Nothing may load: no script, no style sheet, font or image from beside the file or the
#: network; only the page's own <style> and style attributes apply.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
_STYLE = """
body{margin:0;background:#f4f5f7;color:#1f2328;
font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
main{max-width:980px;margin:0 auto;padding:24px 16px}
h1{font-size:24px;line-height:1.25;margin:0 0 6px}
h2{font-size:18px;line-height:1.3;margin:0 0 4px}
section,header{background:#fff;border:1px solid #d0d7de;border-radius:6px;
padding:16px 20px;margin:0 0 16px}
.lede{color:#57606a;margin:0 0 8px}
.status{font-weight:600;margin:8px 0 0}.status.ok{color:#1a7f37}.status.failed{color:#cf222e}
table{border-collapse:collapse;font-size:13px}
.facts th,.params th{text-align:left;color:#57606a;font-weight:600;padding:2px 18px 2px 0;
vertical-align:top}
.facts td,.params td{padding:2px 18px 2px 0;vertical-align:top}
.params thead th{border-bottom:1px solid #d0d7de}
.scroll{overflow-x:auto;max-width:100%;margin:8px 0}
.data th,.data td{border-bottom:1px solid #eaeef2;padding:4px 10px;text-align:left;
vertical-align:top;white-space:pre-wrap;overflow-wrap:break-word;max-width:40em}
.data thead th{background:#f6f8fa;border-bottom:2px solid #d0d7de;white-space:nowrap}
.data td.num,.data th.num{text-align:right;font-variant-numeric:tabular-nums}
.data tbody tr:nth-child(even){background:#fafbfc}
.meta,.note,footer{color:#57606a;font-size:13px;margin:4px 0}
.note.cut{font-weight:600}
.error{color:#82071e;background:#ffebe9;border-left:4px solid #cf222e;padding:8px 12px;
white-space:pre-wrap;overflow-wrap:anywhere}
figure{margin:12px 0;overflow-x:auto}figure svg{max-width:100%;height:auto}
.markdown table td,.markdown table th{border:1px solid #d0d7de;padding:3px 8px}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
"""


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """What a report wrote: its HTML and one CSV per SQL cell that ran."""

    html: Path
    csvs: tuple[Path, ...]


def csv_name(cell: CellRun) -> str:
    """``03_escalations_by_reason.csv``: the cell's position, then its name."""
    return f"{cell.position:02d}_{cell.name or 'cell'}.csv"


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, pl.Series):
        value = value.to_list()
    return json.dumps(value, default=str, ensure_ascii=False)


def _csv_ready(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with the columns CSV cannot hold as text: lists and structs as JSON,
    bytes as hex, durations as ``H:MM:SS``, anything else CSV refuses as its text; text
    that a spreadsheet would run as a formula made inert (:func:`_inert`)."""
    changes = []
    for name, dtype in frame.schema.items():
        if isinstance(dtype, pl.List | pl.Array | pl.Struct):
            changes.append(pl.col(name).map_elements(_json_text, return_dtype=pl.String))
        elif isinstance(dtype, pl.Binary):
            changes.append(pl.col(name).bin.encode("hex"))
        elif isinstance(dtype, pl.Duration | pl.Object):
            changes.append(pl.col(name).map_elements(str, return_dtype=pl.String))
        elif isinstance(dtype, pl.Null):
            changes.append(pl.col(name).cast(pl.String))
        elif dtype == pl.String:
            changes.append(_inert(pl.col(name)).alias(name))
    return frame.with_columns(changes) if changes else frame


def _inert(column: pl.Expr) -> pl.Expr:
    """Text a spreadsheet would run as a formula (it starts with ``=``, ``+``, ``-``, ``@``,
    a tab or a carriage return) prefixed with ``'``: a report's CSV is opened in a
    spreadsheet, and its text comes from conversations anyone can type into (OWASP's
    CSV injection advice; D-NOTEBOOK-REPORTS)."""
    return (
        pl.when(column.str.contains(r"^[=+\-@\t\r]")).then(pl.lit("'") + column).otherwise(column)
    )


def csv_text(frame: pl.DataFrame) -> str:
    """A cell's result as CSV (a header line, then a line per row; a null is empty)."""
    return _csv_ready(frame).write_csv()


def _write(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _param_text(value: Any) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) if value else "(none)"
    return str(value)


def _rows_of(frame: pl.DataFrame, cap: int) -> list[list[str]]:
    """The first ``cap`` rows as their CSV writes them (the header first)."""
    return list(csv.reader(io.StringIO(csv_text(frame.head(cap)), newline="")))


def _table(cell: CellRun, frame: pl.DataFrame, cap: int) -> str:
    numeric = [dtype.is_numeric() for dtype in frame.schema.values()]
    header, *rows = _rows_of(frame, cap)

    def kind(i: int) -> str:
        return ' class="num"' if numeric[i] else ""

    head = "".join(f"<th{kind(i)}>{_e(c)}</th>" for i, c in enumerate(header))
    body = "".join(
        "<tr>" + "".join(f"<td{kind(i)}>{_e(v)}</td>" for i, v in enumerate(row)) + "</tr>"
        for row in rows
    )
    parts = [
        f'<div class="scroll"><table class="data" data-csv="{_e(csv_name(cell))}">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    ]
    if frame.height == 0:
        parts.append('<p class="note">No rows.</p>')
    elif frame.height > cap:
        parts.append(
            f'<p class="note cut">The first {cap:,} of {frame.height:,} rows; '
            f"{_e(csv_name(cell))} holds them all.</p>"
        )
    return "".join(parts)


def _chart(cell: CellRun, frame: pl.DataFrame, colours: dict[str, str]) -> str:
    choice = chart_for(frame, cell.cell)
    drawn = svg_chart(frame, choice, title=cell.cell.title, colours=colours)
    notes = [n for n in (choice.note, *drawn.notes) if n]
    if not drawn.markup and not notes:
        return ""
    caption = "".join(f'<figcaption class="note">{_e(n)}</figcaption>' for n in notes[:1])
    more = "".join(f'<p class="note">{_e(n)}</p>' for n in notes[1:])
    return f"<figure>{drawn.markup}{caption}</figure>{more}"


def _sql_cell(cell: CellRun, cap: int, colours: dict[str, str]) -> str:
    parts = [f'<section class="cell" id="cell-{cell.position}"><h2>{_e(cell.cell.title)}</h2>']
    frame = cell.frame
    if cell.error is not None:
        parts.append(f'<p class="error">This cell did not run: {_e(cell.error)}</p>')
    elif frame is not None:
        rows = f"{frame.height:,} row{'s' if frame.height != 1 else ''}"
        columns = f"{frame.width} column{'s' if frame.width != 1 else ''}"
        parts.append(f'<p class="meta">{rows}, {columns}; every row in {_e(csv_name(cell))}</p>')
        if cell.result is not None and cell.result.truncated:
            parts.append(
                f'<p class="error">More than {HEADLESS_ROW_LIMIT:,} rows: the CSV holds the '
                "first ones only; aggregate or filter in the SQL.</p>"
            )
        parts.append(_chart(cell, frame, colours))
        parts.append(_table(cell, frame, cap))
    parts.append("</section>")
    return "".join(parts)


def _facts(run: NotebookRun) -> str:
    scope = run.scope
    workspace = (
        f"{scope.workspace_name} ({scope.workspace_id})"
        if scope.workspace_id and scope.workspace_name != scope.workspace_id
        else (scope.workspace_id or "every workspace")
    )
    rows = [
        ("Notebook", run.name),
        ("Workspace", workspace),
        ("Published at", run.published_at),
        ("Data through", run.data_through or "no conversations"),
        ("Snapshot", run.snapshot_id),
        ("Generated at", run.generated_at),
    ]
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f'<table class="facts">{body}</table>'


def _params(run: NotebookRun) -> str:
    shown = [s for s in run.specs if s.name in run.values and s.name != "workspace"]
    if not shown:
        return '<p class="note">This notebook takes no parameters.</p>'
    body = "".join(
        f"<tr><th>{_e(s.name)}</th><td>{_e(s.type)}</td>"
        f"<td>{_e(_param_text(run.values[s.name]))}</td></tr>"
        for s in shown
    )
    return (
        '<table class="params"><thead><tr><th>Parameter</th><th>Type</th><th>Value</th>'
        f"</tr></thead><tbody>{body}</tbody></table>"
    )


def _status(run: NotebookRun) -> str:
    sql = [c for c in run.cells if c.cell.kind == "sql"]
    if run.ok:
        return f'<p class="status ok">Every cell ran ({len(sql)} of {len(sql)}).</p>'
    failed = len(run.failures)
    return f'<p class="status failed">{failed} of {len(sql)} cells did not run in full.</p>'


def render_html(run: NotebookRun, cap: int = HTML_ROWS) -> str:
    """The report's HTML (self-contained, no script, loads nothing)."""
    title = run.notebook.title
    parts: list[str] = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body><main>",
        f"<header><h1>{_e(title)}</h1>",
    ]
    if run.notebook.description:
        parts.append(f'<p class="lede">{_e(run.notebook.description)}</p>')
    parts += [_facts(run), _status(run), "</header>"]
    parts.append(f'<section class="parameters"><h2>Parameters</h2>{_params(run)}</section>')
    colours: dict[str, str] = {}  # a value keeps its colour from chart to chart
    for cell in run.cells:
        if cell.cell.kind == "markdown":
            parts.append(f'<section class="markdown">{markdown_html(cell.cell.sql)}</section>')
        else:
            parts.append(_sql_cell(cell, cap, colours))
    parts.append(
        f"<footer>Generated {_e(run.generated_at)} by convo notebook run. A table shows at "
        f"most {cap:,} rows; the CSV beside this report holds every row of its cell.</footer>"
    )
    parts.append("</main></body></html>")
    return "\n".join(parts)


def write_report(run: NotebookRun, out_dir: Path, *, cap: int = HTML_ROWS) -> ReportFiles:
    """Write ``<out_dir>/<notebook>.html`` and a CSV per SQL cell that ran."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csvs: list[Path] = []
    for cell in run.cells:
        if cell.frame is not None:
            path = out_dir / csv_name(cell)
            _write(path, csv_text(cell.frame).encode("utf-8"))
            csvs.append(path)
    page = out_dir / f"{run.name}.html"
    _write(page, render_html(run, cap).encode("utf-8"))
    return ReportFiles(page, tuple(csvs))
