"""Explore's notebooks as plain files, and the schema an analyst browses beside them.

A notebook is a ``.sql`` file anyone can read, diff and run elsewhere: a
title comment, an optional description, then cells, each opened by a
``-- %% <title>`` line, optionally followed by ``-- chart: <kind>``, then its
query::

    -- Escalations by reason and channel
    -- Which reasons send conversations to a person, and through which channel.

    -- %% Escalations by reason
    -- chart: bar
    SELECT reason_code, count(*) AS escalations FROM mart_escalations GROUP BY 1

Starter notebooks ship in the repository beside the app
(``dashboards/notebooks/``); notebooks saved from the page go to
``dashboard.notebooks_dir`` (``data/notebooks/``) and win over a starter of
the same name. A notebook's name is its file's stem, restricted to lower-case
letters, digits, ``-`` and ``_``, so a name from a URL cannot point outside
those folders.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from convo_analytics.dashboard._explore import CHART_KINDS, ChartKind

__all__ = [
    "STARTERS_DIR",
    "Cell",
    "Notebook",
    "TableDoc",
    "list_notebooks",
    "load_notebook",
    "notebook_name",
    "parse_notebook",
    "render_notebook",
    "save_notebook",
    "schema",
]

ROOT = Path(__file__).resolve().parents[3]
#: The starter notebooks, in the repository next to the app.
STARTERS_DIR = ROOT / "dashboards" / "notebooks"
WAREHOUSE_DOC = ROOT / "docs" / "warehouse.md"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_CELL = re.compile(r"^--\s*%%\s*(.*)$")
_CHART = re.compile(r"^--\s*chart:\s*(\w+)\s*$")


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


def notebook_name(text: str) -> str | None:
    """``text`` as a notebook name when it is one (a plain file stem), else None."""
    return text if _NAME.fullmatch(text or "") else None


def parse_notebook(text: str) -> Notebook:
    """A notebook from its file's text (lenient: text before any cell marker with SQL in
    it becomes the first cell)."""
    head: list[str] = []
    cells: list[Cell] = []
    for line in text.splitlines():
        marker = _CELL.match(line)
        if marker:
            cells.append(Cell(marker.group(1).strip() or f"Cell {len(cells) + 1}", ""))
            continue
        if not cells:
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
    return Notebook(title, " ".join(c for c in comments[1:] if c), cells)


def render_notebook(notebook: Notebook) -> str:
    """The file's text (``parse_notebook`` reads it back to the same notebook)."""
    lines = [f"-- {notebook.title.strip() or 'Untitled notebook'}"]
    if notebook.description.strip():
        lines.append(f"-- {' '.join(notebook.description.split())}")
    for cell in notebook.cells:
        lines += ["", f"-- %% {' '.join(cell.title.split()) or 'Cell'}"]
        if cell.chart != "auto":
            lines.append(f"-- chart: {cell.chart}")
        lines.append(cell.sql.strip().rstrip(";").strip() + ";")
    return "\n".join(lines) + "\n"


def _folders(saved_dir: Path) -> list[Path]:
    return [saved_dir, STARTERS_DIR]  # saved ones first: they win over a starter


def list_notebooks(saved_dir: Path) -> dict[str, str]:
    """Every notebook by name, with its title (saved ones over starters of the same name)."""
    found: dict[str, str] = {}
    for folder in _folders(saved_dir):
        for path in sorted(folder.glob("*.sql")) if folder.is_dir() else ():
            name = notebook_name(path.stem)
            if name and name not in found:
                found[name] = parse_notebook(path.read_text(encoding="utf-8")).title
    return found


def load_notebook(saved_dir: Path, name: str) -> Notebook | None:
    """The notebook called ``name`` (saved, else starter), or None."""
    if notebook_name(name) is None:
        return None
    for folder in _folders(saved_dir):
        path = folder / f"{name}.sql"
        if path.is_file():
            return parse_notebook(path.read_text(encoding="utf-8"))
    return None


def save_notebook(saved_dir: Path, name: str, notebook: Notebook) -> Path:
    """Write the notebook as ``<saved_dir>/<name>.sql`` (whole, by a rename)."""
    if notebook_name(name) is None:
        raise ValueError(
            f"{name!r} is not a notebook name: use lower-case letters, digits, - and _"
        )
    saved_dir.mkdir(parents=True, exist_ok=True)
    path = saved_dir / f"{name}.sql"
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(render_notebook(notebook), encoding="utf-8")
    os.replace(partial, path)
    return path


@dataclass(frozen=True, slots=True)
class TableDoc:
    """A table of the snapshot: its description and columns (name, type, meaning)."""

    name: str
    description: str
    columns: tuple[tuple[str, str, str], ...]


def _documented(doc: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """From docs/warehouse.md: per table, its first line of description and column meanings."""
    if not doc.is_file():
        return {}
    text = doc.read_text(encoding="utf-8")
    out: dict[str, tuple[str, dict[str, str]]] = {}
    for section in re.finditer(r"^### (\w+)\n(.*?)(?=^#{2,3} |\Z)", text, re.M | re.S):
        body = section.group(2)
        prose = next((p.strip() for p in body.split("\n\n") if p.strip()
                      and not p.strip().startswith("|")), "")  # fmt: skip
        meanings = {
            m.group(1): m.group(2).strip()
            for m in re.finditer(r"^\| `(\w+)` \| [^|]* \|([^\n]*)\|$", body, re.M)
        }
        out[section.group(1)] = (" ".join(prose.split()), meanings)
    return out


def schema(con: duckdb.DuckDBPyConnection, doc: Path = WAREHOUSE_DOC) -> list[TableDoc]:
    """The snapshot's tables and columns, described from docs/warehouse.md."""
    documented = _documented(doc)
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'main' AND table_catalog = current_database() "
        "ORDER BY table_name, ordinal_position"
    ).fetchall()
    tables: dict[str, list[tuple[str, str, str]]] = {}
    for table, column, kind in rows:
        meaning = documented.get(table, ("", {}))[1].get(column, "")
        tables.setdefault(table, []).append((column, kind, meaning))
    return [
        TableDoc(name, documented.get(name, ("", {}))[0], tuple(columns))
        for name, columns in tables.items()
    ]
