"""The person's rows removed from the warehouse, and the file rewritten without them.

Every table that holds a record of a person (``_holders.HOLDERS``, the list the access
request reads too) but the marts: the erased conversations go to ``transform_pending``,
and the incremental transform that follows takes their facts out of every mart (and
every daily figure they counted in), as it does for a changed conversation (D-ERASURE).

A ``DELETE`` only marks rows deleted: DuckDB reuses the blocks later, and until then
the file still holds the bytes. So the file is then rewritten (:func:`rewrite_file`):
every table copied into a new file, which replaces the old one by an atomic rename.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from convo_analytics.erasure._holders import HOLDERS, present, where
from convo_analytics.erasure._person import Found

__all__ = [
    "REWRITE_SUFFIX",
    "TableHit",
    "count_rows",
    "delete_rows",
    "quarantined_rowids",
    "rewrite_file",
]

REWRITE_SUFFIX = ".erasure-rewrite"


#: The holders the erasure deletes from (the marts follow through the transform).
_ERASED = tuple(h for h in HOLDERS if not h.derived)


@dataclass(frozen=True, slots=True)
class TableHit:
    """How many rows of one table are (or were) the person's."""

    table: str
    rows: int


def line_marks(found: Found) -> list[bytes]:
    """What marks a line (JSON as received) as the person's: one of their ids or
    identifier forms as a JSON string, quotes included (``"u-3"`` is not in ``"u-30"``),
    written as UTF-8 or with ``\\u`` escapes."""
    marks: set[bytes] = set()
    for s in found.strings():
        marks.add(json.dumps(s, ensure_ascii=False).encode("utf-8"))
        marks.add(json.dumps(s).encode("ascii"))
    return sorted(marks)


def quarantined_rowids(
    con: duckdb.DuckDBPyConnection, found: Found, names: Iterable[str], *, unbound: bool = True
) -> list[int]:
    """Row ids of the quarantined lines of the workspace (or, ``unbound``, of none: the
    flat endpoint's) that name the person: a line is kept as it arrived (bytes, maybe not
    UTF-8), so it is matched by its bytes, here rather than in SQL, by :func:`line_marks`."""
    marks = line_marks(found)
    if not marks:
        return []
    rows = con.execute(
        "SELECT rowid, line, excerpt, detail FROM quarantine "
        "WHERE (? AND workspace IS NULL) OR workspace IN (SELECT unnest(?::VARCHAR[]))",
        [unbound, sorted(names)],
    ).fetchall()
    hits = []
    for rowid, line, excerpt, detail in rows:
        text = b"\n".join(
            v if isinstance(v, bytes) else str(v or "").encode("utf-8")
            for v in (line, excerpt, detail)
        )
        if any(mark in text for mark in marks):
            hits.append(int(rowid))
    return hits


def count_rows(
    con: duckdb.DuckDBPyConnection, workspace_id: str, found: Found, names: Iterable[str]
) -> list[TableHit]:
    """The person's rows per table (none where a table holds none)."""
    hits = []
    tables = present(con)
    for holder in _ERASED:
        if holder.table not in tables:  # a warehouse older than the table (a dry run)
            continue
        cond, params = where(holder, found)
        n = con.execute(
            f"SELECT count(*) FROM {holder.table} WHERE {cond}", [workspace_id, *params]
        )
        hits.append(TableHit(holder.table, int(_one(n))))
    if "quarantine" in tables:
        hits.append(TableHit("quarantine", len(quarantined_rowids(con, found, names))))
    return [h for h in hits if h.rows]


def _one(cursor: duckdb.DuckDBPyConnection) -> int:
    row = cursor.fetchone()
    return 0 if row is None else int(row[0])


def delete_rows(
    con: duckdb.DuckDBPyConnection,
    workspace_id: str,
    found: Found,
    names: Iterable[str],
    texts: Iterable[str],
) -> list[TableHit]:
    """Delete the person's rows (in the caller's transaction); their user messages'
    ``texts`` also leave the topics' examples. Returns what each table lost."""
    hits = count_rows(con, workspace_id, found, names)
    for holder in _ERASED:
        cond, params = where(holder, found)
        con.execute(f"DELETE FROM {holder.table} WHERE {cond}", [workspace_id, *params])
    quarantined = quarantined_rowids(con, found, names)
    if quarantined:
        con.execute(
            "DELETE FROM quarantine WHERE rowid IN (SELECT unnest(?::BIGINT[]))", [quarantined]
        )
    gone = sorted(set(texts))
    if gone:
        for table in ("topics", "mart_topics"):
            con.execute(
                f"UPDATE {table} SET examples = "
                "list_filter(examples, lambda x: NOT list_contains(?, x)) "
                "WHERE workspace_id = ? AND len(list_intersect(examples, ?)) > 0",
                [gone, workspace_id, gone],
            )
    return hits


def user_texts(con: duckdb.DuckDBPyConnection, workspace_id: str, found: Found) -> list[str]:
    """The texts of the person's messages (what a topic may show as an example)."""
    rows = con.execute(
        "SELECT DISTINCT text FROM messages WHERE workspace_id = ? AND text IS NOT NULL "
        "AND conversation_id IN (SELECT unnest(?::VARCHAR[]))",
        [workspace_id, sorted(found.conversations)],
    ).fetchall()
    return [str(r[0]) for r in rows]


def typed_texts(con: duckdb.DuckDBPyConnection, workspace_id: str, found: Found) -> list[str]:
    """The texts the person typed (``role = 'user'``) that no other conversation of the
    workspace holds: what marks a row outside the warehouse as mentioning them. A text
    others typed too ("That didn't answer my question"), or an assistant's canned reply,
    says nothing of who typed it, and other people's rows keep it."""
    theirs = sorted(found.conversations)
    rows = con.execute(
        "SELECT DISTINCT text FROM messages WHERE workspace_id = ? AND text IS NOT NULL "
        "AND role = 'user' AND conversation_id IN (SELECT unnest(?::VARCHAR[])) "
        "AND text NOT IN (SELECT text FROM messages WHERE workspace_id = ? "
        "AND text IS NOT NULL AND conversation_id NOT IN (SELECT unnest(?::VARCHAR[])))",
        [workspace_id, theirs, workspace_id, theirs],
    ).fetchall()
    return [str(r[0]) for r in rows]


def rewrite_file(db_path: Path) -> None:
    """Copy every table of the (closed) warehouse into a new file and put it in the old
    one's place atomically: the old file's freed blocks, which still held the deleted
    rows, go with it. A kill before the rename leaves the old file whole (the half-made
    copy is removed by the next erasure); after it, the new one."""
    tmp = db_path.with_name(db_path.name + REWRITE_SUFFIX)
    for stale in (tmp, tmp.with_name(tmp.name + ".wal")):
        stale.unlink(missing_ok=True)
    con = duckdb.connect()
    try:
        con.execute("ATTACH ? AS old (READ_ONLY)", [str(db_path)])
        con.execute("ATTACH ? AS new", [str(tmp)])
        con.execute("COPY FROM DATABASE old TO new")
        con.execute("DETACH new")
        con.execute("DETACH old")
    finally:
        con.close()
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, db_path)
    db_path.with_name(db_path.name + ".wal").unlink(missing_ok=True)
    fd = os.open(db_path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
