"""Explore's notebooks as plain files, and the schema an analyst browses beside them.

The file format is the notebooks package's (``notebooks._format``, decisions
D-NOTEBOOK-FORMAT and D-NOTEBOOK-PARAMS: a header's ``-- param:`` lines). Starter
notebooks ship in the repository beside the app
(``dashboards/notebooks/``); notebooks saved from the page go to
``dashboard.notebooks_dir`` (``data/notebooks/``) and win over a starter of
the same name. A notebook's name is its file's stem, restricted to lower-case
letters, digits, ``-`` and ``_``, so a name from a URL cannot point outside
those folders.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

from convo_analytics.notebooks import (
    STARTERS_DIR,
    Cell,
    Notebook,
    list_notebooks,
    load_notebook,
    notebook_name,
    parse_notebook,
    render_notebook,
    save_notebook,
)

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
WAREHOUSE_DOC = ROOT / "docs" / "warehouse.md"


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
