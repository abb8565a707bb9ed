"""Cells that build on each other: a later cell reads an earlier cell's result by name.

A SQL cell's name is its title in lower case with each run of other
characters an ``_`` ("Escalations by reason" is ``escalations_by_reason``).
A cell that names an earlier cell in its query runs as one statement in which
each earlier cell it needs (and those they need, in notebook order) is a CTE:

    WITH "escalations_by_reason" AS (
    <the earlier cell's query>
    ) SELECT * FROM (
    <this cell's query>
    )

A CTE, not a view or a temporary table: DuckDB does not take bound parameters
inside ``CREATE VIEW``, and one statement goes through the one limited
executor and its statement check whole, so a reference cannot reach anything
its earlier cell could not (decision D-NOTEBOOK-CELLS). The earlier cell's
whole result is read, not the rows its table shows.

Nothing is renamed for the author: a reference to a name no earlier cell has
(a cell retitled, moved below, or never there) is left to the statement
check, which says in one line that there is no table or earlier cell of that
name. Two earlier cells of the same name are refused by name, in one line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from convo_analytics.notebooks._format import Cell

__all__ = ["Composed", "cell_name", "compose", "identifiers"]

_OTHER = re.compile(r"[^a-z0-9]+")
_NAME_CAP = 63


def cell_name(title: str) -> str:
    """The name later cells read a cell's result by (``""``: the title has no letter or
    digit, and the cell cannot be read by name)."""
    name = _OTHER.sub("_", title.lower()).strip("_")[:_NAME_CAP].rstrip("_")
    return f"c_{name}" if name[:1].isdigit() else name


def identifiers(sql: str) -> set[str]:
    """The identifiers ``sql`` names (lower case; quoted ones unquoted), from DuckDB's own
    tokenizer: words inside strings and comments are not identifiers."""
    try:
        tokens = duckdb.tokenize(sql)
    except Exception:  # a query DuckDB cannot tokenize fails in the executor, in one line
        return set()
    found: set[str] = set()
    for at, (start, kind) in enumerate(tokens):
        if kind != duckdb.token_type.identifier:
            continue
        end = tokens[at + 1][0] if at + 1 < len(tokens) else len(sql)
        word = sql[start:end].strip()
        if word.startswith('"') and word.endswith('"') and len(word) >= 2:
            word = word[1:-1].replace('""', '"')
        found.add(word.lower())
    return found


@dataclass(frozen=True, slots=True)
class Composed:
    """The statement a cell runs as, the earlier cells it reads (by name, in notebook
    order), or the one line saying why it cannot run."""

    sql: str
    reads: tuple[str, ...] = ()
    error: str | None = None


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _body(sql: str) -> str:
    """A cell's query as a CTE's or a subquery's body: without the ``;`` an author may end
    it with (``SELECT 1;`` inside ``( )`` is a syntax error)."""
    text = sql.strip()
    while text.endswith(";"):  # bounded: each pass removes a character
        text = text[:-1].rstrip()
    return text


def compose(cells: Sequence[Cell], index: int) -> Composed:
    """The statement cell ``index`` runs as: its own query, or its query over the earlier
    cells it names as CTEs (see the module docstring)."""
    cell = cells[index]
    earlier: dict[str, list[int]] = {}
    for at in range(index):
        if (
            cells[at].kind == "sql"
            and cells[at].sql.strip()
            and (name := cell_name(cells[at].title))
        ):
            earlier.setdefault(name, []).append(at)
    needed: set[int] = set()
    todo = [index]
    while todo:  # bounded: each earlier cell is added once
        at = todo.pop()
        for word in identifiers(cells[at].sql):
            holders = [i for i in earlier.get(word, []) if i < at]
            if not holders:
                continue
            if len(earlier[word]) > 1:
                return Composed(
                    cell.sql,
                    error=f"{len(earlier[word])} earlier cells are called {word}; retitle one "
                    "so this cell reads the one it means",
                )
            if holders[0] not in needed:
                needed.add(holders[0])
                todo.append(holders[0])
    if not needed:
        return Composed(cell.sql)
    order = sorted(needed)
    ctes = ",\n".join(
        f"{_quoted(cell_name(cells[at].title))} AS (\n{_body(cells[at].sql)}\n)" for at in order
    )
    return Composed(
        f"WITH {ctes}\nSELECT * FROM (\n{_body(cell.sql)}\n)",
        tuple(cell_name(cells[at].title) for at in order),
    )
