"""A notebook run as files a person reads: one self-contained HTML report and a CSV per cell.

Reports are mailed, and mail clients run no scripts and should load nothing:
the HTML holds every table as a static ``<table>`` (at most
:data:`HTML_ROWS` rows each, with a note where it cut; the cell's CSV holds
every row), charts as inline SVG, and a Content-Security-Policy that lets
the page load nothing at all, from beside the file or from the network
(decision D-NOTEBOOK-REPORTS). Every piece of text from the data or the
notebook is escaped; a markdown cell is the author's prose, rendered by
``_markdown`` (no raw HTML, no images).

Files are written whole (a temporary name, then a rename), so a report
folder never holds half a file.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from convo_analytics.notebooks._headless import CellRun, NotebookRun
from convo_analytics.notebooks._markdown import markdown_html

__all__ = ["HTML_ROWS", "ReportFiles", "csv_name", "write_report"]

#: Rows of a cell's table the HTML shows (its CSV holds them all).
HTML_ROWS = 500
_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'none'"
)


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """What a report wrote: its HTML and one CSV per SQL cell that ran."""

    html: Path
    csvs: tuple[Path, ...]


def csv_name(cell: CellRun) -> str:
    """``03_escalations_by_reason.csv``: the cell's position, then its name."""
    return f"{cell.position:02d}_{cell.name or 'cell'}.csv"


def _write(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def _cell_value(value: object) -> str:
    return "" if value is None else str(value)


def _table(frame: pl.DataFrame, cap: int) -> str:
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in frame.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{e(_cell_value(v))}</td>" for v in row) + "</tr>"
        for row in frame.head(cap).iter_rows()
    )
    note = ""
    if frame.height > cap:
        note = (
            f'<p class="note">The first {cap:,} of {frame.height:,} rows; '
            "the CSV holds them all.</p>"
        )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{note}"


def render_html(run: NotebookRun, cap: int = HTML_ROWS) -> str:
    """The report's HTML (self-contained, no script, loads nothing)."""
    e = html.escape
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        f"<title>{e(run.notebook.title)}</title></head><body>",
        f"<h1>{e(run.notebook.title)}</h1>",
    ]
    if run.notebook.description:
        parts.append(f"<p>{e(run.notebook.description)}</p>")
    params = "".join(
        f"<tr><th>{e(k)}</th><td>{e(_cell_value(v))}</td></tr>" for k, v in run.values.items()
    )
    parts.append(f"<table class=params>{params}</table>")
    parts.append(
        f"<p>Published {e(run.published_at)}; data through {e(run.data_through or 'no data')}; "
        f"generated {e(run.generated_at)}.</p>"
    )
    for cell in run.cells:
        if cell.cell.kind == "markdown":
            parts.append(f"<section>{markdown_html(cell.cell.sql)}</section>")
            continue
        parts.append(f"<section><h2>{e(cell.cell.title)}</h2>")
        if cell.error is not None:
            parts.append(f'<p class="error">{e(cell.error)}</p>')
        elif cell.frame is not None:
            parts.append(_table(cell.frame, cap))
        parts.append("</section>")
    parts.append("</body></html>")
    return "".join(parts)


def write_report(run: NotebookRun, out_dir: Path, *, cap: int = HTML_ROWS) -> ReportFiles:
    """Write ``<out_dir>/<notebook>.html`` and a CSV per SQL cell that ran."""
    out_dir.mkdir(parents=True, exist_ok=True)
    csvs = []
    for cell in run.cells:
        if cell.frame is not None:
            path = out_dir / csv_name(cell)
            _write(path, cell.frame.write_csv().encode("utf-8"))
            csvs.append(path)
    page = out_dir / f"{run.name}.html"
    _write(page, render_html(run, cap).encode("utf-8"))
    return ReportFiles(page, tuple(csvs))
